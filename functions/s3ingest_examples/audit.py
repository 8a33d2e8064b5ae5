"""Example processor function: an audit record per applied change, for an ``every-change``
processor (each change of a key runs, oldest first: ``docs/effects.md``).

Processor entry: ``{"name": "audit", "handler": "s3ingest_examples.audit:handler", "mode":
"every-change"}``. For every change it writes
``<OUTPUT_PREFIX><bucket>/<key>/<token:012d>-<change id>.json`` to ``OUTPUT_BUCKET`` (default
prefix ``audit/``; one claim may run several waiting changes under one token, so order a key's
records by ``token``, then ``sequencer``)::

    {"changeId", "bucket", "key", "kind", "sequencer", "versionId", "etag", "size",
     "source", "eventName", "token"}

The object is named by the change id, so running the effect again (after a timeout, a crash)
writes the same record again: idempotent. It reads no content (no presigned GET), so it needs
nothing but PutObject on the output bucket.
"""

from __future__ import annotations

import json
import os
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from s3ingest_processor import Change, Content  # pragma: no cover

DEFAULT_PREFIX = "audit/"


def record_key(change: Change, prefix: str = DEFAULT_PREFIX) -> str:
    """Where the audit record of ``change`` goes (grouped per key by the fencing token)."""
    return f"{prefix}{change.bucket}/{change.key}/{change.token:012d}-{change.change_id}.json"


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
