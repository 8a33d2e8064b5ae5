"""S3 Batch Operations jobs on the emulator's S3 Control endpoint, through boto3: CreateJob,
DescribeJob, ListJobs and UpdateJobStatus as AWS answers them
(s3ingest.local.emulator.s3control_jobs); the completion report as the backfill state machine's
Report step reads it."""

from __future__ import annotations

import json
import time
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from s3ingest.local.emulator.batch_ops import TaskError
from s3ingest.local.emulator.lambda_service import LambdaService
from s3ingest.local.emulator.s3control_jobs import BatchOperations, local_host
from s3ingest.local.emulator.server import ACCOUNT, Emulator
from s3ingest.local.emulator.stepfunctions import enable_executor
from s3ingest.local.stack.runtime import LocalRuntime
from s3ingest_fn.services.backfill import handle_invocation
from s3ingest_fn.services.backfill_control import REPORT_PREFIX, read_report

pytestmark = pytest.mark.contract("C13")

#: Keys whose inventory (and so task) form differs from the key: form-encoded in the CSV.
KEYS = ("plain", "a b", "c+d", "e%f", "é/ü", "x=y&z")
FUNCTION_ARN = "arn:aws:lambda:us-east-1:123456789012:function:s3ingest-backfill"


def _s3control(emu: Emulator) -> Any:
    """An S3 Control client on the emulator without SDK retries (each throttle is seen)."""
    session: Any = boto3.session.Session()
    return local_host(
        session.client(
            "s3control",
            endpoint_url=emu.endpoint_url,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            config=Config(retries={"total_max_attempts": 1}),
        )
    )


def _runtime(emu: Emulator, keys: tuple[str, ...] = KEYS) -> tuple[LocalRuntime, str]:
    rt = LocalRuntime(emu, versioning="Enabled")
    for key in keys:
        rt.faithful.put(key, f"pre {key}")
    rt.faithful.take_pending()  # objects that existed before the pipeline: no events
    return rt, rt.write_inventory()


def _request(rt: LocalRuntime, manifest: str, token: str, **overrides: Any) -> dict[str, Any]:
    """CreateJob's parameters as the backfill state machine sends them."""
    inventory = rt.resources.inventory_bucket
    etag = rt.s3.head_object(Bucket=inventory, Key=manifest)["ETag"]
    request: dict[str, Any] = {
        "AccountId": ACCOUNT,
        "ClientRequestToken": token,
        "ConfirmationRequired": False,
        "Operation": {
            "LambdaInvoke": {"FunctionArn": FUNCTION_ARN, "InvocationSchemaVersion": "2.0"}
        },
        "Manifest": {
            "Spec": {"Format": "S3InventoryReport_CSV_20161130"},
            "Location": {"ObjectArn": f"arn:aws:s3:::{inventory}/{manifest}", "ETag": etag},
        },
        "Report": {
            "Bucket": f"arn:aws:s3:::{inventory}",
            "Format": "Report_CSV_20180820",
            "Enabled": True,
            "Prefix": REPORT_PREFIX,
            "ReportScope": "FailedTasksOnly",
        },
        "Priority": 10,
        "RoleArn": f"arn:aws:iam::{ACCOUNT}:role/batch",
        "Description": "s3ingest backfill",
    }
    request.update(overrides)
    return request


def _through_handler(rt: LocalRuntime, seen: list[dict[str, Any]]) -> Any:
    """An invoke override running the real backfill code path on each request."""

    def invoke(arn: str, request: dict[str, Any]) -> dict[str, Any]:
        assert arn == FUNCTION_ARN
        seen.append(request)
        with rt.function_environment():
            return handle_invocation(request, rt.service)

    return invoke


def _wait(emu: Emulator, job_id: str) -> dict[str, Any]:
    emu.batch_operations.wait(ACCOUNT, job_id)
    job: dict[str, Any] = _s3control(emu).describe_job(AccountId=ACCOUNT, JobId=job_id)["Job"]
    return job


