"""Forged input that passes the parser cannot leave the ledger wrong or run effects (issue 24;
CONTRACT C4, C5, C7, C11, C15): a hiding delete the bucket contradicts, and a row whose stored
sequencer S3 cannot have sent, reset by a repair. Nor can it cost real events (issue 34): a
repair over a row the bucket contradicts resets its ordering, and a stale event whose state the
bucket shows repairs the row.

Every test runs over :class:`tests.fakes.FakeLedger` and the real :class:`DynamoLedger` on
moto (as ``test_ingest_decisions``); the processor is a recorder, so "no effect" means no call.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from s3ingest_fn.core.decide import (
    DELETE_CONTRADICTED,
    STALE_BUT_CURRENT,
    STATE_CONTRADICTED,
    IngestService,
)
from s3ingest_fn.core.effects import AppliedChange, EffectRunner, PinnedContent
from s3ingest_fn.core.events import parse_body
from s3ingest_fn.core.model import Change, Format, Kind, Outcome
from s3ingest_fn.core.row import LedgerRow, RowState, WriteMeta
from s3ingest_fn.core.sequencer import normalize
from tests.fakes import CountingLedger, FakeBucket, FakeContentReader
from tests.moto_ledger import LEDGER_KINDS, counting_ledger

BUCKET = "landing"
KEY = "in/reports/2024 q1.csv"
NOW = 1_700_000_000.0
# real-format sequencers of one key in write order (00 + 8 hex digits of seconds + a suffix)
S1, S2, S3, S4 = (f"00{int(NOW) - 100 + i:08X}0000000{i}" for i in range(1, 5))
#: What a forged event wrote before events were checked: 64 significant hex digits.
FORGED = "F" * 64
#: A valid-shaped sequencer within the skew (10 minutes ahead), newer than every real one: what a
#: forger can still send.
FORGED_CURRENT = f"00{int(NOW) + 600:08X}FFFFFFFFFF"


class Recorder:
    """The processor: records every change it is called for."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None, str | None]] = []

    def __call__(self, change: AppliedChange, content: PinnedContent | None) -> None:
        self.calls.append((change.kind, change.version_id, change.etag))


@pytest.fixture(params=LEDGER_KINDS)
def ledger(request: pytest.FixtureRequest) -> Iterator[CountingLedger]:
    with counting_ledger(request.param, NOW) as counted:
        yield counted


@pytest.fixture
def bucket() -> FakeBucket:
    return FakeBucket()


@pytest.fixture
def processor() -> Recorder:
    return Recorder()


@pytest.fixture
def service(ledger: CountingLedger, bucket: FakeBucket, processor: Recorder) -> IngestService:
    reader = FakeContentReader()
    for pin in ("v1", "v2", "v3", "e1", "e2"):
        reader.put(BUCKET, KEY, pin, b"bytes")
    runner = EffectRunner(processor, reader, clock_ms=lambda: int(NOW * 1000))
    return IngestService(
        ledger=ledger, bucket=bucket, scope_bucket=BUCKET, effects=runner, clock=lambda: NOW
    )


def event(
    kind: Kind, sequencer: str, version_id: str | None = None, etag: str | None = None
) -> Change:
    return Change(
        bucket=BUCKET,
        key=KEY,
        raw_key=KEY.replace(" ", "+"),
        kind=kind,
        event_name="Object Created/PutObject"
        if kind is Kind.CREATED
        else "Object Deleted/DeleteObject",
        fmt=Format.EVENTBRIDGE,
        sequencer=normalize(sequencer),
        raw_sequencer=sequencer,
        version_id=version_id,
        etag=etag,
        size=5 if kind is Kind.CREATED else None,
    )


def put(sequencer: str, version_id: str | None, etag: str) -> Change:
    return event(Kind.CREATED, sequencer, version_id, etag)


def delete(sequencer: str) -> Change:
    return event(Kind.REMOVED, sequencer)


def repair() -> Change:
    """The repair event reconciliation and ``s3ingest repair`` send, as the parser reads it."""
    body = {"s3ingestRepair": {"bucket": BUCKET, "key": KEY, "reason": "sequencer_contradicted"}}
    (change,) = parse_body(json.dumps(body)).changes
    return change


def row(ledger: CountingLedger) -> LedgerRow:
    found = ledger.inner.get(BUCKET, KEY)
    assert found is not None
    return found


