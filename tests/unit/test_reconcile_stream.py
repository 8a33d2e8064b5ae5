"""The streamed ``listing`` reconciliation on the fakes (``tests/fakes``): on randomized buckets
and ledgers with hostile keys it finds what the in-memory diff finds (each key's state of the
whole listing in a dict, :func:`bucket_truth` and :func:`diff`), a run interrupted mid-listing
and resumed ends with the same report, and the rows it holds stay bounded whatever the bucket's
size."""

from __future__ import annotations

import json
import random
import tempfile
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from s3ingest_fn.core.diff import (
    EFFECT_BEHIND,
    PENDING_EFFECT,
    DiffStats,
    bucket_truth,
    diff,
)
from s3ingest_fn.core.model import InventoryRow, ObjectState, TransientError
from s3ingest_fn.core.row import DONE, PENDING, SUPERSEDED, Effect, LedgerRow
from s3ingest_fn.core.scope import BucketScope
from s3ingest_fn.services import reconcile_listing
from s3ingest_fn.services.reconcile import (
    CONFIRM_BATCH,
    SCAN_SEGMENTS,
    ReconcileError,
    Reconciler,
    ReconcileReport,
    ReconcileRequest,
)
from s3ingest_fn.services.reconcile_listing import listing_prefixes
from tests.fakes import (
    FakeBucket,
    FakeBucketListing,
    FakeInventoryStore,
    FakeLedger,
    FakeLedgerScanner,
    FakeRepairQueue,
)

pytestmark = pytest.mark.contract("C12")

BUCKET = "bkt"
CLOCK = 1000.0
TAKEN_AT = int(CLOCK * 1000)
#: Pieces of hostile keys: control characters, '+', '%' (and what looks form-encoded),
#: spaces, unicode in and out of the BMP, '/'.
PIECES = [
    "a",
    "b",
    "A",
    "0",
    "/",
    " ",
    "+",
    "%",
    "%2B",
    "é",
    "日本",
    "🙂",
    "\x01",
    "\t",
    "\n",
    "\x7f",
]


def hostile_key(rnd: random.Random) -> str:
    key = "".join(rnd.choice(PIECES) for _ in range(rnd.randint(1, 5)))
    if rnd.random() < 0.05:
        key += "x" * rnd.randint(300, 900)  # long keys (S3 allows 1,024 UTF-8 bytes)
    return key


@dataclass
class World:
    """A bucket's listing (in S3's order), what HEAD answers now, and a ledger."""

    listed: list[InventoryRow]
    heads: dict[tuple[str, str], ObjectState]
    ledger: FakeLedger


SEQUENCERS = [
    None,
    f"00{int(CLOCK) - 500:08X}0001".ljust(64, "0"),
    f"00{int(CLOCK) - 500:08X}0001".ljust(64, "0"),
    "F" * 64,
    f"00{int(CLOCK) + 5_000:08X}0001".ljust(64, "0"),
]


def make_world(seed: int, versioned: bool, keys: int = 60) -> World:
    rnd = random.Random(seed)
    names = sorted({hostile_key(rnd) for _ in range(rnd.randint(0, keys))})
    listed: list[InventoryRow] = []
    heads: dict[tuple[str, str], ObjectState] = {}
    latest: dict[str, InventoryRow] = {}
    for key in names:  # code point order = UTF-8 binary order = S3's listing order
        newest = TAKEN_AT - rnd.randint(-3_000, 100_000)
        for i in range(rnd.randint(1, 4) if versioned else 1):
            marker = versioned and rnd.random() < 0.25
            row = InventoryRow(
                bucket=BUCKET,
                key=key,
                version_id=f"v{rnd.randrange(10**6)}" if versioned else None,
                is_latest=i == 0,
                is_delete_marker=marker,
                etag=None if marker else f"e{rnd.randrange(4)}",
                size=None if marker else 1,
                last_modified_ms=newest - 1000 * i,
            )
            listed.append(row)
            latest.setdefault(key, row)
    for key, row in latest.items():
        visible = not row.is_delete_marker
        if rnd.random() < 0.1:  # changed since it was listed
            visible = not visible
        heads[(BUCKET, key)] = ObjectState(
            visible=visible,
            version_id=row.version_id if visible else None,
            etag=(row.etag or "e9") if visible else None,
        )
    ledger = FakeLedger()
    ledger_keys = [k for k in names if rnd.random() < 0.8]
    ledger_keys += [hostile_key(rnd) for _ in range(rnd.randint(0, 15))]
    for key in ledger_keys:
        seen = latest.get(key)
        if key not in latest and rnd.random() < 0.1:
            heads[(BUCKET, key)] = ObjectState(visible=True, version_id=None, etag="e1")
        present = rnd.random() < 0.8
        same = seen is not None and rnd.random() < 0.6
        effect = rnd.choice(
            [
                None,
                None,
                Effect(DONE),
                Effect(SUPERSEDED),
                Effect(PENDING, lease_until_ms=TAKEN_AT - rnd.randint(-5_000, 50_000)),
            ]
        )
        ledger.rows[(BUCKET, key)] = LedgerRow(
            bucket=BUCKET,
            key=key,
            present=present,
            version_id=(seen.version_id if same and seen else f"v{rnd.randrange(9)}")
            if present
            else None,
            etag=(seen.etag if same and seen else f"e{rnd.randrange(4)}") if present else None,
            updated_at=TAKEN_AT - rnd.randint(-3_000, 100_000),
            effect=effect,
            # a real sequencer, none (observed), or one S3 cannot have sent: 64 digits (a
            # forged one of an earlier release) or from beyond the skew (issue 24)
            seq=rnd.choice(SEQUENCERS),
        )
    return World(listed, heads, ledger)