def test_a_job_runs_every_row_and_completes(emulator: Emulator, jobs: BatchOperations) -> None:
    # GIVEN objects that existed before the pipeline, with keys that need encoding
    rt, manifest = _runtime(emulator)
    seen: list[dict[str, Any]] = []
    jobs.invoke_override = _through_handler(rt, seen)
    client = _s3control(emulator)
    # WHEN the state machine's CreateJob is sent, then DescribeJob until the job ends
    job_id = client.create_job(**_request(rt, manifest, "token-complete"))["JobId"]
    job = _wait(emulator, job_id)
    # THEN the job went through the documented statuses and counted every row
    assert jobs.job(ACCOUNT, job_id).history == [
        "New",
        "Preparing",
        "Ready",
        "Active",
        "Completing",
        "Complete",
    ]
    assert job["Status"] == "Complete" and job["FailureReasons"] == []
    progress = job["ProgressSummary"]
    assert (progress["TotalNumberOfTasks"], progress["NumberOfTasksSucceeded"]) == (6, 6)
    assert progress["NumberOfTasksFailed"] == 0
    assert job["JobArn"] == f"arn:aws:s3:us-east-1:{ACCOUNT}:job/{job_id}"
    assert job["Manifest"]["Spec"]["Format"] == "S3InventoryReport_CSV_20161130"
    assert job["Report"]["ReportScope"] == "FailedTasksOnly"
    # AND each task reached the function as S3 sends it: schema 2.0, one task, the key
    # form-encoded as the inventory CSV holds it, the bucket by name
    assert {r["invocationSchemaVersion"] for r in seen} == {"2.0"}
    assert {r["job"]["id"] for r in seen} == {job_id}
    tasks = [t for r in seen for t in r["tasks"]]
    assert len(tasks) == 6 and all(len(r["tasks"]) == 1 for r in seen)
    assert sorted(t["s3Key"] for t in tasks) == sorted(
        ["plain", "a+b", "c%2Bd", "e%25f", "%C3%A9/%C3%BC", "x%3Dy%26z"]
    )
    assert {t["s3Bucket"] for t in tasks} == {rt.resources.bucket}
    # AND the ledger equals the bucket; the Report step reads no failure
    assert rt.compare().differences == []
    report = read_report(rt.reconciler().inventory, rt.resources.inventory_bucket, job_id)
    assert report["failed"] == 0
    assert report["reportManifest"] == f"{REPORT_PREFIX}/job-{job_id}/manifest.json"
    listed = client.list_jobs(AccountId=ACCOUNT, JobStatuses=["Complete"])["Jobs"]
    assert job_id in {j["JobId"] for j in listed}


def test_the_same_client_request_token_creates_no_second_job(
    emulator: Emulator, jobs: BatchOperations
) -> None:
    rt, manifest = _runtime(emulator, ("k1", "k 2"))
    seen: list[dict[str, Any]] = []
    jobs.invoke_override = _through_handler(rt, seen)
    client = _s3control(emulator)
    request = _request(rt, manifest, "token-idempotent")
    first = client.create_job(**request)["JobId"]
    _wait(emulator, first)
    # WHEN CreateJob is sent again with the token (a retried state, a redriven execution)
    again = client.create_job(**request)["JobId"]
    # THEN the same job answers and no task runs twice
    assert again == first
    assert [key for key in jobs.jobs if key[1] in (first, again)] == [(ACCOUNT, first)]
    assert len(seen) == 2
    # AND another token is another job
    other = client.create_job(**_request(rt, manifest, "token-idempotent-2"))["JobId"]
    assert other != first
    _wait(emulator, other)


