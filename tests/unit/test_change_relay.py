"""The change relay cannot stall and nothing expires unseen (CONTRACT C11, issue 24): PutEvents
requests grouped by count and size, changes that can never be published dead-lettered with
their reason while the batch goes on, transient refusals retried and then left to the stream."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError
from botocore.stub import ANY, Stubber
from hypothesis import given, settings
from hypothesis import strategies as st

from s3ingest_fn.adapters.eventbridge import (
    MAX_REQUEST_BYTES,
    PUT_EVENTS_MAX,
    EventBridgePublisher,
    entry_size,
    requests,
)
from s3ingest_fn.adapters.sqs import REASON_ATTRIBUTE, SOURCE_ID_ATTRIBUTE, DeadLetter
from s3ingest_fn.core.model import TransientError
from s3ingest_fn.core.ports import ChangeEntry
from s3ingest_fn.handlers.change_stream import relay
from s3ingest_fn.services.changes import (
    DEAD_LETTER_BODY_MAX,
    change_event,
    dead_letter_body,
    publish,
)

KB = 1024


def _record(seq: str, version_id: str = "v1") -> dict[str, Any]:
    """An applied change's stream record whose version id is ``version_id``."""
    image: dict[str, Any] = {
        "pk": {"S": "bkt/k"},
        "bucket": {"S": "bkt"},
        "key": {"S": "k"},
        "state": {"S": "present"},
        "chg_seq": {"S": "0055AED6DCD90281E5"},
        "op": {"S": "apply"},
        "chg_id": {"S": f"id-{seq}"},
        "rev": {"N": "3"},
        "source": {"S": "live"},
        "event_name": {"S": "Object Created/PutObject"},
        "reason": {"S": "newer-sequencer"},
        "observed": {"BOOL": False},
        "updated_at": {"N": "1764460800000"},
        "version_id": {"S": version_id},
        "etag": {"S": "abc"},
        "size": {"N": "5"},
    }
    return {
        "eventName": "MODIFY",
        "eventSource": "aws:dynamodb",
        "eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/x",
        "dynamodb": {"NewImage": image, "SequenceNumber": seq},
    }


def _entry(size: int, char: str = "x") -> ChangeEntry:
    """An entry of exactly ``size`` bytes as PutEvents counts them (``size`` >= 32)."""
    fixed = entry_size(
        {"Source": "s3ingest", "DetailType": "Object Ingested", "Detail": "", "Resources": []}
    )
    width = len(char.encode("utf-8"))
    body, pad = divmod(size - fixed, width)
    return {
        "Source": "s3ingest",
        "DetailType": "Object Ingested",
        "EventBusName": "a-bus-name-that-does-not-count",
        "Detail": char * body + "y" * pad,
        "Resources": [],
    }


def _id(entry: dict[str, Any]) -> str:
    return str(json.loads(entry["Detail"])["id"])


class FakeEvents:
    """An EventBridge client's ``put_events``: refuses a request over PutEvents' limits as the
    service does; answers each entry from ``answers`` (change id -> error codes to give, in
    turn; then accepted)."""

    def __init__(self, answers: dict[str, list[str]] | None = None) -> None:
        self.answers = {k: list(v) for k, v in (answers or {}).items()}
        self.requests: list[list[dict[str, Any]]] = []
        self.accepted: list[str] = []

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        self.requests.append(Entries)
        if len(Entries) > PUT_EVENTS_MAX or sum(map(entry_size, Entries)) > MAX_REQUEST_BYTES:
            raise ClientError(
                {"Error": {"Code": "ValidationException", "Message": "over the limit"}},
                "PutEvents",
            )
        results: list[dict[str, Any]] = []
        for entry in Entries:
            codes = self.answers.get(_id(entry), [])
            if codes:
                results.append({"ErrorCode": codes.pop(0), "ErrorMessage": "refused"})
            else:
                self.accepted.append(_id(entry))
                results.append({"EventId": f"e-{len(self.accepted)}"})
        return {"FailedEntryCount": sum("ErrorCode" in r for r in results), "Entries": results}


class FakeDeadLetters:
    """The relay's dead-letter queue: ``(body, reason, detail, message_id)`` sent; ``refuse``
    makes it refuse."""

    def __init__(self, refuse: bool = False) -> None:
        self.sent: list[tuple[str, str, str, str]] = []
        self.refuse = refuse

    def send(self, body: str, reason: str, detail: str, message_id: str) -> None:
        if self.refuse:
            raise TransientError("sqs send_message to DLQ: refused")
        self.sent.append((body, reason, detail, message_id))


