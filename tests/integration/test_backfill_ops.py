"""Backfill against a deployed stack, proven against stubbed AWS responses (moto implements no
S3 Batch Operations jobs): start the state machine, find the job, report its progress."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

from s3ingest.cli.render import emit_backfill
from s3ingest.commands.backfill import backfill_status, start_backfill
from s3ingest.commands.backfill import latest_backfill as latest_execution

if TYPE_CHECKING:
    from mypy_boto3_s3control import S3ControlClient
    from mypy_boto3_stepfunctions import SFNClient

ARN = "arn:aws:states:us-east-1:123456789012:stateMachine:Backfill"
EXEC = "arn:aws:states:us-east-1:123456789012:execution:Backfill:backfill-1"
NOW = datetime(2026, 11, 30, tzinfo=UTC)


def clients() -> tuple[SFNClient, S3ControlClient]:
    kw: dict[str, Any] = {
        "region_name": "us-east-1",
        "aws_access_key_id": "x",
        "aws_secret_access_key": "x",
    }
    return boto3.client("stepfunctions", **kw), boto3.client("s3control", **kw)


def test_start_passes_manifest_and_threshold() -> None:
    sfn, _ = clients()
    with Stubber(sfn) as stub:
        stub.add_response(
            "start_execution",
            {"executionArn": EXEC, "startDate": NOW},
            {
                "stateMachineArn": ARN,
                "name": "backfill-1",
                "input": json.dumps({"maxFailures": 5, "manifest": "inventory/b/m.json"}),
            },
        )
        assert (
            start_backfill(
                sfn, ARN, manifest="inventory/b/m.json", max_failures=5, name="backfill-1"
            )
            == EXEC
        )
    with Stubber(sfn) as stub:
        stub.add_response(
            "start_execution",
            {"executionArn": EXEC, "startDate": NOW},
            {"stateMachineArn": ARN, "name": ANY, "input": json.dumps({"maxFailures": 0})},
        )
        start_backfill(sfn, ARN)


def test_status_reads_the_job_created_by_the_execution() -> None:
    sfn, s3control = clients()
    with Stubber(sfn) as s, Stubber(s3control) as c:
        s.add_response(
            "describe_execution",
            {
                "executionArn": EXEC,
                "stateMachineArn": ARN,
                "status": "RUNNING",
                "startDate": NOW,
                "input": "{}",
            },
            {"executionArn": EXEC},
        )
        s.add_response(
            "get_execution_history",
            {
                "events": [
                    {"timestamp": NOW, "type": "TaskStateEntered", "id": 3},
                    {
                        "timestamp": NOW,
                        "type": "TaskSucceeded",
                        "id": 2,
                        "taskSucceededEventDetails": {
                            "resourceType": "aws-sdk:s3control",
                            "resource": "createJob",
                            "output": json.dumps({"JobId": "job-42"}),
                        },
                    },
                ]
            },
            {"executionArn": EXEC, "reverseOrder": True},
        )
        c.add_response(
            "describe_job",
            {
                "Job": {
                    "JobId": "job-42",
                    "Status": "Active",
                    "ProgressSummary": {
                        "TotalNumberOfTasks": 1000,
                        "NumberOfTasksSucceeded": 600,
                        "NumberOfTasksFailed": 2,
                    },
                    "Report": {
                        "Bucket": "arn:aws:s3:::inv",
                        "Prefix": "backfill-reports",
                        "Enabled": True,
                        "Format": "Report_CSV_20180820",
                        "ReportScope": "FailedTasksOnly",
                    },
                }
            },
            {"AccountId": "123456789012", "JobId": "job-42"},
        )
        status = backfill_status(sfn, s3control, EXEC)
    assert status == {
        "execution": EXEC,
        "status": "RUNNING",
        "jobId": "job-42",
        "jobStatus": "Active",
        "total": 1000,
        "succeeded": 600,
        "failed": 2,
        "output": None,
        "report": "arn:aws:s3:::inv/backfill-reports/job-job-42/",
    }


def test_status_before_the_job_exists_and_latest_execution() -> None:
    sfn, s3control = clients()
    with Stubber(sfn) as s:
        s.add_response(
            "describe_execution",
            {
                "executionArn": EXEC,
                "stateMachineArn": ARN,
                "status": "RUNNING",
                "startDate": NOW,
                "input": "{}",
            },
        )
        s.add_response("get_execution_history", {"events": []})
        status = backfill_status(sfn, s3control, EXEC)
        s.add_response(
            "list_executions",
            {
                "executions": [
                    {
                        "executionArn": EXEC,
                        "stateMachineArn": ARN,
                        "name": "backfill-1",
                        "status": "RUNNING",
                        "startDate": NOW,
                    }
                ]
            },
            {"stateMachineArn": ARN, "maxResults": 1},
        )
        assert latest_execution(sfn, ARN) == EXEC
    assert (status["jobId"], status["total"]) == (None, None)


def test_a_distributed_map_status_names_the_effects_left_pending() -> None:
    # GIVEN a Distributed Map backfill that ended with three keys' effects pending (issue 34)
    sfn, s3control = clients()
    output = {
        "total": 5,
        "succeeded": 5,
        "failed": 0,
        "outcomes": {"applied": 2, "effects_pending": 3},
    }
    with Stubber(sfn) as s:
        s.add_response(
            "describe_execution",
            {
                "executionArn": EXEC,
                "stateMachineArn": ARN,
                "status": "SUCCEEDED",
                "startDate": NOW,
                "input": "{}",
                "output": json.dumps(output),
            },
        )
        s.add_response("get_execution_history", {"events": []})
        status = backfill_status(sfn, s3control, EXEC)
    # THEN its status counts them apart from the failures
    assert (status["succeeded"], status["failed"], status["effects_pending"]) == (5, 0, 3)


def test_a_failed_backfill_names_its_cause_and_renders_as_text(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # GIVEN a backfill execution that failed in its prepare step (issue 36: `backfill status`
    # crashed rendering it, and its JSON said FAILED with no cause)
    sfn, s3control = clients()
    cause = {"errorType": "ReconcileError", "errorMessage": "no inventory report yet", "trace": []}
    with Stubber(sfn) as s:
        s.add_response(
            "describe_execution",
            {
                "executionArn": EXEC,
                "stateMachineArn": ARN,
                "status": "FAILED",
                "startDate": NOW,
                "input": "{}",
                "error": "ReconcileError",
                "cause": json.dumps(cause),
            },
        )
        s.add_response("get_execution_history", {"events": []})
        status = backfill_status(sfn, s3control, EXEC)
    # THEN the status carries the error and the cause in one line
    assert (status["error"], status["cause"]) == (
        "ReconcileError",
        "ReconcileError: no inventory report yet",
    )
    # AND the text rendering shows the execution's ARN and the cause
    emit_backfill(status, as_json=False)
    text = capsys.readouterr().out
    assert "FAILED" in text
    assert "no inventory report yet" in text