def test_a_manifest_whose_etag_differs_fails_the_job(
    emulator: Emulator, jobs: BatchOperations
) -> None:
    rt, manifest = _runtime(emulator, ("k",))
    seen: list[dict[str, Any]] = []
    jobs.invoke_override = _through_handler(rt, seen)
    request = _request(rt, manifest, "token-etag")
    request["Manifest"]["Location"]["ETag"] = '"0123456789abcdef0123456789abcdef"'
    # WHEN the job is created with an ETag that is not the manifest's
    job_id = _s3control(emulator).create_job(**request)["JobId"]
    job = _wait(emulator, job_id)
    # THEN it is accepted, then fails with a reason, without running a task or writing a report
    assert job["Status"] == "Failed"
    assert jobs.job(ACCOUNT, job_id).history[-2:] == ["Failing", "Failed"]
    (reason,) = job["FailureReasons"]
    assert reason["FailureCode"] == "ManifestETagMismatch"
    assert "0123456789abcdef0123456789abcdef" in reason["FailureReason"]
    assert job["ProgressSummary"]["TotalNumberOfTasks"] == 0 and seen == []
    report = read_report(rt.reconciler().inventory, rt.resources.inventory_bucket, job_id)
    assert report["reportManifest"] is None


def test_a_missing_manifest_fails_the_job(emulator: Emulator, jobs: BatchOperations) -> None:
    rt, manifest = _runtime(emulator, ("k",))
    request = _request(rt, manifest, "token-missing")
    request["Manifest"]["Location"]["ObjectArn"] += ".gone"
    job = _wait(emulator, _s3control(emulator).create_job(**request)["JobId"])
    assert job["Status"] == "Failed"
    assert [r["FailureCode"] for r in job["FailureReasons"]] == ["ManifestNotReadable"]


def test_create_job_refuses_what_aws_or_the_emulator_does_not_run(
    emulator: Emulator, jobs: BatchOperations
) -> None:
    rt, manifest = _runtime(emulator, ("k",))
    client = _s3control(emulator)
    bad: list[dict[str, Any]] = [
        {
            "Manifest": {
                "Spec": {"Format": "S3BatchOperations_CSV_20180820"},
                "Location": {"ObjectArn": "arn:aws:s3:::b/m.csv", "ETag": "e"},
            }
        },
        {"Operation": {"LambdaInvoke": {"FunctionArn": FUNCTION_ARN}}},  # schema 1.0
        {"Report": {"Enabled": True, "Bucket": "arn:aws:s3:::b", "Format": "CSV"}},
    ]
    before = len(jobs.jobs)
    for n, overrides in enumerate(bad):
        with pytest.raises(ClientError) as raised:
            client.create_job(**_request(rt, manifest, f"token-bad-{n}", **overrides))
        assert raised.value.response["Error"]["Code"] == "BadRequestException"
        assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert len(jobs.jobs) == before
    with pytest.raises(ClientError) as raised:
        client.describe_job(AccountId=ACCOUNT, JobId="no-such-job")
    assert raised.value.response["Error"]["Code"] == "NotFoundException"


def test_throttled_calls_answer_too_many_requests(
    emulator: Emulator, jobs: BatchOperations
) -> None:
    rt, manifest = _runtime(emulator, ("k",))
    jobs.invoke_override = _through_handler(rt, [])
    client = _s3control(emulator)
    request = _request(rt, manifest, "token-throttled")
    jobs.throttle("CreateJob", 2)
    jobs.throttle("DescribeJob", 1)
    before = len(jobs.jobs)
    # WHEN CreateJob is throttled twice
    for _ in range(2):
        with pytest.raises(ClientError) as raised:
            client.create_job(**request)
        error = raised.value.response
        assert error["Error"]["Code"] == "TooManyRequestsException"
        assert error["ResponseMetadata"]["HTTPStatusCode"] == 400
        assert isinstance(raised.value, client.exceptions.TooManyRequestsException)
    # THEN no job was created; the third call creates it
    assert len(jobs.jobs) == before
    job_id = client.create_job(**request)["JobId"]
    jobs.wait(ACCOUNT, job_id)
    with pytest.raises(client.exceptions.TooManyRequestsException):
        client.describe_job(AccountId=ACCOUNT, JobId=job_id)
    assert client.describe_job(AccountId=ACCOUNT, JobId=job_id)["Job"]["Status"] == "Complete"
    # AND the emulator's own client (standard retries) rides over one throttle
    jobs.throttle("DescribeJob", 1)
    assert emulator.client("s3control").describe_job(AccountId=ACCOUNT, JobId=job_id)["Job"]
    with pytest.raises(ValueError, match="operation must be one of"):
        jobs.throttle("DeleteJobTagging")