def poison(ledger: CountingLedger, state: RowState, raw: str = FORGED) -> None:
    """Write a row as a forged event of an earlier release did: through the adapter's ordinary
    sequenced write, at a sequencer S3 cannot send (the parser now refuses it)."""
    meta = WriteMeta(BUCKET, KEY, KEY, "Object Created/PutObject", "newer-sequencer", "live")
    written = ledger.inner.apply_if_newer(
        state, WriteMeta(**{**meta.__dict__, "sequencer": normalize(raw), "raw_sequencer": raw})
    )
    assert written.applied


# -- a hiding delete the bucket contradicts (C4) ----------------------------------------------


@pytest.mark.contract("C4", "C11")
def test_a_forged_delete_of_a_key_the_bucket_holds_changes_nothing_and_runs_nothing(
    service: IngestService, ledger: CountingLedger, bucket: FakeBucket, processor: Recorder
) -> None:
    # GIVEN a key the bucket holds, in the ledger, its effect done
    bucket.put(BUCKET, KEY, "v1", "e1")
    assert service.handle(put(S1, "v1", "e1")).outcome is Outcome.APPLIED
    before, calls = row(ledger), list(processor.calls)
    ledger.calls.clear()

    # WHEN a delete with a valid-shaped, current sequencer arrives for it
    result = service.handle(delete(FORGED_CURRENT))

    # THEN the delete is contradicted: no tombstone, no sequencer taken, no write, no effect
    assert (result.outcome, result.reason) == (Outcome.SUPERSEDED, DELETE_CONTRADICTED)
    assert result.extra["ledger"] == "holds-bucket-state"
    assert row(ledger) == before
    assert processor.calls == calls
    assert dict(ledger.calls) == {"get": 1}
    # ... and the next real event applies as usual
    bucket.put(BUCKET, KEY, "v2", "e2")
    assert service.handle(put(S2, "v2", "e2")).outcome is Outcome.APPLIED
    assert row(ledger).seq == normalize(S2)


@pytest.mark.contract("C4", "C5")
def test_a_delete_the_bucket_confirms_tombstones_with_a_head_and_one_write(
    service: IngestService, ledger: CountingLedger, bucket: FakeBucket, processor: Recorder
) -> None:
    bucket.put(BUCKET, KEY, "v1", "e1")
    service.handle(put(S1, "v1", "e1"))
    bucket.hide(BUCKET, KEY)
    ledger.calls.clear()
    heads = bucket.requests

    result = service.handle(delete(S2))

    assert result.outcome is Outcome.APPLIED
    assert not row(ledger).present and row(ledger).seq == normalize(S2)
    assert bucket.requests == heads + 1
    assert ledger.calls["write_sequenced"] == 1 and "get" not in ledger.calls
    assert processor.calls[-1] == ("removed", None, None)
    # a duplicate of it is a duplicate, and runs nothing again
    assert service.handle(delete(S2)).outcome is Outcome.DUPLICATE
    assert len(processor.calls) == 2


@pytest.mark.contract("C4", "C7", "C11", "C15")
def test_a_delete_overtaken_by_a_re_put_records_the_new_object_not_a_removal(
    service: IngestService, ledger: CountingLedger, bucket: FakeBucket, processor: Recorder
) -> None:
    # GIVEN v1 at S1; the key is deleted (S2) and written again, v3 (S3), before the delete's
    # event is handled
    bucket.put(BUCKET, KEY, "v1", "e1")
    service.handle(put(S1, "v1", "e1"))
    bucket.put(BUCKET, KEY, "v3", "e3")

    # WHEN the delete's event arrives
    result = service.handle(delete(S2))

    # THEN no removal: the row records what the bucket shows, observed, at the old sequencer,
    # and the created effect runs for it (the bucket really shows it)
    assert (result.outcome, result.reason) == (Outcome.SUPERSEDED, DELETE_CONTRADICTED)
    assert result.extra["ledger"] == "recorded-bucket-state"
    stored = row(ledger)
    assert (stored.present, stored.version_id, stored.observed) == (True, "v3", True)
    assert stored.seq == normalize(S1)
    assert processor.calls == [("created", "v1", "e1"), ("created", "v3", "e3")]
    # ... the re-PUT's own event is verified against the bucket and runs nothing twice
    again = service.handle(put(S3, "v3", "e3"))
    assert again.outcome is Outcome.APPLIED and again.extra["effect"] == "already-recorded"
    assert row(ledger).seq == normalize(S3) and len(processor.calls) == 2
    # ... and a duplicate of the delete is now stale
    assert service.handle(delete(S2)).outcome is Outcome.STALE


