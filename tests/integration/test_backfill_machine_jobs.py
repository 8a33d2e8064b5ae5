"""The stack's batch-operations backfill machine, executed end to end on the emulator: moto's
executor runs the synthesized definition, its S3 Control CreateJob/DescribeJob answered by the
emulated Batch Operations jobs (s3ingest.local.emulator.s3control_jobs), whose tasks invoke the real
backfill function in the in-process Lambda service (CONTRACT C13)."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from s3ingest.local.emulator.s3control_jobs import BatchOperations
from s3ingest.local.emulator.server import ACCOUNT, Emulator
from s3ingest.local.stack.runtime import LocalRuntime
from s3ingest_fn.services.backfill_control import REPORT_PREFIX

pytestmark = [pytest.mark.contract("C13"), pytest.mark.slow]

#: Keys whose inventory and task form differ from the key (form-encoded in the CSV).
KEYS = ("plain", "a b", "c+d", "e%f", "é/ü", "x=y&z")


def _runtime(emu: Emulator, keys: tuple[str, ...] = KEYS) -> LocalRuntime:
    """Objects that existed before the pipeline (no events), the machine as the backfill."""
    rt = LocalRuntime(emu, versioning="Enabled")
    for key in keys:
        rt.faithful.put(key, f"pre {key}")
    rt.faithful.take_pending()
    return rt


def _jobs_of(jobs: BatchOperations, rt: LocalRuntime) -> list[Any]:
    bucket = rt.resources.bucket
    return [j for j in jobs.jobs.values() if j.results and j.results[0].task["s3Bucket"] == bucket]


def test_the_machine_runs_a_job_and_the_ledger_converges(
    emulator: Emulator, jobs: BatchOperations
) -> None:
    rt = _runtime(emulator)
    report = rt.backfill(timeout_seconds=300)
    execution = report["execution"]
    assert execution["status"] == "SUCCEEDED"
    states = execution["states_entered"]
    assert (states["CreateJob"], states["Report"], states["Done"]) == (1, 1, 1)
    assert states["DescribeJob"] == states["WaitForJob"] >= 1
    assert (report["total"], report["succeeded"], report["failed"]) == (6, 6, 0)
    assert report["reportManifest"] == f"{REPORT_PREFIX}/job-{report['jobId']}/manifest.json"
    (job,) = _jobs_of(jobs, rt)
    assert job.job_id == report["jobId"] and job.status == "Complete"
    assert sorted(r.task["s3Key"] for r in job.results) == sorted(
        ["plain", "a+b", "c%2Bd", "e%25f", "%C3%A9/%C3%BC", "x%3Dy%26z"]
    )
    assert rt.compare().differences == []
    assert {r.source for r in rt.ledger_rows()} == {"backfill"}


def test_s3_control_throttling_is_retried(emulator: Emulator, jobs: BatchOperations) -> None:
    rt = _runtime(emulator, ("k 1", "k+2"))
    calls = dict(jobs.calls)
    jobs.throttle("CreateJob", 2)
    jobs.throttle("DescribeJob", 2)
    report = rt.backfill(timeout_seconds=300)
    assert report["execution"]["status"] == "SUCCEEDED"
    assert report["execution"]["states_entered"]["CreateJob"] == 1
    assert jobs.calls["CreateJob"] - calls.get("CreateJob", 0) == 3
    assert len(_jobs_of(jobs, rt)) == 1
    assert rt.compare().differences == []


def test_failures_above_max_failures_fail_the_execution(
    emulator: Emulator, jobs: BatchOperations
) -> None:
    rt = _runtime(emulator, ("k1", "k 2", "k3", "k4"))
    jobs.fail_keys({"k 2", "k3"})
    # within maxFailures: the execution succeeds, with the failures counted
    report = rt.backfill(max_failures=2, timeout_seconds=300)
    assert report["execution"]["status"] == "SUCCEEDED"
    assert (report["succeeded"], report["failed"]) == (2, 2)
    # above it: FAILED by the threshold, after the Report step counted them
    failed = rt.backfill(max_failures=1, timeout_seconds=300)["execution"]
    assert failed["status"] == "FAILED" and failed["error"] == "TooManyFailures"
    assert failed["states_entered"]["Report"] == 1
    assert "Done" not in failed["states_entered"]


def test_a_failed_job_fails_the_execution(emulator: Emulator, jobs: BatchOperations) -> None:
    rt = _runtime(emulator, ("k1", "k2", "k3"))
    jobs.failure_threshold_tasks = 2
    jobs.fail_keys({"k1", "k2", "k3"})
    execution = rt.backfill(max_failures=10, timeout_seconds=300)["execution"]
    assert execution["status"] == "FAILED" and execution["error"] == "BackfillJobFailed"
    assert "Report" not in execution["states_entered"]
    (job,) = _jobs_of(jobs, rt)
    assert job.status == "Failed"


def test_a_redriven_execution_creates_no_second_job(
    emulator: Emulator, jobs: BatchOperations
) -> None:
    # moto 5.2 has no RedriveExecution: a redriven execution keeps its execution id, so its
    # CreateJob sends the same token (the MD5 of the id); that call is made here
    rt = _runtime(emulator, ("k1", "k 2"))
    report = rt.backfill(timeout_seconds=300)
    (job,) = _jobs_of(jobs, rt)
    token = hashlib.md5(report["execution"]["arn"].encode()).hexdigest()
    assert job.request["ClientRequestToken"] == token
    before = (len(jobs.jobs), len(job.results))
    again = emulator.client("s3control").create_job(AccountId=ACCOUNT, **job.request)
    assert again["JobId"] == job.job_id
    assert (len(jobs.jobs), len(job.results)) == before
