"""Forged and unbounded input refused at parse time (issue 24; CONTRACT C2, C9): a sequencer not
in S3's shape or from the future, fields beyond their bound, too many records per message; over
``parse_body`` with a fixed clock, and over the ingest handler with fakes (nothing reaches the
decision logic, every message goes to the DLQ with its reason)."""

from __future__ import annotations

import copy
import json
from typing import Any, cast

import pytest

from s3ingest_fn.adapters.sqs import (
    DEAD_LETTER_MAX_MESSAGE_BYTES,
    FORWARD_ATTRIBUTES_MAX_BYTES,
    INGEST_QUEUE_MAX_MESSAGE_BYTES,
    MAX_REASON_BYTES,
    REASON_ATTRIBUTE,
    DeadLetter,
    message_size,
)
from s3ingest_fn.core import bounds
from s3ingest_fn.core.decide import IngestService
from s3ingest_fn.core.events import MAX_BODY_BYTES, MAX_RECORDS_PER_MESSAGE, parse_body
from s3ingest_fn.core.model import Change, InvalidMessageError, Outcome, Result
from s3ingest_fn.core.sequencer import SKEW_SECONDS
from s3ingest_fn.handlers.ingest import make_handler
from s3ingest_fn.services.ingest import MessageProcessor
from tests.samples import load_sample

#: The handler's clock in these tests: 2026-01-01T00:00:00Z.
NOW = 1_767_225_600
REAL_SEQUENCER = "00643717F9F8B85354"


def _seq_at(seconds: int) -> str:
    """A sequencer in S3's layout (``00`` + 8 hex digits of seconds + a suffix)."""
    return f"00{seconds:08X}00000001"


def eventbridge(**object_fields: Any) -> dict[str, Any]:
    """The AWS doc's EventBridge ``Object Created`` event, with object fields replaced."""
    doc = copy.deepcopy(load_sample("awsdocs-s3ug__eventbridge-ObjectCreated.json"))
    assert isinstance(doc, dict)
    doc["detail"]["object"].update(object_fields)
    return doc


def record(key: str = "k", **object_fields: Any) -> dict[str, Any]:
    obj = {"key": key, "size": 1, "eTag": "0123456789abcdef0123456789abcdef"}
    obj["sequencer"] = REAL_SEQUENCER
    obj.update(object_fields)
    return {
        "eventVersion": "2.1",
        "eventSource": "aws:s3",
        "eventName": "ObjectCreated:Put",
        "eventTime": "2023-04-12T20:43:38.021Z",
        "s3": {"bucket": {"name": "b"}, "object": obj},
    }


def _compact(key: str) -> dict[str, Any]:
    """A minimal record (1,349 of them fit the 256 KiB body)."""
    return {
        "eventName": "ObjectCreated:Put",
        "s3": {"bucket": {"name": "b"}, "object": {"key": key, "sequencer": REAL_SEQUENCER}},
    }


def notification(**object_fields: Any) -> dict[str, Any]:
    return {"Records": [record(**object_fields)]}


def reason_of(doc: Any) -> str:
    with pytest.raises(InvalidMessageError) as info:
        parse_body(json.dumps(doc), now_s=NOW)
    return info.value.reason


#: The forged inputs of issue 24 (and their neighbours), each with the reason it ends with.
FORGED: dict[str, tuple[Any, str]] = {
    "sequencer-64-F": (eventbridge(sequencer="F" * 64), "sequencer-length"),
    "sequencer-far-future": (
        eventbridge(sequencer=_seq_at(NOW + 10 * 365 * 86_400)),
        "sequencer-from-future",
    ),
    "sequencer-not-hex": (notification(sequencer="Happy Sequencer"), "sequencer-not-hex"),
    "sequencer-not-a-string": (notification(sequencer=12345), "sequencer-not-hex"),
    "version-id-130KB": (
        eventbridge(**{"version-id": "v" * 130_000}),
        "field-too-long: version-id",
    ),
    "records-1349": (
        {"Records": [_compact(f"k{i}") for i in range(1349)]},
        "too-many-records",
    ),
    "size-negative": (notification(size=-1), "field-range: size"),
    "size-40-digits": (notification(size=10**39), "field-range: size"),
    "size-40-digit-string": (notification(size="9" * 40), "field-range: size"),
    "size-over-max-object": (notification(size=bounds.MAX_OBJECT_SIZE + 1), "field-range: size"),
    "size-fraction": (notification(size=1.5), "field-not-integer: size"),
    "size-bool": (notification(size=True), "field-not-integer: size"),
    "etag-oversized": (eventbridge(etag="a" * 65), "field-too-long: etag"),
    "etag-not-hex": (eventbridge(etag="<script>"), "field-shape: etag"),
    "time-oversized": (dict(eventbridge(), time="2023-" + "9" * 100), "field-too-long: time"),
    "replay-name-oversized": (
        dict(eventbridge(), **{"replay-name": "r" * 65}),
        "field-too-long: replay-name",
    ),
    "replay-name-shape": (
        dict(eventbridge(), **{"replay-name": "a b"}),
        "field-shape: replay-name",
    ),
    "bucket-oversized": (
        {"Records": [dict(record(), s3={"bucket": {"name": "b" * 256}, "object": {"key": "k"}})]},
        "field-too-long: bucket",
    ),
    "raw-key-oversized": (notification(key="%41" * 1024 + "a"), "key-too-long"),
    "event-name-oversized": (
        {"Records": [dict(record(), eventName="ObjectCreated:" + "x" * 100)]},
        "field-too-long: eventName",
    ),
    "metadata-sequencer-oversized": (
        {
            "Records": [
                dict(record(sequencer="0" * 65), eventName="ObjectTagging:Put"),
            ]
        },
        "field-too-long: sequencer",
    ),
    "repair-reason-oversized": (
        {"s3ingestRepair": {"bucket": "b", "key": "k", "reason": "r" * 129}},
        "field-too-long: reason",
    ),
}


