"""The reprocess machine (issue 27) on the emulator: the synthesized state machine run by moto's
executor, its three functions in-process (plan, a Distributed Map over ledger Scan segments
with the segment loop, summarize), and the CLI's reading of its progress.

"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from s3ingest.commands import reprocess as reprocess_ops
from s3ingest.local.stack.runtime import LocalRuntime, local_settings
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


def test_an_execution_is_named_as_its_run_and_a_running_run_is_found(
    runtimes: tuple[LocalRuntime, LocalRuntime], monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from s3ingest.commands import reprocess as commands
    from s3ingest.local.machines import REPROCESS
    from s3ingest_fn.services.reprocess import Reprocessor

    with_processor, without = runtimes
    put(without)
    sfn = with_processor.machines.sfn
    arn = with_processor.machines.machine(REPROCESS)
    request = reprocess_ops.request_of("default", run="named", segments=2)
    # GIVEN the plan step held until the test lets it go (the first execution is running)
    planning, go = threading.Event(), threading.Event()
    plan = Reprocessor.plan

    def held_plan(self: Reprocessor, *args: Any, **kwargs: Any) -> Any:
        planning.set()
        assert go.wait(60)
        return plan(self, *args, **kwargs)

    monkeypatch.setattr(Reprocessor, "plan", held_plan)
    # WHEN the run is started by the CLI's call, and again while it runs
    first = commands.start_reprocess(sfn, arn, request)
    assert first.endswith(":named")
    assert planning.wait(60)
    assert reprocess_ops.running_execution(sfn, arn, "named") == first
    with pytest.raises(commands.RunRunning, match="'named' is running now"):
        commands.start_reprocess(sfn, arn, request)
    go.set()
    assert with_processor.machines.wait(first, 120).status == "SUCCEEDED"
    assert reprocess_ops.running_execution(sfn, arn, "named") is None
    again = commands.start_reprocess(sfn, arn, request)
    # THEN the later execution's name is the run's plus the time, and it resumes the run
    assert again.split(":")[-1].startswith("named-") and again != first
    summary = with_processor.machines.wait(again, 120).output
    assert summary is not None and summary["counts"]["run"] == KEYS  # the first run's counts
    assert summary["done"] == 2


def test_a_reprocess_run_keeps_an_approval_and_holds_what_the_policy_holds(emulator: Any) -> None:
    from s3ingest_fn import wiring

    sidecar = {"name": "side", "handler": "s3ingest_examples.sidecar:handler"}
    audit = {
        "name": "audit",
        "handler": "s3ingest_examples.audit:handler",
        "hold": {"prefixes": ["published/"]},
    }
    rt = LocalRuntime(
        emulator, local_settings(processor=None, processors=[sidecar]), versioning="Enabled"
    )
    try:
        rt.bucket().put("published/a.txt", "one")
        rt.flush()
        rt.drain()
        # GIVEN audit added later, with a hold on published/: the run holds the key
        rt.configure([sidecar, audit])
        first = rt.reprocess("audit")
        assert first["counts"]["held"] == 1 and first["counts"]["run"] == 0
        assert [(h["key"], h["processor"]) for h in rt.held()] == [("published/a.txt", "audit")]
        # WHEN an operator approves it (its repair not yet delivered) and a run scans the row
        reviewer = wiring.reviewer(rt.ledger, rt.sqs, rt.resources.queue_url)
        reviewer.decide(
            rt.resources.bucket, "published/a.txt", "approved", "alice", processor="audit"
        )
        second = rt.reprocess("audit")
        rt.drain()
        # THEN the approved change runs, once, and is not held again
        assert second["counts"]["run"] == 1 and second["counts"]["held"] == 0
        assert rt.held() == []
        runs = [e for e in rt.effects if e.processor == "audit"]
        assert len(runs) == 1
        (row,) = [r for r in rt.ledger_rows() if r.key == "published/a.txt"]
        assert [t.action for t in row.trail] == ["approved", "held"]
    finally:
        rt.close()


def test_a_segment_that_fails_for_good_fails_the_run(
    runtimes: tuple[LocalRuntime, LocalRuntime],
) -> None:
    from s3ingest.commands.reprocess import healthy
    from s3ingest.local.machines import REPROCESS

    with_processor, without = runtimes
    put(without)
    with_processor.machines.machine(REPROCESS)  # its functions registered
    (segment,) = [n for n in with_processor.machines.lambdas.functions if "Segment" in n]
    # GIVEN one segment call failing with an error the step does not retry
    with_processor.machines.lambdas.inject(segment, "raise", times=1, error="ValueError")
    # WHEN the run runs
    summary = with_processor.reprocess("default", segments=2, run="fails-once")
    # THEN the Distributed Map fails, as in Step Functions (no failure tolerated), and so does
    # the run; a new execution of the run resumes it
    execution = summary["execution"]
    assert execution["status"] == "FAILED"
    assert execution["error"] == "States.ExceedToleratedFailureThreshold"
    (map_run,) = execution["map_runs"]
    assert map_run["items"]["failed"] == 1
    assert not healthy({"status": execution["status"], "output": None})
    resumed = with_processor.reprocess("default", segments=2, run="fails-once")
    assert resumed["execution"]["status"] == "SUCCEEDED" and resumed["done"] == 2
    assert with_processor.effects_not_current() == []
