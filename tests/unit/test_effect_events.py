"""Effects done on the change stream (``historyTable``, docs/history.md#effects-done): the commit
that records an effect ``done`` marks the ledger write (``op`` ``done``, ``fc``), the relay turns
its stream record into one ``Effect Done`` event of its own source (the same event for every
delivery), and nothing else: other commits, and every record without ``effects``, publish
nothing new."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from s3ingest.settings import EFFECT_DETAIL_TYPE, EFFECT_SOURCE
from s3ingest_fn.adapters.dynamo_ledger import (
    EFFECT_STREAM_FILTER,
    PARTITION_KEY,
    STREAM_FILTER,
    DynamoLedger,
    is_applied_change,
    is_effect_done,
    is_review,
    item_size,
    write_units,
)
from s3ingest_fn.adapters.dynamo_ledger.updates import finish_request
from s3ingest_fn.config_roles import ChangeRelayConfig
from s3ingest_fn.core.ports import ChangeEntry, PublishOutcome
from s3ingest_fn.core.row import Claim, RowState, WriteMeta
from s3ingest_fn.core.sequencer import normalize
from s3ingest_fn.services import changes
from s3ingest_fn.services.changes import effect_event, publish
from tests.moto_ledger import moto_ledger_table

BUCKET, KEY = "bkt", "a b.txt"
NOW_MS = 1_800_000_000_000


class Capture:
    """A :class:`~s3ingest_fn.core.ports.ChangePublisher` that accepts every entry."""

    def __init__(self) -> None:
        self.entries: list[ChangeEntry] = []

    def publish(self, entries: Sequence[ChangeEntry]) -> PublishOutcome:
        self.entries.extend(entries)
        return PublishOutcome(stopped=None, refused={})


class Recorder:
    """The ledger adapter on moto; :meth:`record` is the stream record (``NEW_IMAGE``) of the
    row as the last write left it, as Lambda delivers it."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.ledger = DynamoLedger(client, "ledger", 0, clock=lambda: NOW_MS / 1000)
        self.records: list[dict[str, Any]] = []

    def record(self) -> dict[str, Any]:
        item = self.client.get_item(
            TableName="ledger", Key={PARTITION_KEY: {"S": f"{BUCKET}/{KEY}"}}
        )
        record = {
            "eventName": "MODIFY" if self.records else "INSERT",
            "eventSource": "aws:dynamodb",
            "eventSourceARN": "arn:aws:dynamodb:us-east-1:1:table/ledger/stream/x",
            "dynamodb": {"NewImage": item["Item"], "SequenceNumber": str(len(self.records) + 1)},
        }
        self.records.append(record)
        return record


@pytest.fixture
def rec() -> Iterator[Recorder]:
    with moto_ledger_table() as client:
        yield Recorder(client)


def _apply(rec: Recorder, seq: str, processors: tuple[str, ...] = ("default",)) -> Any:
    raw = f"0055AED6DCD90281E{seq}"
    applied = rec.ledger.apply_if_newer(
        RowState(True, f"v{seq}", f"etag{seq}", 5),
        WriteMeta(
            BUCKET, KEY, KEY, "ObjectCreated:Put", "newer-sequencer", "live", normalize(raw), raw
        ),
        Claim(
            now_ms=NOW_MS,
            lease_until_ms=NOW_MS + 60_000,
            processors=processors,
            configured=processors,
            latest=processors,
        ),
    )
    rec.record()
    return applied


def _finish(rec: Recorder, status: str, processor: str = "default", **kwargs: Any) -> bool:
    row = rec.ledger.get(BUCKET, KEY)
    assert row is not None
    token = row.effects()[processor].token
    assert token is not None
    done = rec.ledger.finish(BUCKET, KEY, token, status, processor=processor, **kwargs)
    rec.record()
    return done


@pytest.mark.contract("C11")
def test_a_done_commit_is_published_as_one_effect_event_the_same_for_every_delivery(
    rec: Recorder,
) -> None:
    applied = _apply(rec, "5")
    assert _finish(rec, "done", version=3, at=NOW_MS + 7)
    done = [r for r in rec.records if is_effect_done(r)]
    assert len(done) == 1
    # not a change nor a review: the change filter's checks pass it by
    assert not is_applied_change(done[0]) and not is_review(done[0])
    capture = Capture()
    relayed = publish(capture, "bus", rec.records, effects=True)
    assert relayed.failed_at is None
    kinds = [(e["Source"], e["DetailType"]) for e in capture.entries]
    assert kinds == [("s3ingest", "Object Ingested"), (EFFECT_SOURCE, EFFECT_DETAIL_TYPE)]
    effect = capture.entries[1]
    assert effect["Resources"] == [f"arn:aws:s3:::{BUCKET}"]
    assert json.loads(effect["Detail"]) == {
        "id": applied.change_id,
        "bucket": BUCKET,
        "key": KEY,
        "processor": "default",
        "version": 3,
        "rev": 1,
        "at": NOW_MS + 7,
    }
    # a redelivered record (a relay retry, a bisected batch) is the same event
    assert effect_event(done[0], "bus") == effect


