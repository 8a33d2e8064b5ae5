"""Processor functions, the ingest side (:mod:`s3ingest_fn.adapters.processor_function`): the
request a change makes, the answers and failures of the function classified, the local handler
invoker, the Lambda client's configuration; and the request/response checked against the JSON
Schemas that ``docs/processor-api.md`` publishes (``functions/s3ingest_processor/schema``)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from botocore.exceptions import ClientError, ReadTimeoutError

from s3ingest_fn.adapters import processor_function as pf
from s3ingest_fn.adapters.processor_function import (
    FunctionProcessor,
    ProcessorFunctionError,
    handler_invoker,
    invoke_config,
    lambda_invoker,
    request_of,
)
from s3ingest_fn.core.effects import AppliedChange, PinnedContent, SupersededError
from s3ingest_fn.core.model import TransientError
from s3ingest_processor import schema
from tests.fakes import FakeContentReader

REQUEST = jsonschema.Draft202012Validator(schema("request-v1.json"))
RESPONSE = jsonschema.Draft202012Validator(schema("response-v1.json"))


def _change(**kw: Any) -> AppliedChange:
    base: dict[str, Any] = {
        "bucket": "landing",
        "key": "in/a b.jpg",
        "kind": "created",
        "sequencer": "0055AED6DCD90281E5",
        "version_id": "v1",
        "etag": "e" * 32,
        "size": 9,
        "source": "live",
        "event_name": "Object Created/PutObject",
        "change_id": "c" * 32,
        "token": 7,
        "processor": "thumbs",
        "lease_until_ms": 1_700_000_060_000,
    }
    return AppliedChange(**(base | kw))


def _content(change: AppliedChange) -> PinnedContent:
    reader = FakeContentReader()
    reader.now_ms = 1_700_000_000_000
    return PinnedContent(reader, change)


# -- the request -------------------------------------------------------------------------------


def test_a_versioned_create_sends_the_change_and_a_url_pinned_to_the_version() -> None:
    change = _change()
    request = request_of(change, _content(change), url_seconds=120)
    assert request == {
        "version": "1",
        "processor": "thumbs",
        "change": {
            "id": "c" * 32,
            "bucket": "landing",
            "key": "in/a b.jpg",
            "kind": "created",
            "sequencer": "0055AED6DCD90281E5",
            "versionId": "v1",
            "etag": "e" * 32,
            "size": 9,
            "source": "live",
            "eventName": "Object Created/PutObject",
            "token": 7,
            "leaseDeadline": 1_700_000_060_000,
        },
        "content": {
            "url": "https://landing.s3.example/in/a b.jpg?versionId=v1",
            "headers": {},
            "expiresAt": 1_700_000_000_000 + 120_000,
        },
    }
    REQUEST.validate(request)


def test_an_unversioned_create_carries_the_if_match_header_to_send() -> None:
    change = _change(version_id=None)
    request = request_of(change, _content(change), url_seconds=60)
    assert request["content"]["headers"] == {"If-Match": f'"{"e" * 32}"'}
    assert request["change"]["versionId"] is None
    REQUEST.validate(request)


def test_a_removal_has_no_content_and_an_unknown_lease_is_null() -> None:
    change = _change(kind="removed", version_id=None, etag=None, size=None, lease_until_ms=None)
    request = request_of(change, None, url_seconds=60)
    assert request["content"] is None and request["change"]["leaseDeadline"] is None
    REQUEST.validate(request)


def test_a_create_that_cannot_be_pinned_is_superseded_without_invoking() -> None:
    calls: list[Any] = []
    change = _change(version_id=None, etag=None)
    with pytest.raises(SupersededError, match="cannot be pinned"):
        FunctionProcessor(calls.append)(change, _content(change))
    assert calls == []


@pytest.mark.parametrize(
    "broken",
    [
        {"version": "2"},
        {"processor": "Thumbs"},
        {"content": {"url": "fake://x", "headers": {}}},
        {"change": {"id": "c" * 32}},
    ],
)
def test_the_request_schema_refuses_what_is_not_a_v1_request(broken: dict[str, Any]) -> None:
    change = _change(version_id=None)
    request = request_of(change, _content(change), url_seconds=60)
    request["content"]["url"] = "https://landing.s3.amazonaws.com/in/a%20b.jpg?X-Amz-Signature=1"
    REQUEST.validate(request)
    assert not REQUEST.is_valid(request | broken)
    missing_token = json.loads(json.dumps(request))
    del missing_token["change"]["token"]
    assert not REQUEST.is_valid(missing_token)


def test_the_response_schema_takes_done_and_superseded_only() -> None:
    for ok in ({"status": "done"}, {"status": "superseded", "detail": "412"}):
        RESPONSE.validate(ok)
    for bad in ({}, {"status": "ok"}, {"status": "done", "detail": 3}, ["done"]):
        assert not RESPONSE.is_valid(bad)


def test_both_schemas_are_valid_draft_2020_12() -> None:
    for name in ("request-v1.json", "response-v1.json"):
        doc = schema(name)
        assert doc["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        jsonschema.Draft202012Validator.check_schema(doc)


# -- the answers -------------------------------------------------------------------------------


def _run(answer: Any) -> None:
    change = _change()
    FunctionProcessor(lambda request: answer)(change, _content(change))


def test_done_returns_and_the_invoker_gets_the_request() -> None:
    seen: list[dict[str, Any]] = []

    def invoke(request: dict[str, Any]) -> Any:
        seen.append(request)
        return {"status": "done", "detail": "thumbnail written", "extra": 1}

    change = _change()
    assert FunctionProcessor(invoke, url_seconds=30)(change, _content(change)) is None
    assert seen == [request_of(change, _content(change), url_seconds=30)]


def test_superseded_raises_superseded_with_the_detail() -> None:
    with pytest.raises(SupersededError, match=r"'thumbs' for 'in/a b.jpg'.*: HTTP 412"):
        _run({"status": "superseded", "detail": "HTTP 412"})


@pytest.mark.parametrize(
    "answer",
    [None, "done", {"status": "ok"}, {"detail": "x"}, {"status": "done", "detail": 5}, [1]],
)
def test_an_answer_that_is_not_a_response_is_transient(answer: Any) -> None:
    with pytest.raises(TransientError, match=r"^invalid-response: processor 'thumbs'") as info:
        _run(answer)
    assert isinstance(info.value, ProcessorFunctionError)
    assert info.value.reason == pf.INVALID_RESPONSE
    assert "token 7" in str(info.value) and "c" * 32 in str(info.value)


def test_an_invoker_failure_keeps_its_class_and_names_the_processor() -> None:
    def invoke(request: dict[str, Any]) -> Any:
        raise ProcessorFunctionError(pf.TIMEOUT, "fn: Task timed out after 3.00 seconds")

    change = _change()
    with pytest.raises(ProcessorFunctionError) as info:
        FunctionProcessor(invoke)(change, _content(change))
    assert info.value.reason == pf.TIMEOUT
    assert str(info.value).startswith("timeout: processor 'thumbs' for 'in/a b.jpg'")
    assert str(info.value).endswith("Task timed out after 3.00 seconds")


# -- Lambda Invoke -----------------------------------------------------------------------------


class FakeLambda:
    """A boto3 Lambda client's ``invoke``: answers in turn (a dict response, or an exception)."""

    def __init__(self, *answers: Any, read_timeout: float = 100.0) -> None:
        self.answers = list(answers)
        self.calls: list[dict[str, Any]] = []
        self.meta = type("Meta", (), {"config": invoke_config(int(read_timeout) - 15)})()

    def invoke(self, **kw: Any) -> dict[str, Any]:
        self.calls.append(kw)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def _reply(payload: Any, function_error: str | None = None) -> dict[str, Any]:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    out: dict[str, Any] = {"StatusCode": 200, "Payload": io.BytesIO(body)}
    if function_error:
        out["FunctionError"] = function_error
    return out


