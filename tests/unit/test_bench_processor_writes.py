"""Smoke test of ``bench.processor_writes``: a tiny run reports the protocols' exact counts.

The counts are deterministic (single-threaded, one request per protocol step) and come from the
requests each design's DynamoDB client made; the items the run leaves in moto's tables are
checked against them. Timings are not checked. CONTRACT C11: the write that applies a change
claims every processor it concerns, each commit is one more write, and duplicates and stale
events cost the one rejected conditional write.
"""

from __future__ import annotations

import pytest

from bench import processor_writes
from bench.effects_cost import CATEGORIES
from bench.processor_writes import OURS, OURS_EVERY, POWERTOOLS, POWERTOOLS_DUP, Report, Tally
from s3ingest_fn.adapters.dynamo_ledger import write_units

NS = (1, 3)


@pytest.fixture(scope="module")
def report() -> Report:
    # GIVEN 20 deliveries (applied, duplicate and stale) over 6 keys
    # WHEN the bench runs them through the three designs with 1 and with 3 processors
    return processor_writes.run(events=20, seed=11, ns=NS)


def _tally(report: Report, n: int, design: str) -> Tally:
    return report.tallies[n][design]


def _per_event(t: Tally, category: str) -> dict[str, float]:
    return {op: count / t.events[category] for op, count in t.ops(category).items()}


def test_the_run_holds_every_category(report: Report) -> None:
    mix = {c: sum(1 for d in report.deliveries if d.category == c) for c in CATEGORIES}
    assert all(mix.values()), mix
    assert set(report.tallies) == set(NS)


@pytest.mark.contract("C11")
@pytest.mark.parametrize("design", [OURS, OURS_EVERY])
@pytest.mark.parametrize("n", NS)
def test_ours_costs_one_plus_n_writes_per_applied_change(
    report: Report, n: int, design: str
) -> None:
    t = _tally(report, n, design)
    # THEN the applying write (claiming all N) and one commit per processor; no read
    assert _per_event(t, "applied") == {"UpdateItem": 1.0 + n}
    # AND a duplicate or a stale event: the rejected conditional write alone
    assert _per_event(t, "duplicate") == {"UpdateItem": 1.0}
    assert _per_event(t, "stale") == {"UpdateItem": 1.0}
    assert t.rejected["duplicate"] == t.events["duplicate"]
    assert t.rejected["stale"] == t.events["stale"]
    assert {(c, o) for c, o in t.outcomes} == {(c, c) for c in CATEGORIES}
    # AND every processor ran once per applied change, never for a duplicate or a stale event
    assert t.runs == {"applied": n * t.events["applied"]}
    assert set(t.runs_per_change.values()) == {1}
    # AND the rows the writes left: one per key, no idempotency table used
    assert t.ledger_items == len({d.change.key for d in report.deliveries})
    assert t.idempotency_items == 0


@pytest.mark.parametrize("n", NS)
def test_powertools_pays_a_put_and_an_update_per_processor(report: Report, n: int) -> None:
    t = _tally(report, n, POWERTOOLS)
    applied = t.events["applied"]
    # THEN the ledger write, then per processor Powertools' in-progress PutItem and completed
    # UpdateItem: 1 + 2N writes, no read
    assert _per_event(t, "applied") == {"PutItem": float(n), "UpdateItem": 1.0 + n}
    assert _per_event(t, "duplicate") == {"UpdateItem": 1.0}
    assert _per_event(t, "stale") == {"UpdateItem": 1.0}
    assert t.runs == {"applied": n * applied}
    # AND the PutItems were real: one idempotency record per processor per applied change
    assert t.idempotency_items == n * applied
    # AND the crash-safe variant also pays a rejected PutItem per processor per duplicate,
    # without running a processor again
    dup = _tally(report, n, POWERTOOLS_DUP)
    assert _per_event(dup, "duplicate") == {"PutItem": float(n), "UpdateItem": 1.0}
    assert dup.rejected["duplicate"] == (1 + n) * dup.events["duplicate"]
    assert dup.runs == {"applied": n * applied}


@pytest.mark.parametrize("design", [OURS, OURS_EVERY, POWERTOOLS, POWERTOOLS_DUP])
@pytest.mark.parametrize("n", NS)
def test_write_units_are_billed_per_write(report: Report, n: int, design: str) -> None:
    t = _tally(report, n, design)
    # THEN every write, rejected ones included, is billed at least one write unit and at most
    # the units of the largest item written; exactly one each while every item is under 1 KB
    assert t.peak_bytes >= max(t.ledger_bytes, t.idempotency_bytes) > 0
    for c in CATEGORIES:
        writes = sum(k for op, k in t.ops(c).items() if op in ("PutItem", "UpdateItem"))
        assert writes <= t.wru[c] <= writes * write_units(t.peak_bytes), c
        if t.peak_bytes <= 1024:
            assert t.wru[c] == writes, c
