"""CONTRACT C12 and C15 with dropped events: the bucket is the truth.

Histories run with lost events; after quiescence, one reconciliation (listing or S3 Inventory)
must make the ledger equal the bucket. Plus the interleavings that break naive designs.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from s3ingest.cli.render import skipped_rows
from s3ingest.local.stack.runtime import LocalRuntime
from tests.integration.test_convergence import Monotonic, op_strategy, run_history

pytestmark = pytest.mark.contract("C12")

drop_ops = st.lists(
    st.one_of(op_strategy, st.tuples(st.just("lossy_flush"), st.just(""), st.integers(0, 2**16))),
    min_size=1,
    max_size=18,
)


def run_lossy_history(rt: LocalRuntime, ops: list[tuple[str, str, int]], drop: float) -> None:
    run_history(rt, ops, duplicate=0.3, drop=drop)


@pytest.mark.contract("C15")
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=drop_ops,
    versioning=st.sampled_from(["Enabled", None]),
    drop=st.sampled_from([0.2, 0.5, 1.0]),
    source=st.sampled_from(["listing", "inventory"]),
)
def test_one_reconciliation_after_lossy_delivery_makes_ledger_equal_bucket(
    emulator: Any, ops: list[tuple[str, str, int]], versioning: str | None, drop: float, source: str
) -> None:
    # GIVEN a history whose events are partly lost for good, delivered until quiescence
    rt = LocalRuntime(emulator, versioning=versioning)
    monitor = Monotonic()
    rt.after_batch = monitor
    run_lossy_history(rt, ops, drop)
    # WHEN one reconciliation runs and its repairs are processed
    report = rt.reconcile(source)
    # THEN the ledger equals the bucket, and no invariant broke on the way
    comparison = rt.compare()
    assert comparison.differences == [], report.as_dict()
    assert monitor.violations == []
    assert report.repairs_queued == report.drift_total - report.resolved_on_head
    # AND a second reconciliation finds nothing
    again = rt.reconcile(source)
    assert again.drift_total == 0


@pytest.mark.contract("C7")
def test_repair_racing_a_late_real_event_keeps_the_newest_state(emulator: Any) -> None:
    # GIVEN v1 ingested, v2's event lost for now (held back), and a reconciliation queued a repair
    rt = LocalRuntime(emulator, versioning="Enabled")
    monitor = Monotonic()
    rt.after_batch = monitor
    rt.faithful.put("k", "one")
    rt.flush()
    rt.drain()
    v2 = rt.faithful.put("k", "two").version_id
    (late_v2,) = rt.faithful.take_pending()
    report = rt.reconcile("listing", drain=False)
    assert report.drift["content_mismatch"] == 1
    # AND a later write v3 happens, its event delivered before the repair and the late v2 event
    v3 = rt.faithful.put("k", "three").version_id
    rt.flush()
    rt.faithful.pending.append(late_v2)
    rt.flush()
    # WHEN everything drains (repair, v3 and the late v2, concurrently, in any order)
    rt.drain()
    # THEN the row shows v3, and no write ever lowered its sequencer on the way: the late v2 is
    # applied only if it ran before the repair, and is stale or superseded after it
    (row,) = rt.ledger_rows()
    assert (row.state, row.version_id) == ("present", v3)
    assert v2 != v3
    assert monitor.violations == []
    assert row.raw_seq == max(d.result.sequencer for d in rt.delivered if d.result.sequencer)


@pytest.mark.contract("C6")
def test_missed_delete_then_late_older_create_does_not_resurrect(emulator: Any) -> None:
    # GIVEN put (event held back) then delete (event lost) on an unversioned bucket
    rt = LocalRuntime(emulator, versioning=None)
    rt.faithful.put("x", "one")
    (late_create,) = rt.faithful.take_pending()
    rt.faithful.delete("x")
    rt.faithful.take_pending()  # the delete event is lost
    # AND the create is delivered late, before reconciliation
    rt.faithful.pending.append(late_create)
    rt.flush()
    rt.drain()
    assert rt.ledger_rows()[0].state == "present"
    # WHEN reconciliation runs
    report = rt.reconcile("inventory")
    # THEN the ledger shows the key deleted, and the same late create delivered again is a no-op
    assert report.drift["deleted_but_live"] == 1
    rt.faithful.pending.append(late_create)
    rt.flush()
    rt.drain()
    (row,) = rt.ledger_rows()
    assert row.state == "deleted"
    assert rt.compare().converged


@pytest.mark.contract("C7")
def test_missed_overwrite_on_unversioned_bucket_is_repaired_and_late_event_applies(
    emulator: Any,
) -> None:
    rt = LocalRuntime(emulator, versioning=None)
    rt.faithful.put("doc", "one")
    rt.flush()
    rt.drain()
    rt.faithful.put("doc", "two")
    (late_two,) = rt.faithful.take_pending()
    report = rt.reconcile("listing")
    assert report.drift["content_mismatch"] == 1
    (row,) = rt.ledger_rows()
    assert row.observed is True
    etag_two = row.etag
    # the late event of the overwrite matches the bucket: applied, the observation cleared
    rt.faithful.pending.append(late_two)
    rt.flush()
    rt.drain()
    (row,) = rt.ledger_rows()
    assert (row.etag, row.observed) == (etag_two, False)
    assert rt.delivered[-1].result.outcome.value == "applied"
    assert rt.compare().converged


def test_dry_run_queues_nothing(emulator: Any) -> None:
    rt = LocalRuntime(emulator, versioning="Enabled")
    rt.faithful.put("a", "1")
    rt.faithful.take_pending()
    report = rt.reconcile("inventory", dry_run=True)
    assert (report.drift["missing"], report.repairs_queued) == (1, 0)
    assert report.samples[0]["key"] == "a"
    assert rt.ledger_rows() == []


def test_rows_changed_after_the_snapshot_are_skipped(emulator: Any) -> None:
    # GIVEN an inventory written before an overwrite whose event is delivered
    rt = LocalRuntime(emulator, versioning="Enabled")
    rt.faithful.put("a", "1")
    rt.flush()
    rt.drain()
    manifest = rt.write_inventory()
    rt.faithful.put("a", "2")
    rt.flush()
    rt.drain()
    from s3ingest_fn.services.reconcile import ReconcileRequest

    # WHEN reconciling against the older report with a margin covering the new write
    report = rt.reconciler().run(
        ReconcileRequest(source="inventory", manifest_key=manifest, margin_ms=0)
    )
    # THEN the row changed after the snapshot is skipped, not "repaired" backwards
    assert report.skipped_recent == 1
    assert report.drift_total == 0
    # AND it is counted, and labelled, as changed after the snapshot
    assert report.skipped_after_snapshot == 1
    assert skipped_rows(report.as_dict()) == [
        ("skipped (changed after the snapshot)", 1),
        ("skipped (changed in the margin before it: events may be in flight)", 0),
    ]


@pytest.mark.parametrize("source", ["listing", "inventory"])
def test_objects_written_in_the_margin_are_not_labelled_changed_after_the_snapshot(
    emulator: Any, source: str
) -> None:
    # GIVEN an object written just now whose event is lost
    rt = LocalRuntime(emulator, versioning="Enabled")
    rt.faithful.put("a", "1")
    rt.faithful.take_pending()
    # WHEN a reconciliation with a 60 s margin runs (the object is older than its snapshot)
    report = rt.reconcile(source, dry_run=True, margin_seconds=60)
    # THEN the object is skipped as written in the margin before the snapshot, not after it
    assert (report.skipped_recent, report.skipped_after_snapshot) == (1, 0)
    assert report.margin_s == 60
    assert skipped_rows(report.as_dict()) == [
        ("skipped (changed after the snapshot)", 0),
        ("skipped (changed in the 60 s before the snapshot: events may be in flight)", 1),
    ]


@pytest.mark.slow
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=drop_ops, versioning=st.sampled_from(["Enabled", None]))
def test_fanned_out_reconciliation_finds_what_the_single_run_finds(
    emulator: Any, ops: list[tuple[str, str, int]], versioning: str | None
) -> None:
    # GIVEN a lossy history and one inventory report
    from s3ingest.local.machines import RECONCILE_FANOUT
    from s3ingest_fn.services.reconcile import ReconcileRequest

    rt = LocalRuntime(emulator, versioning=versioning)
    run_lossy_history(rt, ops, 0.5)
    manifest = rt.write_inventory()
    single = rt.reconciler().run(
        ReconcileRequest(source="inventory", manifest_key=manifest, dry_run=True, margin_ms=0)
    )
    # WHEN the stack's fan-out state machine runs over 4 partitions and 3 segments
    try:
        execution = rt.machines.run(
            RECONCILE_FANOUT,
            {"manifest": manifest, "partitions": 4, "segments": 3, "marginSeconds": 0},
        )
        rt.drain()
    finally:
        rt.close()
    # THEN it succeeds and finds the same drift, and its repairs make the ledger equal the bucket
    assert execution.status == "SUCCEEDED", execution.summary()
    summary = execution.output
    assert summary["drift"] == single.drift
    assert summary["ledger_rows"] == single.ledger_rows
    assert rt.compare().differences == []