def _client_error(code: str, status: int) -> ClientError:
    response: Any = {
        "Error": {"Code": code, "Message": "Rate Exceeded."},
        "ResponseMetadata": {"HTTPStatusCode": status},
    }
    return ClientError(response, "Invoke")


ARN = "arn:aws:lambda:us-east-1:123456789012:function:thumbs"


def test_lambda_invoker_invokes_request_response_with_the_json_request() -> None:
    client = FakeLambda(_reply({"status": "done"}))
    assert lambda_invoker(client, ARN, timeout_s=30)({"version": "1"}) == {"status": "done"}
    assert client.calls == [
        {
            "FunctionName": ARN,
            "InvocationType": "RequestResponse",
            "Payload": b'{"version": "1"}',
        }
    ]


@pytest.mark.parametrize(
    ("answer", "reason", "text"),
    [
        (
            _reply({"errorType": "KeyError", "errorMessage": "'x'"}, "Unhandled"),
            pf.FUNCTION_ERROR,
            "Unhandled KeyError: 'x'",
        ),
        (
            _reply({"errorMessage": "boom"}, "Handled"),
            pf.FUNCTION_ERROR,
            "Handled : boom",
        ),
        (
            _reply(
                {
                    "errorType": "Sandbox.Timedout",
                    "errorMessage": "RequestId: 1 Error: Task timed out after 30.00 seconds",
                },
                "Unhandled",
            ),
            pf.TIMEOUT,
            "Task timed out after 30.00 seconds",
        ),
        (_client_error("TooManyRequestsException", 429), pf.THROTTLED, "Rate Exceeded."),
        (_client_error("ResourceNotFoundException", 404), pf.INVOKE_FAILED, "ResourceNotFound"),
        (ReadTimeoutError(endpoint_url="https://lambda"), pf.TIMEOUT, "no answer to Invoke"),
        (_reply(b"<html>"), pf.INVALID_RESPONSE, "not JSON: <html>"),
    ],
    ids=["unhandled", "handled", "timeout", "throttled", "not-found", "read-timeout", "not-json"],
)
def test_lambda_invoker_classifies_what_is_not_an_answer(
    answer: Any, reason: str, text: str
) -> None:
    invoke = lambda_invoker(FakeLambda(answer), ARN, timeout_s=30)
    with pytest.raises(ProcessorFunctionError) as info:
        invoke({"version": "1"})
    assert info.value.reason == reason
    assert str(info.value).startswith(f"{reason}: {ARN}: ")
    assert text in str(info.value)


