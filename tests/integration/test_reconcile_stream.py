"""The streamed ``listing`` reconciliation on the emulator (CONTRACT C12): the real S3 listing
(ListObjectVersions / ListObjectsV2 page by page), the real parallel Scan, the on-disk spill;
it finds what the in-memory diff finds on hostile keys, resumes after an interruption to the
same report, and the reconcile Lambda handler reconciles every bucket of ``SCOPE``."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from s3ingest.local.stack.runtime import LocalRuntime
from s3ingest.settings import inventory_report_prefix
from s3ingest_fn import wiring
from s3ingest_fn.adapters.s3_objects import S3Listing
from s3ingest_fn.core.diff import DiffStats, bucket_truth, diff
from s3ingest_fn.core.model import TransientError
from s3ingest_fn.core.ports import ListingPage
from s3ingest_fn.services import reconcile_listing
from s3ingest_fn.services.reconcile import (
    ReconcileError,
    Reconciler,
    ReconcileReport,
    ReconcileRequest,
)

pytestmark = pytest.mark.contract("C12")

#: Hostile keys: '+', '%', spaces, unicode in and out of the BMP, a tab, a long key.
KEYS = ("a b+c", "dir/é%", "100%25+", "日本/🙂", "tab\there", "x" * 700, "plain", "z/last")


def _history(rt: LocalRuntime, seed: int) -> None:
    """Writes and deletes on KEYS, each event delivered, lost or held back at random."""
    rnd = random.Random(seed)
    for _ in range(rnd.randint(4, 24)):
        key = rnd.choice(KEYS)
        if rnd.random() < 0.7:
            rt.faithful.put(key, f"body {rnd.randrange(3)}")
        else:
            rt.faithful.delete(key)
        pending = rt.faithful.take_pending()
        if rnd.random() < 0.6:  # delivered; else lost for good
            rt.faithful.pending.extend(pending)
            rt.flush()
            rt.drain()


def _reconciler(rt: LocalRuntime, clock: float, listing: Any = None) -> Reconciler:
    r = wiring.reconciler(
        s3=rt.s3,
        dynamodb=rt.ddb,
        sqs=rt.sqs,
        bucket=rt.resources.bucket,
        table=rt.resources.table,
        queue_url=rt.resources.queue_url,
        clock=lambda: clock,
    )
    if listing is not None:
        r.listing = listing
    return r


def _in_memory(r: Reconciler, taken_at_ms: int) -> dict[str, Any]:
    """The single in-memory run over the same ports: the whole listing's state per key, the
    Scan, :func:`diff`, the HEAD confirmation."""
    scratch = ReconcileReport(source="listing", bucket=r.bucket, prefix="", dry_run=True)
    truth = bucket_truth(r.listing.rows(r.bucket, ""))
    keys = len(truth)
    stats = DiffStats()
    drifts = list(
        diff(
            truth,
            r.scan_ledger(scratch, lambda p, n: None),
            taken_at_ms=taken_at_ms,
            compare_versions=True,
            compare_etags=True,
            stats=stats,
        )
    )
    for d in drifts:
        scratch.count(d)
    confirmed = r.confirm(drifts, scratch, lambda p, n: None)
    return {
        "drift": scratch.drift,
        "resolved_on_head": scratch.resolved_on_head,
        "pending_effects": scratch.pending_effects,
        "effects_behind": scratch.effects_behind,
        "ledger_rows": stats.ledger_rows,
        "skipped_recent": stats.skipped_recent,
        "bucket_keys": keys,
        "samples": sorted(d.key for d in confirmed),
    }


def _streamed(report: ReconcileReport) -> dict[str, Any]:
    return {
        "drift": report.drift,
        "resolved_on_head": report.resolved_on_head,
        "pending_effects": report.pending_effects,
        "effects_behind": report.effects_behind,
        "ledger_rows": report.ledger_rows,
        "skipped_recent": report.skipped_recent,
        "bucket_keys": report.bucket_keys,
        "samples": sorted(s["key"] for s in report.samples),
    }


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32),
    versioning=st.sampled_from(["Enabled", None]),
    page_size=st.integers(1, 4),
)
def test_the_streamed_listing_equals_the_in_memory_run_on_the_emulator(
    emulator: Any, seed: int, versioning: str | None, page_size: int
) -> None:
    # GIVEN a history on hostile keys with lost events
    rt = LocalRuntime(emulator, versioning=versioning)
    _history(rt, seed)
    clock = time.time() + 1
    # WHEN the streamed run lists the bucket a few entries per request (dry run)
    r = _reconciler(rt, clock)
    report = r.run(
        ReconcileRequest(source="listing", margin_ms=0, dry_run=True, page_size=page_size)
    )
    # THEN it finds and confirms what the in-memory run finds
    assert _streamed(report) == _in_memory(_reconciler(rt, clock), int(clock * 1000))
    assert report.bucket_requests >= report.bucket_rows / page_size
    # AND its repairs make the ledger equal the bucket
    rt.reconcile("listing")
    assert rt.compare().differences == []


class BreakingListing:
    """The S3 listing, broken after ``limit`` pages (healed by setting it to None)."""

    def __init__(self, inner: S3Listing, limit: int | None) -> None:
        self.inner, self.limit, self.served = inner, limit, 0

    def rows(self, bucket: str, prefix: str) -> Any:
        return self.inner.rows(bucket, prefix)

    def pages(self, bucket: str, prefix: str, marker: Any, page_size: int) -> Iterator[ListingPage]:
        for page in self.inner.pages(bucket, prefix, marker, page_size):
            if self.limit is not None and self.served >= self.limit:
                raise TransientError("s3 listing: connection reset")
            self.served += 1
            yield page


@pytest.mark.parametrize("versioning", ["Enabled", None])
def test_a_listing_run_resumes_after_an_interruption_to_the_same_report(
    emulator: Any, versioning: str | None, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN 30 keys whose events were all lost, and a ledger row whose object is gone
    rt = LocalRuntime(emulator, versioning=versioning)
    rt.faithful.put("gone", "x")
    rt.flush()
    rt.drain()
    for i in range(30):
        rt.faithful.put(f"k {i:02d}+%é", "x")
    rt.faithful.delete("gone")
    rt.faithful.take_pending()
    clock = time.time() + 1
    whole = _reconciler(rt, clock).run(
        ReconcileRequest(source="listing", margin_ms=0, dry_run=True, page_size=4)
    )
    assert (whole.drift["missing"], whole.drift["deleted_but_live"]) == (30, 1)
    # WHEN a resumable run (a checkpoint after every page) breaks after three pages, then
    # runs again with the same id
    monkeypatch.setattr(reconcile_listing, "COMMIT_PAGES", 1)
    listing = BreakingListing(S3Listing(rt.s3), 3)
    request = ReconcileRequest(
        source="listing", margin_ms=0, page_size=4, run_id="r1", work_dir=str(tmp_path)
    )
    with pytest.raises(ReconcileError, match="connection reset"):
        _reconciler(rt, clock, listing).run(request)
    listing.limit = None
    resumed = _reconciler(rt, clock, listing).run(request)
    # THEN it listed only the rest (no page twice), and its figures are the uninterrupted run's
    assert resumed.resumed
    expected = {k: v for k, v in whole.as_dict().items() if k not in _VOLATILE}
    assert {k: v for k, v in resumed.as_dict().items() if k not in _VOLATILE} == expected
    assert resumed.repairs_queued == whole.drift_total - whole.resolved_on_head == 31
    assert listing.served == whole.bucket_requests
    # AND its repairs make the ledger equal the bucket
    rt.drain()
    assert rt.compare().differences == []


_VOLATILE = ("duration_s", "run_id", "resumed", "dry_run", "repairs_queued")


class Context:
    function_name = "reconcile"
    memory_limit_in_mb = 3008
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:reconcile"
    aws_request_id = "req-1"


def test_the_scheduled_run_reconciles_every_bucket_of_the_scope(
    emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the pipeline's bucket (with an inventory) and a second one filtered to "in/" (no
    # inventory), each holding keys whose events were lost
    rt = LocalRuntime(emulator, versioning="Enabled")
    rt.faithful.put("lost", "1")
    rt.faithful.take_pending()
    rt.write_inventory()
    second = f"{rt.resources.bucket}-two"
    rt.s3.create_bucket(Bucket=second)
    for key in ("in/a", "in/b+c", "out/c"):
        rt.s3.put_object(Bucket=second, Key=key, Body=b"x")
    scope = [
        {"name": rt.resources.bucket, "prefixes": [], "suffixes": []},
        {"name": second, "prefixes": ["in/"], "suffixes": []},
    ]
    inventories = [
        {
            "name": rt.resources.bucket,
            "bucket": rt.resources.inventory_bucket,
            "prefix": inventory_report_prefix(rt.resources.bucket),
        }
    ]
    for name, value in {
        "AWS_ENDPOINT_URL": emulator.endpoint_url,
        "LEDGER_TABLE_NAME": rt.resources.table,
        "INGEST_QUEUE_URL": rt.resources.queue_url,
        "BUCKET_NAME": rt.resources.bucket,
        "SCOPE": json.dumps(scope),
        "INVENTORIES": json.dumps(inventories),
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("INVENTORY_BUCKET_NAME", raising=False)
    from s3ingest_fn.handlers import reconcile

    wiring.function_reconciler.cache_clear()
    try:
        # WHEN the schedule's event runs
        summary = reconcile.handler({"source": "inventory", "marginSeconds": 0}, Context())
        # THEN each bucket was reconciled from its own source, only in-scope keys counted
        assert summary["buckets"] == [rt.resources.bucket, second]
        first, other = summary["reports"]
        assert (first["bucket"], first["source"], first["drift"]["missing"]) == (
            rt.resources.bucket,
            "inventory",
            1,
        )
        assert (other["bucket"], other["source"], other["bucket_keys"]) == (
            second,
            "listing",
            2,
        )
        assert other["drift"]["missing"] == 2
        assert summary["drift"]["missing"] == 3 and summary["repairs_queued"] == 3
        bodies = _queued(rt)
        assert sorted((b["bucket"], b["key"]) for b in bodies) == sorted(
            [(second, "in/a"), (second, "in/b+c"), (rt.resources.bucket, "lost")]
        )
        # AND an event naming one bucket reconciles it alone, in the single-bucket shape
        one = reconcile.handler({"bucket": second, "dryRun": True, "marginSeconds": 0}, Context())
        assert (one["bucket"], one["source"], one["drift"]["missing"]) == (second, "listing", 2)
        with pytest.raises(ValueError, match="not one of the pipeline's"):
            reconcile.handler({"bucket": "elsewhere"}, Context())
    finally:
        wiring.function_reconciler.cache_clear()


def _queued(rt: LocalRuntime) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while True:
        got = rt.sqs.receive_message(
            QueueUrl=rt.resources.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0
        ).get("Messages", [])
        if not got:
            return out
        out += [json.loads(m["Body"])["s3ingestRepair"] for m in got]
