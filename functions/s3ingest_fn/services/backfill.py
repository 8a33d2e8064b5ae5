"""S3 Batch Operations tasks -> observations in the ledger (CONTRACT C13, relying on C7).

A Batch Operations job over the stack's S3 Inventory manifest invokes the backfill Lambda with
one or more tasks (invocation schema 2.0, or 1.0;
https://docs.aws.amazon.com/AmazonS3/latest/userguide/batch-ops-invoke-lambda.html). Each task
names an object that existed when the inventory was taken. It is recorded as an observation
through the same ledger rules as a repair: the handler reads the object's *current* state and
writes it only if the row has not moved, so a backfill never overrides a newer live event, is
safe to overlap with live traffic, and changes nothing when run twice.

Keys: Batch Operations passes ``s3Key`` as the manifest wrote it. An S3 Inventory CSV manifest
form-encodes keys (space as ``+``), so keys are decoded with the same form decoding as events.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from s3ingest_fn.core.decide import IngestService
from s3ingest_fn.core.events import decode_form_key
from s3ingest_fn.core.model import (
    Change,
    Format,
    InvalidMessageError,
    Kind,
    Outcome,
    TransientError,
)

SUCCEEDED = "Succeeded"
TEMPORARY_FAILURE = "TemporaryFailure"
PERMANENT_FAILURE = "PermanentFailure"
SCHEMAS = ("1.0", "2.0")
#: How a ``Succeeded`` task's ``resultString`` starts when its row is in the ledger but a
#: processor's effect failed after it
#: (:attr:`~s3ingest_fn.core.model.TransientError.effects_pending`).
EFFECTS_PENDING = "effects-pending"
#: How effects a backfill left pending are finished, as its reports say.
EFFECTS_FINISH = (
    "once the processor works again: s3ingest reprocess --processor NAME (each processor that "
    "failed), or the next reconciliation, whose effects_pending repairs run them"
)


@dataclass(frozen=True)
class Task:
    """One Batch Operations task, parsed: bucket name, decoded key, raw key, version (or None)."""

    task_id: str
    bucket: str
    key: str
    raw_key: str
    version_id: str | None


def bucket_of(task: dict[str, Any], schema: str) -> str:
    """The task's bucket name: ``s3Bucket`` (2.0) or the last part of ``s3BucketArn`` (1.0; the
    AWS doc sample's ARN even carries a region and account: ``arn:aws:s3:us-east-1:0123:b``).

    Raises
    ------
    InvalidMessageError
        When neither field holds a bucket.
    """
    name = task.get("s3Bucket") if schema == "2.0" else None
    if not name:
        arn = task.get("s3BucketArn")
        name = arn.rsplit(":", 1)[-1] if isinstance(arn, str) else None
    if not isinstance(name, str) or not name:
        raise InvalidMessageError("missing-bucket", "task has neither s3Bucket nor s3BucketArn")
    return name


def parse_task(task: dict[str, Any], schema: str) -> Task:
    """Validate one task.

    Raises
    ------
    InvalidMessageError
        Missing bucket, or a key that is not valid form-encoding.
    """
    raw_key = task.get("s3Key")
    key = decode_form_key(raw_key)
    version = task.get("s3VersionId")
    return Task(
        task_id=str(task.get("taskId", "")),
        bucket=bucket_of(task, schema),
        key=key,
        raw_key=str(raw_key),
        version_id=version if isinstance(version, str) and version else None,
    )


def handle_invocation(event: dict[str, Any], service: IngestService) -> dict[str, Any]:
    """Process one Batch Operations invocation and build the response S3 requires.

    Parameters
    ----------
    event : dict
        ``{"invocationSchemaVersion", "invocationId", "job": {"id", ...}, "tasks": [...]}``.
    service : IngestService
        The ingest decision logic (its observation path).

    Returns
    -------
    dict
        ``{"invocationSchemaVersion", "treatMissingKeysAs", "invocationId", "results":
        [{"taskId", "resultCode", "resultString"}]}`` with one result per task: ``Succeeded``
        (applied, duplicate, the object is gone since the inventory, its key is outside the
        bucket's key filters: ``ignored: out-of-scope``, or the row is written and a
        processor's effect failed after it: ``effects-pending: ...``, left to ``s3ingest
        reprocess`` or reconciliation), ``TemporaryFailure`` (throttling, a ledger or service
        error, a worker killed before its commit: Batch Operations retries it) or
        ``PermanentFailure`` (an invalid task, a bucket that is not one of the stack's).
    """
    schema = str(event.get("invocationSchemaVersion", ""))
    job = event.get("job") if isinstance(event.get("job"), dict) else {}
    job_id = str((job or {}).get("id", "unknown"))
    results = []
    for raw in event.get("tasks") or []:
        task_id = str(raw.get("taskId", "")) if isinstance(raw, dict) else ""
        code, text = _one(raw, schema, job_id, service)
        results.append({"taskId": task_id, "resultCode": code, "resultString": text[:1000]})
    return {
        "invocationSchemaVersion": event.get("invocationSchemaVersion"),
        "treatMissingKeysAs": PERMANENT_FAILURE,
        "invocationId": event.get("invocationId"),
        "results": results,
    }


def _one(raw: Any, schema: str, job_id: str, service: IngestService) -> tuple[str, str]:
    if schema not in SCHEMAS:
        return PERMANENT_FAILURE, f"unsupported invocationSchemaVersion {schema!r}"
    if not isinstance(raw, dict):
        return PERMANENT_FAILURE, "task is not an object"
    try:
        task = parse_task(raw, schema)
    except InvalidMessageError as exc:
        return PERMANENT_FAILURE, f"invalid: {exc}"
    if service.tracked.reason(task.bucket, task.key) == "other-bucket":
        return PERMANENT_FAILURE, f"bucket {task.bucket} is not this stack's landing bucket"
    change = Change(
        bucket=task.bucket,
        key=task.key,
        raw_key=task.raw_key,
        kind=Kind.OBSERVE,
        event_name=f"Backfill/{job_id}",
        fmt=Format.BACKFILL,
        version_id=task.version_id,
    )
    try:
        result = service.handle(change)
    except TransientError as exc:
        if exc.effects_pending:
            # the row is written: the task's work is done; the effect waits for reprocess or
            # reconciliation (a processor outage must not fail the ledger's backfill)
            return SUCCEEDED, f"{EFFECTS_PENDING}: {exc}"
        return TEMPORARY_FAILURE, str(exc)
    if result.outcome in (Outcome.APPLIED, Outcome.DUPLICATE, Outcome.IGNORED):
        return SUCCEEDED, f"{result.outcome.value}: {result.reason}"
    return PERMANENT_FAILURE, f"{result.outcome.value}: {result.reason}"  # pragma: no cover
