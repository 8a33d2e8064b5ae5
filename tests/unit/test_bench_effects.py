"""Smoke test of ``bench.effects_cost``: a tiny run reports the effect protocol's exact counts.

The counts are deterministic (single-threaded, one request per protocol step), so checking them
exactly is honest; timings are not checked. CONTRACT C5 (one conditional write) and C11 (claim in
the applying write, commit after the effect; nothing for duplicates and stale events).
"""

from __future__ import annotations

import pytest

from bench import effects_cost
from bench.effects_cost import CATEGORIES, Report


@pytest.fixture(scope="module")
def report() -> Report:
    # GIVEN about 40 deliveries (applied, duplicate and stale) and a 3-key crash sub-run
    # WHEN the bench runs them through the four designs
    return effects_cost.run(events=40, seed=11, crash_keys=3)


def _per_event(report: Report, design: str, category: str) -> dict[str, float]:
    t = report.tallies[design]
    n = t.events[category]
    return {op: count / n for op, count in t.ops(category).items()}


def test_the_run_holds_every_category(report: Report) -> None:
    mix = {c: sum(1 for d in report.deliveries if d.category == c) for c in CATEGORIES}
    assert all(mix.values()), mix


@pytest.mark.contract("C5", "C11")
def test_s3ingest_costs_two_writes_applied_and_one_otherwise(report: Report) -> None:
    # THEN A: apply+claim and commit (2 UpdateItem) when applied, the rejected conditional write
    # alone otherwise, and never a read
    assert _per_event(report, "A", "applied") == {"UpdateItem": 2.0}
    assert _per_event(report, "A", "duplicate") == {"UpdateItem": 1.0}
    assert _per_event(report, "A", "stale") == {"UpdateItem": 1.0}
    a = report.tallies["A"]
    assert {(c, o) for c, o in a.outcomes} == {(c, c) for c in CATEGORIES}
    assert a.hook_runs == {"applied": a.events["applied"]}
    assert report.wrong_keys["A"] == 0


def test_powertools_around_the_hook_adds_a_put_and_an_update(report: Report) -> None:
    # THEN B: the ledger write, then Powertools' in-progress PutItem and completed UpdateItem
    assert _per_event(report, "B", "applied") == {"PutItem": 1.0, "UpdateItem": 2.0}
    assert _per_event(report, "B", "duplicate") == {"UpdateItem": 1.0}
    assert _per_event(report, "B", "stale") == {"UpdateItem": 1.0}
    # and B+dup pays a rejected PutItem per duplicate
    assert _per_event(report, "B+dup", "duplicate") == {"PutItem": 1.0, "UpdateItem": 1.0}


def test_without_the_ledger_stale_events_run_the_hook(report: Report) -> None:
    n = report.tallies["N"]
    assert _per_event(report, "N", "applied") == {"PutItem": 1.0, "UpdateItem": 1.0}
    assert _per_event(report, "N", "duplicate") == {"PutItem": 1.0}
    # first deliveries of an older change: PutItem + UpdateItem and a hook run; redeliveries of
    # one: the rejected PutItem only
    assert n.ops("stale") == {"PutItem": n.events["stale"], "UpdateItem": n.hook_runs["stale"]}
    assert n.hook_runs["stale"] > 0
    assert n.older_after_newer == n.hook_runs["stale"]


@pytest.mark.contract("C11")
def test_crash_before_the_effect(report: Report) -> None:
    # THEN A re-runs the effect on the retry (claim, rejected duplicate, reclaim, commit) and B,
    # whose retry is a duplicate, never runs it
    assert report.crash["A"] == {"completed": 3, "keys": 3, "writes": 4.0, "reads": 0.0}
    assert report.crash["B"]["completed"] == 0
    assert report.crash["B+dup"] == {"completed": 3, "keys": 3, "writes": 5.0, "reads": 0.0}
