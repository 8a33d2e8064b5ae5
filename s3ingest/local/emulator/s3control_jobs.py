"""S3 Batch Operations jobs on the emulator's S3 Control endpoint (moto implements none).

:func:`install` adds ``CreateJob``, ``DescribeJob``, ``ListJobs`` and ``UpdateJobStatus`` to
moto's S3 Control service, with the request and response XML of AWS (moto's own serializer
over botocore's model: https://docs.aws.amazon.com/AmazonS3/latest/API/API_control_CreateJob.html,
API_control_DescribeJob.html, API_control_ListJobs.html, API_control_UpdateJobStatus.html).
A job runs in a background thread through the statuses of
https://docs.aws.amazon.com/AmazonS3/latest/userguide/batch-ops-job-status.html:
``New`` -> ``Preparing`` -> (``Suspended`` while ``ConfirmationRequired``, until
``UpdateJobStatus Ready``) -> ``Ready`` -> ``Active`` -> ``Completing`` -> ``Complete``; or
``Failing`` -> ``Failed`` (manifest unreadable, its ETag not the one given, or more than half
of the tasks failed once :attr:`BatchOperations.failure_threshold_tasks` were attempted, 1,000
in AWS); or ``Cancelling`` -> ``Cancelled``.

What a job does:

* the manifest: ``S3InventoryReport_CSV_20161130`` only, read from ``Location.ObjectArn``
  (``ObjectVersionId`` if given); ``Location.ETag`` must equal the object's ETag;
* the operation: ``LambdaInvoke`` with ``InvocationSchemaVersion`` ``2.0`` only; one task per
  inventory row through :func:`s3ingest.local.emulator.batch_ops.run_task` (the real request shape,
  ``UserArguments`` as ``job.userArguments``, the response checked; ``TemporaryFailure``
  redriven), the function invoked through the emulator's Lambda ``Invoke`` (the in-process
  Lambda service runs registered functions for real). A function error fails the task
  (``PermanentFailure``, ``Lambda returned function error: <payload>``); Lambda throttling or a
  5xx is redriven as a ``TemporaryFailure``;
* the completion report (``Report_CSV_20180820``, ``AllTasks`` or ``FailedTasksOnly``):
  ``<Prefix>/job-<JobId>/manifest.json`` and ``<Prefix>/job-<JobId>/results/<sha1>.csv``, rows
  ``Bucket, Key, VersionId, TaskStatus, HTTPStatusCode, ResultCode, ResultString`` as in the
  examples of https://docs.aws.amazon.com/AmazonS3/latest/userguide/batch-ops-examples-reports.html
  (the examples put the HTTP status before the error code, unlike the ``ReportSchema`` string);
* idempotency: a ``ClientRequestToken`` already used by the account returns that job's id and
  creates nothing (CreateJob's documented idempotency token).

Not emulated: other operations and manifest formats (``BadRequestException`` says so), manifest
generators, tags, priorities between jobs (each job runs on its own thread), IAM (``RoleArn`` is
kept, not assumed), per-task parallelism, job expiry after 90 days. ``FailureCode`` values are
the emulator's own.

Reaching it: botocore's S3 Control endpoint rules put the account in the host
(``http://<AccountId>.127.0.0.1:<port>``, whatever ``inject_host_prefix`` says), which does not
resolve. :func:`local_host` registers a ``before-sign`` handler that takes the account label off
when the rest of the host is ``127.0.0.1`` or ``localhost`` (the account still travels in the
``x-amz-account-id`` header); :meth:`s3ingest.local.emulator.server.Emulator.client` applies it, and
so do the clients of moto's Step Functions ``aws-sdk`` integration
(:mod:`s3ingest.local.emulator.stepfunctions`, which also names S3 Control's errors as Step
Functions does).

Tests reach the jobs of one emulator through :func:`service_for` (``Emulator.batch_operations``):
:meth:`BatchOperations.throttle` makes the next calls answer ``TooManyRequestsException`` (400,
the S3 Control API reference's status for it); :meth:`BatchOperations.fail_keys` makes the
tasks of some keys fail permanently without invoking the function.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from s3ingest.local.emulator.batch_ops import TaskError, TaskResult, manifest_tasks, run_task
from s3ingest_fn.core.events import decode_form_key
from s3ingest_fn.services.inventory import InventoryError, Manifest

MANIFEST_FORMAT = "S3InventoryReport_CSV_20161130"
REPORT_FORMAT = "Report_CSV_20180820"
REPORT_SCOPES = ("AllTasks", "FailedTasksOnly")
INVOCATION_SCHEMA_VERSION = "2.0"
#: The ``ReportSchema`` a completion report's manifest.json states.
REPORT_SCHEMA = "Bucket, Key, VersionId, TaskStatus, ErrorCode, HTTPStatusCode, ResultMessage"
#: Statuses after which a job changes no more.
TERMINAL = ("Complete", "Failed", "Cancelled")
#: Tasks attempted before the failure rate can fail a job, and that rate
#: (https://docs.aws.amazon.com/AmazonS3/latest/userguide/batch-ops-job-status.html).
FAILURE_THRESHOLD_TASKS = 1000
FAILURE_THRESHOLD_RATE = 0.5
#: Operations whose answers :meth:`BatchOperations.throttle` can replace.
THROTTLEABLE = ("CreateJob", "DescribeJob", "ListJobs", "UpdateJobStatus")

_LOCAL_HOSTS = ("127.0.0.1", "localhost")
_ACCOUNT_LABEL = re.compile(r"^\d{12}\.")


# -- reaching the endpoint ------------------------------------------------------------------------


def _strip_account_label(request: Any, **_: Any) -> None:
    """``http://<account>.127.0.0.1:<port>/...`` -> ``http://127.0.0.1:<port>/...``."""
    parts = urlsplit(request.url)
    host = parts.hostname or ""
    if _ACCOUNT_LABEL.match(host) and host.split(".", 1)[1] in _LOCAL_HOSTS:
        netloc = _ACCOUNT_LABEL.sub("", parts.netloc, count=1)
        request.url = urlunsplit(parts._replace(netloc=netloc))


