"""Bodies the parser must classify as invalid, with their exact reason (CONTRACT C3, C9), and
key decoding (CONTRACT C1; docs/payloads.md 1.3)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from s3ingest_fn.core.events import MAX_BODY_BYTES, MAX_KEY_BYTES, decode_form_key, parse_body
from s3ingest_fn.core.model import Format, InvalidMessageError, Kind


def notification(
    key: Any = "k",
    *,
    bucket: Any = "b",
    event_name: Any = "ObjectCreated:Put",
    drop: tuple[str, ...] = (),
) -> str:
    """One S3 notification record as a body; ``drop`` removes ``key``, ``bucket``, ``eventName``."""
    obj: dict[str, Any] = {"key": key, "size": 1, "eTag": "e", "sequencer": "00643717F9F8B85354"}
    record: dict[str, Any] = {
        "eventVersion": "2.1",
        "eventSource": "aws:s3",
        "eventName": event_name,
        "s3": {"bucket": {"name": bucket}, "object": obj},
    }
    if "key" in drop:
        del obj["key"]
    if "bucket" in drop:
        del record["s3"]["bucket"]["name"]
    if "eventName" in drop:
        del record["eventName"]
    return json.dumps({"Records": [record]})


def eventbridge(
    key: Any = "k",
    *,
    source: str = "aws.s3",
    detail_type: str = "Object Created",
    detail: dict[str, Any] | None = None,
) -> str:
    if detail is None:
        obj = {"key": key, "sequencer": "00643717F9F8B85354"}
        detail = {"bucket": {"name": "b"}, "object": obj}
    return json.dumps(
        {"version": "0", "detail-type": detail_type, "source": source, "detail": detail}
    )


def reason_of(body: Any) -> str:
    with pytest.raises(InvalidMessageError) as info:
        parse_body(body)
    return info.value.reason


# --- whole bodies --------------------------------------------------------------------------------


@pytest.mark.contract("C3", "C9")
@pytest.mark.parametrize(
    "body",
    [
        "",
        "Test message.",
        "{",
        '{"Records": [',
        "{{{body}}}",
        "{'single': 'quotes'}",
        "[" * 100_000,  # nesting deep enough to exhaust the decoder's recursion
    ],
)
def test_body_that_is_not_json_is_malformed(body: str) -> None:
    assert reason_of(body) == "malformed-json"


@pytest.mark.contract("C3", "C9")
@pytest.mark.parametrize(
    "body",
    [
        "[]",
        json.dumps([json.loads(notification())]),
        "null",
        "42",
        '"Records"',
        "true",
    ],
)
def test_json_that_is_not_an_object_is_an_unknown_shape(body: str) -> None:
    assert reason_of(body) == "unknown-shape"


@pytest.mark.contract("C3", "C9")
@pytest.mark.parametrize("body", [b"{}", None, {"Records": []}])
def test_body_that_is_not_a_string_is_an_unknown_shape(body: Any) -> None:
    assert reason_of(body) == "unknown-shape"


@pytest.mark.contract("C3", "C9")
@pytest.mark.parametrize(
    "doc",
    [
        {},
        {"message": "foo1"},
        {"Records": []},
        {"Records": {}},
        {"Records": ["not a record"]},
        # Another service's EventBridge event on the same queue.
        {
            "version": "0",
            "detail-type": "EC2 Instance State-change Notification",
            "source": "aws.ec2",
            "detail": {"instance-id": "i-0123", "state": "running"},
        },
        # Another service's record in a Records list (an SQS record passed as a body).
        {"Records": [{"eventSource": "aws:sqs", "body": "{}"}]},
        # An S3 EventBridge event whose detail is not an object.
        {"detail-type": "Object Created", "source": "aws.s3", "detail": "b/k"},
        # An SNS envelope whose Message is not a string.
        {"Type": "Notification", "Message": {"Records": []}},
        # An SNS envelope inside an SNS envelope: only one level is unwrapped.
        {
            "Type": "Notification",
            "Message": json.dumps({"Type": "Notification", "Message": notification()}),
        },
        {"s3ingestRepair": "b/k"},
    ],
)
def test_unknown_shape(doc: Any) -> None:
    assert reason_of(json.dumps(doc)) == "unknown-shape"


@pytest.mark.contract("C3", "C9")
def test_sns_envelope_with_a_message_that_is_not_json_is_malformed() -> None:
    assert (
        reason_of(json.dumps({"Type": "Notification", "Message": "{{{message}}}"}))
        == "malformed-json"
    )


@pytest.mark.contract("C3", "C9")
def test_body_over_max_body_bytes_is_too_large_even_when_valid_json() -> None:
    base = notification()
    assert reason_of(base + " " * (MAX_BODY_BYTES - len(base) + 1)) == "body-too-large"


@pytest.mark.contract("C3", "C9")
def test_body_size_is_counted_in_utf8_bytes_not_characters() -> None:
    body = json.dumps({"pad": "é" * (MAX_BODY_BYTES // 2)}, ensure_ascii=False)
    assert len(body) <= MAX_BODY_BYTES < len(body.encode("utf-8"))
    assert reason_of(body) == "body-too-large"


@pytest.mark.contract("C3")
def test_body_of_exactly_max_body_bytes_is_parsed() -> None:
    base = notification()
    body = base + " " * (MAX_BODY_BYTES - len(base))
    assert len(body.encode("utf-8")) == MAX_BODY_BYTES
    assert [c.key for c in parse_body(body).changes] == ["k"]


# --- missing or unusable fields ------------------------------------------------------------------


@pytest.mark.contract("C3", "C9")
@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (notification(drop=("key",)), "missing-key"),
        (notification(key=""), "missing-key"),
        (notification(key=None), "missing-key"),
        (notification(key=42), "missing-key"),
        (notification(drop=("bucket",)), "missing-field"),
        (notification(bucket=""), "missing-field"),
        (notification(drop=("eventName",)), "missing-field"),
        (notification(event_name=""), "missing-field"),
        (notification(event_name="ObjectExploded:Put"), "unknown-event"),
        (json.dumps({"Records": [{"eventName": "ObjectCreated:Put"}]}), "missing-field"),
        (
            json.dumps(
                {"Records": [{"eventName": "ObjectCreated:Put", "s3": {"bucket": {"name": "b"}}}]}
            ),
            "missing-field",
        ),
        (eventbridge(key=None), "missing-key"),
        (eventbridge(detail={"object": {"key": "k"}}), "missing-field"),
        (eventbridge(detail={"bucket": "b", "object": {"key": "k"}}), "missing-field"),
        (eventbridge(detail={"bucket": {"name": "b"}}), "missing-field"),
        (eventbridge(detail_type="Object Exploded"), "unknown-event"),
        (json.dumps({"s3ingestRepair": {"bucket": "b"}}), "missing-field"),
    ],
)
def test_missing_or_unusable_field(body: str, reason: str) -> None:
    assert reason_of(body) == reason


@pytest.mark.contract("C3", "C9")
def test_invalid_record_makes_the_whole_body_invalid() -> None:
    good, bad = json.loads(notification()), json.loads(notification(drop=("key",)))
    assert reason_of(json.dumps({"Records": good["Records"] + bad["Records"]})) == "missing-key"


@pytest.mark.contract("C3")
def test_only_the_key_is_required() -> None:
    # C3: every field but the key is optional (no size, eTag, versionId or sequencer).
    body = json.dumps(
        {
            "Records": [
                {
                    "eventName": "ObjectRemoved:Delete",
                    "s3": {"bucket": {"name": "b"}, "object": {"key": "k"}},
                }
            ]
        }
    )
    (change,) = parse_body(body).changes
    assert (change.kind, change.key, change.sequencer, change.raw_sequencer) == (
        Kind.REMOVED,
        "k",
        None,
        None,
    )
    assert (change.version_id, change.etag, change.size) == (None, None, None)


# --- keys that cannot be decoded -----------------------------------------------------------------


@pytest.mark.contract("C1", "C9")
@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("a%ZZ", "bad-percent-encoding"),
        ("%", "bad-percent-encoding"),
        ("a%2", "bad-percent-encoding"),
        ("100%+sure", "bad-percent-encoding"),
        ("%C3", "key-not-utf8"),  # a lone UTF-8 lead byte
        ("caf%E9", "key-not-utf8"),  # Latin-1, not UTF-8
        ("%FF%FE", "key-not-utf8"),
    ],
)
def test_key_that_is_not_valid_form_encoding(raw: str, reason: str) -> None:
    with pytest.raises(InvalidMessageError) as info:
        decode_form_key(raw)
    assert info.value.reason == reason
    assert reason_of(notification(raw)) == reason
    assert reason_of(eventbridge(raw)) == reason


@pytest.mark.contract("C1", "C9")
@pytest.mark.parametrize(
    "raw",
    [
        "a" * (MAX_KEY_BYTES + 1),
        "%C3%A9" * 512 + "a",  # 1025 bytes once decoded
        "+" * (MAX_KEY_BYTES + 1),
    ],
)
def test_key_over_1024_utf8_bytes_is_too_long(raw: str) -> None:
    assert reason_of(notification(raw)) == "key-too-long"
    assert reason_of(eventbridge(raw)) == "key-too-long"


@pytest.mark.contract("C1")
@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ("a" * MAX_KEY_BYTES, "a" * MAX_KEY_BYTES),
        # 3072 characters on the wire, 1024 bytes decoded: the limit applies to the object key.
        ("%C3%A9" * 512, "é" * 512),
    ],
)
def test_key_of_exactly_1024_utf8_bytes_is_accepted(raw: str, key: str) -> None:
    (change,) = parse_body(notification(raw)).changes
    assert (change.key, change.raw_key) == (key, raw)


@pytest.mark.contract("C1", "C9")
def test_repair_key_over_1024_bytes_is_too_long() -> None:
    body = json.dumps({"s3ingestRepair": {"bucket": "b", "key": "é" * 513, "reason": "drift"}})
    assert reason_of(body) == "key-too-long"


# --- key decoding: form-encoding, exactly once ---------------------------------------------------


@pytest.mark.contract("C1")
@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ("a%40b", "a@b"),  # LocalStack AWS-validated
        ("5%3A00.log", "5:00.log"),
        ("files/2017-11-15+14%3A22%3A21_file.csv", "files/2017-11-15 14:22:21_file.csv"),
        ("this+im+%2B+age+blah.txt", "this im + age blah.txt"),
        ("something/dt%3D2018-05-04/_SUCCESS", "something/dt=2018-05-04/_SUCCESS"),
        ("Happy%20Face.jpg", "Happy Face.jpg"),
        ("Happy+Face.jpg", "Happy Face.jpg"),
        ("a/b%252Fc", "a/b%2Fc"),  # decoded once: a literal "%2F" stays
        ("a/b%2Fc/foo.file", "a/b/c/foo.file"),
        ("a%252Bb", "a%2Bb"),
        ("caf%C3%A9", "café"),
        ("caf%c3%a9", "café"),  # lower-case hex digits
        ("%E6%97%A5%E6%9C%AC.txt", "日本.txt"),
        ("%F0%9F%98%80", "\U0001f600"),
        ("dir/", "dir/"),
        ("dir/sub/", "dir/sub/"),
        ("line%0Abreak", "line\nbreak"),
        ("glacier%2Dtest.txt", "glacier-test.txt"),
        ("plain-key_0.txt", "plain-key_0.txt"),
    ],
)
def test_key_is_form_decoded_exactly_once(raw: str, key: str) -> None:
    assert decode_form_key(raw) == key
    for body in (notification(raw), eventbridge(raw)):
        (change,) = parse_body(body).changes
        assert (change.key, change.raw_key) == (key, raw)


@pytest.mark.contract("C1")
def test_eventbridge_key_is_form_decoded_like_a_notification_key() -> None:
    # docs/payloads.md 5 (inferred, undocumented): EventBridge keys are encoded like classic ones.
    (change,) = parse_body(eventbridge("a+b%2Bc%40%C3%A9.txt")).changes
    assert (change.fmt, change.key) == (Format.EVENTBRIDGE, "a b+c@é.txt")


@pytest.mark.contract("C1")
def test_repair_key_is_already_raw_and_not_decoded() -> None:
    body = json.dumps({"s3ingestRepair": {"bucket": "b", "key": "a+b%2Bc", "reason": "drift"}})
    (change,) = parse_body(body).changes
    assert (change.fmt, change.kind, change.key, change.raw_key) == (
        Format.REPAIR,
        Kind.OBSERVE,
        "a+b%2Bc",
        "a+b%2Bc",
    )


# --- inputs that once crashed the parser or normalised wrongly ---------------------------------


@pytest.mark.contract("C3", "C9")
@pytest.mark.parametrize(
    "body",
    [
        '{"Records": [], "n": ' + "1" * 4301 + "}",  # over CPython's int-string digit limit
        json.dumps({"Type": "Notification", "Message": '{"n": ' + "9" * 5000 + "}"}),
    ],
)
def test_json_integer_beyond_the_interpreter_digit_limit_is_malformed(body: str) -> None:
    assert reason_of(body) == "malformed-json"


@pytest.mark.contract("C1", "C9")
@pytest.mark.parametrize(
    "body",
    [
        # A JSON escape for a lone surrogate is valid JSON text (and ASCII, so SQS accepts it) but
        # names no UTF-8 key.
        notification("a\ud800"),
        eventbridge("a\udfff"),
        json.dumps({"s3ingestRepair": {"bucket": "b", "key": "a\ud800", "reason": "drift"}}),
    ],
)
def test_key_with_a_lone_surrogate_is_not_utf8(body: str) -> None:
    assert reason_of(body) == "key-not-utf8"


@pytest.mark.contract("C3", "C9")
@pytest.mark.parametrize(
    ("size", "reason"),
    [("\u00b2", "field-not-integer: size"), ("9" * 5000, "field-range: size")],
)
def test_unusable_size_string_is_invalid(size: str, reason: str) -> None:
    # C9: a size present but not one S3 sends is invalid, not dropped; str.isdigit() accepts
    # "²", int() does not.
    body = json.loads(notification())
    body["Records"][0]["s3"]["object"]["size"] = size
    assert reason_of(json.dumps(body)) == reason


@pytest.mark.contract("C3")
def test_etag_of_only_quotes_is_absent() -> None:
    body = json.loads(notification())
    body["Records"][0]["s3"]["object"]["eTag"] = '""'
    (change,) = parse_body(json.dumps(body)).changes
    assert change.etag is None