def _publisher(client: Any, pauses: list[float] | None = None) -> EventBridgePublisher:
    return EventBridgePublisher(client, sleep=(pauses if pauses is not None else []).append)


# --- Grouping by count and by size ---------------------------------------------------------------


def test_entry_size_is_what_put_events_counts() -> None:
    # Source, DetailType, Detail and each resource in UTF-8 bytes; Time 14; the bus name nothing
    entry: dict[str, Any] = {
        "Source": "s3ingest",
        "DetailType": "Object Ingested",
        "EventBusName": "ignored",
        "Detail": '{"k":"é"}',
        "Resources": ["arn:aws:s3:::bkt", "ab"],
    }
    assert entry_size(entry) == 8 + 15 + 10 + 16 + 2
    assert entry_size({**entry, "Time": "2026-12-02T10:00:00Z"}) == entry_size(entry) + 14


def test_many_small_entries_go_ten_per_request() -> None:
    entries = [_entry(200) for _ in range(25)]
    groups, too_large = requests(entries)
    assert too_large == {}
    assert groups == [list(range(0, 10)), list(range(10, 20)), list(range(20, 25))]


def test_one_huge_entry_is_set_aside_and_the_others_are_grouped_around_it() -> None:
    entries = [_entry(300), _entry(MAX_REQUEST_BYTES + 1), _entry(300), _entry(MAX_REQUEST_BYTES)]
    groups, too_large = requests(entries)
    assert groups == [[0, 2], [3]]  # exactly the limit fits, alone
    assert too_large == {
        1: f"entry-too-large: {MAX_REQUEST_BYTES + 1} bytes, over PutEvents' "
        f"{MAX_REQUEST_BYTES}-byte request limit"
    }


def test_mixed_sizes_close_a_request_before_it_would_exceed_256_kb() -> None:
    # 100 KB entries: two per request; multi-byte characters counted as UTF-8 bytes
    sizes = [100 * KB, 100 * KB, 100 * KB, 10 * KB, 50 * KB, 200 * KB, 1 * KB]
    entries = [_entry(s, char="é" if n % 2 else "x") for n, s in enumerate(sizes)]
    assert [entry_size(e) for e in entries] == sizes
    groups, too_large = requests(entries)
    assert too_large == {}
    assert groups == [[0, 1], [2, 3, 4], [5, 6]]


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(
        st.one_of(
            st.integers(200, 2 * KB),
            st.integers(20 * KB, 140 * KB),
            st.integers(MAX_REQUEST_BYTES - 600, MAX_REQUEST_BYTES + 4 * KB),
        ),
        max_size=30,
    ),
    malformed=st.sets(st.integers(0, 29)),
    throttled=st.sets(st.integers(0, 29)),
)
def test_every_request_fits_and_every_change_is_published_or_dead_lettered_once(
    sizes: list[int], malformed: set[int], throttled: set[int]
) -> None:
    # GIVEN changes of any size, some PutEvents refuses for their content, some once for now
    base = len(json.dumps(json.loads(change_event(_record("0", ""), "bus")["Detail"])))
    records = [_record(str(n), "v" * max(1, size - base)) for n, size in enumerate(sizes)]
    answers = {f"id-{n}": ["MalformedDetail"] for n in malformed if n < len(sizes)}
    for n in throttled - malformed:
        answers[f"id-{n}"] = ["ThrottlingException"]
    client, dead = FakeEvents(answers), FakeDeadLetters()
    # WHEN the relay publishes them
    published, failed_at, dead_lettered = publish(_publisher(client), "bus", records, dead)
    # THEN every request was within 10 entries and 256 KB ...
    for request in client.requests:
        assert len(request) <= PUT_EVENTS_MAX
        assert sum(entry_size(e) for e in request) <= MAX_REQUEST_BYTES
    # ... and each change was published or dead-lettered, exactly once, and the batch went on
    assert failed_at is None
    dead_ids = [json.loads(body)["detail"]["id"] for body, *_ in dead.sent]
    everything = Counter(client.accepted) + Counter(dead_ids)
    ids = [f"id-{n}" for n in range(len(sizes))]
    assert everything == Counter(ids)
    assert [_id(dict(e)) for e in published] == [i for i in ids if i in client.accepted]
    assert {seq for seq, _ in dead_lettered} == {i.removeprefix("id-") for i in dead_ids}
    for body, *_ in dead.sent:
        assert len(body.encode("utf-8")) <= DEAD_LETTER_BODY_MAX


# --- What can never be published goes to the relay's DLQ, with its reason ------------------------