@pytest.mark.contract("C4", "C11")
def test_a_delete_then_the_same_bytes_again_leaves_the_row_to_the_re_put_event(
    service: IngestService, ledger: CountingLedger, bucket: FakeBucket, processor: Recorder
) -> None:
    # GIVEN an unversioned key e1 at S1, deleted (S2) and put again with the same bytes (S3)
    bucket.put(BUCKET, KEY, None, "e1")
    service.handle(put(S1, None, "e1"))
    before = row(ledger)

    # WHEN the delete's event arrives: the row holds what the bucket shows, nothing is written
    result = service.handle(delete(S2))
    assert (result.outcome, result.extra["ledger"]) == (Outcome.SUPERSEDED, "holds-bucket-state")
    assert row(ledger) == before

    # THEN the re-PUT's event applies as a new change, with its own effect
    assert service.handle(put(S3, None, "e1")).outcome is Outcome.APPLIED
    assert processor.calls == [("created", None, "e1"), ("created", None, "e1")]


@pytest.mark.contract("C4")
def test_a_delete_marker_removed_again_before_its_event_leaves_the_visible_version(
    service: IngestService, ledger: CountingLedger, bucket: FakeBucket, processor: Recorder
) -> None:
    # GIVEN v1 at S1; a delete marker dm1 (S2) and its removal (S3), which shows v1 again
    bucket.put(BUCKET, KEY, "v1", "e1")
    service.handle(put(S1, "v1", "e1"))

    # WHEN the marker's event arrives, then the marker removal's
    marker = service.handle(delete(S2))
    removal = service.handle(event(Kind.VERSION_REMOVED, S3, "dm1"))

    # THEN v1 stays, no removal effect ever ran, and the sequencer is the removal's
    assert marker.outcome is Outcome.SUPERSEDED
    assert removal.outcome is Outcome.APPLIED
    stored = row(ledger)
    assert (stored.present, stored.version_id, stored.seq) == (True, "v1", normalize(S3))
    assert processor.calls == [("created", "v1", "e1")]


@pytest.mark.contract("C4", "C7")
def test_a_forged_delete_of_a_key_the_ledger_never_saw_records_the_bucket(
    service: IngestService, ledger: CountingLedger, bucket: FakeBucket, processor: Recorder
) -> None:
    bucket.put(BUCKET, KEY, "v1", "e1")  # its create event was lost

    result = service.handle(delete(FORGED_CURRENT))

    assert result.outcome is Outcome.SUPERSEDED
    stored = row(ledger)
    assert (stored.present, stored.version_id, stored.seq, stored.observed) == (
        True,
        "v1",
        None,
        True,
    )
    assert processor.calls == [("created", "v1", "e1")]  # what a repair would have run


@pytest.mark.contract("C4")
def test_an_older_delete_of_a_re_put_key_is_still_stale(
    service: IngestService, ledger: CountingLedger, bucket: FakeBucket
) -> None:
    bucket.put(BUCKET, KEY, "v3", "e3")
    service.handle(put(S3, "v3", "e3"))
    before = row(ledger)

    assert service.handle(delete(S2)).outcome is Outcome.STALE
    assert service.handle(delete(S3)).outcome is Outcome.DUPLICATE
    assert row(ledger) == before


# -- a poisoned sequencer, reset by a repair (C5, C7, C15) -------------------------------------


@pytest.mark.contract("C5", "C7", "C15")
def test_a_repair_resets_a_forged_sequencer_and_real_events_apply_again(
    service: IngestService, ledger: CountingLedger, bucket: FakeBucket, processor: Recorder
) -> None:
    # GIVEN a row poisoned with 64 F (written before this release), and a real write after it
    # whose event was lost (a real event that arrives repairs the row itself: test_stale_repair)
    poison(ledger, RowState(True, "v0", "e0", 5))
    bucket.put(BUCKET, KEY, "v2", "e2")
    assert processor.calls == []

    # WHEN a repair of the key is handled
    result = service.handle(repair())

    # THEN the row holds the bucket's state, observed, with no sequencer, and says why
    assert (result.outcome, result.reason) == (
        Outcome.APPLIED,
        "sequencer-reset: sequencer-length",
    )
    assert result.extra["sequencer_reset"] == "sequencer-length"
    stored = row(ledger)
    assert (stored.present, stored.version_id, stored.seq, stored.raw_seq, stored.observed) == (
        True,
        "v2",
        None,
        None,
        True,
    )
    assert stored.history[0].reason == "sequencer-reset: sequencer-length"
    assert stored.history[0].seq == "-"
    assert processor.calls == [("created", "v2", "e2")]
    # ... and later real events apply again (verified against the bucket: C7)
    bucket.put(BUCKET, KEY, "v3", "e3")
    assert service.handle(put(S3, "v3", "e3")).outcome is Outcome.APPLIED
    assert row(ledger).seq == normalize(S3) and row(ledger).version_id == "v3"
    bucket.put(BUCKET, KEY, "v4", "e4")
    assert service.handle(put(S4, "v4", "e4")).reason == "newer-sequencer"
    # a repair of a healthy row changes nothing
    assert service.handle(repair()).outcome is Outcome.DUPLICATE


