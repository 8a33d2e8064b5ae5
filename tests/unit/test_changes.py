"""The change-stream relay (CONTRACT C11): stream records -> PutEvents entries, in order, with
the first unpublished record reported for Lambda to retry from."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

from s3ingest.settings import CHANGE_DETAIL_TYPES, CHANGE_SOURCE
from s3ingest_fn.adapters.dynamo_ledger import STREAM_FILTER, item_of
from s3ingest_fn.adapters.eventbridge import EventBridgePublisher
from s3ingest_fn.core.row import Decision, LedgerRow
from s3ingest_fn.core.sequencer import normalize
from s3ingest_fn.handlers.change_stream import relay
from s3ingest_fn.services.changes import (
    DETAIL_TYPES,
    SOURCE,
    change_event,
    is_applied_change,
    publish,
)


def _record(
    seq: str, op: str = "apply", state: str = "present", event: str = "MODIFY", key: str = "a b.txt"
) -> dict[str, Any]:
    """A stream record of an item in the legacy layout (records written before an upgrade)."""
    image: dict[str, Any] = {
        "pk": {"S": f"bkt/{key}"},
        "bucket": {"S": "bkt"},
        "key": {"S": key},
        "state": {"S": state},
        "chg_seq": {"S": "0055AED6DCD90281E5"},
        "op": {"S": op},
        "chg_id": {"S": f"id-{seq}"},
        "rev": {"N": "3"},
        "source": {"S": "live"},
        "event_name": {"S": "Object Created/PutObject"},
        "reason": {"S": "newer-sequencer"},
        "observed": {"BOOL": False},
        "updated_at": {"N": "1764460800000"},
    }
    if state == "present":
        image |= {"version_id": {"S": "v1"}, "etag": {"S": "abc"}, "size": {"N": "5"}}
    return {
        "eventName": event,
        "eventSource": "aws:dynamodb",
        "dynamodb": {"NewImage": image, "SequenceNumber": seq},
    }


def test_the_function_package_agrees_with_the_settings_module() -> None:
    assert SOURCE == CHANGE_SOURCE
    assert DETAIL_TYPES == CHANGE_DETAIL_TYPES


@pytest.mark.contract("C11")
def test_change_event_carries_the_change_and_its_deterministic_id() -> None:
    entry = change_event(_record("100"), "changes-bus")
    assert entry["Source"] == "s3ingest" and entry["DetailType"] == "Object Ingested"
    assert entry["EventBusName"] == "changes-bus"
    assert entry["Resources"] == ["arn:aws:s3:::bkt"]
    assert json.loads(entry["Detail"]) == {
        "id": "id-100",
        "bucket": "bkt",
        "key": "a b.txt",
        "kind": "created",
        "sequencer": "0055AED6DCD90281E5",
        "versionId": "v1",
        "etag": "abc",
        "size": 5,
        "rev": 3,
        "source": "live",
        "eventName": "Object Created/PutObject",
        "reason": "newer-sequencer",
        "observed": False,
        "appliedAt": 1764460800000,
    }
    tomb = json.loads(change_event(_record("101", state="deleted"), "b")["Detail"])
    assert tomb["kind"] == "removed" and tomb["versionId"] is None and tomb["size"] is None
    assert change_event(_record("101", state="deleted"), "b")["DetailType"] == "Object Tombstoned"


@pytest.mark.contract("C11")
def test_only_applied_changes_are_published() -> None:
    assert is_applied_change(_record("1"))
    assert is_applied_change(_record("1", event="INSERT"))
    assert not is_applied_change(_record("1", op="commit"))  # an effect commit
    assert not is_applied_change(_record("1", op="claim"))  # an effect re-claim
    assert not is_applied_change(_record("1", event="REMOVE"))  # a TTL expiry
    # applied changes, and the hold policy's decisions (published as their own detail types)
    assert STREAM_FILTER["dynamodb"]["NewImage"]["op"] == {
        "S": ["apply", "hold", "approve", "reject"]
    }


def _compact_record(seq: str, op: str = "apply") -> dict[str, Any]:
    """A stream record of an item as the ledger adapter writes it now."""
    row = LedgerRow(
        bucket="bkt",
        key="a b.txt",
        present=True,
        seq=normalize("0055AED6DCD90281E5"),
        raw_seq="0055AED6DCD90281E5",
        version_id="v1",
        etag="abc",
        size=5,
        rev=3,
        history=(
            Decision(
                seq="0055AED6DCD90281E5",
                event="Object Created/PutObject",
                reason="newer-sequencer",
                source="live",
                at=1764460800000,
                state="present",
            ),
        ),
        op=op,
        change_id=f"id-{seq}",
        change_seq="0055AED6DCD90281E5",
    )
    return {
        "eventName": "MODIFY",
        "eventSource": "aws:dynamodb",
        "dynamodb": {"NewImage": item_of(row), "SequenceNumber": seq},
    }


def test_both_item_layouts_give_the_same_change_event() -> None:
    assert is_applied_change(_compact_record("100"))
    assert not is_applied_change(_compact_record("100", op="commit"))
    assert change_event(_compact_record("100"), "bus") == change_event(_record("100"), "bus")


def _events_client() -> Any:
    return boto3.client(
        "events", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )


@pytest.mark.contract("C11")
def test_publish_sends_in_order_in_chunks_of_ten() -> None:
    client = _events_client()
    records = [_record(str(100 + i)) for i in range(12)] + [_record("999", op="commit")]
    with Stubber(client) as stub:
        stub.add_response(
            "put_events",
            {"FailedEntryCount": 0, "Entries": [{"EventId": f"e{i}"} for i in range(10)]},
            {"Entries": ANY},
        )
        stub.add_response(
            "put_events",
            {"FailedEntryCount": 0, "Entries": [{"EventId": "e10"}, {"EventId": "e11"}]},
            {"Entries": ANY},
        )
        published, failed, dead = publish(EventBridgePublisher(client), "bus", records)
    assert failed is None and dead == []
    assert [json.loads(p["Detail"])["id"] for p in published] == [
        f"id-{100 + i}" for i in range(12)
    ]


@pytest.mark.contract("C11")
def test_a_failed_entry_is_the_record_lambda_retries_from() -> None:
    # GIVEN EventBridge refuses the second entry of a batch, and keeps refusing it
    client = _events_client()
    with Stubber(client) as stub:
        stub.add_response(
            "put_events",
            {
                "FailedEntryCount": 1,
                "Entries": [
                    {"EventId": "e0"},
                    {"ErrorCode": "InternalFailure", "ErrorMessage": "x"},
                    {"EventId": "e2"},
                ],
            },
            {"Entries": ANY},
        )
        for _ in range(2):  # the retries send the refused entry alone
            stub.add_response(
                "put_events",
                {"FailedEntryCount": 1, "Entries": [{"ErrorCode": "InternalFailure"}]},
                {"Entries": ANY},
            )
        response = relay(
            EventBridgePublisher(client, sleep=lambda _: None),
            "bus",
            {"Records": [_record("1"), _record("2"), _record("3")]},
        )
        stub.assert_no_pending_responses()
    # THEN the partial batch response names record 2: Lambda re-sends 2 and 3 (3 is then a
    # duplicate, with the same id), never skips 2
    assert response == {"batchItemFailures": [{"itemIdentifier": "2"}]}


@pytest.mark.contract("C11")
def test_a_put_events_error_reports_the_chunk_start() -> None:
    client = _events_client()
    with Stubber(client) as stub:
        for _ in range(3):
            stub.add_client_error(
                "put_events", service_error_code="ThrottlingException", http_status_code=400
            )
        published, failed, dead = publish(
            EventBridgePublisher(client, sleep=lambda _: None), "bus", [_record("7"), _record("8")]
        )
    assert published == [] and failed == "7" and dead == []