def test_failed_tasks_are_in_the_completion_report_the_report_step_reads(
    emulator: Emulator, jobs: BatchOperations
) -> None:
    # GIVEN a job whose tasks fail in each way S3 records: a task the function reports as
    # PermanentFailure (injected), a function error, and a response that breaks the contract
    rt, manifest = _runtime(emulator, ("ok", "a b", "boom", "bad"))
    real = _through_handler(rt, [])

    def invoke(arn: str, request: dict[str, Any]) -> dict[str, Any]:
        key = request["tasks"][0]["s3Key"]
        if key == "boom":
            raise TaskError("PermanentFailure", 'Lambda returned function error: {"x": 1}')
        if key == "bad":
            return {"invocationSchemaVersion": "2.0", "results": []}
        return dict(real(arn, request))

    jobs.invoke_override = invoke
    jobs.fail_keys({"a b"})
    request = _request(rt, manifest, "token-failures")
    request["Report"]["ReportScope"] = "AllTasks"
    job_id = _s3control(emulator).create_job(**request)["JobId"]
    job = _wait(emulator, job_id)
    # THEN the job completes (under the failure threshold) with the failures counted
    assert job["Status"] == "Complete"
    progress = job["ProgressSummary"]
    assert (progress["NumberOfTasksSucceeded"], progress["NumberOfTasksFailed"]) == (1, 3)
    # AND the report has the documented layout, and read_report reads its failed tasks
    inventory = rt.resources.inventory_bucket
    listed = rt.s3.list_objects_v2(Bucket=inventory, Prefix=f"{REPORT_PREFIX}/job-{job_id}/")
    keys = sorted(o["Key"] for o in listed["Contents"])
    assert keys[0] == f"{REPORT_PREFIX}/job-{job_id}/manifest.json"
    assert len(keys) == 3 and all(k.endswith(".csv") and "/results/" in k for k in keys[1:])
    report = read_report(rt.reconciler().inventory, inventory, job_id)
    assert report["failed"] == 3
    assert report["errors"] == {"PermanentFailure": 3}
    samples = {s["Key"]: s for s in report["samples"]}
    assert set(samples) == {"a+b", "boom", "bad"}
    assert samples["a+b"]["ResultMessage"] == "injected permanent failure"
    assert samples["boom"]["ResultMessage"].startswith("Lambda returned function error:")
    assert samples["bad"]["ResultMessage"].startswith("Invalid response from Lambda:")
    assert {s["TaskStatus"] for s in samples.values()} == {"failed"}
    assert {s["HTTPStatusCode"] for s in samples.values()} == {"200"}


def test_temporary_failures_are_redriven(emulator: Emulator, jobs: BatchOperations) -> None:
    rt, manifest = _runtime(emulator, ("k",))
    real = _through_handler(rt, [])
    answers = ["TemporaryFailure", "TemporaryFailure"]

    def invoke(arn: str, request: dict[str, Any]) -> dict[str, Any]:
        if answers:
            raise TaskError(answers.pop(), "Lambda Invoke failed: TooManyRequestsException")
        return dict(real(arn, request))

    jobs.invoke_override = invoke
    job_id = _s3control(emulator).create_job(**_request(rt, manifest, "token-temp"))["JobId"]
    job = _wait(emulator, job_id)
    assert job["Status"] == "Complete"
    assert job["ProgressSummary"]["NumberOfTasksSucceeded"] == 1
    (result,) = jobs.job(ACCOUNT, job_id).results
    assert (result.code, result.temporary_retries) == ("Succeeded", 2)