def _eb_detail(**detail: Any) -> dict[str, Any]:
    doc = eventbridge()
    doc["detail"].update(detail)
    return doc


FORGED["eb-reason-oversized"] = (_eb_detail(reason="R" * 65), "field-too-long: reason")
FORGED["eb-deletion-type-oversized"] = (
    dict(_eb_detail(**{"deletion-type": "D" * 65}), **{"detail-type": "Object Deleted"}),
    "field-too-long: deletion-type",
)


@pytest.mark.contract("C2", "C9")
@pytest.mark.parametrize("name", sorted(FORGED))
def test_forged_input_is_invalid_with_its_reason(name: str) -> None:
    doc, reason = FORGED[name]
    assert len(json.dumps(doc).encode()) <= MAX_BODY_BYTES  # refused for its field, not its size
    assert reason_of(doc) == reason


@pytest.mark.contract("C2", "C7")
@pytest.mark.parametrize("value", [None, ""])
def test_absent_or_empty_sequencer_is_no_sequencer(value: str | None) -> None:
    doc = notification(sequencer=value)
    if value is None:
        del doc["Records"][0]["s3"]["object"]["sequencer"]
    (change,) = parse_body(json.dumps(doc), now_s=NOW).changes
    assert change.sequencer is None


@pytest.mark.contract("C2", "C3")
def test_metadata_event_keeps_ignoring_its_sequencer_shape() -> None:
    doc = {"Records": [dict(record(sequencer="Happy Sequencer"), eventName="ObjectTagging:Put")]}
    (change,) = parse_body(json.dumps(doc), now_s=NOW).changes
    assert (change.sequencer, change.raw_sequencer) == (None, "Happy Sequencer")


@pytest.mark.contract("C2")
def test_sequencer_within_the_skew_is_accepted_and_beyond_it_refused() -> None:
    at_edge = notification(sequencer=_seq_at(NOW + SKEW_SECONDS))
    (change,) = parse_body(json.dumps(at_edge), now_s=NOW).changes
    assert change.raw_sequencer == _seq_at(NOW + SKEW_SECONDS)
    assert reason_of(notification(sequencer=_seq_at(NOW + SKEW_SECONDS + 1))) == (
        "sequencer-from-future"
    )


@pytest.mark.contract("C2")
def test_the_clock_defaults_to_the_time_of_day() -> None:
    # A sequencer of 2001 is in the past by any real clock; one of 2106 in the future.
    (change,) = parse_body(json.dumps(notification(sequencer=_seq_at(10**9)))).changes
    assert change.sequencer is not None
    with pytest.raises(InvalidMessageError, match="sequencer-from-future"):
        parse_body(json.dumps(notification(sequencer="00FFFFFFFF00000001")))


