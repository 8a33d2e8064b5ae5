"""A processor function end to end on the emulator: the ingest side's request (a presigned GET
pinned to the change, signed by the ingest side's S3 client) read by the example sidecar
function (``s3ingest_examples.sidecar:handler``) over HTTP with nothing but the URL and its
headers; run in-process by the local handler invoker and through the emulator's Lambda
``Invoke`` (function errors, timeouts and throttling classified as Lambda reports them)."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import jsonschema
import pytest

from s3ingest.local.emulator.lambda_service import LambdaService
from s3ingest.local.emulator.server import Emulator
from s3ingest_examples.sidecar import sidecar_key
from s3ingest_fn.adapters import processor_function as pf
from s3ingest_fn.adapters.processor_function import (
    FunctionProcessor,
    ProcessorFunctionError,
    handler_invoker,
    invoke_config,
    lambda_invoker,
    request_of,
)
from s3ingest_fn.adapters.s3_objects import S3ContentReader
from s3ingest_fn.core.effects import AppliedChange, PinnedContent, SupersededError
from s3ingest_processor import schema

HANDLER = "s3ingest_examples.sidecar:handler"
REQUEST = jsonschema.Draft202012Validator(schema("request-v1.json"))


class Buckets:
    """A landing bucket (versioned or not) and an output bucket on the emulator, the ingest
    side's S3 client, and the function's environment (``OUTPUT_BUCKET``) set."""

    def __init__(self, emulator: Emulator, versioned: bool) -> None:
        self.s3 = emulator.client("s3")
        suffix = uuid.uuid4().hex[:8]
        self.landing, self.output = f"landing-{suffix}", f"output-{suffix}"
        for name in (self.landing, self.output):
            self.s3.create_bucket(Bucket=name)
        if versioned:
            self.s3.put_bucket_versioning(
                Bucket=self.landing, VersioningConfiguration={"Status": "Enabled"}
            )
        self.reader = S3ContentReader(self.s3)

    def put(self, key: str, body: bytes) -> AppliedChange:
        out = self.s3.put_object(Bucket=self.landing, Key=key, Body=body)
        return AppliedChange(
            bucket=self.landing,
            key=key,
            kind="created",
            sequencer=None,
            version_id=out.get("VersionId"),
            etag=out["ETag"].strip('"'),
            size=len(body),
            source="live",
            event_name="Object Created/PutObject",
            change_id=hashlib.sha256(body).hexdigest()[:32],
            token=1,
            processor="sidecar",
            lease_until_ms=2_000_000_000_000,
        )

    def content(self, change: AppliedChange) -> PinnedContent | None:
        return PinnedContent(self.reader, change) if change.kind == "created" else None

    def sidecar(self, key: str) -> dict[str, Any] | None:
        try:
            body = self.s3.get_object(Bucket=self.output, Key=sidecar_key(self.landing, key))[
                "Body"
            ].read()
        except self.s3.exceptions.NoSuchKey:
            return None
        doc: dict[str, Any] = json.loads(body)
        return doc


@pytest.fixture(params=[True, False], ids=["versioned", "unversioned"])
def buckets(
    request: pytest.FixtureRequest, emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Buckets]:
    b = Buckets(emulator, versioned=request.param)
    for name, value in emulator.function_environment().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("OUTPUT_BUCKET", b.output)
    yield b


def test_the_sidecar_function_reads_the_changes_bytes_through_the_presigned_url(
    buckets: Buckets,
) -> None:
    run = FunctionProcessor(handler_invoker(HANDLER, timeout_s=30), url_seconds=60)
    body = b'{"a": 1}\n'
    change = buckets.put("in/a b+c.json", body)
    request = request_of(change, buckets.content(change), url_seconds=60)
    REQUEST.validate(request)
    assert request["content"]["url"].startswith(f"{buckets.s3.meta.endpoint_url}/")
    assert "X-Amz-Algorithm=AWS4-HMAC-SHA256" in request["content"]["url"]
    if change.version_id:
        assert request["content"]["headers"] == {}
        assert f"versionId={change.version_id}" in request["content"]["url"]
    else:
        assert request["content"]["headers"] == {"If-Match": f'"{change.etag}"'}
        assert "if-match" in request["content"]["url"]  # X-Amz-SignedHeaders=host;if-match

    run(change, buckets.content(change))

    doc = buckets.sidecar(change.key)
    assert doc is not None
    assert doc["sha256"] == hashlib.sha256(body).hexdigest() and doc["bytes"] == len(body)
    assert (doc["json"], doc["lines"], doc["changeId"], doc["token"]) == (
        True,
        1,
        change.change_id,
        1,
    )
    assert doc["versionId"] == change.version_id and doc["etag"] == change.etag

    removed = AppliedChange(**{**change.__dict__, "kind": "removed", "token": 2})
    REQUEST.validate(request_of(removed, None, url_seconds=60))
    run(removed, None)
    assert buckets.sidecar(change.key) is None


@pytest.mark.contract("C8")
def test_an_overwrite_before_the_read_is_superseded_unversioned_and_pinned_versioned(
    buckets: Buckets,
) -> None:
    run = FunctionProcessor(handler_invoker(HANDLER, timeout_s=30), url_seconds=60)
    old = buckets.put("k.txt", b"old bytes\n")
    buckets.put("k.txt", b"new bytes, longer\n")  # a newer write lands before the read
    if old.version_id:
        # the URL names the old version: its bytes, whatever came after
        run(old, buckets.content(old))
        doc = buckets.sidecar("k.txt")
        assert doc is not None and doc["sha256"] == hashlib.sha256(b"old bytes\n").hexdigest()
        # ... until that version is gone: 404
        buckets.s3.delete_object(Bucket=buckets.landing, Key="k.txt", VersionId=old.version_id)
    with pytest.raises(SupersededError, match=r"answered superseded: content: HTTP (412|404)"):
        run(old, buckets.content(old))
    if not old.version_id:
        assert buckets.sidecar("k.txt") is None  # nothing written for the obsolete change


def test_a_change_that_cannot_be_pinned_is_superseded_before_any_invoke(
    buckets: Buckets,
) -> None:
    calls: list[Any] = []
    change = buckets.put("no-pin.txt", b"x")
    unpinned = AppliedChange(**{**change.__dict__, "version_id": None, "etag": None})
    with pytest.raises(SupersededError, match="cannot be pinned"):
        FunctionProcessor(calls.append)(unpinned, buckets.content(unpinned))
    assert calls == []


@pytest.fixture
def service(emulator: Emulator) -> Iterator[LambdaService]:
    with LambdaService(emulator) as svc:
        yield svc


@pytest.mark.contract("C8", "C11")
def test_the_sidecar_as_a_lambda_through_invoke_and_its_failures_classified(
    emulator: Emulator, service: LambdaService
) -> None:
    b = Buckets(emulator, versioned=False)
    arn = service.register("sidecar", HANDLER.replace(":", "."), {"OUTPUT_BUCKET": b.output})
    client = boto3.client(
        "lambda",
        endpoint_url=emulator.endpoint_url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=invoke_config(3),
    )
    run = FunctionProcessor(lambda_invoker(client, arn, timeout_s=3), url_seconds=60)
    change = b.put("via/invoke.csv", b"a,b\n1,2\n")
    run(change, b.content(change))
    doc = b.sidecar(change.key)
    assert doc is not None and doc["lines"] == 2 and doc["json"] is False

    newer = b.put("via/invoke.csv", b"a,b\n3,4\n")
    with pytest.raises(SupersededError, match="HTTP 412"):
        run(change, b.content(change))

    for kind, reason, text in (
        ("raise", pf.FUNCTION_ERROR, "Unhandled InjectedFailure"),
        ("timeout", pf.TIMEOUT, "Task timed out after 3.00 seconds"),
        ("throttle", pf.THROTTLED, "TooManyRequestsException"),
        ("service", pf.INVOKE_FAILED, "ServiceException"),
    ):
        service.inject("sidecar", kind)
        with pytest.raises(ProcessorFunctionError) as info:
            run(newer, b.content(newer))
        assert info.value.reason == reason, info.value
        assert text in str(info.value) and "processor 'sidecar'" in str(info.value)
    run(newer, b.content(newer))
    doc = b.sidecar(newer.key)
    assert doc is not None and doc["sha256"] == hashlib.sha256(b"a,b\n3,4\n").hexdigest()
    assert [i.outcome for i in service.invocations] == [
        "ok",
        "ok",
        "error",
        "timeout",
        "throttle",
        "service",
        "ok",
    ]


@pytest.mark.contract("C11")
def test_a_processor_deployed_as_its_own_lambda_runs_under_the_claim_effectively_once(
    emulator: Emulator, service: LambdaService
) -> None:
    """Done-when of the processors issue: the example deployed as its own Lambda, invoked by
    the ingest service under the claim through Lambda Invoke, commits once per applied change;
    a failed invocation is retried alone, a duplicate and a stale event invoke nothing."""
    import json as json_

    from s3ingest.local.stack.runtime import LocalRuntime, local_settings
    from s3ingest_fn import wiring
    from s3ingest_fn.core.events import parse_body

    rt = LocalRuntime(emulator, local_settings(processor=None), versioning="Enabled")
    output = f"output-{uuid.uuid4().hex[:8]}"
    rt.s3.create_bucket(Bucket=output)
    arn = service.register("sidecar", HANDLER.replace(":", "."), {"OUTPUT_BUCKET": output})
    client = boto3.client(
        "lambda",
        endpoint_url=emulator.endpoint_url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=invoke_config(3),
    )
    specs = wiring.processor_specs(
        [{"name": "sidecar", "functionArn": arn, "timeoutSeconds": 3}],
        lambda_client=lambda timeout_s: client,
    )
    rt.service.effects = wiring.effect_runner(specs, rt.s3)
    rt.faithful.put("a.csv", "v1")
    rt.faithful.put("a.csv", "v2")
    first, second = (parse_body(json_.dumps(e)).changes[0] for e in rt.faithful.take_pending())
    # the first invocation fails: the claim is released, the message retried
    service.inject("sidecar", "raise")
    with pytest.raises(ProcessorFunctionError, match="function-error"):
        rt.service.handle(first)
    retried = rt.service.handle(first)
    assert retried.extra["effect"] == {"sidecar": "resumed-done"}
    applied = rt.service.handle(second)
    assert applied.extra["effect"] == {"sidecar": "done"}
    # a duplicate and a stale event invoke nothing
    assert rt.service.handle(second).outcome.value == "duplicate"
    assert rt.service.handle(first).outcome.value == "stale"
    assert [i.outcome for i in service.invocations] == ["error", "ok", "ok"]
    (row,) = rt.ledger_rows()
    effect = row.effect_of("sidecar")
    assert effect is not None and effect.status == "done"
    assert effect.done_change_id == row.change_id == applied.extra["change_id"]
    body = rt.s3.get_object(Bucket=output, Key=sidecar_key(rt.resources.bucket, "a.csv"))[
        "Body"
    ].read()
    assert json.loads(body)["versionId"] == second.version_id