@pytest.mark.contract("C11")
def test_an_oversized_change_is_dead_lettered_with_its_reason_and_the_batch_goes_on() -> None:
    # GIVEN a batch whose second change is over 256 KB alone (a 300 KB version id)
    records = [_record("1"), _record("2", "v" * 300 * KB), _record("3")]
    client, dead = FakeEvents(), FakeDeadLetters()
    # WHEN the relay handles it
    response = relay(_publisher(client), "bus", {"Records": records}, dead_letters=dead)
    # THEN the others are published in one request, nothing is retried ...
    assert response == {"batchItemFailures": []}
    assert client.accepted == ["id-1", "id-3"] and len(client.requests) == 1
    # ... and the relay's DLQ holds the change itself, cut to fit, with the reason and position
    ((body, reason, detail, message_id),) = dead.sent
    assert reason.startswith("entry-too-large: ") and detail == "" and message_id == "2"
    message = json.loads(body)
    assert len(body.encode("utf-8")) <= DEAD_LETTER_BODY_MAX
    assert message["reason"] == reason and message["sequenceNumber"] == "2"
    assert message["eventSourceARN"] == records[1]["eventSourceARN"]
    assert (message["source"], message["detailType"]) == ("s3ingest", "Object Ingested")
    assert message["resources"] == ["arn:aws:s3:::bkt"]
    assert message["truncated"] == ["detail.versionId"]
    assert message["detail"]["versionId"] == "v" * 1024
    full = json.loads(change_event(records[1], "bus")["Detail"])
    assert {k: v for k, v in message["detail"].items() if k != "versionId"} == {
        k: v for k, v in full.items() if k != "versionId"
    }


def test_a_dead_letter_body_that_fits_is_the_whole_change() -> None:
    record = _record("5")
    entry = change_event(record, "bus")
    message = json.loads(dead_letter_body(record, entry, "put-events-refused: MalformedDetail: x"))
    assert message["detail"] == json.loads(entry["Detail"]) and message["truncated"] == []


def test_a_dead_letter_body_of_many_long_fields_is_cut_harder_until_it_fits() -> None:
    record = _record("6")
    entry = dict(change_event(record, "bus"))
    entry["Detail"] = json.dumps({f"f{n}": "\U0001f600" * 2000 for n in range(40)})
    body = dead_letter_body(record, entry, "entry-too-large: ...")  # type: ignore[arg-type]
    message = json.loads(body)
    assert len(body.encode("utf-8")) <= DEAD_LETTER_BODY_MAX
    assert all(len(v) == 64 for v in message["detail"].values())
    assert len(message["truncated"]) == 40


