"""The reprocess machine (issue 27) on the emulator: the synthesized state machine run by moto's
executor, its three functions in-process (plan, a Distributed Map over ledger Scan segments
with the segment loop, summarize), and the CLI's reading of its progress.

"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from s3ingest import reprocess_ops
from s3ingest.local.runtime import LocalRuntime, local_settings
from s3ingest.settings import Settings

KEYS = 12


@pytest.fixture
def runtimes(emulator: Any) -> Iterator[tuple[LocalRuntime, LocalRuntime]]:
    """The same deployment twice: ``with_processor`` (the example processor, ``default``) and
    ``without`` (none configured: before the processor was added, or after it was removed)."""
    with_processor = LocalRuntime(emulator, local_settings(), versioning="Enabled")
    without = LocalRuntime(emulator, Settings(), resources=with_processor.resources)
    yield with_processor, without
    without.close()
    with_processor.close()


def put(rt: LocalRuntime, n: int = KEYS) -> None:
    """``n`` keys through the live path (events, queue, ingest function)."""
    for i in range(n):
        rt.faithful.put(f"data/k{i:03d}", f"body {i}")
    rt.flush()
    rt.drain()


def test_a_dry_run_removal_counts_the_rows_a_removed_processor_left(
    runtimes: tuple[LocalRuntime, LocalRuntime],
) -> None:
    with_processor, without = runtimes
    # GIVEN rows whose effects the example processor ran, and the processor since removed
    put(with_processor)
    assert all(r.effect_of("default") is not None for r in with_processor.ledger_rows())
    # WHEN a dry run of --remove runs on the machine
    summary = without.reprocess("default", remove=True, dry_run=True, segments=4)
    # THEN every segment ran and the rows are counted, nothing written
    assert summary["execution"]["status"] == "SUCCEEDED", summary["execution"]
    assert summary["processor"] == "default" and summary["remove"] and summary["dry_run"]
    assert summary["segments"] == summary["done"] == 4
    assert summary["counts"]["scanned"] == KEYS
    assert summary["counts"]["behind"] == KEYS
    assert summary["counts"]["removed"] == summary["counts"]["run"] == 0
    assert summary["requests"]["write"] == 0
    assert summary["requests"]["scan"] == summary["counts"]["pages"] >= 4
    assert summary["estimated_cost_usd"] > 0
    (map_run,) = summary["execution"]["map_runs"]
    assert map_run["items"]["total"] == map_run["items"]["succeeded"] == 4
    assert all(r.effect_of("default") is not None for r in without.ledger_rows())


def test_the_same_run_resumes_and_skips_finished_segments(
    runtimes: tuple[LocalRuntime, LocalRuntime],
) -> None:
    with_processor, without = runtimes
    put(with_processor)
    first = without.reprocess("default", remove=True, dry_run=True, segments=3, run="resume-me")
    # WHEN the same run is started again
    again = without.reprocess("default", remove=True, dry_run=True, segments=3, run="resume-me")
    # THEN its plan leaves every segment out (all done) and the totals are the first's
    assert again["execution"]["status"] == "SUCCEEDED"
    assert again["counts"] == first["counts"] and again["done"] == 3
    sfn = without.machines.sfn
    plan = reprocess_ops.plan_of(sfn, again["execution"]["arn"])
    assert plan is not None and plan["segments"] == [] and plan["done"] == plan["total"] == 3
    # and the CLI's reading of both executions: all segments done, the summary as output
    for execution in (first, again):
        status = reprocess_ops.reprocess_status(sfn, execution["execution"]["arn"])
        assert status["status"] == "SUCCEEDED" and status["run"] == "resume-me"
        assert status["total"] == status["done"] == 3
        assert status["output"]["counts"] == first["counts"]


def test_a_prefix_narrows_the_scan(runtimes: tuple[LocalRuntime, LocalRuntime]) -> None:
    with_processor, without = runtimes
    put(with_processor)
    summary = without.reprocess(
        "default",
        bucket=without.resources.bucket,
        prefix="data/k00",
        remove=True,
        dry_run=True,
        segments=2,
    )
    assert summary["execution"]["status"] == "SUCCEEDED"
    assert summary["counts"]["behind"] == 10  # data/k000 .. data/k009


def test_a_processor_not_configured_fails_the_execution(
    runtimes: tuple[LocalRuntime, LocalRuntime],
) -> None:
    _, without = runtimes
    summary = without.reprocess("default", dry_run=True, segments=2)
    execution = summary["execution"]
    assert execution["status"] == "FAILED"
    assert "not configured" in str(execution["cause"])
    assert "counts" not in summary


def test_a_dry_run_counts_the_keys_behind_and_writes_nothing(
    runtimes: tuple[LocalRuntime, LocalRuntime],
) -> None:
    with_processor, without = runtimes
    # GIVEN keys ingested before the processor was added (no effect state for it)
    put(without)
    # WHEN a dry run of the processor runs
    summary = with_processor.reprocess("default", dry_run=True, segments=4)
    # THEN every key is behind, none run
    assert summary["execution"]["status"] == "SUCCEEDED", summary["execution"]
    assert summary["counts"]["scanned"] == summary["counts"]["behind"] == KEYS
    assert summary["counts"]["run"] == summary["requests"]["write"] == 0
    assert all(r.effect_of("default") is None for r in with_processor.ledger_rows())


def test_a_run_brings_every_key_up_to_date_once(
    runtimes: tuple[LocalRuntime, LocalRuntime],
) -> None:
    with_processor, without = runtimes
    put(without)
    summary = with_processor.reprocess("default", segments=4)
    assert summary["execution"]["status"] == "SUCCEEDED", summary["execution"]
    assert summary["counts"]["run"] == KEYS and summary["counts"]["failed"] == 0
    assert with_processor.check_sidecars() == []
    # a second run finds nothing behind
    again = with_processor.reprocess("default", segments=4)
    assert again["counts"]["behind"] == again["counts"]["run"] == 0
