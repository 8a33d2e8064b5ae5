"""The stack's state machines executed end to end on the emulator (moto's executor, the
functions in-process through the local Lambda service): the Distributed Map backfill (CONTRACT
C13) and the fan-out reconciliation (CONTRACT C12) converge the ledger with keys that need
encoding; a task whose invocation fails once is retried by the machine's own retrier; failures
above ``maxFailures`` end the backfill ``FAILED``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from s3ingest.cli import app
from s3ingest.local.machines import (
    BACKFILL_BATCH_OPERATIONS,
    BACKFILL_DISTRIBUTED_MAP,
    RECONCILE_FANOUT,
)
from s3ingest.local.stack.runtime import DISTRIBUTED_MAP, LocalRuntime, local_settings
from s3ingest_fn.core.decide import IngestService
from s3ingest_fn.core.model import TransientError

#: Keys that need encoding in events, inventory CSVs and URLs.
HOSTILE = ("a b.txt", "x+y=z", "100%/done", "café/naïve résumé.pdf", "日本語/ファイル.txt")
CONTROL = "BackfillControlFunction"
FANOUT = "ReconcileFanOutFunction"


@pytest.fixture
def runtime(emulator: Any) -> Iterator[LocalRuntime]:
    rt = LocalRuntime(emulator, local_settings(), versioning="Enabled")
    yield rt
    rt.close()


def _predating(rt: LocalRuntime, keys: tuple[str, ...] = HOSTILE) -> None:
    """Objects whose events never reached the pipeline."""
    for key in keys:
        rt.faithful.put(key, f"before {key}")
    rt.faithful.take_pending()


@pytest.mark.slow
@pytest.mark.contract("C13", "C15")
def test_distributed_map_backfill_executes_and_converges(runtime: LocalRuntime) -> None:
    # GIVEN objects with hostile keys the ledger never heard of, one overwritten and one deleted
    # after the inventory report (live traffic the backfill meets)
    _predating(runtime)
    manifest = runtime.write_inventory()
    runtime.faithful.put(HOSTILE[0], "live")
    runtime.faithful.delete(HOSTILE[1])
    runtime.flush()
    runtime.drain()
    # WHEN the Distributed Map backfill machine runs over the report
    report = runtime.backfill(manifest, engine=DISTRIBUTED_MAP)
    # THEN it succeeded through every state of the engine, one child per data file
    execution = report["execution"]
    assert execution["status"] == "SUCCEEDED", execution
    assert list(execution["states_entered"]) == [
        "Defaults",
        "ManifestGiven",
        "PrepareManifest",
        "BackfillFiles",
        "Summarize",
        "FailureThreshold",
        "Output",
        "Done",
    ]
    (map_run,) = execution["map_runs"]
    assert map_run["status"] == "SUCCEEDED"
    assert map_run["executions"]["succeeded"] == map_run["executions"]["total"] >= 1
    assert (report["total"], report["failed"]) == (len(HOSTILE), 0)
    # AND the ledger equals the bucket
    assert runtime.compare().differences == []


@pytest.mark.slow
@pytest.mark.contract("C12", "C15")
def test_fanout_reconciliation_executes_and_converges(runtime: LocalRuntime) -> None:
    # GIVEN a ledger that missed creates, a delete and an overwrite of hostile keys
    runtime.faithful.put(HOSTILE[2], "seen")
    runtime.faithful.put(HOSTILE[3], "seen")
    runtime.flush()
    runtime.drain()
    _predating(runtime, (HOSTILE[0], HOSTILE[1], HOSTILE[4]))
    runtime.faithful.delete(HOSTILE[2])
    runtime.faithful.put(HOSTILE[3], "changed")
    runtime.faithful.take_pending()  # these events are lost
    assert runtime.compare().differences
    # WHEN the fan-out machine reconciles (3 partitions, 2 ledger segments)
    summary = runtime.reconcile_fan_out(partitions=3, segments=2)
    # THEN every shard and partition ran, and the repairs converged the ledger
    execution = summary["execution"]
    assert execution["status"] == "SUCCEEDED", execution
    entered = execution["states_entered"]
    assert (entered["ShardLedgerSegment"], entered["DiffPartition"]) == (2, 3)
    assert execution["map_runs"][0]["status"] == "SUCCEEDED"
    assert summary["drift"] == {
        "missing": 3,
        "deleted_but_live": 1,
        "content_mismatch": 1,
        "sequencer_contradicted": 0,
    }
    assert summary["repairs_queued"] == 5
    assert runtime.compare().differences == []
    # AND a second run finds nothing
    assert runtime.reconcile_fan_out(partitions=3, segments=2)["drift_total"] == 0


@pytest.mark.slow
@pytest.mark.contract("C13")
@pytest.mark.parametrize("kind", ["service", "throttle"])
def test_an_invocation_failing_once_is_retried_by_the_machine(
    runtime: LocalRuntime, kind: str
) -> None:
    # GIVEN the control function's next invocation (PrepareManifest) fails at the Lambda API
    _predating(runtime)
    manifest = runtime.write_inventory()
    runtime.machines.machine(BACKFILL_DISTRIBUTED_MAP)  # registers the functions
    runtime.machines.lambdas.inject(CONTROL, kind)
    # WHEN the backfill runs
    report = runtime.backfill(manifest, engine=DISTRIBUTED_MAP)
    # THEN the task's retrier (Lambda.ServiceException, Lambda.TooManyRequestsException) ran it
    # again within the same state, and the execution succeeded
    assert report["execution"]["status"] == "SUCCEEDED", report["execution"]
    assert report["execution"]["states_entered"]["PrepareManifest"] == 1
    outcomes = [i.outcome for i in runtime.machines.lambdas.invocations]
    assert outcomes[:2] == [kind, "ok"]
    assert runtime.compare().differences == []


@pytest.mark.slow
@pytest.mark.contract("C12")
def test_a_fanout_step_failing_once_is_retried(runtime: LocalRuntime) -> None:
    _predating(runtime, HOSTILE[:2])
    runtime.machines.machine(RECONCILE_FANOUT)
    runtime.machines.lambdas.inject(FANOUT, "service")
    summary = runtime.reconcile_fan_out(partitions=2, segments=1)
    assert summary["execution"]["status"] == "SUCCEEDED"
    assert [i.outcome for i in runtime.machines.lambdas.invocations][:2] == ["service", "ok"]
    assert runtime.compare().differences == []


@pytest.mark.slow
@pytest.mark.contract("C13")
def test_a_function_error_is_not_retried_and_fails_the_execution(runtime: LocalRuntime) -> None:
    # GIVEN the control function raises (an Unhandled function error no retrier names)
    _predating(runtime, HOSTILE[:1])
    manifest = runtime.write_inventory()
    runtime.machines.machine(BACKFILL_DISTRIBUTED_MAP)
    runtime.machines.lambdas.inject(CONTROL, "raise", error="InjectedFailure")
    # WHEN the backfill runs THEN it fails at PrepareManifest with the function's errorType
    report = runtime.backfill(manifest, engine=DISTRIBUTED_MAP)
    execution = report["execution"]
    assert execution["status"] == "FAILED"
    assert execution["error"] == "InjectedFailure"
    assert "BackfillFiles" not in execution["states_entered"]
    assert [i.outcome for i in runtime.machines.lambdas.invocations] == ["error"]


@pytest.mark.slow
@pytest.mark.contract("C13")
@pytest.mark.parametrize(("max_failures", "status"), [(0, "FAILED"), (2, "SUCCEEDED")])
def test_failures_above_max_failures_fail_the_backfill(
    runtime: LocalRuntime, monkeypatch: pytest.MonkeyPatch, max_failures: int, status: str
) -> None:
    # GIVEN two keys whose observation keeps failing temporarily (throttled, every attempt)
    _predating(runtime)
    manifest = runtime.write_inventory()
    stuck = {HOSTILE[0], HOSTILE[3]}
    handle = IngestService.handle

    def throttled(self: IngestService, change: Any) -> Any:
        if change.key in stuck:
            raise TransientError("throttled")
        return handle(self, change)

    monkeypatch.setattr(IngestService, "handle", throttled)
    # WHEN the backfill runs with maxFailures
    report = runtime.backfill(manifest, engine=DISTRIBUTED_MAP, max_failures=max_failures)
    # THEN each file ran its 3 attempts, the failures were counted, and the threshold decided
    execution = report["execution"]
    assert execution["status"] == status, execution
    backfill_file_runs = [i for i in runtime.machines.lambdas.invocations if i.function == CONTROL]
    assert len(backfill_file_runs) == 1 + 3 * execution["map_runs"][0]["items"]["total"] + 1
    assert execution["states_entered"]["FailureThreshold"] == 1
    if status == "FAILED":
        assert execution["error"] == "TooManyFailures"
        assert "Output" not in execution["states_entered"]
    else:
        assert (report["failed"], report["succeeded"]) == (2, len(HOSTILE) - 2)
    # the other keys were backfilled either way
    assert sorted(runtime.compare().differences) == sorted(
        f"missing in ledger: {key!r}" for key in stuck
    )


@pytest.mark.slow
@pytest.mark.contract("C13")
def test_the_batch_operations_machine_reaches_s3_control(runtime: LocalRuntime) -> None:
    # GIVEN the Batch Operations backfill machine as synthesized, its placeholders filled
    _predating(runtime, HOSTILE[:1])
    manifest = runtime.write_inventory()
    # WHEN it runs (CreateJob through the executor's aws-sdk integration)
    execution = runtime.backfill_execution(BACKFILL_BATCH_OPERATIONS, manifest)
    # THEN it prepared the manifest, ran the job through the emulator's S3 Control, read its
    # completion report and succeeded
    assert {"PrepareManifest", "CreateJob", "DescribeJob", "Report", "Done"} <= set(
        execution.states_entered
    ), execution.summary()
    assert execution.status == "SUCCEEDED", execution.summary()
    assert execution.output is not None and execution.output["failed"] == 0


@pytest.mark.slow
@pytest.mark.contract("C13")
def test_cli_backfill_start_local_distributed_map_reports_the_execution() -> None:
    result = CliRunner().invoke(
        app, ["backfill", "start", "--local", "--engine", "distributed-map", "--json"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["execution"]["status"] == "SUCCEEDED"
    assert set(report["execution"]) >= {"arn", "status", "states_entered", "map_runs"}
    assert report["converged"] is True
    assert report["failed"] == 0 and report["total"] > 0


@pytest.mark.slow
@pytest.mark.contract("C12")
def test_cli_reconcile_local_fan_out_reports_the_execution() -> None:
    result = CliRunner().invoke(app, ["reconcile", "--local", "--fan-out", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["execution"]["status"] == "SUCCEEDED"
    assert report["execution"]["map_runs"][0]["status"] == "SUCCEEDED"
    assert report["converged"] is True


def test_cli_engine_and_fan_out_are_local_only() -> None:
    runner = CliRunner()
    backfill = runner.invoke(app, ["backfill", "start", "--stack", "X", "--engine", "glue"])
    assert backfill.exit_code == 2
    reconcile = runner.invoke(app, ["reconcile", "--stack", "X", "--fan-out"])
    assert reconcile.exit_code == 2
    listing = runner.invoke(app, ["reconcile", "--local", "--source", "listing", "--fan-out"])
    assert listing.exit_code == 2
