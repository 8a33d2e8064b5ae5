"""The ledger item's layout: items written by earlier versions (retained tables) are read and
advanced correctly, and an item stays within one write unit for keys up to 512 bytes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from s3ingest_fn.adapters.dynamo_ledger import (
    DynamoLedger,
    item_of,
    item_size,
    row_from_item,
    write_units,
)
from s3ingest_fn.core import sequencer
from s3ingest_fn.core.effects import change_id
from s3ingest_fn.core.model import TransientError
from s3ingest_fn.core.row import Claim, Decision, Effect, LedgerRow, RowState, WriteMeta
from tests.moto_ledger import moto_ledger_table

TABLE = "ledger"
BUCKET = "amzn-s3-demo-bucket"
KEY = "photos/a b+c.jpg"
NOW = 1_800_000_000.0
OLD_SEQ, NEW_SEQ = "00643717F9F8B85354", "00643717FA1234"

#: An item exactly as the previous release wrote it (the layout documented until then): the
#: key three times, the sequencer padded to 64 characters, the history as maps, an effect done.
LEGACY_ITEM: dict[str, Any] = {
    "pk": {"S": f"{BUCKET}/{KEY}"},
    "bucket": {"S": BUCKET},
    "key": {"S": KEY},
    "raw_key": {"S": "photos/a+b%2Bc.jpg"},
    "state": {"S": "present"},
    "seq": {"S": sequencer.normalize(OLD_SEQ)},
    "raw_seq": {"S": OLD_SEQ},
    "observed": {"BOOL": False},
    "version_id": {"S": "v1"},
    "etag": {"S": "etag1"},
    "size": {"N": "5"},
    "rev": {"N": "2"},
    "event_name": {"S": "ObjectCreated:Put"},
    "reason": {"S": "newer-sequencer"},
    "source": {"S": "live"},
    "updated_at": {"N": "1700000000000"},
    "op": {"S": "commit"},
    "chg_id": {"S": "c" * 32},
    "chg_seq": {"S": OLD_SEQ},
    "fx": {"S": "done"},
    "fx_token": {"N": "2"},
    "fx_done": {"S": "c" * 32},
    "h0": {
        "M": {
            "seq": {"S": OLD_SEQ},
            "event": {"S": "ObjectCreated:Put"},
            "reason": {"S": "newer-sequencer"},
            "source": {"S": "live"},
            "at": {"N": "1700000000000"},
            "state": {"S": "present"},
        }
    },
    "h1": {"NULL": True},
    "h2": {"NULL": True},
}

LEGACY_ROW = LedgerRow(
    bucket=BUCKET,
    key=KEY,
    raw_key="photos/a+b%2Bc.jpg",
    present=True,
    seq=sequencer.normalize(OLD_SEQ),
    raw_seq=OLD_SEQ,
    observed=False,
    version_id="v1",
    etag="etag1",
    size=5,
    rev=2,
    event_name="ObjectCreated:Put",
    reason="newer-sequencer",
    source="live",
    updated_at=1700000000000,
    history=(
        Decision(
            seq=OLD_SEQ,
            event="ObjectCreated:Put",
            reason="newer-sequencer",
            source="live",
            at=1700000000000,
            state="present",
        ),
    ),
    op="commit",
    change_id="c" * 32,
    change_seq=OLD_SEQ,
    effect=Effect(status="done", token=2, done_change_id="c" * 32),
)


def _meta(raw_seq: str | None) -> WriteMeta:
    return WriteMeta(
        bucket=BUCKET,
        key=KEY,
        raw_key="photos/a+b%2Bc.jpg",
        event_name="ObjectCreated:Delete",
        reason="newer-sequencer",
        source="live",
        sequencer=sequencer.normalize(raw_seq) if raw_seq else None,
        raw_sequencer=raw_seq,
    )


@pytest.fixture
def table() -> Iterator[tuple[Any, DynamoLedger]]:
    with moto_ledger_table(TABLE) as client:
        yield client, DynamoLedger(client, TABLE, tombstone_ttl_seconds=3600, clock=lambda: NOW)


def test_a_legacy_item_is_read_as_written(table: tuple[Any, DynamoLedger]) -> None:
    client, ledger = table
    client.put_item(TableName=TABLE, Item=LEGACY_ITEM)
    assert ledger.get(BUCKET, KEY) == LEGACY_ROW


def test_a_legacy_item_refuses_what_it_refused_before(table: tuple[Any, DynamoLedger]) -> None:
    # GIVEN a legacy row at OLD_SEQ
    client, ledger = table
    client.put_item(TableName=TABLE, Item=LEGACY_ITEM)
    # WHEN the same event comes again (a duplicate)
    again = ledger.apply_if_newer(RowState(True, "v1", "etag1", 5), _meta(OLD_SEQ))
    # THEN it is refused with the row as it was; the item is now compact and means the same
    assert not again.applied
    assert again.old is not None and again.old.seq == sequencer.normalize(OLD_SEQ)
    migrated = client.get_item(TableName=TABLE, Key={"pk": LEGACY_ITEM["pk"]})["Item"]
    assert "bucket" not in migrated and "key" not in migrated
    row = ledger.get(BUCKET, KEY)
    assert row is not None
    assert (row.rev, row.effect, row.history, row.change_id) == (
        LEGACY_ROW.rev,
        LEGACY_ROW.effect,
        LEGACY_ROW.history,
        LEGACY_ROW.change_id,
    )
    assert row.op == "migrate"  # not "apply": the change stream does not publish it again


def test_a_legacy_item_is_advanced_by_a_newer_event(table: tuple[Any, DynamoLedger]) -> None:
    # GIVEN a legacy row at OLD_SEQ with a completed effect
    client, ledger = table
    client.put_item(TableName=TABLE, Item=LEGACY_ITEM)
    # WHEN a newer delete arrives, claiming its effect
    result = ledger.apply_if_newer(
        RowState(present=False), _meta(NEW_SEQ), Claim(now_ms=1, lease_until_ms=2)
    )
    # THEN it applies over the legacy row: revision, fencing token and history continue
    assert result.applied
    assert result.change_id == change_id(
        BUCKET, KEY, sequencer.normalize(NEW_SEQ), False, None, None
    )
    row = ledger.get(BUCKET, KEY)
    assert row is not None
    assert row.state == "deleted" and row.seq == sequencer.normalize(NEW_SEQ)
    assert row.rev == 3 and result.token == 3
    assert row.effect == Effect(
        status="pending", token=3, lease_until_ms=2, done_change_id="c" * 32
    )
    assert [d.seq for d in row.history] == [NEW_SEQ, OLD_SEQ]
    assert row.op == "apply" and row.change_seq == NEW_SEQ
    # and its effect commits like any other
    assert ledger.finish(BUCKET, KEY, 3, "done")
    done = ledger.get(BUCKET, KEY)
    assert done is not None and done.effect is not None
    assert done.effect.done_change_id == result.change_id


def test_a_legacy_effect_can_be_reclaimed(table: tuple[Any, DynamoLedger]) -> None:
    client, ledger = table
    pending = dict(LEGACY_ITEM, fx={"S": "pending"}, fx_lease={"N": "10"})
    client.put_item(TableName=TABLE, Item=pending)
    taken = ledger.reclaim(BUCKET, KEY, 2, Claim(now_ms=11, lease_until_ms=99))
    assert taken.applied and taken.token == 3
    row = ledger.get(BUCKET, KEY)
    assert row is not None and row.effect == Effect("pending", 3, 99, "c" * 32)


def test_a_legacy_effect_leased_by_an_earlier_version_is_left_to_it(
    table: tuple[Any, DynamoLedger],
) -> None:
    # GIVEN a legacy row whose effect a worker of the previous release holds (lease not over)
    client, ledger = table
    held = dict(LEGACY_ITEM, fx={"S": "pending"}, fx_lease={"N": str(int(NOW * 1000) + 60_000)})
    client.put_item(TableName=TABLE, Item=held)
    # WHEN a newer event comes THEN it is retried later, and the item is not migrated under the
    # worker (its commit is conditional on the legacy fencing token)
    with pytest.raises(TransientError, match="leased by an earlier version"):
        ledger.apply_if_newer(RowState(True, "v2", "etag2", 6), _meta(NEW_SEQ))
    assert client.get_item(TableName=TABLE, Key={"pk": LEGACY_ITEM["pk"]})["Item"] == held


def test_a_migration_never_puts_back_an_effect_a_legacy_commit_replaced(
    table: tuple[Any, DynamoLedger],
) -> None:
    # GIVEN a legacy item read while its effect was pending
    client, ledger = table
    pending = dict(LEGACY_ITEM, fx={"S": "pending"}, fx_lease={"N": "10"})
    client.put_item(TableName=TABLE, Item=pending)
    # WHEN a worker of the previous release commits it (same rev) before the migration lands
    committed = dict(pending, fx={"S": "done"}, op={"S": "commit"})
    del committed["fx_lease"]
    client.put_item(TableName=TABLE, Item=committed)
    ledger._migrate(pending)
    # THEN the migration of the stale read is refused: the commit stands
    assert client.get_item(TableName=TABLE, Key={"pk": LEGACY_ITEM["pk"]})["Item"] == committed
    # and a migration of what is there now goes through
    ledger._migrate(committed)
    row = ledger.get(BUCKET, KEY)
    assert row is not None and row.effect_status == "done" and row.op == "migrate"


def test_the_compact_item_reads_back_as_its_row() -> None:
    row = LedgerRow(
        bucket=BUCKET,
        key="k",
        raw_key="k",
        present=True,
        seq=sequencer.normalize("0055AED6DCD90281E0"),
        raw_seq="0055AED6DCD90281E0",  # a trailing zero: stored apart from the sequencer
        version_id="v",
        etag="e",
        size=1,
        rev=7,
        event_name="\x01odd name",
        reason="X",
        source="r",
        updated_at=5,
        history=(
            Decision("0055AED6DCD90281E0", "\x01odd name", "X", "r", 5, "present"),
            Decision(
                "-", "Object Deleted/DeleteObject", "observed-bucket-state", "repair", 4, "deleted"
            ),
        ),
        op="apply",
        change_id="i",
        change_seq="0055AED6DCD90281E0",
        effect=Effect("superseded", 7, None, None),
    )
    assert row_from_item(item_of(row)) == row


LONG_EVENT = "ObjectCreated:CompleteMultipartUpload"


@pytest.mark.parametrize("key_bytes", [20, 200, 512, 1024])
def test_an_item_with_full_history_fits_one_write_unit_up_to_512_byte_keys(
    table: tuple[Any, DynamoLedger], key_bytes: int
) -> None:
    # GIVEN the largest item the ledger writes for a key: a 63-character bucket name, versioned,
    # multipart ETag, a claimed effect with a completed one before it, three decisions
    client, ledger = table
    bucket, key = "b" * 63, "k" * key_bytes
    etag = "d41d8cd98f00b204e9800998ecf8427e-10000"
    version = "Zlt1vQkT3XvnNb9cS9b0pIjM0ZDQ5yGx"
    for i, raw in enumerate(("0055AED6DCD90281E5", "0055AED6DCD90281E6", "0055AED6DCD90281E7")):
        ledger.apply_if_newer(
            RowState(True, version, etag, 5_000_000_000),
            WriteMeta(
                bucket,
                key,
                key,
                LONG_EVENT,
                "newer-sequencer",
                "replay",
                sequencer.normalize(raw),
                raw,
            ),
            Claim(now_ms=10**12 + i, lease_until_ms=1_900_000_000_000),
        )
        if i < 2:
            ledger.finish(bucket, key, i + 1, "done")
    item = client.get_item(TableName=TABLE, Key={"pk": {"S": f"{bucket}/{key}"}})["Item"]
    assert {"h0", "h1", "h2", "fd", "fl"} <= set(item)
    size = item_size(item)
    # THEN it is one write unit up to 512-byte keys (a 1024-byte key needs two)
    assert write_units(size) == (1 if key_bytes <= 512 else 2), size


def test_item_size_follows_the_documented_rule() -> None:
    # "Item sizes and formats": names + values; a number about one byte per two significant
    # digits plus one; a list 3 bytes plus one per element
    assert item_size({"ab": {"S": "xyz"}}) == 5
    assert item_size({"n": {"N": "12345"}}) == 1 + 4
    assert item_size({"l": {"L": [{"S": "a"}, {"BOOL": True}]}}) == 1 + 3 + 2 + 2
    assert write_units(1024) == 1 and write_units(1025) == 2
