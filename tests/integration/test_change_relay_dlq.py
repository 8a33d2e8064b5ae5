"""The change relay on the local runtime (CONTRACT C11, issue 24): a change that can never be
published ends in the relay's dead-letter queue with its reason, and the others are published."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from s3ingest.local.stack.runtime import LocalRuntime, local_settings
from s3ingest_fn.adapters.dynamo_ledger import item_of
from s3ingest_fn.adapters.sqs import REASON_ATTRIBUTE, SOURCE_ID_ATTRIBUTE
from s3ingest_fn.services.changes import DEAD_LETTER_BODY_MAX


@pytest.mark.contract("C11")
def test_an_oversized_change_ends_in_the_relays_dlq_with_its_reason(emulator: Any) -> None:
    # GIVEN two changes ingested, then a row whose change event is over PutEvents' 256 KB (a
    # 300 KB version id, written straight to the ledger: the ingest path bounds its fields),
    # then a third change
    rt = LocalRuntime(emulator, local_settings(), versioning="Enabled")
    assert rt.resources.change_dlq_url is not None
    rt.faithful.put("a", "one")
    rt.faithful.put("b", "two")
    rt.flush()
    rt.drain()
    (row,) = [r for r in rt.ledger_rows() if r.key == "b"]
    huge = dataclasses.replace(
        row,
        key="huge",
        raw_key="huge",
        version_id="v" * 300 * 1024,
        op="apply",
        change_id="huge-change",
    )
    rt.ddb.put_item(TableName=rt.resources.table, Item=item_of(huge))
    rt.faithful.put("c", "three")
    rt.flush()
    rt.drain()
    # WHEN the relay publishes the stream (it would raise if it reported a failed record)
    rt.pump_changes()
    # THEN the others reached the change bus's subscriber ...
    assert sorted(c["detail"]["key"] for c in rt.changes) == ["a", "b", "c"]
    assert "huge-change" not in {c["detail"]["id"] for c in rt.changes}
    # ... and the oversized one is in the relay's DLQ, with its reason and the change itself
    messages = rt.sqs.receive_message(
        QueueUrl=rt.resources.change_dlq_url,
        MaxNumberOfMessages=10,
        MessageAttributeNames=["All"],
    ).get("Messages", [])
    assert len(messages) == 1
    (message,) = messages
    body = json.loads(message["Body"])
    reason = message["MessageAttributes"][REASON_ATTRIBUTE]["StringValue"]
    assert reason.startswith("entry-too-large: ") and body["reason"] == reason
    assert (
        message["MessageAttributes"][SOURCE_ID_ATTRIBUTE]["StringValue"] == (body["sequenceNumber"])
    )
    assert body["detail"]["id"] == "huge-change" and body["detail"]["key"] == "huge"
    assert body["truncated"] == ["detail.versionId"]
    assert len(message["Body"].encode("utf-8")) <= DEAD_LETTER_BODY_MAX