@pytest.mark.contract("C5", "C7")
def test_a_poisoned_row_holding_the_bucket_state_is_reset_without_a_new_change(
    service: IngestService, ledger: CountingLedger, bucket: FakeBucket, processor: Recorder
) -> None:
    poison(ledger, RowState(False))  # a forged delete's tombstone; the bucket has no key
    before = row(ledger)

    result = service.handle(repair())

    assert result.outcome is Outcome.APPLIED and result.extra["effect"] == "already-recorded"
    stored = row(ledger)
    assert (stored.present, stored.seq, stored.observed) == (False, None, True)
    assert stored.change_id == before.change_id and stored.rev == before.rev + 1
    assert processor.calls == []
    # a real create now applies over the tombstone (verified: the bucket shows it)
    bucket.put(BUCKET, KEY, "v1", "e1")
    assert service.handle(put(S1, "v1", "e1")).outcome is Outcome.APPLIED
    assert processor.calls == [("created", "v1", "e1")]


@pytest.mark.contract("C5", "C7")
def test_a_sequencer_from_beyond_the_skew_is_reset_a_current_one_is_not(
    service: IngestService, ledger: CountingLedger, bucket: FakeBucket
) -> None:
    future = f"00{int(NOW) + 3600:08X}00000001"
    poison(ledger, RowState(True, "v1", "e1", 5), raw=future)
    bucket.put(BUCKET, KEY, "v1", "e1")

    assert service.handle(repair()).reason == "sequencer-reset: sequencer-from-future"
    assert row(ledger).seq is None
    # a current sequencer is kept by an observation, as before
    assert service.handle(put(S2, "v1", "e1")).outcome is Outcome.APPLIED
    assert service.handle(repair()).outcome is Outcome.DUPLICATE
    assert row(ledger).seq == normalize(S2)


@pytest.mark.contract("C7")
def test_a_listing_entry_resets_a_poisoned_row_that_matches_it(
    service: IngestService, ledger: CountingLedger, bucket: FakeBucket
) -> None:
    poison(ledger, RowState(True, "v1", "e1", 5))
    bucket.put(BUCKET, KEY, "v1", "e1")
    listed = Change(
        bucket=BUCKET,
        key=KEY,
        raw_key=KEY,
        kind=Kind.LISTED,
        event_name="Listing/run-1",
        fmt=Format.LISTING,
        version_id="v1",
        etag="e1",
        size=5,
        last_modified_ms=1_700_000_000_000,
    )

    result = service.handle(listed)

    assert result.reason == "sequencer-reset: sequencer-length"
    assert row(ledger).seq is None


# -- issue 34: a forged value within the skew, or of another layout ----------------------------


@pytest.mark.contract("C5", "C7", "C11")
def test_a_stale_put_the_bucket_shows_current_repairs_the_row_with_one_head(
    service: IngestService, ledger: CountingLedger, bucket: FakeBucket, processor: Recorder
) -> None:
    # GIVEN a row pinned by a forged, current-looking sequencer (within the skew) over v1
    poison(ledger, RowState(True, "v1", "e1", 5), raw=FORGED_CURRENT)
    bucket.put(BUCKET, KEY, "v2", "e2")
    ledger.calls.clear()

    # WHEN the real PUT of v2 arrives (older than the forged value)
    result = service.handle(put(S2, "v2", "e2"))

    # THEN the bucket shows its version: the row records it, its sequencer removed, and the
    # effect runs; one refused write, one HEAD, one write
    assert (result.outcome, result.reason) == (
        Outcome.APPLIED,
        f"sequencer-reset: {STALE_BUT_CURRENT}",
    )
    stored = row(ledger)
    assert (stored.present, stored.version_id, stored.seq, stored.observed) == (
        True,
        "v2",
        None,
        True,
    )
    assert processor.calls == [("created", "v2", "e2")]
    assert ledger.calls == {"write_sequenced": 1, "write_observation": 1, "finish_effect": 1}
    assert bucket.requests == 1
    # ... and the next real DELETE applies, its effect runs
    bucket.hide(BUCKET, KEY)
    assert service.handle(delete(S3)).outcome is Outcome.APPLIED
    assert row(ledger).present is False
    assert processor.calls[-1] == ("removed", None, None)