def reconciler(
    world: World,
    *,
    scope: BucketScope | None = None,
    repairs: FakeRepairQueue | None = None,
    listing: FakeBucketListing | None = None,
    scan_page_rows: int | None = 7,
) -> Reconciler:
    return Reconciler(
        objects=FakeBucket(dict(world.heads)),
        listing=listing or FakeBucketListing(world.listed),
        inventory=FakeInventoryStore(),
        repairs=repairs or FakeRepairQueue(),
        scanner=FakeLedgerScanner(world.ledger, page_rows=scan_page_rows),
        bucket=BUCKET,
        table="ledger",
        queue_url="https://sqs/ingest",
        clock=lambda: CLOCK,
        scope=scope,
    )


def in_memory(world: World, scope: BucketScope, prefix: str, margin: int) -> dict[str, Any]:
    """The single in-memory run: the whole listing's state per key, then :func:`diff`, then
    the same HEAD confirmation."""
    truth = {
        k: t for k, t in bucket_truth(world.listed, prefix=prefix).items() if scope.contains(k)
    }
    under = [r for (_, k), r in sorted(world.ledger.rows.items()) if k.startswith(prefix)]
    rows = [r for r in under if scope.contains(r.key)]
    stats = DiffStats()
    keys = len(truth)
    drifts = list(
        diff(
            truth,
            rows,
            taken_at_ms=TAKEN_AT - margin,
            compare_versions=True,
            compare_etags=True,
            stats=stats,
            prefix=prefix,
        )
    )
    report = ReconcileReport(source="listing", bucket=BUCKET, prefix=prefix, dry_run=False)
    for d in drifts:
        report.count(d)
    confirmed = reconciler(world).confirm(drifts, report, lambda p, n: None)
    return {
        "drift": report.drift,
        "pending_effects": report.pending_effects,
        "effects_behind": report.effects_behind,
        "resolved_on_head": report.resolved_on_head,
        "ledger_rows": stats.ledger_rows,
        "skipped_recent": stats.skipped_recent,
        "bucket_keys": keys,
        "out_of_scope": len(under) - len(rows),
        "repairs": Counter((d.key, d.kind) for d in confirmed),
    }


def streamed(report: ReconcileReport, repairs: FakeRepairQueue) -> dict[str, Any]:
    sent = [json.loads(b)["s3ingestRepair"] for b in repairs.sent]
    assert all(r["bucket"] == BUCKET for r in sent)
    return {
        "drift": report.drift,
        "pending_effects": report.pending_effects,
        "effects_behind": report.effects_behind,
        "resolved_on_head": report.resolved_on_head,
        "ledger_rows": report.ledger_rows,
        "skipped_recent": report.skipped_recent,
        "bucket_keys": report.bucket_keys,
        "out_of_scope": report.out_of_scope,
        "repairs": Counter((r["key"], r["reason"]) for r in sent),
    }


