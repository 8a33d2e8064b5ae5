"""The ordered change stream: applied ledger changes -> events on the stack's own bus (C11).

The outbox is the ledger itself: every write that applies a change marks the row as an applied
change with its deterministic change id, in the same conditional write
(:mod:`s3ingest_fn.adapters.dynamo_ledger`), and the
table's DynamoDB stream carries the row's new image. A relay Lambda, subscribed to the stream
with the filter :data:`s3ingest_fn.adapters.dynamo_ledger.STREAM_FILTER` (so it is invoked only
for applied changes and reviews, never for claims or TTL deletions; with ``historyTable`` also
:data:`~s3ingest_fn.adapters.dynamo_ledger.EFFECT_STREAM_FILTER`, effects committed done), turns
each record into one event with :func:`change_event` and publishes it with PutEvents.

Guarantees, and where they come from:

* **No losses, nothing unseen.** A change is published iff its ledger write happened (same
  item, same write), or else it reaches the relay's dead-letter queue. A change that can never
  be published (over PutEvents' 256 KB alone, or refused for its content) goes there at once,
  as a message carrying the reason and the change (:func:`dead_letter_body`), and the batch
  goes on. A record whose entry was refused for now (throttling, a fault, the relay's
  permissions) is reported in ``batchItemFailures``; Lambda retries from it (and everything
  after it in the shard, so order is kept) a bounded number of times within a bounded record
  age, then sends the batch's position to the same queue
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
With ``historyTable``, also each effect committed ``done`` (``source`` ``"s3ingest.effects"``,
``detail-type`` ``"Effect Done"``, :func:`effect_event`), for the history table's ``done`` rows;
its own ``source`` keeps it from every rule that matches the changes'.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, NamedTuple

from s3ingest_fn.adapters.dynamo_ledger import (
    done_effect,
    is_applied_change,
    is_effect_done,
    is_review,
    row_from_item,
)
from s3ingest_fn.contract import ATTESTATION_DETAIL_TYPE
from s3ingest_fn.core.model import TransientError
from s3ingest_fn.core.ports import ChangeEntry, ChangePublisher, DeadLetters

__all__ = [
    "DEAD_LETTER_BODY_MAX",
    "DETAIL_TYPES",
    "EFFECT_DETAIL_TYPE",
    "EFFECT_SOURCE",
    "SOURCE",
    "Relayed",
    "change_event",
    "dead_letter_body",
    "effect_event",
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
    "attestation": ATTESTATION_DETAIL_TYPE,
}
#: An effect done (``historyTable`` only): a ``source`` of its own, so that a rule matching the
#: change stream's ``source`` (the stack's audit rule and archive, a team's subscription) never
#: receives it as a change. Kept in step with ``s3ingest.settings.EFFECT_SOURCE`` /
#: ``EFFECT_DETAIL_TYPE``.
EFFECT_SOURCE = "s3ingest.effects"
EFFECT_DETAIL_TYPE = "Effect Done"


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


def effect_event(record: dict[str, Any], bus_name: str) -> ChangeEntry:
    """The PutEvents entry for the stream record of an effect committed ``done``
    (:func:`~s3ingest_fn.adapters.dynamo_ledger.is_effect_done`).

    Returns
    -------
    ChangeEntry
        As :func:`change_event`; ``Source`` :data:`EFFECT_SOURCE`, ``DetailType``
        :data:`EFFECT_DETAIL_TYPE`; ``Detail`` is JSON of ``{"id", "bucket", "key",
        "processor", "version", "rev", "at"}`` (``id``: the change the effect completed;
        ``version``: the processor's; ``rev``: the row's revision at the commit; ``at``: epoch
        ms, the commit's clock, else the stream record's ``ApproximateCreationDateTime``, whole
        seconds). Every field comes from the record, so each delivery of it is the same event.
    """
    done = done_effect(record)
    at = done.at
    if at is None:
        approx = record.get("dynamodb", {}).get("ApproximateCreationDateTime")
        at = int(float(approx) * 1000) if isinstance(approx, int | float) else None
    detail = {
        "id": done.change_id,
        "bucket": done.bucket,
        "key": done.key,
        "processor": done.processor,
        "version": done.version,
        "rev": done.rev,
        "at": at,
    }
    partition = str(record.get("eventSourceARN") or "arn:aws").split(":")[1] or "aws"
    return {
        "Source": EFFECT_SOURCE,
        "DetailType": EFFECT_DETAIL_TYPE,
        "EventBusName": bus_name,
        "Detail": json.dumps(detail),
        "Resources": [f"arn:{partition}:s3:::{done.bucket}"],
    }


def _entry(record: dict[str, Any], bus_name: str, effects: bool) -> ChangeEntry | None:
    """The entry of one stream record, or None for a record the relay does not publish."""
    if is_applied_change(record):
        return change_event(record, bus_name)
    if is_review(record):
        return review_event(record, bus_name)
    if effects and is_effect_done(record):
        return effect_event(record, bus_name)
    return None


#: The largest body of a dead-lettered change, bytes: SQS's 256 KiB message limit (body and
#: attributes together; https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-messages.html)
#: less 8 KiB for the attributes the dead-letter adapter adds (reason, sequence number).
DEAD_LETTER_BODY_MAX = 256 * 1024 - 8 * 1024
#: Characters a dead-letter body keeps of a long string field, in turn, until it fits.
_FIELD_CAPS = (1024, 64)


def _cut(value: Any, cap: int, path: str, cut: list[str]) -> Any:
    """``value`` with each string longer than ``cap`` characters cut to ``cap`` (their paths
    appended to ``cut``)."""
    if isinstance(value, str) and len(value) > cap:
        cut.append(path)
        return value[:cap]
    if isinstance(value, dict):
        return {k: _cut(v, cap, f"{path}.{k}", cut) for k, v in value.items()}
    if isinstance(value, list):
        return [_cut(v, cap, f"{path}[{n}]", cut) for n, v in enumerate(value)]
    return value


def dead_letter_body(record: dict[str, Any], entry: ChangeEntry, reason: str) -> str:
    """The relay's dead-letter message for a change it can never publish: JSON of
    ``{"reason", "sequenceNumber", "eventSourceARN", "source", "detailType", "resources",
    "detail", "truncated"}`` (``detail``: the change event's detail as :func:`change_event`
    builds it; ``truncated``: the paths of the strings cut so the body fits, empty when none
    was), at most :data:`DEAD_LETTER_BODY_MAX` bytes. Strings over 1024 characters are cut to
    1024, then to 64; a body still too large keeps only the reason and the record's position."""
    try:
        detail: Any = json.loads(entry["Detail"])
    except ValueError:
        detail = entry["Detail"]
    body: dict[str, Any] = {
        "reason": reason,
        "sequenceNumber": record.get("dynamodb", {}).get("SequenceNumber"),
        "eventSourceARN": record.get("eventSourceARN"),
        "source": entry["Source"],
        "detailType": entry["DetailType"],
        "resources": list(entry.get("Resources") or []),
        "detail": detail,
        "truncated": [],
    }
    text = json.dumps(body)
    for cap in _FIELD_CAPS:
        if len(text.encode("utf-8")) <= DEAD_LETTER_BODY_MAX:
            return text
        cut: list[str] = []
        smaller = _cut({k: v for k, v in body.items() if k != "truncated"}, cap, "", cut)
        text = json.dumps({**smaller, "truncated": [p.lstrip(".") for p in cut]})
    if len(text.encode("utf-8")) <= DEAD_LETTER_BODY_MAX:
        return text
    return json.dumps(
        {"reason": reason[:500], "sequenceNumber": body["sequenceNumber"], "truncated": ["*"]}
    )


