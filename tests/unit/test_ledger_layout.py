"""The ledger item's layout: items written by earlier versions (retained tables) are read and
advanced correctly, and an item stays within one write unit for keys up to 512 bytes."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from s3ingest_fn.adapters.dynamo_ledger import (
    DynamoLedger,
    DynamoLedgerScanner,
    event_key,
    item_of,
    item_size,
    row_from_item,
    write_units,
)
from s3ingest_fn.adapters.dynamo_ledger.scan import _DIFF_ATTRIBUTES, _scanned_row
from s3ingest_fn.core import sequencer
from s3ingest_fn.core.effects import change_id
from s3ingest_fn.core.events import decode_form_key
from s3ingest_fn.core.model import TransientError
from s3ingest_fn.core.row import (
    Claim,
    Decision,
    Effect,
    Hold,
    LedgerRow,
    RowState,
    WriteMeta,
    fencing_token,
)
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
    token = fencing_token(3, 1)  # revision 3, claimed at epoch ms 1 (second 0)
    assert row.rev == 3 and result.token == token
    assert row.effect == Effect(
        status="pending", token=token, lease_until_ms=2, done_change_id="c" * 32
    )
    assert [d.seq for d in row.history] == [NEW_SEQ, OLD_SEQ]
    assert row.op == "apply" and row.change_seq == NEW_SEQ
    # and its effect commits like any other
    assert ledger.finish(BUCKET, KEY, token, "done")
    done = ledger.get(BUCKET, KEY)
    assert done is not None and done.effect is not None
    assert done.effect.done_change_id == result.change_id


def test_a_legacy_effect_can_be_reclaimed(table: tuple[Any, DynamoLedger]) -> None:
    client, ledger = table
    pending = dict(LEGACY_ITEM, fx={"S": "pending"}, fx_lease={"N": "10"})
    client.put_item(TableName=TABLE, Item=pending)
    # the legacy token is the revision (2); the new one the next revision and the claim's time
    taken = ledger.reclaim(BUCKET, KEY, 2, Claim(now_ms=11, lease_until_ms=99))
    assert taken.applied and taken.token == fencing_token(3, 11)
    row = ledger.get(BUCKET, KEY)
    assert row is not None and row.effect == Effect("pending", fencing_token(3, 11), 99, "c" * 32)


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
        claimed = ledger.apply_if_newer(
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
            # a token of today's clock: as many digits as a real one
            Claim(now_ms=1_800_000_000_000 + i, lease_until_ms=1_900_000_000_000),
        )
        assert claimed.token == fencing_token(i + 1, 1_800_000_000_000 + i)
        if i < 2:
            ledger.finish(bucket, key, claimed.token, "done")
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


#: Keys and their events' form as S3 sends it (form encoding: a space is "+", other reserved and
#: non-ASCII bytes "%XX" in upper-case hex, "/" kept): the form ``rk`` is not stored for.
S3_FORMS = [
    ("photos/red flower.jpg", "photos/red+flower.jpg"),
    ("files/2017-11-15 14:22:21_file.csv", "files/2017-11-15+14%3A22%3A21_file.csv"),
    ("this im + age blah.txt", "this+im+%2B+age+blah.txt"),
    ("a@b", "a%40b"),
    ("café/naïve ü.txt", "caf%C3%A9/na%C3%AFve+%C3%BC.txt"),
]
#: The same kind of keys in forms other producers send (library fixtures, emulators, S3-compatible
#: stores): decoded to the same key, but not S3's form, so ``rk`` keeps them.
OTHER_FORMS = [
    ("Happy Face.jpg", "Happy%20Face.jpg"),  # quote(): "%20" for a space
    ("glacier-test.txt", "glacier%2Dtest.txt"),  # "-" encoded
    ("café.txt", "caf%c3%a9.txt"),  # lower-case hex
    ("a/b/c.txt", "a%2Fb%2Fc.txt"),  # "/" encoded
]


def _write(ledger: DynamoLedger, key: str, raw_key: str, raw_seq: str = OLD_SEQ) -> None:
    result = ledger.apply_if_newer(
        RowState(True, "v1", "etag1", 5),
        WriteMeta(
            BUCKET,
            key,
            raw_key,
            "ObjectCreated:Put",
            "newer-sequencer",
            "live",
            sequencer.normalize(raw_seq),
            raw_seq,
        ),
    )
    assert result.applied


def _item(client: Any, key: str) -> dict[str, Any]:
    item: dict[str, Any] = client.get_item(TableName=TABLE, Key={"pk": {"S": f"{BUCKET}/{key}"}})[
        "Item"
    ]
    return item


@pytest.mark.parametrize(("key", "raw_key"), S3_FORMS)
def test_a_key_in_s3s_own_form_stores_no_raw_key(
    table: tuple[Any, DynamoLedger], key: str, raw_key: str
) -> None:
    # GIVEN a key with spaces, reserved or non-ASCII characters, in the form S3 sends it
    client, ledger = table
    assert decode_form_key(raw_key) == key and event_key(key) == raw_key
    # WHEN it is written
    _write(ledger, key, raw_key)
    # THEN the item holds it once (in pk) and reads back with the form it came in
    assert "rk" not in _item(client, key)
    row = ledger.get(BUCKET, key)
    assert row is not None and (row.key, row.raw_key) == (key, raw_key)


@pytest.mark.parametrize(("key", "raw_key"), OTHER_FORMS)
def test_a_key_in_another_form_stores_it(
    table: tuple[Any, DynamoLedger], key: str, raw_key: str
) -> None:
    # GIVEN a key in a form that decodes to it but is not S3's own
    client, ledger = table
    assert decode_form_key(raw_key) == key and event_key(key) != raw_key
    # WHEN it is written THEN rk keeps the form, and it reads back
    _write(ledger, key, raw_key)
    assert _item(client, key)["rk"] == {"S": raw_key}
    row = ledger.get(BUCKET, key)
    assert row is not None and (row.key, row.raw_key) == (key, raw_key)
    # and a later event in S3's own form removes it
    _write(ledger, key, event_key(key), NEW_SEQ)
    assert "rk" not in _item(client, key)
    row = ledger.get(BUCKET, key)
    assert row is not None and row.raw_key == event_key(key)


def test_a_raw_key_that_is_the_decoded_key_reads_back_as_it(
    table: tuple[Any, DynamoLedger],
) -> None:
    # GIVEN writes whose raw key is the decoded key itself (a repair, a backfill's observation)
    client, ledger = table
    _write(ledger, "a b+c.txt", "a b+c.txt")
    _write(ledger, "plain/key.txt", "plain/key.txt")
    # THEN a key S3 would encode stores an empty rk (2 bytes), a plain key none
    assert _item(client, "a b+c.txt")["rk"] == {"S": ""}
    assert "rk" not in _item(client, "plain/key.txt")
    for key in ("a b+c.txt", "plain/key.txt"):
        row = ledger.get(BUCKET, key)
        assert row is not None and row.raw_key == key


def test_a_scanned_held_effect_keeps_its_hold() -> None:
    # GIVEN a row whose (default) processor's effect is held
    hold = Hold(change_id="c1", reason="delete", at=1_700_000_000_000)
    row = LedgerRow(BUCKET, "k", False, updated_at=9, effect=Effect("held", hold=hold), rev=2)
    projected = {k: v for k, v in item_of(row).items() if k in _DIFF_ATTRIBUTES}
    # THEN the scan reads the held change with it (reconciliation's held count and age)
    scanned = _scanned_row(projected, BUCKET)
    assert scanned.effect == Effect("held", hold=hold)
    assert scanned.named_effects == {}


def test_scanned_named_effects_are_each_processors_own_the_summary_the_unheld_ones() -> None:
    # GIVEN a row with a held processor, a pending one and a done one (of version 3)
    hold = Hold(change_id="c1", reason="prefix: in/", at=5)
    row = LedgerRow(
        BUCKET,
        "in/k",
        True,
        etag="e",
        updated_at=9,
        rev=2,
        named_effects={
            "audit": Effect("held", hold=hold),
            "mirror": Effect("pending", 3, 11),
            "thumbs": Effect("done", done_change_id="c1", version=3),
        },
    )
    item = item_of(row)
    # WHEN the scanner's projection of those processors reads it
    scanner = DynamoLedgerScanner(None, "t", ["audit", "mirror", "thumbs"])  # type: ignore[arg-type]
    projected = {k: v for k, v in item.items() if k in scanner._attributes}
    scanned = _scanned_row(projected, BUCKET, named=True)
    # THEN each processor's own effect is there (the held one with its hold, the done one
    # with its version and the change it completed), the summary is the pending one, and the
    # held effect counts once
    assert scanned.named_effects == {
        "audit": Effect("held", hold=hold),
        "mirror": Effect("pending", lease_until_ms=11),
        "thumbs": Effect("done", done_change_id="c1", version=3),
    }
    assert scanned.effect == Effect("pending", lease_until_ms=11)
    assert [e.status for e in scanned.effects().values()].count("held") == 1


@pytest.mark.parametrize(
    ("key", "raw_key"),
    [*S3_FORMS, *OTHER_FORMS, ("a b+c.txt", "a b+c.txt"), ("a b+c.txt", ""), ("k", "")],
)
def test_the_raw_key_survives_item_of(key: str, raw_key: str) -> None:
    # an empty raw key (a row built without one) reads back as the key, as before
    row = LedgerRow(bucket=BUCKET, key=key, raw_key=raw_key, present=True, rev=1)
    assert row_from_item(item_of(row)) == dataclasses.replace(row, raw_key=raw_key or key)


@pytest.mark.parametrize(
    "row",
    [
        LedgerRow(BUCKET, "a b/c", True, version_id="v", etag="e", updated_at=7),
        LedgerRow(BUCKET, "k", False, updated_at=9),
        LedgerRow(BUCKET, "k", True, etag="e", effect=Effect("pending", 3, 11)),
        LedgerRow(BUCKET, "k", True, etag="e", effect=Effect("superseded", 3, None, "d")),
        LedgerRow(BUCKET, "k", True, etag="e", seq="F" * 64),  # a forged one: drift (issue 24)
        LedgerRow(BUCKET, "k", True, etag="e", seq="00643717F9F8B85354".ljust(64, "0")),
    ],
)
def test_a_scanned_item_gives_the_fields_the_diff_reads(row: LedgerRow) -> None:
    # GIVEN a compact item projected as a reconciliation's Scan reads it
    item = item_of(dataclasses.replace(row, rev=2))
    projected = {k: v for k, v in item.items() if k in _DIFF_ATTRIBUTES}
    # THEN the scan's fast path gives the row with the fields it reads, the rest their defaults
    expected = LedgerRow(
        bucket=row.bucket,
        key=row.key,
        present=row.present,
        version_id=row.version_id,
        etag=row.etag,
        updated_at=row.updated_at,
        seq=row.seq,
        effect=None
        if row.effect is None
        else Effect(row.effect.status, lease_until_ms=row.effect.lease_until_ms),
    )
    assert _scanned_row(projected, BUCKET) == expected
    full = row_from_item(projected)
    assert (full.key, full.present, full.version_id, full.etag, full.updated_at) == (
        row.key,
        row.present,
        row.version_id,
        row.etag,
        row.updated_at,
    )
