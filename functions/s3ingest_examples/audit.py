"""Example processor function: an audit record per applied change, for an ``every-change``
processor (each change of a key runs, oldest first: ``docs/effects.md``).

Processor entry: ``{"name": "audit", "handler": "s3ingest_examples.audit:handler", "mode":
"every-change"}``. For every change it writes
``<AUDIT_PREFIX><bucket>/<key>/<token:012d>-<change id>.json`` to ``OUTPUT_BUCKET`` (default
prefix ``audit/``; one claim may run several waiting changes under one token, so order a key's
records by ``token``, then ``sequencer``): named by bucket and key, as a ledger row (CONTRACT
C1), so buckets holding the same key keep their own records. For a key too long for that name to
fit S3's 1,024-byte limit the folder is ``<AUDIT_PREFIX>_sha256/<bucket>/<SHA-256 of the
key>/`` instead (no bucket name starts with ``_``: the two forms never meet; see
:func:`record_key`)::

    {"changeId", "bucket", "key", "kind", "sequencer", "versionId", "etag", "size",
     "source", "eventName", "token"}

The object is named by the change id, so running the effect again (after a timeout, a crash)
writes the same record again: idempotent. It reads no content (no presigned GET), so it needs
nothing but PutObject on the output bucket.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from s3ingest_processor import Change, Content  # pragma: no cover

DEFAULT_PREFIX = "audit/"
#: S3's limit on a key, UTF-8 bytes (https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-keys.html).
MAX_KEY_BYTES = 1024
#: Folder under the prefix for the records of keys too long to be named after.
HASHED_FOLDER = "_sha256/"


def record_key(change: Change, prefix: str = DEFAULT_PREFIX) -> str:
    """Where the audit record of ``change`` goes, grouped per bucket and key, then by the fencing
    token: ``<prefix><bucket>/<key>/<token:012d>-<change id>.json``, or, when that would pass
    S3's limit of :data:`MAX_KEY_BYTES` UTF-8 bytes, ``<prefix>_sha256/<bucket>/<hex SHA-256 of
    key>/<token:012d>-<change id>.json`` (the record's ``bucket`` and ``key`` name the object)."""
    name = f"{change.token:012d}-{change.change_id}.json"
    plain = f"{prefix}{change.bucket}/{change.key}/{name}"
    if len(plain.encode("utf-8")) <= MAX_KEY_BYTES:
        return plain
    digest = hashlib.sha256(change.key.encode("utf-8")).hexdigest()
    return f"{prefix}{HASHED_FOLDER}{change.bucket}/{digest}/{name}"


def audit(change: Change, content: Content | None) -> None:
    """The audit record of one change (the body of :func:`handler`).

    Raises
    ------
    KeyError
        When ``OUTPUT_BUCKET`` is not set (a function error: retried).
    """
    import boto3

    record = {
        "changeId": change.change_id,
        "bucket": change.bucket,
        "key": change.key,
        "kind": change.kind,
        "sequencer": change.sequencer,
        "versionId": change.version_id,
        "etag": change.etag,
        "size": change.size,
        "source": change.source,
        "eventName": change.event_name,
        "token": change.token,
    }
    boto3.client("s3").put_object(
        Bucket=os.environ["OUTPUT_BUCKET"],
        Key=record_key(change, os.environ.get("AUDIT_PREFIX", DEFAULT_PREFIX)),
        Body=json.dumps(record).encode(),
        ContentType="application/json",
    )


def handler(event: Any, context: Any) -> dict[str, Any]:
    """The Lambda handler (``s3ingest_examples.audit:handler``): the processor request in,
    ``{"status": "done"}`` out (``docs/processor-api.md``)."""
    return _handler()(event, context)


@cache
def _handler() -> Any:
    from s3ingest_processor import processor

    return processor(audit)
