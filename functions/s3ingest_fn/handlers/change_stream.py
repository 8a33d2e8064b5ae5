"""The change-stream relay Lambda: ledger DynamoDB stream in, events on the stack's bus out.

Event shape in: the Lambda DynamoDB Streams event (``{"Records": [{"eventName", "dynamodb":
{"NewImage", "SequenceNumber", ...}}, ...]}``), filtered by the event source mapping to applied
changes (:data:`s3ingest_fn.adapters.dynamo_ledger.STREAM_FILTER`). Shape out: the partial batch
response, ``{"batchItemFailures": [{"itemIdentifier": <SequenceNumber>}]}``, naming the first
record neither published nor dead-lettered; Lambda retries from there
(https://docs.aws.amazon.com/lambda/latest/dg/services-ddb-batchfailurereporting.html). A change
that can never be published goes to the relay's dead-letter queue with its reason
(:func:`s3ingest_fn.services.changes.publish`). Environment: ``CHANGE_BUS_NAME``,
``DEAD_LETTER_QUEUE_URL`` (the relay's), ``EFFECT_EVENTS`` (``true``: also effects done,
filtered by :data:`~s3ingest_fn.adapters.dynamo_ledger.EFFECT_STREAM_FILTER`); with
``LOG_KEYS=hashed`` each event's detail also carries ``keyHash`` (:class:`KeyHashing`), which
the change audit log keeps instead of the key.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

from s3ingest_fn import wiring
from s3ingest_fn.config_roles import ChangeRelayConfig
from s3ingest_fn.contract import CHANGE_RELAY_SERVICE
from s3ingest_fn.core.ports import ChangeEntry, ChangePublisher, DeadLetters, PublishOutcome
from s3ingest_fn.handlers import resume
from s3ingest_fn.handlers.telemetry import function_logger, invocation_metrics, key_policy
from s3ingest_fn.log_keys import KeyPolicy
from s3ingest_fn.services.changes import publish

logger = function_logger(CHANGE_RELAY_SERVICE)

#: The field ``logKeys: hashed`` adds to each event's detail: the key's keyed hash, which the
#: change audit log keeps in place of the key (subscribers still get ``key``).
KEY_HASH_FIELD = "keyHash"


class KeyHashing:
    """A :class:`~s3ingest_fn.core.ports.ChangePublisher` that adds :data:`KEY_HASH_FIELD`
    (:func:`s3ingest_fn.log_keys.key_hash` of ``detail.key``) to each entry's detail before
    ``inner`` publishes it."""

    def __init__(self, inner: ChangePublisher, policy: KeyPolicy) -> None:
        self.inner, self.policy = inner, policy

    def publish(self, entries: Sequence[ChangeEntry]) -> PublishOutcome:
        """``inner.publish`` of the entries with the hash added."""
        return self.inner.publish([self._hashed(e) for e in entries])

    def _hashed(self, entry: ChangeEntry) -> ChangeEntry:
        detail = json.loads(entry["Detail"])
        key = detail.get("key")
        if not isinstance(key, str):
            return entry
        detail[KEY_HASH_FIELD] = self.policy.shown(key)
        return {**entry, "Detail": json.dumps(detail)}


def relay(
    publisher: ChangePublisher,
    bus_name: str,
    event: dict[str, Any],
    metrics: EphemeralMetrics | None = None,
    dead_letters: DeadLetters | None = None,
    effects: bool = False,
) -> dict[str, Any]:
    """Publish the applied changes (and reviews; with ``effects``, effects done) of one stream
    batch.

    Parameters
    ----------
    publisher : ChangePublisher
        The change bus's publisher (:func:`s3ingest_fn.wiring.change_publisher`).
    bus_name : str
        The change bus.
    event : dict
        The Lambda DynamoDB Streams event.
    metrics : EphemeralMetrics, optional
        The invocation's metrics (``changes_published``, ``changes_dead_lettered``,
        ``changes_publish_failed``); None: not counted (the local runtime's event source).
    dead_letters : DeadLetters, optional
        The relay's dead-letter queue, for changes that can never be published (None: they
        stop the batch instead).
    effects : bool
        Also publish effects committed done (``Effect Done``; ``EFFECT_EVENTS``, with
        ``historyTable``).

    Returns
    -------
    dict
        The partial batch response: ``{"batchItemFailures": [{"itemIdentifier": seq}]}`` naming
        the first record neither published nor dead-lettered, or an empty list.
    """
    records = event.get("Records", [])
    policy = key_policy()
    if policy.mode == "hashed":
        publisher = KeyHashing(publisher, policy)
    published, failed_at, dead = publish(publisher, bus_name, records, dead_letters, effects)
    if metrics is not None:
        metrics.add_metric(name="changes_published", unit=MetricUnit.Count, value=len(published))
        if dead:
            metrics.add_metric(name="changes_dead_lettered", unit=MetricUnit.Count, value=len(dead))
    for entry in published:
        detail = json.loads(entry["Detail"])
        logger.debug(
            "change published",
            extra={
                "detail_type": entry["DetailType"],
                "change_id": detail.get("id"),
                "bucket": detail.get("bucket"),
                "key": detail.get("key"),
                "rev": detail.get("rev"),
            },
        )
    for seq, reason in dead:
        logger.error(
            "change cannot be published; sent to the relay's dead-letter queue",
            extra={"sequence_number": seq, "reason": reason},
        )
    if failed_at is None:
        return {"batchItemFailures": []}
    if metrics is not None:
        metrics.add_metric(name="changes_publish_failed", unit=MetricUnit.Count, value=1)
    logger.warning(
        "change stream publish failed; Lambda retries from this record",
        extra={"sequence_number": failed_at},
    )
    return {"batchItemFailures": [{"itemIdentifier": failed_at}]}


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Lambda entry point (``s3ingest_fn.handlers.change_stream.handler``)."""
    config = wiring.function_config(ChangeRelayConfig)
    dead_letters = wiring.function_change_dead_letters(config.dead_letter_queue_url)
    with invocation_metrics() as metrics:
        return relay(
            wiring.function_change_publisher(),
            config.change_bus_name,
            event,
            metrics,
            dead_letters,
            config.effect_events,
        )


#: the cold start ends with this module (see :mod:`s3ingest_fn.handlers`)
resume()