def local_host(client: Any) -> Any:
    """Make an S3 Control ``client`` bound to a loopback endpoint send to it (see the module
    docstring); returns ``client``. Other hosts are left alone."""
    client.meta.events.register("before-sign.s3-control", _strip_account_label)
    return client


# -- errors ---------------------------------------------------------------------------------------


_ERROR_CLASS: list[type[Exception]] = []


def _service_exception(code: str, message: str) -> Exception:
    """An S3 Control error moto serializes with the S3 Control model's status (a subclass
    defined outside ``moto.*``: moto looks the code up in the service answering)."""
    if not _ERROR_CLASS:
        from moto.core.exceptions import ServiceException

        class S3ControlJobError(ServiceException):
            """An S3 Control error of the emulated jobs."""

        _ERROR_CLASS.append(S3ControlJobError)
    return _ERROR_CLASS[0](code, message)


# -- jobs -----------------------------------------------------------------------------------------


@dataclass
class Job:
    """One job: what CreateJob was given, and where it is."""

    job_id: str
    account: str
    region: str
    request: dict[str, Any]
    status: str = "New"
    #: Every status the job went through, in order.
    history: list[str] = field(default_factory=lambda: ["New"])
    total: int = 0
    succeeded: int = 0
    failed: int = 0
    failure_reasons: list[dict[str, str]] = field(default_factory=list)
    status_update_reason: str | None = None
    created: datetime = field(default_factory=lambda: datetime.now(UTC))
    terminated: datetime | None = None
    suspended: datetime | None = None
    active_seconds: float = 0.0
    #: The keys (``<Prefix>/job-<id>/manifest.json``) of the completion report, once written.
    report_manifest: str | None = None
    #: Results of the tasks that ran (tests look at them).
    results: list[TaskResult] = field(default_factory=list)
    confirmed: threading.Event = field(default_factory=threading.Event)
    cancel: threading.Event = field(default_factory=threading.Event)

    @property
    def arn(self) -> str:
        """``arn:aws:s3:<region>:<account>:job/<id>``."""
        return f"arn:aws:s3:{self.region}:{self.account}:job/{self.job_id}"

    def descriptor(self) -> dict[str, Any]:
        """DescribeJob's ``Job`` (``JobDescriptor``)."""
        req = self.request
        out: dict[str, Any] = {
            "JobId": self.job_id,
            "ConfirmationRequired": bool(req.get("ConfirmationRequired", False)),
            "JobArn": self.arn,
            "Status": self.status,
            "Manifest": req.get("Manifest"),
            "Operation": req.get("Operation"),
            "Priority": req.get("Priority"),
            "ProgressSummary": self.progress(),
            "FailureReasons": list(self.failure_reasons),
            "Report": req.get("Report"),
            "CreationTime": self.created,
            "RoleArn": req.get("RoleArn"),
        }
        if req.get("Description"):
            out["Description"] = req["Description"]
        if self.status_update_reason:
            out["StatusUpdateReason"] = self.status_update_reason
        if self.terminated:
            out["TerminationDate"] = self.terminated
        if self.suspended:
            out["SuspendedDate"] = self.suspended
            out["SuspendedCause"] = "AwaitingConfirmation"
        return out

    def progress(self) -> dict[str, Any]:
        """``JobProgressSummary``."""
        return {
            "TotalNumberOfTasks": self.total,
            "NumberOfTasksSucceeded": self.succeeded,
            "NumberOfTasksFailed": self.failed,
            "Timers": {"ElapsedTimeInActiveSeconds": int(self.active_seconds)},
        }

    def list_descriptor(self) -> dict[str, Any]:
        """ListJobs' ``JobListDescriptor``."""
        out: dict[str, Any] = {
            "JobId": self.job_id,
            "Operation": next(iter(self.request.get("Operation") or {"LambdaInvoke": 0})),
            "Priority": self.request.get("Priority"),
            "Status": self.status,
            "CreationTime": self.created,
            "ProgressSummary": self.progress(),
        }
        if self.request.get("Description"):
            out["Description"] = self.request["Description"]
        if self.terminated:
            out["TerminationDate"] = self.terminated
        return out


