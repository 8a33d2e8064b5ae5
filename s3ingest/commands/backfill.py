"""``s3ingest backfill``: start a backfill of pre-existing objects and follow it: start the
backfill state machine, follow its S3 Batch Operations job. Plain functions over injected
clients (the CLI only parses and renders).


The job's progress comes from S3 Control ``DescribeJob`` (``ProgressSummary``:
``TotalNumberOfTasks``, ``NumberOfTasksSucceeded``, ``NumberOfTasksFailed``;
https://docs.aws.amazon.com/AmazonS3/latest/API/API_control_DescribeJob.html). The job id is read
from the execution history: the output of the state machine's ``CreateJob`` task.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, Literal, get_args

from s3ingest.commands.reprocess import cause_text

#: ``--engine`` of ``backfill start --local``: the backfill state machine to run.
LocalEngine = Literal["batch-operations", "distributed-map"]
#: ``--engine`` values of ``backfill start --local`` (the first is the default).
LOCAL_ENGINES: tuple[str, ...] = get_args(LocalEngine)
#: Seconds between two reads of a followed backfill.
POLL_SECONDS = 10.0
#: Execution states a backfill command exits 0 with (an ABORTED one was stopped on purpose, but
#: did not bring every object in).
OK_STATES = ("SUCCEEDED", "RUNNING")


TERMINAL_JOB = ("Complete", "Failed", "Cancelled")
TERMINAL_EXECUTION = ("SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED")


def start_backfill(
    sfn: Any,
    state_machine_arn: str,
    *,
    manifest: str | None = None,
    max_failures: int = 0,
    name: str | None = None,
) -> str:
    """Start one backfill execution; return its ARN.

    Parameters
    ----------
    manifest : str, optional
        Key of an inventory ``manifest.json`` in the stack's inventory bucket; newest by default.
    max_failures : int
        The execution fails when more tasks than this failed.
    name : str, optional
        Execution name (unique per state machine for 90 days); a timestamped one by default.
    """
    payload: dict[str, Any] = {"maxFailures": max_failures}
    if manifest:
        payload["manifest"] = manifest
    resp = sfn.start_execution(
        stateMachineArn=state_machine_arn,
        name=name or time.strftime("backfill-%Y%m%dT%H%M%SZ", time.gmtime()),
        input=json.dumps(payload),
    )
    return str(resp["executionArn"])


def latest_backfill(sfn: Any, state_machine_arn: str) -> str | None:
    """The ARN of the most recent backfill execution, or None when none has run."""
    resp = sfn.list_executions(stateMachineArn=state_machine_arn, maxResults=1)
    executions = resp.get("executions", [])
    return str(executions[0]["executionArn"]) if executions else None


def job_id_of(sfn: Any, execution_arn: str) -> str | None:
    """The Batch Operations job id the execution created (None before CreateJob ran)."""
    pages = sfn.get_paginator("get_execution_history").paginate(
        executionArn=execution_arn, reverseOrder=True
    )
    for page in pages:
        for event in page.get("events", []):
            details = event.get("taskSucceededEventDetails") or {}
            if (
                details.get("resourceType") == "aws-sdk:s3control"
                and details.get("resource") == "createJob"
            ):
                return str(json.loads(details["output"])["JobId"])
    return None


def backfill_status(sfn: Any, s3control: Any, execution_arn: str) -> dict[str, Any]:
    """The execution's status and, once created, its job's progress.

    Returns
    -------
    dict
        ``{"execution", "status", "jobId", "jobStatus", "total", "succeeded", "failed",
        "report", "output"}`` (job fields None before the job exists), with ``"error"`` and
        ``"cause"`` (one line) when the execution ended without succeeding; the
        ``distributed-map`` engine's adds ``effects_pending`` (keys recorded while a processor
        failed after their rows; a job's are its ``backfill_effects_pending`` metric).
    """
    desc = sfn.describe_execution(executionArn=execution_arn)
    out: dict[str, Any] = {
        "execution": execution_arn,
        "status": desc["status"],
        "jobId": None,
        "jobStatus": None,
        "total": None,
        "succeeded": None,
        "failed": None,
        "report": None,
        "output": json.loads(desc["output"]) if desc.get("output") else None,
    }
    if desc["status"] in TERMINAL_EXECUTION and desc["status"] != "SUCCEEDED":
        out.update(error=desc.get("error"), cause=cause_text(desc.get("cause")))
    job_id = job_id_of(sfn, execution_arn)
    if job_id:
        account = execution_arn.split(":")[4]
        job = s3control.describe_job(AccountId=account, JobId=job_id)["Job"]
        progress = job.get("ProgressSummary", {})
        report = job.get("Report", {})
        out.update(
            jobId=job_id,
            jobStatus=job.get("Status"),
            total=progress.get("TotalNumberOfTasks"),
            succeeded=progress.get("NumberOfTasksSucceeded"),
            failed=progress.get("NumberOfTasksFailed"),
            report=f"{report.get('Bucket', '')}/{report.get('Prefix', '')}/job-{job_id}/"
            if report.get("Enabled")
            else None,
        )
    elif isinstance(out["output"], dict):  # the distributed-map engine reports its totals
        out.update({k: out["output"].get(k) for k in ("total", "succeeded", "failed")})
        # rows written while a processor failed after them (succeeded; docs/backfill.md)
        outcomes = out["output"].get("outcomes") or {}
        out["effects_pending"] = int(outcomes.get("effects_pending", 0))
    return out


def follow_backfill(
    sfn: Any,
    s3control: Any,
    execution: str,
    *,
    watch: bool,
    on_status: Callable[[dict[str, Any]], None] | None = None,
    poll_seconds: float = POLL_SECONDS,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """The execution's status and its Batch Operations job's progress
    (:func:`backfill_status`); with ``watch``, read again every
    ``poll_seconds`` until the execution ends. ``on_status`` gets every reading."""
    while True:
        status = backfill_status(sfn, s3control, execution)
        if on_status:
            on_status(status)
        if not watch or status["status"] in TERMINAL_EXECUTION:
            return status
        sleep(poll_seconds)
