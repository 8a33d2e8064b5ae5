"""CONTRACT C13: backfill of pre-existing objects, overlapping live traffic, run twice."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from s3ingest.local.emulator.chaos import Chaos
from s3ingest.local.stack.runtime import LocalRuntime
from tests.integration.test_convergence import Monotonic

pytestmark = pytest.mark.contract("C13")

KEYS = ("old-1", "old 2+x", "shared/é", "new-1")


@pytest.mark.contract("C15")
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pre=st.lists(st.sampled_from(KEYS), min_size=1, max_size=6),
    live=st.lists(st.tuples(st.sampled_from(["put", "delete"]), st.sampled_from(KEYS)), max_size=8),
    seed=st.integers(0, 2**16),
    versioning=st.sampled_from(["Enabled", None]),
)
def test_backfill_overlapping_live_traffic_converges(
    emulator: Any, pre: list[str], live: list[tuple[str, str]], seed: int, versioning: str | None
) -> None:
    # GIVEN objects that existed before the pipeline (their events never reach it)
    rt = LocalRuntime(emulator, versioning=versioning)
    monitor = Monotonic()
    rt.after_batch = monitor
    for key in pre:
        rt.faithful.put(key, f"pre {key}")
    rt.faithful.take_pending()
    manifest = rt.write_inventory()
    rng = random.Random(seed)
    pending_live = list(live)

    def live_traffic(_index: int) -> None:
        # between backfill tasks, some live operations happen and are delivered (reordered,
        # duplicated)
        for _ in range(rng.randint(0, 2)):
            if not pending_live:
                return
            op, key = pending_live.pop(0)
            rt.faithful.put(key, f"live {rng.random()}") if op == "put" else rt.faithful.delete(key)
        rt.flush(Chaos(seed=rng.randint(0, 999), duplicate=0.3, reorder=True))
        rt.drain()

    # WHEN the backfill job runs with live traffic interleaved, then the rest of the traffic
    report = rt.drive_backfill_job(manifest, between=live_traffic)
    while pending_live:
        live_traffic(0)
    rt.flush(Chaos(seed=seed, duplicate=0.3, reorder=True))
    rt.drain()
    # THEN every task succeeded and the ledger equals the bucket, with no regression on the way
    assert report["failed"] == 0 and report["succeeded"] == report["total"]
    assert rt.compare().differences == []
    assert monitor.violations == []


def test_backfill_twice_changes_nothing(emulator: Any) -> None:
    rt = LocalRuntime(emulator, versioning="Enabled")
    for i in range(12):
        rt.faithful.put(f"pre/{i} +", str(i))
    rt.faithful.delete("pre/3 +")
    rt.faithful.take_pending()
    first = rt.drive_backfill_job()
    rows = rt.ledger_rows()
    second = rt.drive_backfill_job()
    assert first["result_strings"] == {"applied": 11, "ignored": 2}
    assert second["result_strings"] == {"duplicate": 11, "ignored": 2}
    assert rt.ledger_rows() == rows  # not even updated_at or rev moved
    assert {r.source for r in rows} == {"backfill"}
    assert rt.compare().converged


@pytest.mark.contract("C7")
def test_backfill_never_overrides_a_newer_live_event(emulator: Any) -> None:
    # GIVEN an inventory taken before a live overwrite whose event was already applied
    rt = LocalRuntime(emulator, versioning="Enabled")
    rt.faithful.put("k", "old")
    rt.faithful.take_pending()
    manifest = rt.write_inventory()
    newest = rt.faithful.put("k", "new").version_id
    rt.flush()
    rt.drain()
    # WHEN the stale inventory is backfilled
    report = rt.drive_backfill_job(manifest)
    # THEN the task succeeds without touching the newer row
    assert report["result_strings"] == {"duplicate": 1}
    (row,) = rt.ledger_rows()
    assert (row.version_id, row.source) == (newest, "live")
