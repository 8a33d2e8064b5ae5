"""S3 Batch Operations, driven locally (moto implements no Batch Operations jobs).

:func:`run_job` does what a job with an ``S3InventoryReport_CSV_20161130`` manifest and a
``LambdaInvoke`` operation (invocation schema 2.0) does: one task per manifest row, the key as
the manifest wrote it (form-encoded), ``s3VersionId`` null for the null version; it invokes the
function with the real request shape, checks the response against what S3 requires
(``invocationSchemaVersion`` and ``invocationId`` copied, one result per ``taskId``, a known
``resultCode``), redrives ``TemporaryFailure`` tasks, and reports like the job's completion
report (https://docs.aws.amazon.com/AmazonS3/latest/userguide/batch-ops-job-status.html).
"""

from __future__ import annotations

import base64
import csv
import gzip
import io
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from s3ingest_fn.services.inventory import Manifest

RESULT_CODES = ("Succeeded", "TemporaryFailure", "PermanentFailure")
#: Times a TemporaryFailure task is redriven before it counts as failed.
MAX_TEMPORARY_RETRIES = 3

Invoke = Callable[[dict[str, Any]], dict[str, Any]]


class InvalidResponseError(RuntimeError):
    """The function's response is not what Batch Operations accepts (the job would fail)."""


class TaskError(Exception):
    """Raised by an ``invoke`` callable when the invocation itself ends the task: ``code``
    ``"TemporaryFailure"`` (Lambda throttled or failed as a service: the task is redriven) or
    ``"PermanentFailure"`` (a function error: the task fails with ``message`` as its result,
    as a completion report shows ``Lambda returned function error: ...``,
    https://docs.aws.amazon.com/AmazonS3/latest/userguide/batch-ops-examples-reports.html)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class TaskResult:
    """How one task ended: its last ``code`` and ``text`` (the result string) and how many
    times it was redriven after a ``TemporaryFailure``."""

    task: dict[str, Any]
    code: str
    text: str
    temporary_retries: int


@dataclass
class JobReport:
    """Counts and failures of one job, like its completion report."""

    job_id: str
    manifest: str
    total: int = 0
    succeeded: int = 0
    failed: int = 0
    temporary_retries: int = 0
    result_strings: dict[str, int] = field(default_factory=dict)
    failures: list[dict[str, str]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready report."""
        return dict(self.__dict__)


def manifest_tasks(manifest: Manifest, data_files: list[bytes]) -> Iterator[dict[str, Any]]:
    """One task per row of the inventory CSV data files, keys left as written."""
    columns = {name: i for i, name in enumerate(manifest.columns)}
    v = columns.get("VersionId")
    for data in data_files:
        text = gzip.decompress(data).decode("utf-8")
        for row in csv.reader(io.StringIO(text)):
            if not row:
                continue
            yield {
                "taskId": base64.b64encode(uuid.uuid4().bytes).decode().rstrip("="),
                "s3Key": row[columns["Key"]],
                "s3Bucket": row[columns["Bucket"]],
                "s3VersionId": (row[v] or None) if v is not None else None,
            }


def run_job(
    manifest_key: str,
    manifest: Manifest,
    data_files: list[bytes],
    invoke: Invoke,
    between: Callable[[int], None] | None = None,
) -> JobReport:
    """Run the job's tasks through ``invoke`` (one task per invocation, as S3 does).

    Parameters
    ----------
    between : callable, optional
        Called with the task index before each task (tests interleave live traffic with it).

    Raises
    ------
    InvalidResponseError
        When a response breaks the Batch Operations contract.
    """
    job_id = str(uuid.uuid4())
    report = JobReport(job_id=job_id, manifest=manifest_key)
    for index, task in enumerate(manifest_tasks(manifest, data_files)):
        if between:
            between(index)
        result = run_task(invoke, job_id, task)
        report.total += 1
        report.temporary_retries += result.temporary_retries
        head = result.text.split(":", 1)[0]
        report.result_strings[head] = report.result_strings.get(head, 0) + 1
        if result.code == "Succeeded":
            report.succeeded += 1
        else:
            report.failed += 1
            report.failures.append(
                {"key": task["s3Key"], "resultCode": result.code, "resultString": result.text}
            )
    return report


def run_task(
    invoke: Invoke,
    job_id: str,
    task: dict[str, Any],
    *,
    strict: bool = True,
    user_arguments: dict[str, str] | None = None,
) -> TaskResult:
    """Invoke the function for one task, redriving it while it answers ``TemporaryFailure``
    (at most :data:`MAX_TEMPORARY_RETRIES` times; then it fails with that code).
    ``temporary_retries`` counts the ``TemporaryFailure`` answers.

    Parameters
    ----------
    strict : bool
        ``True``: a response that breaks the contract raises; ``False``: the task fails
        (``PermanentFailure``, the reason as its result string), as a job does.
    user_arguments : dict, optional
        The job's ``LambdaInvoke.UserArguments`` (``job.userArguments`` of the request).

    Raises
    ------
    InvalidResponseError
        When ``strict`` and a response breaks the Batch Operations contract.
    """
    retries = 0
    code, text = "TemporaryFailure", ""
    for _attempt in range(MAX_TEMPORARY_RETRIES + 1):
        try:
            code, text = _invoke_one(invoke, job_id, task, user_arguments or {})
        except TaskError as exc:
            code, text = exc.code, exc.message
        except InvalidResponseError as exc:
            if strict:
                raise
            code, text = "PermanentFailure", f"Invalid response from Lambda: {exc}"
        if code != "TemporaryFailure":
            break
        retries += 1
    return TaskResult(task=task, code=code, text=text, temporary_retries=retries)


def _invoke_one(
    invoke: Invoke, job_id: str, task: dict[str, Any], user_arguments: dict[str, str]
) -> tuple[str, str]:
    request = {
        "invocationSchemaVersion": "2.0",
        "invocationId": base64.b64encode(uuid.uuid4().bytes).decode(),
        "job": {"id": job_id, "userArguments": dict(user_arguments)},
        "tasks": [task],
    }
    response = json.loads(json.dumps(invoke(request)))  # what crosses the wire is JSON
    for name in ("invocationSchemaVersion", "invocationId"):
        if response.get(name) != request[name]:
            raise InvalidResponseError(f"{name} not copied: {response.get(name)!r}")
    results = response.get("results")
    if not isinstance(results, list) or [r.get("taskId") for r in results] != [task["taskId"]]:
        raise InvalidResponseError(f"results must hold exactly the task ids: {results!r}")
    code = results[0].get("resultCode")
    if code not in RESULT_CODES:
        raise InvalidResponseError(f"unknown resultCode {code!r}")
    return code, str(results[0].get("resultString", ""))