def test_the_invoke_client_waits_past_the_function_timeout_and_never_retries() -> None:
    config: Any = invoke_config(300)
    assert config.read_timeout == 300 + pf.INVOKE_READ_SLACK_S
    assert config.retries == {"total_max_attempts": 1, "mode": "standard"}
    assert config.tcp_keepalive is True
    with pytest.raises(ValueError, match=r"read_timeout \(100 s\).*invoke_config\(120\)"):
        lambda_invoker(FakeLambda(read_timeout=100), ARN, timeout_s=120)


# -- the local handler invoker -----------------------------------------------------------------

SEEN: list[Any] = []
CLOCK = [0.0]


def done_handler(event: Any, context: Any) -> dict[str, Any]:
    SEEN.append((event, context.get_remaining_time_in_millis(), context.function_name))
    return {"status": "done"}


def failing_handler(event: Any, context: Any) -> None:
    raise KeyError("OUTPUT_BUCKET")


def slow_handler(event: Any, context: Any) -> dict[str, Any]:
    CLOCK[0] += 31.0  # the test clock: the handler took 31 s
    return {"status": "done"}


def odd_handler(event: Any, context: Any) -> Any:
    return {"status": "done", "when": {1, 2}}


HERE = "tests.unit.test_processor_function"


def test_handler_invoker_round_trips_json_and_counts_down_the_context() -> None:
    SEEN.clear()
    CLOCK[0] = 100.0
    invoke = handler_invoker(f"{HERE}:done_handler", timeout_s=30, clock=lambda: CLOCK[0])
    request = {"version": "1", "change": {"key": "k", "size": None}}
    assert invoke(request) == {"status": "done"}
    event, remaining, name = SEEN[0]
    assert event == request and event is not request
    assert remaining == 30_000 and name == "test_processor_function"


@pytest.mark.parametrize(
    ("handler", "reason", "text"),
    [
        ("failing_handler", pf.FUNCTION_ERROR, "Unhandled KeyError: 'OUTPUT_BUCKET'"),
        ("slow_handler", pf.TIMEOUT, "Task timed out after 30 s"),
        ("odd_handler", pf.INVALID_RESPONSE, "not JSON"),
    ],
)
def test_handler_invoker_maps_failures_as_lambda_would(
    handler: str, reason: str, text: str
) -> None:
    invoke = handler_invoker(f"{HERE}:{handler}", timeout_s=30, clock=lambda: CLOCK[0])
    with pytest.raises(ProcessorFunctionError) as info:
        invoke({"version": "1"})
    assert info.value.reason == reason and text in str(info.value)
    assert isinstance(info.value, TransientError)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (f"{HERE}.done_handler", "is not 'package.module:handler'"),
        ("no_such_module_xyz:handler", "cannot be imported"),
        (f"{HERE}:HERE", "is not a callable"),
    ],
)
def test_handler_invoker_refuses_a_bad_handler_at_once(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        handler_invoker(spec, timeout_s=3)


def test_the_examples_of_the_api_doc_follow_the_schemas() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "processor-api.md").read_text()
    blocks = re.findall(r"```json\n(.*?)```", doc, re.S)
    request, response = (json.loads(block) for block in blocks)
    REQUEST.validate(request)
    RESPONSE.validate(response)
    assert set(request["change"]) == set(_change_json_keys())
    for name in ("request-v1.json", "response-v1.json"):
        assert f"functions/s3ingest_processor/schema/{name}" in doc


