"""The ordered change stream: applied ledger changes -> events on the stack's own bus (C11).

The outbox is the ledger itself: every write that applies a change marks the row as an applied
change with its deterministic change id, in the same conditional write
(:mod:`s3ingest_fn.adapters.dynamo_ledger`), and the
table's DynamoDB stream carries the row's new image. A relay Lambda, subscribed to the stream
with the filter :data:`s3ingest_fn.adapters.dynamo_ledger.STREAM_FILTER` (so it is invoked only
for applied changes, never for effect commits, claims or TTL deletions), turns each record into
one event with :func:`change_event` and publishes it with PutEvents.

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
as :func:`change_event` documents; and, for the hold policy's decisions
(:mod:`s3ingest_fn.core.hold`), ``"Object Held"``, ``"Change Approved"`` and
``"Change Rejected"`` (:func:`review_event`), published from the write that recorded them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from s3ingest_fn.adapters.dynamo_ledger import is_applied_change, is_review, row_from_item
from s3ingest_fn.core.ports import ChangeEntry, ChangePublisher

__all__ = [
    "DETAIL_TYPES",
    "SOURCE",
    "change_event",
    "is_applied_change",
    "publish",
    "review_event",
]

#: Kept in step with ``s3ingest.settings.CHANGE_SOURCE`` / ``CHANGE_DETAIL_TYPES`` (the function
#: package does not ship the ``s3ingest`` package; a unit test checks they agree).
SOURCE = "s3ingest"
DETAIL_TYPES = {
    "created": "Object Ingested",
    "removed": "Object Tombstoned",
    "held": "Object Held",
    "approved": "Change Approved",
    "rejected": "Change Rejected",
}


def change_event(record: dict[str, Any], bus_name: str) -> ChangeEntry:
    """The PutEvents entry for one applied-change stream record.

    Parameters
    ----------
    record : dict
        A DynamoDB stream record as Lambda delivers it (``NewImage`` in attribute-value form).
    bus_name : str

    Returns
    -------
    ChangeEntry
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
    entry: ChangeEntry = {
        "Source": SOURCE,
        "DetailType": DETAIL_TYPES[kind],
        "EventBusName": bus_name,
        "Detail": json.dumps(detail),
        "Resources": [f"arn:{partition}:s3:::{bucket}"],
    }
    return entry


def review_event(record: dict[str, Any], bus_name: str) -> ChangeEntry:
    """The PutEvents entry for a stream record of a hold, approval or rejection
    (:func:`~s3ingest_fn.adapters.dynamo_ledger.is_review`): the row's newest review decision.

    Returns
    -------
    ChangeEntry
        As :func:`change_event`; ``DetailType`` ``"Object Held"``, ``"Change Approved"`` or
        ``"Change Rejected"``; ``Detail`` is JSON of ``{"id", "bucket", "key", "processor",
        "action", "reason", "actor", "sequencer", "rev", "at"}`` (``id``: the held change's
        id; ``actor``: ``policy`` for a hold, else the operator's identity; ``at`` epoch ms).
    """
    row = row_from_item(record["dynamodb"]["NewImage"])
    review = row.trail[0]
    detail = {
        "id": review.change_id,
        "bucket": row.bucket,
        "key": row.key,
        "processor": review.processor,
        "action": review.action,
        "reason": review.reason,
        "actor": review.actor,
        "sequencer": None if review.seq == "-" else review.seq,
        "rev": row.rev,
        "at": review.at,
    }
    partition = str(record.get("eventSourceARN") or "arn:aws").split(":")[1] or "aws"
    return {
        "Source": SOURCE,
        "DetailType": DETAIL_TYPES[review.action],
        "EventBusName": bus_name,
        "Detail": json.dumps(detail),
        "Resources": [f"arn:{partition}:s3:::{row.bucket}"],
    }


def publish(
    publisher: ChangePublisher, bus_name: str, records: Iterable[dict[str, Any]]
) -> tuple[list[ChangeEntry], str | None]:
    """Publish the applied changes among ``records`` in order, stopping at the first entry the
    bus did not accept (the :class:`~s3ingest_fn.core.ports.ChangePublisher` sends them ten per
    PutEvents request).

    Parameters
    ----------
    publisher : ChangePublisher
    bus_name : str
    records : iterable of dict
        DynamoDB stream records as Lambda delivers them; each has ``dynamodb.SequenceNumber``.

    Returns
    -------
    (published, failed_sequence_number)
        The entries published, and the stream ``SequenceNumber`` of the first record not
        published (None when all were): Lambda resumes from it.
    """
    todo = [
        (r, change_event(r, bus_name) if is_applied_change(r) else review_event(r, bus_name))
        for r in records
        if is_applied_change(r) or is_review(r)
    ]
    accepted = publisher.publish([entry for _, entry in todo])
    published = [entry for _, entry in todo[:accepted]]
    if accepted < len(todo):
        return published, todo[accepted][0]["dynamodb"]["SequenceNumber"]
    return published, None
