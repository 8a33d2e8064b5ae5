"""The backfill state machine's Lambda steps (the S3 Control calls themselves are direct SDK
integrations of the state machine).

* ``prepare``: the inventory manifest to backfill from (the newest report, or the one given),
  checked against its checksum, with its ETag (``CreateJob`` requires it) and its data files;
* ``report``: read the job's completion report (failed tasks only) and count the failures;
* ``backfill_file``: the ``distributed-map`` engine's child: backfill every key of one inventory
  data file as observations, without S3 Batch Operations;
* ``summarize``: the ``distributed-map`` engine's totals, in the shape of a Batch Operations
  job's progress summary.

Completion reports: ``<prefix>/job-<id>/manifest.json`` lists result CSV files (no header, schema
``Bucket, Key, VersionId, TaskStatus, ErrorCode, HTTPStatusCode, ResultMessage``;
https://docs.aws.amazon.com/AmazonS3/latest/userguide/batch-ops-examples-reports.html).
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from s3ingest_fn.core.context import in_caller_context
from s3ingest_fn.core.decide import IngestService
from s3ingest_fn.core.model import Change, Format, Kind, TransientError
from s3ingest_fn.core.ports import InventoryStore
from s3ingest_fn.services.inventory import read_rows
from s3ingest_fn.services.reconcile import Reconciler

REPORT_PREFIX = "backfill-reports"
#: The outcome of a key whose row is in the ledger while a processor's effect failed after it
#: (:attr:`~s3ingest_fn.core.model.TransientError.effects_pending`): a succeeded key, its
#: effect left to ``s3ingest reprocess`` or reconciliation.
EFFECTS_PENDING = "effects_pending"


#: What a backfill does without an inventory report (``docs/backfill.md``).
BACKFILL_INSTEAD = (
    "name one with backfill start --manifest KEY once it exists, "
    "or bring the bucket in by listing: s3ingest onboard"
)


def prepare(reconciler: Reconciler, event: dict[str, Any]) -> dict[str, Any]:
    """``{"manifest"?: key}`` -> ``{"manifestKey", "manifestEtag", "manifestObjectArn",
    "files", "createdMs"}``.

    Raises
    ------
    ReconcileError
        No report yet, or a manifest whose checksum does not match.
    """
    key = event.get("manifest") or reconciler.newest_manifest(BACKFILL_INSTEAD)
    manifest = reconciler.manifest(key)
    etag = reconciler.inventory.etag(reconciler.require_inventory_bucket(), key)
    partition = str(event.get("partition", "aws"))
    return {
        "manifestKey": key,
        "manifestEtag": etag,
        "manifestObjectArn": f"arn:{partition}:s3:::{reconciler.inventory_bucket}/{key}",
        "files": list(manifest.files),
        "createdMs": manifest.created_ms,
    }


def read_report(
    store: InventoryStore, bucket: str, job_id: str, prefix: str = REPORT_PREFIX, sample: int = 20
) -> dict[str, Any]:
    """Failed tasks of a finished job, from its completion report.

    Parameters
    ----------
    store : InventoryStore
        Reads the report bucket's objects.
    bucket : str
        The report bucket.
    job_id : str
    prefix : str
        The job's report prefix in ``bucket``.
    sample : int
        At most this many failed tasks in ``samples``.

    Returns
    -------
    dict
        ``{"reportManifest", "failed", "errors": {ErrorCode: n}, "samples": [...]}``; ``failed``
        0 and no manifest when the job had no failure report.

    Raises
    ------
    TransientError
        When S3 fails (a missing report manifest is no failure).
    """
    key = f"{prefix}/job-{job_id}/manifest.json"
    raw = store.read_if_exists(bucket, key)
    if raw is None:
        return {"reportManifest": None, "failed": 0, "errors": {}, "samples": []}
    doc = json.loads(raw)
    schema = [
        c.strip()
        for c in str(
            doc.get(
                "ReportSchema",
                "Bucket, Key, VersionId, TaskStatus, ErrorCode, HTTPStatusCode, ResultMessage",
            )
        ).split(",")
    ]
    failed, errors = 0, Counter[str]()
    samples: list[dict[str, str]] = []
    for result in doc.get("Results", []):
        if result.get("TaskExecutionStatus") != "failed":
            continue
        text = store.read(result["Bucket"], result["Key"]).decode()
        for row in csv.reader(io.StringIO(text)):
            if not row:
                continue
            rec = _report_record(schema, row)
            failed += 1
            errors[rec.get("ErrorCode", "")] += 1
            if len(samples) < sample:
                samples.append(rec)
    return {"reportManifest": key, "failed": failed, "errors": dict(errors), "samples": samples}


def _report_record(schema: list[str], row: list[str]) -> dict[str, str]:
    """One result row as ``{column: value}``. The documented example rows put the HTTP status
    before the error code (``bucket,key,,failed,200,PermanentFailure,"Lambda returned function
    error: ..."``), unlike the ``ReportSchema`` they come with
    (https://docs.aws.amazon.com/AmazonS3/latest/userguide/batch-ops-examples-reports.html): a
    numeric ``ErrorCode`` beside a non-numeric ``HTTPStatusCode`` is read the other way round."""
    rec = dict(zip(schema, row, strict=False))
    code, status = rec.get("ErrorCode", ""), rec.get("HTTPStatusCode", "")
    if code.isdigit() and not status.isdigit():
        rec["ErrorCode"], rec["HTTPStatusCode"] = status, code
    return rec


def backfill_file(
    reconciler: Reconciler, service: IngestService, event: dict[str, Any], concurrency: int = 16
) -> dict[str, Any]:
    """``{"manifest", "file", "jobId"?}``: observe every key of one inventory data file.

    Returns
    -------
    dict
        ``{"file", "keys", "outcomes": {outcome: n}, "temporaryFailures"}``. Keys whose
        observation kept failing are counted in ``temporaryFailures`` (the state machine retries
        the file); a key whose row is written while a processor's effect failed after it is the
        outcome ``effects_pending`` (:data:`EFFECTS_PENDING`), not a failure.
    """
    manifest = reconciler.manifest(event["manifest"])
    keys = sorted(
        {row.key for row in read_rows(manifest, reconciler.get_inventory_object(event["file"]))}
    )
    run = str(event.get("jobId") or "distributed-map")

    def observe(key: str) -> str:
        change = Change(
            bucket=reconciler.bucket,
            key=key,
            raw_key=key,
            kind=Kind.OBSERVE,
            event_name=f"Backfill/{run}",
            fmt=Format.BACKFILL,
        )
        try:
            return service.handle(change).outcome.value
        except TransientError as exc:  # effects pending: the row is written (docs/backfill.md)
            return EFFECTS_PENDING if exc.effects_pending else "temporary-failure"

    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        outcomes = Counter(pool.map(in_caller_context(observe), keys))
    temporary = outcomes.pop("temporary-failure", 0)
    return {
        "file": event["file"],
        "keys": len(keys),
        "outcomes": dict(outcomes),
        "temporaryFailures": temporary,
    }


def summarize(event: dict[str, Any]) -> dict[str, Any]:
    """``{"files": [backfill_file results]}`` -> ``{"total", "succeeded", "failed",
    "outcomes"}`` (keys, not rows: each key is observed once)."""
    outcomes: Counter[str] = Counter()
    failed = 0
    for result in event.get("files", []):
        outcomes.update(result.get("outcomes", {}))
        failed += int(result.get("temporaryFailures", 0))
    succeeded = sum(outcomes.values())
    return {
        "total": succeeded + failed,
        "succeeded": succeeded,
        "failed": failed,
        "outcomes": dict(outcomes),
    }