SCOPES = [
    BucketScope(BUCKET),
    BucketScope(BUCKET, prefixes=("a", "%", "日本")),
    BucketScope(BUCKET, suffixes=("b", "\n")),
    BucketScope(BUCKET, prefixes=("a", "ab", "+"), suffixes=("0",)),
]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32),
    versioned=st.booleans(),
    scope=st.sampled_from(SCOPES),
    prefix=st.sampled_from(["", "a", "%", "日本"]),
    margin=st.sampled_from([0, 5_000]),
    page_size=st.integers(1, 9),
)
def test_the_streamed_listing_finds_what_the_in_memory_diff_finds(
    seed: int,
    versioned: bool,
    scope: BucketScope,
    prefix: str,
    margin: int,
    page_size: int,
) -> None:
    # GIVEN a bucket and a ledger with hostile keys, lost events and changes after the listing
    world = make_world(seed, versioned)
    repairs = FakeRepairQueue()
    # WHEN the streamed listing run reconciles them, page by page
    r = reconciler(world, scope=scope, repairs=repairs)
    report = r.run(
        ReconcileRequest(source="listing", prefix=prefix, margin_ms=margin, page_size=page_size)
    )
    # THEN it finds, confirms and repairs exactly what the in-memory run does
    assert streamed(report, repairs) == in_memory(world, scope, prefix, margin)
    assert report.repairs_queued == len(repairs.sent)
    assert report.repairs_queued == (
        report.drift_total
        - report.resolved_on_head
        + report.pending_effects
        + report.effects_behind
    )
    assert len(report.samples) == min(20, report.repairs_queued)
    sent_keys = {json.loads(b)["s3ingestRepair"]["key"] for b in repairs.sent}
    assert {s["key"] for s in report.samples} <= sent_keys
    # AND it read the ledger once, held nothing at the end, and kept nothing on disk
    assert report.ledger_requests == r.scanner.requests  # type: ignore[attr-defined]
    assert r.held.now == 0
    if not scope.prefixes:
        assert report.bucket_rows == sum(1 for row in world.listed if row.key.startswith(prefix))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32),
    versioned=st.booleans(),
    scope=st.sampled_from(SCOPES),
    cut=st.integers(0, 40),
    page_size=st.integers(1, 4),
)
def test_a_run_interrupted_mid_listing_resumes_to_the_same_report(
    seed: int, versioned: bool, scope: BucketScope, cut: int, page_size: int
) -> None:
    world = make_world(seed, versioned)
    request = ReconcileRequest(source="listing", margin_ms=0, page_size=page_size)
    whole = reconciler(world, scope=scope).run(request)
    with tempfile.TemporaryDirectory() as work:
        # GIVEN a resumable run whose listing breaks after `cut` pages
        listing = FakeBucketListing(world.listed)
        listing.fail_after_pages = cut
        repairs = FakeRepairQueue()
        resumable = ReconcileRequest(
            source="listing", margin_ms=0, page_size=page_size, run_id="run-1", work_dir=work
        )
        try:
            first = reconciler(world, scope=scope, repairs=repairs, listing=listing).run(resumable)
            interrupted = False
        except ReconcileError as exc:
            assert "connection reset" in str(exc)
            interrupted = True
        # WHEN the listing works again and the run is given the same id
        listing.fail_after_pages = None
        if interrupted:
            first = reconciler(world, scope=scope, repairs=repairs, listing=listing).run(resumable)
            assert first.resumed
        # THEN its report is the uninterrupted run's, and every confirmed difference was repaired
        assert _figures(first) == _figures(whole)
        assert first.run_id == "run-1"
        sent = {
            (json.loads(b)["s3ingestRepair"]["key"], json.loads(b)["s3ingestRepair"]["reason"])
            for b in repairs.sent
        }
        assert len(sent) == whole.repairs_queued
        # AND a run given the finished run's id returns its report without listing again
        served = listing.pages_served
        again = reconciler(world, scope=scope, listing=listing).run(resumable)
        assert again.resumed and listing.pages_served == served
        assert _figures(again) == _figures(whole)


def _figures(report: ReconcileReport) -> dict[str, Any]:
    out = report.as_dict()
    for name in ("duration_s", "run_id", "resumed"):
        out.pop(name)
    return out