class BatchOperations:
    """The Batch Operations jobs of one emulator (one moto server port).

    Parameters
    ----------
    endpoint_url : str
        The emulator's endpoint; the jobs read the manifest, invoke the function and write the
        report through it.
    """

    def __init__(self, endpoint_url: str) -> None:
        self.endpoint_url = endpoint_url
        self.jobs: dict[tuple[str, str], Job] = {}
        self._tokens: dict[tuple[str, str], str] = {}
        self._lock = threading.RLock()
        self._throttles: dict[str, int] = {}
        self._failing_keys: set[str] = set()
        #: Calls answered per operation, throttled ones included.
        self.calls: dict[str, int] = {}
        #: Tasks attempted before the failure rate can fail a job (AWS: 1,000).
        self.failure_threshold_tasks = FAILURE_THRESHOLD_TASKS
        #: ``(function_arn, request) -> response`` used instead of the emulator's Lambda
        #: ``Invoke`` when set (it may raise :class:`~s3ingest.local.emulator.batch_ops.TaskError`).
        self.invoke_override: Callable[[str, dict[str, Any]], dict[str, Any]] | None = None

    # -- failure injection -------------------------------------------------------------------

    def throttle(self, operation: str, times: int = 1) -> None:
        """Answer the next ``times`` calls of ``operation`` (``CreateJob``, ``DescribeJob``,
        ``ListJobs``, ``UpdateJobStatus``) with ``TooManyRequestsException`` and do nothing.

        Raises
        ------
        ValueError
            For another operation.
        """
        if operation not in THROTTLEABLE:
            raise ValueError(f"operation must be one of {THROTTLEABLE}, not {operation!r}")
        with self._lock:
            self._throttles[operation] = self._throttles.get(operation, 0) + times

    def fail_keys(self, keys: set[str] | list[str]) -> None:
        """Make the tasks of these (decoded) keys fail with ``PermanentFailure`` without invoking
        the function; an empty set stops it."""
        with self._lock:
            self._failing_keys = set(keys)

    def reset_hooks(self) -> None:
        """Undo :meth:`throttle`, :meth:`fail_keys`, ``invoke_override`` and a lowered
        ``failure_threshold_tasks`` (tests share one emulator)."""
        with self._lock:
            self._throttles.clear()
            self._failing_keys = set()
            self.invoke_override = None
            self.failure_threshold_tasks = FAILURE_THRESHOLD_TASKS

    def answer(self, operation: str) -> None:
        """Count a call of ``operation``; raise ``TooManyRequestsException`` if it is throttled."""
        with self._lock:
            self.calls[operation] = self.calls.get(operation, 0) + 1
            if self._throttles.get(operation, 0) > 0:
                self._throttles[operation] -= 1
                raise _service_exception("TooManyRequestsException", "Please reduce your rate.")

    # -- the API ---------------------------------------------------------------------------------

    def create_job(self, account: str, region: str, request: dict[str, Any]) -> str:
        """CreateJob: validate ``request`` (the operation's parameters), start the job; return
        its id, or the id of the account's job created with the same ``ClientRequestToken``.

        Raises
        ------
        ServiceException
            ``BadRequestException`` for a request AWS or the emulator refuses.
        """
        _validate(request)
        token = str(request["ClientRequestToken"])
        with self._lock:
            existing = self._tokens.get((account, token))
            if existing is not None:
                return existing
            job = Job(job_id=str(uuid.uuid4()), account=account, region=region, request=request)
            self.jobs[(account, job.job_id)] = job
            self._tokens[(account, token)] = job.job_id
        threading.Thread(
            target=self._run, args=(job,), name=f"batch-job-{job.job_id[:8]}", daemon=True
        ).start()
        return job.job_id

    def job(self, account: str, job_id: str) -> Job:
        """The account's job ``job_id``.

        Raises
        ------
        ServiceException
            ``NotFoundException`` when there is none.
        """
        with self._lock:
            found = self.jobs.get((account, job_id))
        if found is None:
            raise _service_exception("NotFoundException", f"The specified job {job_id} not found")
        return found

    def list_jobs(self, account: str, statuses: list[str] | None) -> list[Job]:
        """The account's jobs, newest first, in ``statuses`` if given."""
        with self._lock:
            jobs = [j for (a, _), j in self.jobs.items() if a == account]
        if statuses:
            jobs = [j for j in jobs if j.status in statuses]
        return sorted(jobs, key=lambda j: j.created, reverse=True)

    def update_status(self, account: str, job_id: str, requested: str, reason: str | None) -> Job:
        """UpdateJobStatus: ``Ready`` confirms a ``Suspended`` job; ``Cancelled`` cancels a job
        that has not ended.

        Raises
        ------
        ServiceException
            ``JobStatusException`` for a transition the job's status does not allow,
            ``BadRequestException`` for another requested status.
        """
        job = self.job(account, job_id)
        if requested not in ("Ready", "Cancelled"):
            raise _service_exception("BadRequestException", f"invalid status {requested!r}")
        with self._lock:
            if requested == "Ready":
                if job.status != "Suspended":
                    raise _service_exception(
                        "JobStatusException", f"job {job_id} is {job.status}, not Suspended"
                    )
                job.confirmed.set()
            else:
                if job.status in TERMINAL:
                    raise _service_exception(
                        "JobStatusException", f"job {job_id} has ended ({job.status})"
                    )
                job.cancel.set()
                job.confirmed.set()
            if reason:
                job.status_update_reason = reason
        return job

    def wait(self, account: str, job_id: str, timeout_seconds: float = 60.0) -> Job:
        """Block until the job ends; return it.

        Raises
        ------
        TimeoutError
            When it has not ended by then.
        """
        deadline = time.monotonic() + timeout_seconds
        job = self.job(account, job_id)
        while job.status not in TERMINAL:
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job_id} still {job.status}")
            time.sleep(0.02)
        return job

    # -- the job -----------------------------------------------------------------------------

    def _client(self, service: str, region: str, **config: Any) -> Any:
        session: Any = boto3.session.Session()
        return session.client(
            service,
            endpoint_url=self.endpoint_url,
            region_name=region,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            config=Config(**config),
        )

    def _set(self, job: Job, status: str) -> None:
        with self._lock:
            job.status = status
            job.history.append(status)
            if status in TERMINAL:
                job.terminated = datetime.now(UTC)

    def _fail(self, job: Job, code: str, reason: str) -> None:
        with self._lock:
            job.failure_reasons.append({"FailureCode": code, "FailureReason": reason})
        self._set(job, "Failing")
        self._set(job, "Failed")

    def _run(self, job: Job) -> None:
        try:
            self._run_job(job)
        except Exception as exc:  # the emulator's own failure: the job fails, visibly
            if job.status not in TERMINAL:
                self._fail(job, "InternalError", f"{type(exc).__name__}: {exc}")

    def _run_job(self, job: Job) -> None:
        s3 = self._client("s3", job.region)
        self._set(job, "Preparing")
        tasks = self._prepare(job, s3)
        if tasks is None:
            return
        job.total = len(tasks)
        if job.request.get("ConfirmationRequired"):
            job.suspended = datetime.now(UTC)
            self._set(job, "Suspended")
            job.confirmed.wait()
        if job.cancel.is_set():
            self._cancel(job)
            return
        self._set(job, "Ready")
        self._set(job, "Active")
        invoke = self._invoker(job)
        lambda_op = job.request["Operation"]["LambdaInvoke"]
        user_arguments = dict(lambda_op.get("UserArguments") or {})
        started = time.monotonic()
        threshold_failed = False
        for task in tasks:
            if job.cancel.is_set():
                break
            result = self._one_task(job, task, invoke, user_arguments)
            with self._lock:
                job.results.append(result)
                if result.code == "Succeeded":
                    job.succeeded += 1
                else:
                    job.failed += 1
                job.active_seconds = time.monotonic() - started
            attempted = job.succeeded + job.failed
            if (
                attempted >= self.failure_threshold_tasks
                and job.failed > FAILURE_THRESHOLD_RATE * attempted
            ):
                threshold_failed = True
                break
        # the report is written in the closing status (Completing, Failing or Cancelling)
        if job.cancel.is_set():
            self._set(job, "Cancelling")
            self._write_report(job, s3)
            self._set(job, "Cancelled")
        elif threshold_failed:
            with self._lock:
                job.failure_reasons.append(
                    {
                        "FailureCode": "TaskFailureThresholdExceeded",
                        "FailureReason": (
                            f"{job.failed} of {job.succeeded + job.failed} tasks failed: more "
                            f"than {FAILURE_THRESHOLD_RATE:.0%} after at least "
                            f"{self.failure_threshold_tasks}"
                        ),
                    }
                )
            self._set(job, "Failing")
            self._write_report(job, s3)
            self._set(job, "Failed")
        else:
            self._set(job, "Completing")
            self._write_report(job, s3)
            self._set(job, "Complete")

    def _cancel(self, job: Job) -> None:
        self._set(job, "Cancelling")
        self._set(job, "Cancelled")

    def _prepare(self, job: Job, s3: Any) -> list[dict[str, Any]] | None:
        """Read and check the manifest; the tasks, or ``None`` when the job failed."""
        location = job.request["Manifest"]["Location"]
        arn = str(location["ObjectArn"])
        bucket, _, key = arn.split(":::", 1)[-1].partition("/")
        get: dict[str, Any] = {"Bucket": bucket, "Key": key}
        if location.get("ObjectVersionId"):
            get["VersionId"] = location["ObjectVersionId"]
        try:
            obj = s3.get_object(**get)
        except ClientError as exc:
            code = exc.response["Error"]["Code"]
            self._fail(job, "ManifestNotReadable", f"Reading the manifest {arn} failed: {code}")
            return None
        etag, given = obj["ETag"].strip('"'), str(location.get("ETag", "")).strip('"')
        if etag != given:
            self._fail(
                job,
                "ManifestETagMismatch",
                f"The ETag of the manifest {arn} is {etag}, not the {given} given",
            )
            return None
        try:
            manifest = Manifest.parse(obj["Body"].read())
            if manifest.file_format.upper() != "CSV":
                raise InventoryError(f"{manifest.file_format} is not {MANIFEST_FORMAT}")
            data = [
                s3.get_object(Bucket=manifest.destination_bucket, Key=f)["Body"].read()
                for f in manifest.files
            ]
            return list(manifest_tasks(manifest, data))
        except (InventoryError, ClientError, OSError, ValueError) as exc:
            self._fail(job, "ManifestInvalid", f"Reading the manifest {arn} failed: {exc}")
            return None

    def _invoker(self, job: Job) -> Callable[[dict[str, Any]], dict[str, Any]]:
        """``request -> response`` through the emulator's Lambda ``Invoke`` (synchronous, as
        Batch Operations invokes), or :attr:`invoke_override`."""
        arn = job.request["Operation"]["LambdaInvoke"]["FunctionArn"]
        override = self.invoke_override
        if override is not None:
            return lambda request: override(arn, request)
        lam = self._client(
            "lambda", job.region, retries={"total_max_attempts": 1}, read_timeout=900
        )

        def invoke(request: dict[str, Any]) -> dict[str, Any]:
            try:
                response = lam.invoke(
                    FunctionName=arn,
                    InvocationType="RequestResponse",
                    Payload=json.dumps(request).encode(),
                )
            except ClientError as exc:
                status = exc.response["ResponseMetadata"].get("HTTPStatusCode", 0)
                code = exc.response["Error"]["Code"]
                if status == 429 or status >= 500:
                    raise TaskError("TemporaryFailure", f"Lambda Invoke failed: {code}") from exc
                raise TaskError("PermanentFailure", f"Lambda Invoke failed: {code}") from exc
            body = response["Payload"].read().decode("utf-8", "replace")
            if response.get("FunctionError"):
                raise TaskError("PermanentFailure", f"Lambda returned function error: {body}")
            try:
                parsed = json.loads(body)
            except ValueError as exc:
                raise TaskError(
                    "PermanentFailure", "Invalid JSON returned in Lambda payload"
                ) from exc
            if not isinstance(parsed, dict):
                raise TaskError("PermanentFailure", "Invalid JSON returned in Lambda payload")
            return parsed

        return invoke

    def _one_task(
        self,
        job: Job,
        task: dict[str, Any],
        invoke: Callable[[dict[str, Any]], dict[str, Any]],
        user_arguments: dict[str, str],
    ) -> TaskResult:
        with self._lock:
            failing = set(self._failing_keys)
        if failing:
            try:
                key = decode_form_key(task["s3Key"])
            except Exception:
                key = task["s3Key"]
            if key in failing:
                return TaskResult(
                    task=task,
                    code="PermanentFailure",
                    text="injected permanent failure",
                    temporary_retries=0,
                )
        return run_task(invoke, job.job_id, task, strict=False, user_arguments=user_arguments)

    def _write_report(self, job: Job, s3: Any) -> None:
        """The completion report, when enabled and at least one task ran."""
        report = job.request.get("Report") or {}
        if not report.get("Enabled") or not job.results:
            return
        bucket = str(report["Bucket"]).split(":::", 1)[-1]
        prefix = str(report.get("Prefix") or "").strip("/")
        base = f"{prefix}/job-{job.job_id}" if prefix else f"job-{job.job_id}"
        scope = report.get("ReportScope", "AllTasks")
        groups = {"failed": [r for r in job.results if r.code != "Succeeded"]}
        if scope == "AllTasks":
            groups = {"succeeded": [r for r in job.results if r.code == "Succeeded"], **groups}
        results = []
        for status, rows in groups.items():
            if not rows:
                continue
            text = _report_csv(status, rows)
            key = f"{base}/results/{hashlib.sha1(uuid.uuid4().bytes).hexdigest()}.csv"
            s3.put_object(Bucket=bucket, Key=key, Body=text.encode("utf-8"))
            results.append(
                {
                    "TaskExecutionStatus": status,
                    "Bucket": bucket,
                    "MD5Checksum": hashlib.md5(text.encode("utf-8")).hexdigest(),
                    "Key": key,
                }
            )
        manifest = {
            "Format": REPORT_FORMAT,
            "ReportCreationDate": datetime.now(UTC).isoformat(timespec="milliseconds")[:-6] + "Z",
            "Results": results,
            "ReportSchema": REPORT_SCHEMA,
        }
        key = f"{base}/manifest.json"
        s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(manifest, indent=4).encode())
        job.report_manifest = key