def _change_json_keys() -> list[str]:
    return list(request_of(_change(kind="removed"), None, url_seconds=1)["change"])


@pytest.mark.parametrize("region", ["eu-west-1", "us-east-1"])
def test_s3_presigns_sigv4_on_the_regional_endpoint_whatever_botocores_default(
    region: str,
) -> None:
    import boto3

    from s3ingest_fn.adapters.s3_objects import S3ContentReader
    from s3ingest_fn.core.ports import Pin

    client = boto3.client(
        "s3", region_name=region, aws_access_key_id="a", aws_secret_access_key="b"
    )
    reader = S3ContentReader(client)
    S3ContentReader(client)  # a second reader on the same client registers nothing twice
    by_etag = reader.presign(Pin("bkt", "in/a b.jpg", etag="e1"), 60)
    by_version = reader.presign(Pin("bkt", "in/a b.jpg", version_id="v1"), 60)
    host = f"https://bkt.s3.{region}.amazonaws.com/in/a%20b.jpg?"
    assert by_etag.url.startswith(host) and by_version.url.startswith(host + "versionId=v1&")
    for get in (by_etag, by_version):
        assert "X-Amz-Algorithm=AWS4-HMAC-SHA256" in get.url and "X-Amz-Expires=60" in get.url
        assert f"%2F{region}%2Fs3%2Faws4_request" in get.url
    assert "X-Amz-SignedHeaders=host%3Bif-match&" in by_etag.url
    assert by_etag.headers == {"If-Match": '"e1"'} and by_version.headers == {}
    # without the reader's hooks botocore would presign SigV2 on the global endpoint
    plain = boto3.client("s3", region_name=region, aws_access_key_id="a", aws_secret_access_key="b")
    legacy = plain.generate_presigned_url("get_object", Params={"Bucket": "bkt", "Key": "k"})
    assert "X-Amz-Algorithm" not in legacy or "s3.amazonaws.com" in legacy


def test_content_goes_with_creates_only() -> None:
    created, removed = _change(), _change(kind="removed")
    with pytest.raises(ValueError, match="content given only for creates"):
        request_of(created, None, url_seconds=1)
    with pytest.raises(ValueError, match="content given only for creates"):
        request_of(removed, _content(removed), url_seconds=1)
    good = request_of(created, _content(created), url_seconds=1)
    assert not REQUEST.is_valid(good | {"content": None})
    bad = request_of(removed, None, url_seconds=1) | {"content": good["content"]}
    assert not REQUEST.is_valid(bad)


@pytest.mark.parametrize("timeout_s", [3, 40, 900])
def test_the_content_url_lives_the_functions_timeout_plus_the_margin(timeout_s: int) -> None:
    from s3ingest_fn.wiring import processor_specs

    entry = {"name": "thumbs", "handler": f"{HERE}:done_handler", "timeoutSeconds": timeout_s}
    (spec,) = processor_specs([entry])
    assert isinstance(spec.call, FunctionProcessor)
    assert spec.call.url_seconds == pf.url_seconds_for(timeout_s) == timeout_s + pf.URL_MARGIN_S
    seen: list[dict[str, Any]] = []

    def invoke(request: dict[str, Any]) -> Any:
        seen.append(request)
        return {"status": "done"}

    spec.call.invoke = invoke
    change = _change()
    spec.call(change, _content(change))
    # the URL outlives the function's last moment by the margin, not a fixed 900 s
    assert seen[0]["content"]["expiresAt"] == 1_700_000_000_000 + (timeout_s + 60) * 1000


def test_a_content_url_for_no_timeout_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1 s"):
        pf.url_seconds_for(0)