def test_a_checkpoint_of_another_request_is_refused(tmp_path: Any) -> None:
    world = make_world(7, versioned=False)
    listing = FakeBucketListing(world.listed)
    listing.fail_after_pages = 1
    request = ReconcileRequest(source="listing", page_size=1, run_id="r", work_dir=str(tmp_path))
    with pytest.raises(ReconcileError):
        reconciler(world, listing=listing).run(request)
    other = ReconcileRequest(
        source="listing", prefix="a", page_size=1, run_id="r", work_dir=str(tmp_path)
    )
    with pytest.raises(ReconcileError, match=r"checkpoint of run r is of another request"):
        reconciler(world).run(other)


def test_a_run_without_a_work_dir_leaves_nothing_behind(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    world = make_world(3, versioned=True)
    report = reconciler(world).run(ReconcileRequest(source="listing", page_size=2))
    assert report.run_id and not report.resumed
    assert list(tmp_path.iterdir()) == []


def _big_world(n: int) -> World:
    """``n`` keys in the bucket, the ledger holding each but every hundredth (missing), plus
    one row in ten thousand deleted from the bucket."""
    listed = [
        InventoryRow(BUCKET, f"k/{i:07d}", None, True, False, f"e{i}", 1, TAKEN_AT - 100_000)
        for i in range(n)
    ]
    ledger = FakeLedger()
    for i in range(n):
        if i % 100:
            ledger.rows[(BUCKET, f"k/{i:07d}")] = LedgerRow(
                BUCKET, f"k/{i:07d}", True, etag=f"e{i}", updated_at=TAKEN_AT - 100_000
            )
    for i in range(n // 10_000 + 1):
        ledger.rows[(BUCKET, f"gone/{i}")] = LedgerRow(
            BUCKET, f"gone/{i}", True, etag="e", updated_at=TAKEN_AT - 100_000
        )
    heads = {(BUCKET, r.key): ObjectState(True, None, r.etag) for r in listed}
    return World(listed, heads, ledger)


@pytest.mark.parametrize("n", [5_000, 40_000])
def test_the_rows_held_stay_bounded_whatever_the_bucket_size(n: int) -> None:
    # GIVEN a bucket of n keys, 1% of them missing from the ledger
    world = _big_world(n)
    page, scan_rows = 100, 50
    repairs = FakeRepairQueue()
    r = reconciler(world, repairs=repairs, scan_page_rows=scan_rows)
    # WHEN it is reconciled from its listing
    report = r.run(ReconcileRequest(source="listing", margin_ms=0, page_size=page))
    assert report.drift["missing"] == n // 100
    assert report.drift["deleted_but_live"] == n // 10_000 + 1
    assert report.repairs_queued == len(repairs.sent) == n // 100 + n // 10_000 + 1
    # THEN it never held more than a few Scan pages, a few listing pages (and the ledger rows
    # of one) and one batch of differences: a bound that does not grow with n
    bound = (3 * SCAN_SEGMENTS + 1) * scan_rows + 5 * page + CONFIRM_BATCH
    assert 0 < r.held.peak <= bound
    assert r.held.now == 0


def test_a_ledger_row_outside_the_scope_is_reported_and_never_repaired() -> None:
    # GIVEN a bucket filtered to "in/" whose ledger still holds a row of "old/" (written before
    # the filter was added) and whose listing shows keys of both
    listed = [
        InventoryRow(BUCKET, key, None, True, False, "e", 1, 1)
        for key in ("in/a", "in/b", "old/x", "old/y")
    ]
    ledger = FakeLedger()
    for key in ("in/a", "old/gone"):
        ledger.rows[(BUCKET, key)] = LedgerRow(BUCKET, key, True, etag="e", updated_at=1)
    heads = {(BUCKET, r.key): ObjectState(True, None, "e") for r in listed}
    world = World(listed, heads, ledger)
    repairs = FakeRepairQueue()
    scope = BucketScope(BUCKET, prefixes=("in/",))
    for source in ("listing",):
        report = reconciler(world, scope=scope, repairs=repairs).run(
            ReconcileRequest(source=source, margin_ms=0)
        )
        # THEN only in/b is missing; old/gone is counted apart; old/x and old/y never listed
        assert report.drift == {
            "missing": 1,
            "deleted_but_live": 0,
            "content_mismatch": 0,
            "sequencer_contradicted": 0,
        }
        assert (report.out_of_scope, report.out_of_scope_samples) == (1, ["old/gone"])
        assert (report.bucket_keys, report.bucket_rows, report.ledger_rows) == (2, 2, 1)
        assert [json.loads(b)["s3ingestRepair"]["key"] for b in repairs.sent] == ["in/b"]


def test_listing_prefixes_intersect_the_request_and_the_scope() -> None:
    assert listing_prefixes("", ()) == [""]
    assert listing_prefixes("a/", ()) == ["a/"]
    assert listing_prefixes("", ("b/", "a/", "a/x/")) == ["a/", "b/"]
    assert listing_prefixes("a/", ("a/x/", "b/")) == ["a/x/"]
    assert listing_prefixes("a/x/y", ("a/", "b/")) == ["a/x/y"]
    assert listing_prefixes("c/", ("a/", "b/")) == []


def test_a_pending_effect_and_an_effect_behind_are_repaired_when_unlisted() -> None:
    ledger = FakeLedger()
    ledger.rows[(BUCKET, "p")] = LedgerRow(
        BUCKET, "p", False, updated_at=1, effect=Effect(PENDING, lease_until_ms=1)
    )
    ledger.rows[(BUCKET, "s")] = LedgerRow(
        BUCKET, "s", False, updated_at=1, effect=Effect(SUPERSEDED)
    )
    repairs = FakeRepairQueue()
    report = reconciler(World([], {}, ledger), repairs=repairs).run(
        ReconcileRequest(source="listing", margin_ms=0)
    )
    assert (report.pending_effects, report.effects_behind, report.drift_total) == (1, 1, 0)
    reasons = sorted(json.loads(b)["s3ingestRepair"]["reason"] for b in repairs.sent)
    assert reasons == sorted([PENDING_EFFECT, EFFECT_BEHIND])


def test_progress_ticks_every_phase(tmp_path: Any) -> None:
    world = _big_world(2_000)
    ticks: Counter[str] = Counter()
    report = reconciler(world).run(
        ReconcileRequest(source="listing", margin_ms=0, page_size=100),
        lambda phase, n: ticks.update({phase: n}),
    )
    assert ticks["ledger"] == report.ledger_rows
    assert ticks["bucket"] == report.bucket_rows == 2_000
    assert ticks["confirm"] == report.drift_total
    assert ticks["repair"] == report.repairs_queued


def test_the_spill_orders_keys_as_s3_lists_them(tmp_path: Any) -> None:
    # UTF-8 binary order, which is code point order (not UTF-16's: U+FFFD < U+1F642)
    spill = reconcile_listing.LedgerSpill(tmp_path / "s.sqlite", BUCKET)
    keys = ["\ufffd", "🙂", "a", "a\x00b", "a\x01", "\x7f", "é"]
    spill.restart()
    spill.add([LedgerRow(BUCKET, k, True) for k in keys], CLOCK)
    spill.build()
    walked = [r.key for r in spill.unseen(None, 100)]
    assert walked == sorted(keys)
    assert spill.take(["a\x00b", "nope"]).keys() == {"a\x00b"}
    assert [r.key for r in spill.unseen(None, 100)] == [k for k in sorted(keys) if k != "a\x00b"]
    spill.close()


class _BreakingScanner(FakeLedgerScanner):
    """Fails its first ``fail`` Scan pages' segments, then reads as the fake."""

    def __init__(self, ledger: FakeLedger, fail: int) -> None:
        super().__init__(ledger, page_rows=7)
        self.fail = fail

    def pages(self, bucket: str, segment: int, total: int) -> Any:
        if self.fail > 0:
            self.fail -= 1
            raise TransientError("dynamodb scan: ProvisionedThroughputExceededException")
        return super().pages(bucket, segment, total)


def test_a_run_interrupted_while_spilling_the_ledger_starts_the_spill_over(
    tmp_path: Any,
) -> None:
    world = make_world(11, versioned=True)
    whole = reconciler(world).run(ReconcileRequest(source="listing", margin_ms=0, page_size=2))
    r = reconciler(world)
    r.scanner = _BreakingScanner(world.ledger, fail=1)
    request = ReconcileRequest(
        source="listing", margin_ms=0, page_size=2, run_id="s", work_dir=str(tmp_path)
    )
    with pytest.raises(ReconcileError, match="scanning the ledger failed"):
        r.run(request)
    again = r.run(request)
    assert _figures(again) == _figures(whole)
    # a finished run keeps only its report
    assert [p.name for p in (tmp_path / "s" / BUCKET).iterdir()] == ["report.json"]