def test_failures_above_the_threshold_fail_the_job(
    emulator: Emulator, jobs: BatchOperations
) -> None:
    # GIVEN a threshold reached after 4 tasks (AWS: 1,000) and most tasks failing
    rt, manifest = _runtime(emulator, ("k1", "k2", "k3", "k4", "k5", "k6"))
    jobs.invoke_override = _through_handler(rt, [])
    jobs.failure_threshold_tasks = 4
    jobs.fail_keys({"k1", "k2", "k3", "k4", "k5"})
    job_id = _s3control(emulator).create_job(**_request(rt, manifest, "token-threshold"))["JobId"]
    job = _wait(emulator, job_id)
    # THEN the job stops and fails with the reason; the report of what ran is written
    assert job["Status"] == "Failed"
    assert [r["FailureCode"] for r in job["FailureReasons"]] == ["TaskFailureThresholdExceeded"]
    progress = job["ProgressSummary"]
    assert progress["TotalNumberOfTasks"] == 6
    assert progress["NumberOfTasksFailed"] + progress["NumberOfTasksSucceeded"] < 6
    report = read_report(rt.reconciler().inventory, rt.resources.inventory_bucket, job_id)
    assert report["failed"] == progress["NumberOfTasksFailed"] >= 3


def test_confirmation_and_cancellation(emulator: Emulator, jobs: BatchOperations) -> None:
    rt, manifest = _runtime(emulator, ("k",))
    seen: list[dict[str, Any]] = []
    jobs.invoke_override = _through_handler(rt, seen)
    client = _s3control(emulator)
    # a job that needs confirmation waits Suspended, then runs once confirmed
    request = _request(rt, manifest, "token-confirm", ConfirmationRequired=True)
    job_id = client.create_job(**request)["JobId"]
    job = jobs.job(ACCOUNT, job_id)
    for _ in range(500):
        if job.status == "Suspended":
            break
        time.sleep(0.01)
    assert client.describe_job(AccountId=ACCOUNT, JobId=job_id)["Job"]["Status"] == "Suspended"
    assert seen == []
    updated = client.update_job_status(
        AccountId=ACCOUNT, JobId=job_id, RequestedJobStatus="Ready", StatusUpdateReason="go"
    )
    assert updated["JobId"] == job_id
    assert _wait(emulator, job_id)["Status"] == "Complete" and len(seen) == 1
    # an ended job cannot be cancelled
    with pytest.raises(client.exceptions.JobStatusException):
        client.update_job_status(AccountId=ACCOUNT, JobId=job_id, RequestedJobStatus="Cancelled")
    # a suspended job can
    other = client.create_job(**_request(rt, manifest, "token-cancel", ConfirmationRequired=True))
    for _ in range(500):
        if jobs.job(ACCOUNT, other["JobId"]).status == "Suspended":
            break
        time.sleep(0.01)
    client.update_job_status(
        AccountId=ACCOUNT, JobId=other["JobId"], RequestedJobStatus="Cancelled"
    )
    assert _wait(emulator, other["JobId"])["Status"] == "Cancelled" and len(seen) == 1


# -- through the in-process Lambda service: the real backfill handler ------------------------------


def _backfill_function(emu: Emulator, rt: LocalRuntime, lambdas: LambdaService) -> str:
    """Register the stack's backfill function (its handler, its environment) on ``lambdas``."""
    return lambdas.register(
        "backfill",
        "s3ingest_fn.handlers.backfill.handler",
        {
            "LEDGER_TABLE_NAME": rt.resources.table,
            "DEAD_LETTER_QUEUE_URL": rt.resources.dlq_url,
            "TOMBSTONE_TTL_SECONDS": str(rt.settings.tombstone_ttl_seconds),
            "BUCKET_NAME": rt.resources.bucket,
        },
        timeout_seconds=30,
    )


