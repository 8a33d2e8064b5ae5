"""One SQS message in, one outcome out (CONTRACT C3, C9): MessageProcessor, DeadLetter and the
function's settings."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import boto3
import pytest
from botocore.stub import Stubber

from s3ingest_fn.adapters.sqs import (
    DETAIL_ATTRIBUTE,
    REASON_ATTRIBUTE,
    SOURCE_ID_ATTRIBUTE,
    DeadLetter,
)
from s3ingest_fn.core.decide import IngestService
from s3ingest_fn.core.model import Change, Outcome, Result, TransientError
from s3ingest_fn.services.ingest import FunctionSettings, MessageProcessor
from tests.samples import load_sample

DLQ_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/s3ingest-dlq"


@dataclass
class FakeService:
    """IngestService-like: records every change; raises ``errors[key]`` for a key if set."""

    errors: dict[str, TransientError] = field(default_factory=dict)
    seen: list[Change] = field(default_factory=list)

    def handle(self, change: Change) -> Result:
        self.seen.append(change)
        if change.key in self.errors:
            raise self.errors[change.key]
        return Result(
            outcome=Outcome.APPLIED,
            reason="newer-sequencer",
            bucket=change.bucket,
            key=change.key,
            sequencer=change.raw_sequencer,
        )


def eventbridge_body(key: str = "example-key", **object_fields: Any) -> str:
    """An EventBridge ``Object Created`` body from the AWS doc sample, with a given key."""
    doc = copy.deepcopy(load_sample("awsdocs-s3ug__eventbridge-ObjectCreated.json"))
    assert isinstance(doc, dict)
    doc["detail"]["object"]["key"] = key
    doc["detail"]["object"].update(object_fields)
    return json.dumps(doc)


@pytest.fixture
def sqs() -> Iterator[tuple[Any, Stubber]]:
    client = boto3.client(
        "sqs", region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    with Stubber(client) as stub:
        yield client, stub
        stub.assert_no_pending_responses()


@pytest.fixture
def service() -> FakeService:
    return FakeService()


@pytest.fixture
def seen_results() -> list[Result]:
    return []


@pytest.fixture
def processor(
    sqs: tuple[Any, Stubber], service: FakeService, seen_results: list[Result]
) -> MessageProcessor:
    client, _ = sqs
    return MessageProcessor(
        service=cast(IngestService, service),
        dead_letter=DeadLetter(client, DLQ_URL),
        on_result=seen_results.append,
    )


def _dlq_request(body: str, reason: str, detail: str, message_id: str) -> dict[str, Any]:
    return {
        "QueueUrl": DLQ_URL,
        "MessageBody": body,
        "MessageAttributes": {
            REASON_ATTRIBUTE: {"DataType": "String", "StringValue": reason},
            SOURCE_ID_ATTRIBUTE: {"DataType": "String", "StringValue": message_id},
            DETAIL_ATTRIBUTE: {"DataType": "String", "StringValue": detail},
        },
    }


@pytest.mark.contract("C9")
@pytest.mark.parametrize(
    ("body", "reason", "detail"),
    [
        ('{"foo": 1}', "unknown-shape", "keys: foo"),
        ("[]", "unknown-shape", "top level is list"),
        (eventbridge_body("a%zz"), "bad-percent-encoding", "a%zz"),
        (
            json.dumps(
                {
                    "source": "aws.s3",
                    "detail-type": "Object Frobbed",
                    "detail": {"bucket": {"name": "b"}, "object": {"key": "k"}},
                }
            ),
            "unknown-event",
            "detail-type 'Object Frobbed'",
        ),
    ],
)
def test_invalid_body_goes_to_the_dlq_with_its_reason(
    processor: MessageProcessor,
    sqs: tuple[Any, Stubber],
    service: FakeService,
    seen_results: list[Result],
    body: str,
    reason: str,
    detail: str,
) -> None:
    # GIVEN the DLQ accepts exactly this message, unchanged, with the reason as an attribute
    _, stub = sqs
    stub.add_response(
        "send_message", {"MessageId": "dlq-1"}, _dlq_request(body, reason, detail, "msg-1")
    )

    # WHEN the body is processed
    results = processor.process(body, "msg-1")

    # THEN it ends invalid, never reaching the decision logic
    assert [(r.outcome, r.reason) for r in results] == [(Outcome.INVALID, reason)]
    assert service.seen == []
    assert seen_results == results


@pytest.mark.contract("C9")
def test_when_the_dlq_send_fails_the_message_is_retried(
    processor: MessageProcessor, sqs: tuple[Any, Stubber]
) -> None:
    # GIVEN the DLQ is unavailable
    _, stub = sqs
    stub.add_client_error(
        "send_message",
        service_error_code="InternalError",
        http_status_code=500,
        expected_params=_dlq_request('{"foo": 1}', "unknown-shape", "keys: foo", "msg-1"),
    )

    # WHEN an invalid body is processed
    results = processor.process('{"foo": 1}', "msg-1")

    # THEN it is retried rather than acknowledged: nothing lost (C9)
    assert len(results) == 1
    assert results[0].outcome is Outcome.RETRIED
    assert results[0].reason.startswith("dead-letter failed")


@pytest.mark.contract("C3", "C9")
def test_test_event_is_ignored_without_ingesting(
    processor: MessageProcessor, service: FakeService
) -> None:
    body = json.dumps(load_sample("awsdocs-s3ug__notification-TestEvent.json"))

    results = processor.process(body, "msg-1")

    assert [(r.outcome, r.reason) for r in results] == [(Outcome.IGNORED, "test-event")]
    assert service.seen == []  # and no SQS call: the stubber has no response queued


@pytest.mark.contract("C1")
def test_a_valid_event_reaches_the_service_with_its_decoded_key(
    processor: MessageProcessor, service: FakeService
) -> None:
    results = processor.process(eventbridge_body("a+b%2Bc.txt"), "msg-1")

    assert [r.outcome for r in results] == [Outcome.APPLIED]
    assert [c.key for c in service.seen] == ["a b+c.txt"]


@pytest.mark.contract("C9")
def test_transient_error_from_the_service_is_retried(
    processor: MessageProcessor, service: FakeService, seen_results: list[Result]
) -> None:
    service.errors["example-key"] = TransientError("dynamodb: ThrottlingException")

    results = processor.process(eventbridge_body(), "msg-1")

    assert len(results) == 1
    assert results[0].outcome is Outcome.RETRIED
    assert results[0].reason == "dynamodb: ThrottlingException"
    assert (results[0].bucket, results[0].key, results[0].sequencer) == (
        "DOC-EXAMPLE-BUCKET1",
        "example-key",
        "617f08299329d189",
    )
    assert seen_results == results


@pytest.mark.contract("C9")
def test_one_result_per_record_and_a_transient_record_does_not_hide_the_others(
    processor: MessageProcessor, service: FakeService
) -> None:
    doc = copy.deepcopy(load_sample("awsdocs-s3ug__notification-ObjectCreatedPut.json"))
    assert isinstance(doc, dict)
    first = doc["Records"][0]
    second = copy.deepcopy(first)
    first["s3"]["object"]["key"] = "ok"
    second["s3"]["object"]["key"] = "throttled"
    doc["Records"] = [first, second]
    service.errors["throttled"] = TransientError("s3 head_object: SlowDown")

    results = processor.process(json.dumps(doc), "msg-1")

    assert [(r.key, r.outcome) for r in results] == [
        ("ok", Outcome.APPLIED),
        ("throttled", Outcome.RETRIED),
    ]


@pytest.mark.contract("C9")
def test_a_size_that_is_not_a_number_is_invalid_not_a_crash(
    processor: MessageProcessor, service: FakeService, sqs: tuple[Any, Stubber]
) -> None:
    # C9: a size present but not an integer is invalid (not dropped), and never a crash.
    # ('²'.isdigit() is True but int('²') raises: this once escaped process() as a ValueError.)
    body = eventbridge_body(size="²")
    _, stub = sqs
    stub.add_response(
        "send_message",
        {"MessageId": "dlq-1"},
        _dlq_request(body, "field-not-integer: size", "'²'", "msg-1"),
    )

    results = processor.process(body, "msg-1")

    assert [(r.outcome, r.reason) for r in results] == [
        (Outcome.INVALID, "field-not-integer: size")
    ]
    assert service.seen == []


# -- FunctionSettings --------------------------------------------------------------------------


def test_settings_from_a_valid_environment() -> None:
    settings = FunctionSettings.from_env(
        {
            "LEDGER_TABLE_NAME": "ledger",
            "DEAD_LETTER_QUEUE_URL": DLQ_URL,
            "TOMBSTONE_TTL_SECONDS": "1209600",
            "RECORD_CONCURRENCY": "16",
            "BUCKET_NAME": "amzn-s3-demo-bucket",
        }
    )

    assert settings == FunctionSettings(
        ledger_table_name="ledger",
        dead_letter_queue_url=DLQ_URL,
        tombstone_ttl_seconds=1209600,
        record_concurrency=16,
        bucket_name="amzn-s3-demo-bucket",
    )


def test_settings_defaults() -> None:
    settings = FunctionSettings.from_env(
        {"LEDGER_TABLE_NAME": "ledger", "DEAD_LETTER_QUEUE_URL": DLQ_URL, "BUCKET_NAME": ""}
    )

    assert settings.tombstone_ttl_seconds == 0
    assert settings.record_concurrency == 8
    assert settings.bucket_name is None


def test_settings_report_every_problem_in_one_error() -> None:
    with pytest.raises(ValueError, match="misconfigured") as info:
        FunctionSettings.from_env({"DEAD_LETTER_QUEUE_URL": DLQ_URL, "RECORD_CONCURRENCY": "0"})

    message = str(info.value)
    assert "LEDGER_TABLE_NAME is not set" in message
    assert "RECORD_CONCURRENCY='0'" in message


def test_settings_report_a_non_ascii_digit_with_the_other_problems() -> None:
    # '²'.isdigit() is True but int('²') raises: this once gave a bare ValueError.
    with pytest.raises(ValueError, match="misconfigured") as info:
        FunctionSettings.from_env({"DEAD_LETTER_QUEUE_URL": DLQ_URL, "RECORD_CONCURRENCY": "²"})

    message = str(info.value)
    assert "LEDGER_TABLE_NAME is not set" in message
    assert "RECORD_CONCURRENCY" in message