def test_the_dead_letter_adapter_sends_the_reason_and_sequence_number_as_attributes() -> None:
    sqs = boto3.client(
        "sqs", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    records = [_record("1", "v" * 300 * KB)]
    with Stubber(sqs) as stub:
        stub.add_response(
            "send_message",
            {"MessageId": "m1"},
            {
                "QueueUrl": "https://sqs/relay-dlq",
                "MessageBody": ANY,
                "MessageAttributes": {
                    REASON_ATTRIBUTE: {"DataType": "String", "StringValue": ANY},
                    SOURCE_ID_ATTRIBUTE: {"DataType": "String", "StringValue": "1"},
                },
            },
        )
        _, failed_at, dead = publish(
            _publisher(FakeEvents()), "bus", records, DeadLetter(sqs, "https://sqs/relay-dlq")
        )
        stub.assert_no_pending_responses()
    assert failed_at is None and [seq for seq, _ in dead] == ["1"]


@pytest.mark.parametrize("code", ["MalformedDetail", "InvalidArgument", "RedactionFailure"])
def test_an_entry_refused_for_its_content_is_dead_lettered_not_retried(code: str) -> None:
    client, dead = FakeEvents({"id-2": [code]}), FakeDeadLetters()
    published, failed_at, dead_lettered = publish(
        _publisher(client), "bus", [_record("1"), _record("2"), _record("3")], dead
    )
    assert failed_at is None and len(client.requests) == 1
    assert [_id(dict(e)) for e in published] == ["id-1", "id-3"]
    assert dead_lettered == [("2", f"put-events-refused: {code}: refused")]
    assert json.loads(dead.sent[0][0])["detail"]["id"] == "id-2"


def test_a_lone_entry_whose_request_is_refused_as_invalid_is_dead_lettered() -> None:
    # a request refused as a whole for its content is sent again entry by entry; the one
    # refused alone is the culprit
    class Refusing(FakeEvents):
        def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
            if any(_id(e) == "id-2" for e in Entries):
                self.requests.append(Entries)
                raise ClientError(
                    {"Error": {"Code": "ValidationException", "Message": "bad"}}, "PutEvents"
                )
            return super().put_events(Entries)

    client, dead = Refusing(), FakeDeadLetters()
    records = [_record("1"), _record("2"), _record("3")]
    published, failed_at, dead_lettered = publish(_publisher(client), "bus", records, dead)
    assert failed_at is None and client.accepted == ["id-1", "id-3"] and len(published) == 2
    assert [len(r) for r in client.requests] == [3, 1, 1, 1]
    assert dead_lettered == [("2", "put-events-refused: ValidationException: bad")]


# --- Transient refusals are retried, then left to the stream ---------------------------------


@pytest.mark.parametrize("code", ["ThrottlingException", "InternalFailure"])
def test_a_transient_refusal_is_retried_alone_and_then_published(code: str) -> None:
    pauses: list[float] = []
    client, dead = FakeEvents({"id-2": [code, code]}), FakeDeadLetters()
    published, failed_at, dead_lettered = publish(
        _publisher(client, pauses), "bus", [_record("1"), _record("2"), _record("3")], dead
    )
    assert failed_at is None and dead_lettered == [] and dead.sent == []
    assert client.accepted == ["id-1", "id-3", "id-2"]
    assert [[_id(e) for e in r] for r in client.requests] == [
        ["id-1", "id-2", "id-3"],
        ["id-2"],
        ["id-2"],
    ]
    assert pauses == [0.2, 0.4]  # a doubling pause between attempts
    assert len(published) == 3


def test_a_transient_refusal_that_persists_fails_the_batch_from_that_record() -> None:
    throttled = ["ThrottlingException"] * 3
    client, dead = FakeEvents({"id-2": throttled, "id-3": ["MalformedDetail"]}), FakeDeadLetters()
    records = [_record("1"), _record("2"), _record("3"), _record("4")]
    response = relay(_publisher(client), "bus", {"Records": records}, dead_letters=dead)
    # Lambda retries from record 2; record 3 (after it) is not dead-lettered now, but then
    assert response == {"batchItemFailures": [{"itemIdentifier": "2"}]}
    assert dead.sent == [] and len(client.requests) == 3


@pytest.mark.parametrize(
    "error",
    [
        ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow"}}, "PutEvents"),
        ClientError({"Error": {"Code": "InternalException", "Message": "oops"}}, "PutEvents"),
        EndpointConnectionError(endpoint_url="https://events"),
    ],
)
def test_a_request_failing_for_now_is_retried_then_fails_the_batch(error: Exception) -> None:
    class Failing:
        calls = 0

        def put_events(self, Entries: Sequence[Any]) -> Any:
            self.calls += 1
            raise error

    client = Failing()
    published, failed_at, dead = publish(_publisher(client), "bus", [_record("7"), _record("8")])
    assert (published, failed_at, dead) == ([], "7", []) and client.calls == 3


@pytest.mark.parametrize(
    "code", ["AccessDeniedException", "NotAuthorizedForSourceException", "SomethingNew"]
)
def test_a_refusal_of_the_relay_fails_the_batch_at_once_and_dead_letters_nothing(
    code: str,
) -> None:
    # an authorization refusal would refuse every change alike: the stream keeps them
    client, dead = FakeEvents({"id-2": [code]}), FakeDeadLetters()
    records = [_record("1"), _record("2"), _record("3")]
    published, failed_at, _ = publish(_publisher(client), "bus", records, dead)
    assert failed_at == "2" and dead.sent == [] and len(client.requests) == 1
    assert [_id(dict(e)) for e in published] == ["id-1"]


def test_a_dead_letter_queue_refusing_fails_the_batch_at_that_record() -> None:
    client = FakeEvents({"id-2": ["MalformedDetail"]})
    records = [_record("1"), _record("2"), _record("3")]
    published, failed_at, dead = publish(
        _publisher(client), "bus", records, FakeDeadLetters(refuse=True)
    )
    assert failed_at == "2" and dead == []
    assert [_id(dict(e)) for e in published] == ["id-1"]


def test_without_a_dead_letter_queue_an_unpublishable_change_stops_the_batch() -> None:
    records = [_record("1"), _record("2", "v" * 300 * KB), _record("3")]
    published, failed_at, dead = publish(_publisher(FakeEvents()), "bus", records)
    assert failed_at == "2" and dead == []
    assert [_id(dict(e)) for e in published] == ["id-1"]