@pytest.mark.slow
def test_a_job_invokes_the_real_backfill_function_and_the_ledger_converges(
    emulator: Emulator, jobs: BatchOperations
) -> None:
    # GIVEN pre-existing objects with keys that need encoding, and the backfill function
    # registered in the emulator's Lambda service
    rt, manifest = _runtime(emulator)
    with LambdaService(emulator) as lambdas:
        arn = _backfill_function(emulator, rt, lambdas)
        request = _request(rt, manifest, "token-lambda")
        request["Operation"]["LambdaInvoke"]["FunctionArn"] = arn
        # WHEN the job runs, its tasks invoking the function through lambda:Invoke
        job_id = _s3control(emulator).create_job(**request)["JobId"]
        job = _wait(emulator, job_id)
        invocations = [i for i in lambdas.invocations if i.function == "backfill"]
    # THEN every row was one invocation of the real handler, and the ledger equals the bucket
    assert job["Status"] == "Complete"
    assert job["ProgressSummary"]["NumberOfTasksSucceeded"] == len(KEYS)
    assert [i.outcome for i in invocations] == ["ok"] * len(KEYS)
    assert rt.compare().differences == []
    assert {r.source for r in rt.ledger_rows()} == {"backfill"}
    results = {r.task["s3Key"]: r.text for r in jobs.job(ACCOUNT, job_id).results}
    assert set(results.values()) == {"applied: observed-bucket-state"}


@pytest.mark.slow
def test_function_errors_fail_tasks_and_lambda_throttling_is_redriven(
    emulator: Emulator, jobs: BatchOperations
) -> None:
    rt, manifest = _runtime(emulator, ("k1", "k 2", "k3"))
    with LambdaService(emulator) as lambdas:
        arn = _backfill_function(emulator, rt, lambdas)
        # GIVEN the function's first invocation raises, and the next one is throttled by Lambda
        lambdas.inject("backfill", "raise", error="KaboomError")
        lambdas.inject("backfill", "throttle")
        request = _request(rt, manifest, "token-lambda-errors")
        request["Operation"]["LambdaInvoke"]["FunctionArn"] = arn
        job_id = _s3control(emulator).create_job(**request)["JobId"]
        job = _wait(emulator, job_id)
    # THEN the function error fails its task, the throttled one is redriven and succeeds
    assert job["Status"] == "Complete"
    progress = job["ProgressSummary"]
    assert (progress["NumberOfTasksSucceeded"], progress["NumberOfTasksFailed"]) == (2, 1)
    (failed,) = [r for r in jobs.job(ACCOUNT, job_id).results if r.code != "Succeeded"]
    assert failed.code == "PermanentFailure"
    assert failed.text.startswith("Lambda returned function error: ")
    assert "KaboomError" in failed.text
    assert sum(r.temporary_retries for r in jobs.job(ACCOUNT, job_id).results) == 1
    # AND the Report step reads the failed task; a backfill of the failed key repairs it
    report = read_report(rt.reconciler().inventory, rt.resources.inventory_bucket, job_id)
    assert (report["failed"], report["errors"]) == (1, {"PermanentFailure": 1})
    rt.backfill(manifest)
    assert rt.compare().differences == []


# -- through moto's Step Functions executor (the aws-sdk:s3control integration) --------------------