@pytest.mark.contract("C9")
def test_fields_at_their_bound_are_accepted() -> None:
    doc = eventbridge(
        **{"version-id": "é" * (bounds.MAX_VERSION_ID_BYTES // 2)},
        etag="0123456789abcdef0123456789abcdef-10000",
        size=bounds.MAX_OBJECT_SIZE,
    )
    doc["replay-name"] = "r" * bounds.MAX_REPLAY_NAME_CHARS
    (change,) = parse_body(json.dumps(doc), now_s=NOW).changes
    assert change.size == bounds.MAX_OBJECT_SIZE
    assert change.replay_name == "r" * 64
    assert change.etag == "0123456789abcdef0123456789abcdef-10000"
    # one byte more than 1,024 (a two-byte character) is too long
    over = eventbridge(**{"version-id": "é" * (bounds.MAX_VERSION_ID_BYTES // 2) + "a"})
    assert reason_of(over) == "field-too-long: version-id"


@pytest.mark.contract("C9")
def test_records_up_to_the_bound_parse_and_one_more_is_invalid() -> None:
    full = {"Records": [record(f"k{i}") for i in range(MAX_RECORDS_PER_MESSAGE)]}
    assert len(parse_body(json.dumps(full), now_s=NOW).changes) == MAX_RECORDS_PER_MESSAGE
    full["Records"].append(record("one-more"))
    assert reason_of(full) == "too-many-records"


# --- over the ingest handler, with fakes ---------------------------------------------------------


class RecordingService:
    """IngestService-like: records every change that reaches it."""

    def __init__(self) -> None:
        self.seen: list[Change] = []

    def bind_context(self, context: Any) -> None:
        pass

    def handle(self, change: Change) -> Result:
        self.seen.append(change)
        return Result(outcome=Outcome.APPLIED, reason="newer-sequencer", key=change.key)


class RecordingDeadLetter:
    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    def send(self, body: str, reason: str, detail: str, message_id: str) -> None:
        self.sent.append((message_id, reason))


@pytest.mark.contract("C9")
def test_the_handler_dead_letters_every_forged_message_and_applies_nothing() -> None:
    # GIVEN a batch of every forged body and one real event, and a handler whose clock is NOW
    service, dead = RecordingService(), RecordingDeadLetter()
    processor = MessageProcessor(
        service=cast(IngestService, service), dead_letter=dead, clock=lambda: NOW
    )
    results: list[tuple[str, Result]] = []
    handler = make_handler(processor, 4, emit=lambda r, mid: results.append((mid, r)))
    names = sorted(FORGED)
    bodies = {name: json.dumps(FORGED[name][0]) for name in names}
    bodies["real"] = json.dumps(eventbridge())
    event = {
        "Records": [
            {"messageId": name, "receiptHandle": "rh", "body": body, "attributes": {},
             "messageAttributes": {}, "md5OfBody": "", "eventSource": "aws:sqs",
             "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:ingest",
             "awsRegion": "us-east-1"}
            for name, body in bodies.items()
        ]
    }  # fmt: skip

    # WHEN it runs
    response = handler(event, None)

    # THEN each forged message is invalid with its reason and in the DLQ; only the real event
    # reached the decision logic; nothing is retried
    assert response == {"batchItemFailures": []}
    outcomes = {mid: (r.outcome, r.reason) for mid, r in results}
    assert outcomes == {
        **{name: (Outcome.INVALID, FORGED[name][1]) for name in names},
        "real": (Outcome.APPLIED, "newer-sequencer"),
    }
    assert sorted(dead.sent) == sorted((name, FORGED[name][1]) for name in names)
    assert [c.key for c in service.seen] == ["example-key"]


# --- the DLQ forward fits (CONTRACT C9) ----------------------------------------------------------


class CapturingSqs:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def send_message(self, **kwargs: Any) -> dict[str, Any]:
        self.sent.append(kwargs)
        return {"MessageId": "dlq-1"}


@pytest.mark.contract("C9")
def test_message_size_counts_body_and_every_attribute_part_in_utf8_bytes() -> None:
    # SQS: body + each attribute's name, data type and value (sqs-message-metadata.html)
    attrs = {"n": {"DataType": "String", "StringValue": "é"}}
    assert message_size("ab", attrs) == 2 + 1 + 6 + 2


@pytest.mark.contract("C9")
@pytest.mark.parametrize("char", ["a", "é", "\U0001f600"])
def test_a_body_at_the_queue_maximum_forwards_with_the_longest_reason_within_the_dlq_limit(
    char: str,
) -> None:
    # GIVEN a body of the ingest queue's maximum size, and reason, detail and message id longer
    # than any bound
    width = len(char.encode())
    body = char * (INGEST_QUEUE_MAX_MESSAGE_BYTES // width)
    assert INGEST_QUEUE_MAX_MESSAGE_BYTES - width < len(body.encode()) <= MAX_BODY_BYTES
    reason = "field-too-long: " + char * 400
    sqs = CapturingSqs()

    # WHEN it is forwarded to the DLQ
    DeadLetter(cast(Any, sqs), "https://dlq").send(body, reason, char * 5000, "m" * 500)

    # THEN the message SQS would count fits the DLQ, with the body unchanged and the reason kept
    # (cut at a character boundary)
    (sent,) = sqs.sent
    size = message_size(sent["MessageBody"], sent["MessageAttributes"])
    assert size <= INGEST_QUEUE_MAX_MESSAGE_BYTES + FORWARD_ATTRIBUTES_MAX_BYTES
    assert size <= DEAD_LETTER_MAX_MESSAGE_BYTES
    assert sent["MessageBody"] == body
    kept = sent["MessageAttributes"][REASON_ATTRIBUTE]["StringValue"]
    assert reason.startswith(kept) and len(kept.encode()) > MAX_REASON_BYTES - width