class Relayed(NamedTuple):
    """What :func:`publish` did with a batch: ``published`` (the entries published),
    ``failed_at`` (the stream ``SequenceNumber`` of the first record neither published nor
    dead-lettered, None when there is none: Lambda resumes from it) and ``dead_lettered``
    (``(SequenceNumber, reason)`` of each change sent to the dead-letter queue)."""

    published: list[ChangeEntry]
    failed_at: str | None
    dead_lettered: list[tuple[str, str]]


def publish(
    publisher: ChangePublisher,
    bus_name: str,
    records: Iterable[dict[str, Any]],
    dead_letters: DeadLetters | None = None,
    effects: bool = False,
) -> Relayed:
    """Publish the changes among ``records`` in order; dead-letter those that can never be
    published; stop at the first the bus did not accept for now.

    Parameters
    ----------
    publisher : ChangePublisher
        Groups entries into PutEvents requests by count and size.
    bus_name : str
    records : iterable of dict
        DynamoDB stream records as Lambda delivers them; each has ``dynamodb.SequenceNumber``.
    dead_letters : DeadLetters, optional
        The relay's dead-letter queue: each change that can never be published is sent there
        (:func:`dead_letter_body`, with its reason and sequence number as attributes) and the
        batch goes on. None: such a change stops the batch like a transient refusal (Lambda's
        retries, then the on-failure destination, take it). A send the queue refuses
        (:class:`~s3ingest_fn.core.model.TransientError`) stops the batch at that record.
    effects : bool
        Also publish effects committed ``done`` (:func:`effect_event`; ``historyTable``).
        False: their records are skipped, as any record that is not a change.

    Returns
    -------
    Relayed
    """
    todo = [(r, entry) for r in records if (entry := _entry(r, bus_name, effects)) is not None]
    outcome = publisher.publish([entry for _, entry in todo])
    stop = len(todo) if outcome.stopped is None else outcome.stopped
    dead: list[tuple[str, str]] = []
    for i, reason in sorted(outcome.refused.items()):
        if i >= stop:
            break
        record, entry = todo[i]
        seq = str(record["dynamodb"]["SequenceNumber"])
        if dead_letters is None:
            stop = i
            break
        try:
            dead_letters.send(dead_letter_body(record, entry, reason), reason, "", seq)
        except TransientError:
            stop = i
            break
        dead.append((seq, reason))
    published = [entry for i, (_, entry) in enumerate(todo[:stop]) if i not in outcome.refused]
    failed_at = todo[stop][0]["dynamodb"]["SequenceNumber"] if stop < len(todo) else None
    return Relayed(published, failed_at, dead)
