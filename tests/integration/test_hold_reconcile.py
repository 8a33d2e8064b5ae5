"""Held effects in a reconciliation (``docs/hold.md``): counted (``held_effects``) with the
oldest held change's age when the run read the ledger (``held_oldest_seconds``), never drift and
never repaired, by each source (inventory, listing) and by the fan-out's ledger shards; the
reconcile handler emits both as metrics.

The ledger, the hold policies, the Scan's projection and the reconciliation are the real code
on the emulator (:class:`~tests.integration.test_hold.HoldRig`: ``audit`` and ``mirror`` hold
deletes, ``notify`` holds anything under ``in/``).
"""

from __future__ import annotations

from typing import Any

import pytest

from s3ingest_fn.core.row import APPROVED
from s3ingest_fn.handlers.reconcile import emit_drift_metrics
from s3ingest_fn.services.fanout import FanOut
from s3ingest_fn.services.reconcile import INVENTORY, LISTING, Reconciler, ReconcileRequest
from s3ingest_fn.services.review import held_changes
from tests.integration.test_hold import HoldRig
from tests.integration.test_processors import _changes

pytestmark = pytest.mark.contract("C12")

#: How long after the first hold the reconciliation runs, seconds.
LATER_S = 7_200


def _reconciler(rig: HoldRig, now_ms: int) -> Reconciler:
    """The runtime's reconciler (every processor's effects read) at ``now_ms``."""
    return rig.rt.reconciler(clock=lambda: now_ms / 1000)


def _held_rig(emulator: Any) -> tuple[HoldRig, int]:
    """Three held effects: ``in/b.csv``'s creation (``notify``), then, 10 minutes later,
    ``a.csv``'s delete (``audit`` and ``mirror``); returns the rig and the first hold's time."""
    rig = HoldRig(emulator, "Enabled")
    rig.put("a.csv", b"one")
    first = rig.clock()
    rig.put("in/b.csv", b"two")
    rig.deliver(_changes(rig.rt))
    rig.clock.advance(600_000)
    rig.rt.faithful.delete("a.csv")
    rig.deliver(_changes(rig.rt))
    held = sorted((h.key, h.processor, h.held_at) for h in rig.note_held())
    assert held == [
        ("a.csv", "audit", first + 600_000),
        ("a.csv", "mirror", first + 600_000),
        ("in/b.csv", "notify", first),
    ]
    return rig, first


@pytest.mark.parametrize("source", [INVENTORY, LISTING])
def test_held_effects_are_counted_with_the_oldest_age_and_never_repaired(
    emulator: Any, source: str
) -> None:
    # GIVEN three held effects, the oldest held LATER_S seconds before the run
    rig, first = _held_rig(emulator)
    manifest = rig.rt.write_inventory() if source == INVENTORY else None
    # WHEN reconciliation runs
    report = _reconciler(rig, first + LATER_S * 1000).run(
        ReconcileRequest(source=source, manifest_key=manifest, margin_ms=0)
    )
    # THEN it counts them, with the oldest one's age, and repairs nothing
    assert (report.held_effects, report.held_oldest_seconds) == (3, LATER_S)
    assert (report.drift_total, report.pending_effects, report.effects_behind) == (0, 0, 0)
    assert report.repairs_queued == 0
    assert report.as_dict()["held_effects"] == 3


def test_an_approved_change_is_no_longer_counted(emulator: Any) -> None:
    # GIVEN the held delete of a.csv approved for both processors (the creation stays held)
    rig, first = _held_rig(emulator)
    bucket = rig.rt.resources.bucket
    done = rig.reviewer.decide(bucket, "a.csv", APPROVED, "curator")
    assert {d["processor"] for d in done} == {"audit", "mirror"}
    # WHEN reconciliation runs
    report = _reconciler(rig, first + LATER_S * 1000).run(
        ReconcileRequest(source=LISTING, margin_ms=0)
    )
    # THEN only the creation under in/ is held
    assert (report.held_effects, report.held_oldest_seconds) == (1, LATER_S)
    assert [h.processor for row in rig.rt.ledger_rows() for h in held_changes(row)] == ["notify"]


def test_nothing_held_reports_zero(emulator: Any) -> None:
    rig = HoldRig(emulator, "Enabled")
    rig.put("a.csv", b"one")
    rig.deliver(_changes(rig.rt))
    report = _reconciler(rig, rig.clock() + 60_000).run(
        ReconcileRequest(source=LISTING, margin_ms=0)
    )
    assert report.ledger_rows == 1
    assert (report.held_effects, report.held_oldest_seconds) == (0, 0)


def test_the_fan_out_counts_held_effects_in_its_ledger_shards(emulator: Any) -> None:
    # GIVEN three held effects and the fan-out's steps over two Scan segments
    rig, first = _held_rig(emulator)
    fan_out = FanOut(_reconciler(rig, first + LATER_S * 1000))
    shards = [
        fan_out.shard_ledger(
            {"runId": "run", "segment": s, "segments": 2, "partitions": 2, "prefix": ""}
        )
        for s in range(2)
    ]
    # THEN the shards count them and the summary adds them up (the age: the largest)
    assert sum(s["heldEffects"] for s in shards) == 3
    assert max(s["heldOldestSeconds"] for s in shards) == LATER_S
    summary = FanOut.summarize({"plan": {"bucket": "b"}, "ledger": shards, "partitions": []})
    assert (summary["held_effects"], summary["held_oldest_seconds"]) == (3, LATER_S)
    # ... a prefix the held keys are not under counts none
    under = fan_out.shard_ledger(
        {"runId": "run2", "segment": 0, "segments": 1, "partitions": 1, "prefix": "zz/"}
    )
    assert under["heldEffects"] == 0 and under["heldOldestSeconds"] == 0


class _Sink:
    """A Powertools ``Metrics`` stand-in recording each metric."""

    def __init__(self) -> None:
        self.metrics: dict[str, tuple[str, float]] = {}

    def add_metric(self, name: str, unit: Any, value: float) -> None:
        self.metrics[name] = (getattr(unit, "value", str(unit)), value)


def test_the_handler_emits_the_held_metrics() -> None:
    sink = _Sink()
    emit_drift_metrics(
        sink,  # type: ignore[arg-type]
        {"missing": 0, "deleted_but_live": 0, "content_mismatch": 0, "sequencer_contradicted": 0},
        0,
        held_effects=3,
        held_oldest_seconds=LATER_S,
    )
    assert sink.metrics["held_effects"] == ("Count", 3)
    assert sink.metrics["held_oldest_seconds"] == ("Seconds", LATER_S)
    # held effects are not drift
    assert sink.metrics["drift_total"] == ("Count", 0)