#: The backfill machine's job loop in small: CreateJob and DescribeJob as aws-sdk integrations
#: retrying S3Control.TooManyRequestsException, a wait loop on the job's Status.
_RETRY = [
    {
        "ErrorEquals": ["S3Control.TooManyRequestsException"],
        "IntervalSeconds": 1,
        "MaxAttempts": 3,
        "BackoffRate": 1,
    }
]
JOB_LOOP = {
    "StartAt": "CreateJob",
    "States": {
        "CreateJob": {
            "Type": "Task",
            "Resource": "arn:aws:states:::aws-sdk:s3control:createJob",
            # RoleArn a literal, as in the synthesized machine ("RoleArn.$" is a keyword of
            # moto's ASL grammar and fails there)
            "Parameters": {
                "RoleArn": f"arn:aws:iam::{ACCOUNT}:role/batch",
                **{
                    f"{name}.$": f"$.{name}"
                    for name in (
                        "AccountId",
                        "ClientRequestToken",
                        "ConfirmationRequired",
                        "Operation",
                        "Manifest",
                        "Report",
                        "Priority",
                    )
                },
            },
            "ResultPath": "$.job",
            "Retry": _RETRY,
            "Next": "DescribeJob",
        },
        "DescribeJob": {
            "Type": "Task",
            "Resource": "arn:aws:states:::aws-sdk:s3control:describeJob",
            "Parameters": {"AccountId": ACCOUNT, "JobId.$": "$.job.JobId"},
            "ResultSelector": {"Status.$": "$.Job.Status", "Progress.$": "$.Job.ProgressSummary"},
            "ResultPath": "$.describe",
            "Retry": _RETRY,
            "Next": "JobStatus",
        },
        "JobStatus": {
            "Type": "Choice",
            "Choices": [
                {"Variable": "$.describe.Status", "StringEquals": "Complete", "Next": "Done"},
                {"Variable": "$.describe.Status", "StringEquals": "Failed", "Next": "JobFailed"},
            ],
            "Default": "WaitForJob",
        },
        "WaitForJob": {"Type": "Wait", "Seconds": 1, "Next": "DescribeJob"},
        "JobFailed": {"Type": "Fail", "Error": "BackfillJobFailed"},
        "Done": {"Type": "Succeed"},
    },
}


@pytest.fixture
def executing(emulator: Emulator) -> None:
    """moto's Step Functions executes state machines, its clients on the emulator (as the local
    runtime sets it up; left on, as the runtime leaves it)."""
    enable_executor(emulator.endpoint_url)


@pytest.mark.slow
def test_step_functions_reach_the_jobs_and_retry_their_throttling(
    emulator: Emulator, jobs: BatchOperations, executing: None
) -> None:
    # GIVEN the job loop as a state machine, CreateJob throttled twice and DescribeJob once
    rt, manifest = _runtime(emulator, ("k 1", "k+2"))
    seen: list[dict[str, Any]] = []
    jobs.invoke_override = _through_handler(rt, seen)
    sfn = emulator.client("stepfunctions")
    machine = sfn.create_state_machine(
        name=f"job-loop-{rt.resources.table}",
        definition=json.dumps(JOB_LOOP),
        roleArn=f"arn:aws:iam::{ACCOUNT}:role/sfn",
    )["stateMachineArn"]
    jobs.throttle("CreateJob", 2)
    jobs.throttle("DescribeJob", 1)
    calls = dict(jobs.calls)
    request = _request(rt, manifest, "token-sfn")
    request.pop("AccountId")
    request.pop("RoleArn")
    # WHEN it runs in moto's executor
    execution = sfn.start_execution(
        stateMachineArn=machine,
        input=json.dumps({"AccountId": ACCOUNT, **request}),
    )["executionArn"]
    deadline = time.monotonic() + 60
    while (status := sfn.describe_execution(executionArn=execution)["status"]) == "RUNNING":
        assert time.monotonic() < deadline, "execution still running"
        time.sleep(0.2)
    # THEN it succeeded: each throttled call was retried under its S3Control.* name
    history = sfn.get_execution_history(executionArn=execution)["events"]
    failures = [e["taskFailedEventDetails"]["error"] for e in history if e["type"] == "TaskFailed"]
    assert status == "SUCCEEDED", history[-1]
    assert failures == ["S3Control.TooManyRequestsException"] * 3
    assert jobs.calls["CreateJob"] - calls.get("CreateJob", 0) == 3
    # AND the job ran once, every row through the backfill code path
    assert len(seen) == 2
    assert rt.compare().differences == []
