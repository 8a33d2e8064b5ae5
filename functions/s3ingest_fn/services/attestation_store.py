"""Where attestations are kept and announced (issue 38): the document and its leaves stored in
the stack's bucket (``attestations/<bucket>/``), its SHA-256 as an event on the change bus, the
newest document of a bucket found again (``s3ingest status``), and the scheduled run's
attestation after its repairs (:func:`scheduled`).

S3: PutObject (https://docs.aws.amazon.com/AmazonS3/latest/API/API_PutObject.html), ListObjectsV2;
EventBridge: PutEvents (https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutEvents.html).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from typing import IO, Any

from s3ingest_fn.contract import ATTESTATION_BUCKET_ENV
from s3ingest_fn.core.model import TransientError
from s3ingest_fn.core.ports import ChangeEntry, ChangePublisher
from s3ingest_fn.core.row import LedgerRow
from s3ingest_fn.services.attestation import (
    ROOT,
    Attestation,
    AttestError,
    AttestRequest,
    attest,
    document_bytes,
    document_key,
)
from s3ingest_fn.services.attestation_pass import TreeTap
from s3ingest_fn.services.changes import DETAIL_TYPES, SOURCE
from s3ingest_fn.services.reconcile import Reconciler

#: The change bus's ``detail-type`` of an attestation (``DETAIL_TYPES["attestation"]``).
DETAIL_TYPE = DETAIL_TYPES["attestation"]
#: The longest the scheduled run waits for its repairs to leave the ingest queue, seconds.
SETTLE_SECONDS = 120.0


def put(s3: Any, bucket: str, key: str, body: bytes | IO[bytes], content_type: str) -> str | None:
    """PutObject with a SHA-256 checksum, which a bucket under Object Lock requires (the SDK
    sends none where ``request_checksum_calculation`` is ``when_required``,
    https://docs.aws.amazon.com/AmazonS3/latest/API/API_PutObject.html); the version id (None in
    a bucket without versioning)."""
    answer = s3.put_object(
        Bucket=bucket, Key=key, Body=body, ContentType=content_type, ChecksumAlgorithm="SHA256"
    )
    version = answer.get("VersionId")
    return str(version) if version and version != "null" else None


def store(made: Attestation, s3: Any, bucket: str) -> dict[str, Any]:
    """Store the leaves, then the document (naming the leaves' location) in ``bucket``.

    Returns
    -------
    dict
        ``document`` (as stored), ``location`` (``bucket``, ``key``, ``version_id``),
        ``document_sha256`` (over the stored bytes, hex), ``differences_total``.
    """
    document = made.document
    key = document_key(document)
    leaves_key = key[: -len(".json")] + ".leaves.jsonl"
    leaves_version = put(s3, bucket, leaves_key, made.leaves_file(), "application/x-ndjson")
    document["inputs"]["leaves"].update(
        {"bucket": bucket, "key": leaves_key, "version_id": leaves_version}
    )
    body = document_bytes(document)
    version = put(s3, bucket, key, body, "application/json")
    return {
        "document": document,
        "location": {"bucket": bucket, "key": key, "version_id": version},
        "document_sha256": hashlib.sha256(body).hexdigest(),
        "differences_total": len(made.differences),
    }


def summary(stored: dict[str, Any]) -> dict[str, Any]:
    """What the log line, the change event and ``status`` say of a stored attestation: the
    document's ``bucket``, ``stack``, ``taken_at``, ``equal``, both ``roots``, ``keys``,
    ``differing``, ``location`` and ``document_sha256``."""
    doc = stored["document"]
    return {
        "stack": doc["stack"],
        "bucket": doc["bucket"],
        "taken_at": doc["snapshot"]["taken_at"],
        "equal": doc["equal"],
        "roots": doc["roots"],
        "keys": doc["counts"]["keys"],
        "differing": doc["differences_total"],
        "location": stored["location"],
        "document_sha256": stored["document_sha256"],
    }


def attestation_event(stored: dict[str, Any], bus_name: str) -> ChangeEntry:
    """The change bus's event of a stored attestation: ``source`` ``s3ingest``,
    ``detail-type`` :data:`DETAIL_TYPE`, ``detail`` :func:`summary`, ``resources`` the
    document's S3 ARN."""
    where = stored["location"]
    return {
        "Source": SOURCE,
        "DetailType": DETAIL_TYPE,
        "EventBusName": bus_name,
        "Detail": json.dumps(summary(stored), sort_keys=True),
        "Resources": [f"arn:aws:s3:::{where['bucket']}/{where['key']}"],
    }


def announce(stored: dict[str, Any], publisher: ChangePublisher, bus_name: str) -> bool:
    """Publish :func:`attestation_event`; whether the bus took it."""
    outcome = publisher.publish([attestation_event(stored, bus_name)])
    return outcome.stopped is None and not outcome.refused


def newest(s3: Any, bucket: str, landing: str) -> dict[str, Any] | None:
    """The newest attestation document of landing bucket ``landing`` in ``bucket`` (the last
    ``attestations/<landing>/*.json`` in key order: keys are snapshot times), or None."""
    prefix = f"{ROOT}/{landing}/"
    last: str | None = None
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", ()):
            key = str(item["Key"])
            if key.endswith(".json") and (last is None or key > last):
                last = key
    if last is None:
        return None
    raw = s3.get_object(Bucket=bucket, Key=last)["Body"].read()
    document: dict[str, Any] = json.loads(raw)
    document["_location"] = {"bucket": bucket, "key": last}
    document["_sha256"] = hashlib.sha256(raw).hexdigest()
    return document


def settle(
    depth: Callable[[], int],
    *,
    budget_s: float = SETTLE_SECONDS,
    poll_s: float = 5.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Wait until ``depth()`` (the ingest queue's visible and in-flight messages) is 0, at most
    ``budget_s`` seconds; whether it got there (the repairs were applied)."""
    end = clock() + budget_s
    while depth() > 0:
        if clock() >= end:
            return False
        sleep(poll_s)
    return True


def queue_depth(sqs: Any, queue_url: str) -> Callable[[], int]:
    """:func:`settle`'s ``depth`` over SQS GetQueueAttributes (visible plus in flight)."""
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]

    def depth() -> int:
        attributes = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=names)
        return sum(int(attributes["Attributes"].get(n, 0)) for n in names)

    return depth


def scheduled(
    reconciler: Reconciler,
    s3: Any,
    *,
    store_bucket: str,
    stack: str,
    source: str,
    margin_ms: int | None = None,
    prefix: str = "",
    tap: TreeTap | None = None,
    read_row: Callable[[str], LedgerRow | None] | None = None,
) -> dict[str, Any]:
    """The scheduled run's attestation of the reconciler's bucket over every configured
    processor, stored in ``store_bucket``.

    With ``tap`` (an ``inventory`` run's, :mod:`s3ingest_fn.services.attestation_pass`): the
    trees of the run's own pass under ``prefix`` (the run's), the rows of the keys it queued
    a repair for read again with ``read_row(key)`` (what the repairs wrote); neither the
    report nor the ledger is read again. Without (a ``listing`` run):
    :func:`~s3ingest_fn.services.attestation.attest` from ``source`` with ``margin_ms`` (the
    run's), a second read of both.

    Returns
    -------
    dict
        :func:`store`'s result.

    Raises
    ------
    AttestError
        When a reader fails.
    """
    if tap is None:
        made = attest(reconciler, AttestRequest(source=source, margin_ms=margin_ms), stack=stack)
        return store(made, s3, store_bucket)
    if tap.repaired:
        if read_row is None:
            raise AttestError("the repaired keys' rows cannot be read again")
        try:
            tap.recheck({key: read_row(key) for key in dict.fromkeys(tap.repaired)})
        except TransientError as exc:
            raise AttestError(f"reading the repaired keys' rows failed: {exc}") from exc
    made = tap.attestation(stack=stack, scope=reconciler.scope.as_dict(), prefix=prefix)
    return store(made, s3, store_bucket)


def tap_for(reconciler: Reconciler, clock: Callable[[], float] = time.time) -> TreeTap:
    """A tap for the scheduled run's pass over the reconciler's bucket: every configured
    processor attested."""
    return TreeTap(reconciler.bucket, sorted(reconciler.targets, key=lambda t: t.name), clock)


__all__ = [
    "ATTESTATION_BUCKET_ENV",
    "DETAIL_TYPE",
    "AttestError",
    "TreeTap",
    "announce",
    "attestation_event",
    "newest",
    "queue_depth",
    "scheduled",
    "settle",
    "store",
    "summary",
    "tap_for",
]