@pytest.mark.contract("C4", "C5", "C11")
def test_a_stale_delete_the_bucket_confirms_tombstones_the_row_with_its_own_head(
    service: IngestService, ledger: CountingLedger, bucket: FakeBucket, processor: Recorder
) -> None:
    poison(ledger, RowState(True, "v1", "e1", 5), raw=FORGED_CURRENT)  # the bucket hides it

    result = service.handle(delete(S2))

    assert result.reason == f"sequencer-reset: {STALE_BUT_CURRENT}"
    assert result.outcome is Outcome.APPLIED
    assert (row(ledger).present, row(ledger).seq) == (False, None)
    assert processor.calls == [("removed", None, None)]
    assert bucket.requests == 1  # the hiding delete's own HEAD, read once


@pytest.mark.contract("C5")
def test_a_stale_event_the_bucket_does_not_back_stays_stale_and_writes_nothing(
    service: IngestService, ledger: CountingLedger, bucket: FakeBucket, processor: Recorder
) -> None:
    poison(ledger, RowState(True, "v1", "e1", 5), raw=FORGED_CURRENT)
    bucket.put(BUCKET, KEY, "v1", "e1")  # the row holds what the bucket shows
    before = row(ledger)
    ledger.calls.clear()

    assert service.handle(put(S1, "v0", "e0")).outcome is Outcome.STALE  # not the bucket's
    assert service.handle(put(S1, "v1", "e1")).outcome is Outcome.STALE  # the row holds it

    assert row(ledger) == before
    assert ledger.calls == {"write_sequenced": 2}
    assert bucket.requests == 2
    assert processor.calls == []


@pytest.mark.contract("C7", "C11", "C12")
def test_a_repair_over_a_row_the_bucket_contradicts_resets_its_ordering(
    service: IngestService, ledger: CountingLedger, bucket: FakeBucket, processor: Recorder
) -> None:
    # GIVEN a forged PUT's row (a version the bucket never had, a current-looking sequencer)
    poison(ledger, RowState(True, "v9", "e9", 5), raw=FORGED_CURRENT)
    bucket.put(BUCKET, KEY, "v1", "e1")

    # WHEN reconciliation's repair of the key is handled
    result = service.handle(repair())

    # THEN the row holds the bucket's state with no sequencer, its effect ran
    assert (result.outcome, result.reason) == (
        Outcome.APPLIED,
        f"sequencer-reset: {STATE_CONTRADICTED}",
    )
    stored = row(ledger)
    assert (stored.version_id, stored.seq, stored.observed) == ("v1", None, True)
    assert stored.history[0].reason == f"sequencer-reset: {STATE_CONTRADICTED}"
    assert processor.calls == [("created", "v1", "e1")]
    # ... and the next real PUT and DELETE apply, their effects run
    bucket.put(BUCKET, KEY, "v2", "e2")
    assert service.handle(put(S2, "v2", "e2")).reason == "verified-against-bucket"
    bucket.hide(BUCKET, KEY)
    assert service.handle(delete(S3)).reason == "newer-sequencer"
    assert processor.calls[1:] == [("created", "v2", "e2"), ("removed", None, None)]


@pytest.mark.contract("C7", "C12")
@pytest.mark.parametrize("forged", ["0100000000000000", "01", "5" + "F" * 31])
def test_a_repair_resets_a_stored_value_above_the_clock_even_when_the_state_matches(
    service: IngestService, ledger: CountingLedger, bucket: FakeBucket, forged: str
) -> None:
    poison(ledger, RowState(True, "v1", "e1", 5), raw=forged)
    bucket.put(BUCKET, KEY, "v1", "e1")

    result = service.handle(repair())

    assert result.reason == "sequencer-reset: sequencer-above-clock"
    assert result.extra["effect"] == "already-recorded"
    assert row(ledger).seq is None
    bucket.put(BUCKET, KEY, "v2", "e2")
    assert service.handle(put(S2, "v2", "e2")).outcome is Outcome.APPLIED