def test_without_effects_the_relay_publishes_what_it_did_before(rec: Recorder) -> None:
    _apply(rec, "5")
    _finish(rec, "done")
    capture = Capture()
    publish(capture, "bus", rec.records)
    assert [e["DetailType"] for e in capture.entries] == ["Object Ingested"]


def test_only_a_done_commit_is_an_effect_event(rec: Recorder) -> None:
    _apply(rec, "5")
    assert _finish(rec, "superseded")
    _apply(rec, "6")
    assert _finish(rec, "skipped")
    assert [r["dynamodb"]["NewImage"]["op"] for r in rec.records] == [
        {"S": "apply"},
        {"S": "commit"},
        {"S": "apply"},
        {"S": "commit"},
    ]
    assert not [r for r in rec.records if is_effect_done(r)]


def test_a_named_processors_done_commits_carry_its_name_version_and_change(
    rec: Recorder,
) -> None:
    first = _apply(rec, "5", ("audit",))
    _finish(rec, "done", "audit", version=2)
    second = _apply(rec, "6", ("audit",))
    _finish(rec, "done", "audit", change_id=second.change_id)
    capture = Capture()
    publish(capture, "bus", rec.records, effects=True)
    done = [json.loads(e["Detail"]) for e in capture.entries if e["Source"] == EFFECT_SOURCE]
    # no time recorded by the commit, and none in the record: null
    assert [(d["id"], d["processor"], d["version"], d["at"]) for d in done] == [
        (first.change_id, "audit", 2, None),
        (second.change_id, "audit", 1, None),
    ]


def test_an_every_change_queues_done_commit_is_marked_too() -> None:
    # more: only the queue's first change leaves it, and no fd records it; fc does
    request = finish_request("audit", 7, "done", "chg-1", True, 2, NOW_MS)
    assert request["ExpressionAttributeValues"][":commit"] == {"S": "done"}
    assert request["ExpressionAttributeValues"][":fc"] == {
        "L": [{"S": "audit"}, {"N": "2"}, {"S": "chg-1"}, {"N": str(NOW_MS)}]
    }
    assert "#fc = :fc" in request["UpdateExpression"]
    other = finish_request("audit", 7, "superseded", None, True)
    assert other["ExpressionAttributeValues"][":commit"] == {"S": "commit"}
    assert "fc" not in json.dumps(other)


def test_the_next_change_removes_the_done_marker(rec: Recorder) -> None:
    _apply(rec, "5")
    _finish(rec, "done", at=NOW_MS)
    assert "fc" in rec.records[-1]["dynamodb"]["NewImage"]
    _apply(rec, "6")
    last = rec.records[-1]["dynamodb"]["NewImage"]
    assert "fc" not in last and last["op"] == {"S": "apply"}


def test_the_approximate_time_of_the_record_stands_in_for_a_commit_without_one(
    rec: Recorder,
) -> None:
    _apply(rec, "5")
    _finish(rec, "done")
    record = {**rec.records[-1]}
    record["dynamodb"] = {**record["dynamodb"], "ApproximateCreationDateTime": 1_800_000_001}
    assert json.loads(effect_event(record, "bus")["Detail"])["at"] == 1_800_000_001_000


def test_the_effect_filter_passes_done_commits_only() -> None:
    assert EFFECT_STREAM_FILTER == {
        "eventName": ["MODIFY"],
        "dynamodb": {"NewImage": {"op": {"S": ["done"]}}},
    }
    assert "done" not in STREAM_FILTER["dynamodb"]["NewImage"]["op"]["S"]


def test_the_relays_environment_names_effects_only_when_on() -> None:
    off = ChangeRelayConfig("bus", "q").to_env()
    assert "EFFECT_EVENTS" not in off
    on = ChangeRelayConfig("bus", "q", effect_events=True).to_env()
    assert on["EFFECT_EVENTS"] == "true"
    assert ChangeRelayConfig.from_env(on).effect_events is True
    assert ChangeRelayConfig.from_env(off).effect_events is False


def test_the_function_package_agrees_with_the_settings_module_on_effects() -> None:
    assert changes.EFFECT_SOURCE == EFFECT_SOURCE
    assert changes.EFFECT_DETAIL_TYPE == EFFECT_DETAIL_TYPE


def test_a_done_commits_marker_keeps_the_largest_item_one_write_unit() -> None:
    from bench.row_size import BUCKET as LONGEST_BUCKET
    from bench.row_size import _largest_item

    key = "k" * 512
    with moto_ledger_table() as client:
        lg = DynamoLedger(client, "ledger", 0)
        _largest_item(client, lg, key)
        row = lg.get(LONGEST_BUCKET, key)
        assert row is not None and row.effect is not None and row.effect.token is not None
        assert lg.finish(
            LONGEST_BUCKET, key, row.effect.token, "done", change_id="f" * 32, version=2, at=NOW_MS
        )
        pk = {PARTITION_KEY: {"S": f"{LONGEST_BUCKET}/{key}"}}
        item = client.get_item(TableName="ledger", Key=pk)["Item"]
    assert "fc" in item
    assert write_units(item_size(item)) == 1