def _report_csv(status: str, rows: list[TaskResult]) -> str:
    """Result rows as the documented examples show them: ``Bucket, Key, VersionId,
    TaskStatus, 200, <resultCode or empty>, <resultString>`` (key as in the manifest)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for r in rows:
        writer.writerow(
            [
                r.task["s3Bucket"],
                r.task["s3Key"],
                r.task.get("s3VersionId") or "",
                status,
                200,
                "" if r.code == "Succeeded" else r.code,
                r.text,
            ]
        )
    return out.getvalue()


def _validate(request: dict[str, Any]) -> None:
    """What CreateJob refuses (``BadRequestException``), and what the emulator does not run."""

    def bad(message: str) -> Exception:
        return _service_exception("BadRequestException", message)

    for name in ("Operation", "Report", "ClientRequestToken", "Priority", "RoleArn", "Manifest"):
        if request.get(name) in (None, ""):
            raise bad(f"{name} is required")
    lambda_op = (request.get("Operation") or {}).get("LambdaInvoke")
    if not lambda_op or len(request["Operation"]) != 1:
        raise bad("the emulator runs LambdaInvoke jobs only")
    if not lambda_op.get("FunctionArn"):
        raise bad("Operation.LambdaInvoke.FunctionArn is required")
    if str(lambda_op.get("InvocationSchemaVersion", "1.0")) != INVOCATION_SCHEMA_VERSION:
        raise bad("the emulator invokes with InvocationSchemaVersion 2.0 only")
    manifest = request["Manifest"]
    if (manifest.get("Spec") or {}).get("Format") != MANIFEST_FORMAT:
        raise bad(f"the emulator reads {MANIFEST_FORMAT} manifests only")
    location = manifest.get("Location") or {}
    if not location.get("ObjectArn") or not location.get("ETag"):
        raise bad("Manifest.Location needs ObjectArn and ETag")
    if not str(location["ObjectArn"]).startswith("arn:") or "/" not in str(location["ObjectArn"]):
        raise bad(f"invalid manifest ObjectArn {location['ObjectArn']!r}")
    report = request["Report"]
    if report.get("Enabled"):
        if report.get("Format") != REPORT_FORMAT:
            raise bad(f"Report.Format must be {REPORT_FORMAT}")
        if not str(report.get("Bucket", "")).startswith("arn:"):
            raise bad("Report.Bucket must be a bucket ARN")
        if report.get("ReportScope", "AllTasks") not in REPORT_SCOPES:
            raise bad(f"Report.ReportScope must be one of {REPORT_SCOPES}")
    priority = request["Priority"]
    if not isinstance(priority, int) or priority < 0:
        raise bad("Priority must be an integer >= 0")


# -- the routes -----------------------------------------------------------------------------------

_SERVICES: dict[int, BatchOperations] = {}
_SERVICES_LOCK = threading.Lock()


def service_for(port: int) -> BatchOperations:
    """The jobs of the emulator listening on ``port`` (created on first use)."""
    with _SERVICES_LOCK:
        found = _SERVICES.get(port)
        if found is None:
            found = _SERVICES[port] = BatchOperations(f"http://127.0.0.1:{port}")
        return found


def drop_service(port: int) -> None:
    """Forget the jobs of the emulator that listened on ``port`` (it stopped; a later emulator
    on the same port starts with none)."""
    with _SERVICES_LOCK:
        _SERVICES.pop(port, None)


def _port_of(host: str) -> int:
    return int(host.rsplit(":", 1)[1]) if ":" in host else 80


def _response_class() -> Any:
    from moto.core.responses import ActionResult
    from moto.s3control.responses import S3ControlResponse

    class JobsResponse(S3ControlResponse):
        """CreateJob, DescribeJob, ListJobs and UpdateJobStatus on moto's S3 Control."""

        def _jobs(self, operation: str) -> BatchOperations:
            service = service_for(_port_of(str(self.headers.get("Host", ""))))
            service.answer(operation)
            return service

        def create_job(self) -> ActionResult:
            service = self._jobs("CreateJob")
            request = {k: v for k, v in dict(self.params).items() if k != "AccountId"}
            job_id = service.create_job(self._get_param("AccountId"), self.region, request)
            return ActionResult({"JobId": job_id})

        def describe_job(self) -> ActionResult:
            service = self._jobs("DescribeJob")
            job = service.job(self._get_param("AccountId"), self._get_param("JobId"))
            return ActionResult({"Job": job.descriptor()})

        def list_jobs(self) -> ActionResult:
            service = self._jobs("ListJobs")
            statuses = self._get_param("JobStatuses")
            jobs = service.list_jobs(self._get_param("AccountId"), statuses)
            return ActionResult({"Jobs": [j.list_descriptor() for j in jobs]})

        def update_job_status(self) -> ActionResult:
            service = self._jobs("UpdateJobStatus")
            job = service.update_status(
                self._get_param("AccountId"),
                self._get_param("JobId"),
                self._get_param("RequestedJobStatus"),
                self._get_param("StatusUpdateReason"),
            )
            out = {"JobId": job.job_id, "Status": job.status}
            if job.status_update_reason:
                out["StatusUpdateReason"] = job.status_update_reason
            return ActionResult(out)

    return JobsResponse


_INSTALLED = threading.Lock()
_installed = False


def install() -> None:
    """Add the jobs routes to moto's S3 Control service. Once per process (idempotent); before
    the server answers its first S3 Control request (moto builds a service's routes then)."""
    global _installed
    with _INSTALLED:
        if _installed:
            return
        from moto.s3control import urls

        handler = _response_class().dispatch
        urls.url_paths[r"{0}/v20180820/jobs$"] = handler
        urls.url_paths[r"{0}/v20180820/jobs/(?P<id>[^/]+)$"] = handler
        urls.url_paths[r"{0}/v20180820/jobs/(?P<id>[^/]+)/status$"] = handler
        _installed = True
