"""The ordered change stream: applied ledger changes -> events on the stack's own bus (C11).

The outbox is the ledger itself: every write that applies a change marks the row as an applied
change with its deterministic change id, in the same conditional write
(:mod:`s3ingest_fn.adapters.dynamo_ledger`), and the
table's DynamoDB stream carries the row's new image. A relay Lambda, subscribed to the stream
with the filter :data:`STREAM_FILTER` (so it is invoked only for applied changes, never for effect
commits, claims or TTL deletions), turns each record into one event with :func:`change_event` and
publishes it with PutEvents.

Guarantees, and where they come from:

* **No losses.** A change is published iff its ledger write happened (same item, same write).
  A record whose PutEvents entry failed is reported in ``batchItemFailures``; Lambda retries
  from it (and everything after it in the shard, so order is kept) until the record leaves the
  stream (24 h), then sends its position to the on-failure destination
  (https://docs.aws.amazon.com/lambda/latest/dg/services-ddb-batchfailurereporting.html).
* **Duplicates at most.** Retries re-publish; every event carries ``detail.id`` (the change id,
  the same for every delivery of one change) for consumers to drop them.
* **Order.** DynamoDB Streams keeps the order of writes to one item within its shard; the relay
  publishes the records of a batch in order and stops at the first failure. EventBridge does not
  promise delivery order to targets, so ``detail.sequencer`` and ``detail.rev`` (the row
  revision, strictly increasing per key for the lifetime of the ledger row; a tombstone row
  expires by TTL and a re-created key starts again) let a consumer order or drop late events
  per key.

Event shape: ``source`` :data:`~s3ingest.settings.CHANGE_SOURCE` (``"s3ingest"``),
``detail-type`` ``"Object Ingested"`` (created) or ``"Object Tombstoned"`` (removed), ``detail``
as :func:`change_event` documents.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from s3ingest_fn.adapters.dynamo_ledger import STREAM_FILTER, is_applied_change, row_from_item

__all__ = [
    "DETAIL_TYPES",
    "SOURCE",
    "STREAM_FILTER",
    "change_event",
    "is_applied_change",
    "publish",
]

#: Kept in step with ``s3ingest.settings.CHANGE_SOURCE`` / ``CHANGE_DETAIL_TYPES`` (the function
#: package does not ship the ``s3ingest`` package; a unit test checks they agree).
SOURCE = "s3ingest"
DETAIL_TYPES = {"created": "Object Ingested", "removed": "Object Tombstoned"}

#: PutEvents takes at most 10 entries per request.
PUT_EVENTS_MAX = 10


def change_event(record: dict[str, Any], bus_name: str) -> dict[str, Any]:
    """The PutEvents entry for one applied-change stream record.

    Parameters
    ----------
    record : dict
        A DynamoDB stream record as Lambda delivers it (``NewImage`` in attribute-value form).
    bus_name : str

    Returns
    -------
    dict
        ``{"Source", "DetailType", "Detail", "EventBusName", "Resources"}``; ``Detail`` is JSON
        of ``{"id", "bucket", "key", "kind", "sequencer", "versionId", "etag", "size", "rev",
        "source", "eventName", "reason", "observed", "appliedAt"}`` (``sequencer``: the change's
        own, null for an observation; ``appliedAt`` in epoch ms; absent values are null).
    """
    row = row_from_item(record["dynamodb"]["NewImage"])
    kind = "created" if row.present else "removed"
    bucket = row.bucket
    detail = {
        "id": row.change_id,
        "bucket": bucket,
        "key": row.key,
        "kind": kind,
        "sequencer": row.change_seq,
        "versionId": row.version_id,
        "etag": row.etag,
        "size": row.size,
        "rev": row.rev,
        "source": row.source,
        "eventName": row.event_name,
        "reason": row.reason,
        "observed": row.observed,
        "appliedAt": row.updated_at,
    }
    # the partition (aws, aws-cn, aws-us-gov) of the stream the record came from
    partition = str(record.get("eventSourceARN") or "arn:aws").split(":")[1] or "aws"
    return {
        "Source": SOURCE,
        "DetailType": DETAIL_TYPES[kind],
        "EventBusName": bus_name,
        "Detail": json.dumps(detail),
        "Resources": [f"arn:{partition}:s3:::{bucket}"],
    }


def publish(
    events_client: Any, bus_name: str, records: Iterable[dict[str, Any]]
) -> tuple[list[dict[str, Any]], str | None]:
    """Publish the applied changes among ``records`` in order, ten per PutEvents request,
    stopping at the first entry EventBridge did not accept.

    Parameters
    ----------
    events_client : EventBridge client
    bus_name : str
    records : iterable of dict
        DynamoDB stream records as Lambda delivers them; each has ``dynamodb.SequenceNumber``.

    Returns
    -------
    (published, failed_sequence_number)
        The entries published, and the stream ``SequenceNumber`` of the first record not
        published (None when all were): Lambda resumes from it.
    """
    todo = [(r, change_event(r, bus_name)) for r in records if is_applied_change(r)]
    published: list[dict[str, Any]] = []
    for i in range(0, len(todo), PUT_EVENTS_MAX):
        chunk = todo[i : i + PUT_EVENTS_MAX]
        try:
            resp = events_client.put_events(Entries=[entry for _, entry in chunk])
        except (ClientError, BotoCoreError):
            return published, chunk[0][0]["dynamodb"]["SequenceNumber"]
        results = resp.get("Entries", [])
        for i, (record, entry) in enumerate(chunk):
            result = results[i] if i < len(results) else {}  # unanswered: not published
            if result.get("ErrorCode") or not result.get("EventId"):
                return published, record["dynamodb"]["SequenceNumber"]
            published.append(entry)
    return published, None
