"""The stack's resources the local runtime creates too, as the settings give them: the ingest
queue and its dead-letter queue, the ledger table, the ingest rule and its archive, (with
``changeStream``) the change relay's dead-letter queue and the change bus's rule and archive, and
each landing bucket's inventory configuration.

One description, read by the CDK features (:mod:`s3ingest_cdk.features`) and by the local
provisioner (:func:`s3ingest.local.stack.provisioning.provision`), beside the function-role table
(:mod:`s3ingest.function_roles`): the same :class:`~s3ingest.settings.Settings` give the same
properties locally as deployed (``tests/infra/test_infra_local_resources.py`` compares both with
the synthesized template). CDK-free, like the role table. Property names are CloudFormation's,
which for these are the service APIs' too (SQS queue attributes, DynamoDB ``CreateTable``,
EventBridge ``PutRule`` / ``CreateArchive``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from s3ingest.function_roles import CHANGE_RELAY
from s3ingest.settings import (
    CHANGE_SOURCE,
    EFFECT_SOURCE,
    INVENTORY_ID,
    INVENTORY_PREFIX,
    Settings,
    ingest_event_pattern,
)
from s3ingest_fn.adapters.dynamo_ledger import PARTITION_KEY, TTL_ATTRIBUTE
from s3ingest_fn.adapters.sqs import DEAD_LETTER_MAX_MESSAGE_BYTES, INGEST_QUEUE_MAX_MESSAGE_BYTES

#: Seconds in a day (retentions are set in days, SQS counts seconds).
DAY_SECONDS = 86_400
#: The ledger's stream view with the change stream: the relay reads the row as written.
LEDGER_STREAM_VIEW = "NEW_IMAGE"
#: The change bus's rule and archive: every change the relay publishes (``source`` ``s3ingest``).
CHANGE_PATTERN: Mapping[str, Any] = {"source": [CHANGE_SOURCE]}
#: The history rule's pattern: the changes, and the effects done the relay publishes with
#: ``historyTable`` under their own ``source`` (:data:`~s3ingest.settings.EFFECT_SOURCE`).
HISTORY_PATTERN: Mapping[str, Any] = {"source": [CHANGE_SOURCE, EFFECT_SOURCE]}

#: Optional inventory fields reconciliation reads (CONTRACT C12: ETag / versionId mismatches).
INVENTORY_OPTIONAL_FIELDS = (
    "Size",
    "LastModifiedDate",
    "ETag",
    "IsMultipartUploaded",
    "StorageClass",
)


def inventory_configuration(destination_arn: Any, account_id: Any) -> dict[str, Any]:
    """The stack's daily inventory of a landing bucket (id ``s3ingest-daily``) as
    PutBucketInventoryConfiguration takes it: CSV, all versions, the optional fields
    reconciliation reads, to ``destination_arn`` under ``inventory/``; ``account_id`` owns the
    destination (``AccountId``, checked by S3 before it writes,
    https://docs.aws.amazon.com/AmazonS3/latest/API/API_PutBucketInventoryConfiguration.html).
    Either may be a CDK token."""
    return {
        "Id": INVENTORY_ID,
        "IsEnabled": True,
        "Destination": {
            "S3BucketDestination": {
                "AccountId": account_id,
                "Bucket": destination_arn,
                "Format": "CSV",
                "Prefix": INVENTORY_PREFIX,
            }
        },
        "IncludedObjectVersions": "All",
        "OptionalFields": list(INVENTORY_OPTIONAL_FIELDS),
        "Schedule": {"Frequency": "Daily"},
    }


@dataclass(frozen=True)
class QueueSpec:
    """One standard SQS queue (seconds, bytes); ``max_receive_count``: receives before a message
    moves to its dead-letter queue (None: no redrive policy). SQS's defaults for what is None
    (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SetQueueAttributes.html)."""

    retention_seconds: int
    visibility_timeout_seconds: int | None = None
    max_message_bytes: int | None = None
    max_receive_count: int | None = None

    def properties(self, dead_letter_arn: Any = None) -> dict[str, Any]:
        """``AWS::SQS::Queue`` properties: ``MessageRetentionPeriod``, ``VisibilityTimeout``,
        ``MaximumMessageSize`` (ints) and ``RedrivePolicy`` (``{"deadLetterTargetArn":
        dead_letter_arn, "maxReceiveCount"}``), those set only."""
        out: dict[str, Any] = {"MessageRetentionPeriod": self.retention_seconds}
        if self.visibility_timeout_seconds is not None:
            out["VisibilityTimeout"] = self.visibility_timeout_seconds
        if self.max_message_bytes is not None:
            out["MaximumMessageSize"] = self.max_message_bytes
        if self.max_receive_count is not None:
            out["RedrivePolicy"] = {
                "deadLetterTargetArn": dead_letter_arn,
                "maxReceiveCount": self.max_receive_count,
            }
        return out

    def attributes(self, dead_letter_arn: str | None = None) -> dict[str, str]:
        """``CreateQueue``'s ``Attributes``: :meth:`properties` as strings (the redrive policy
        as JSON)."""
        return {
            name: json.dumps(value) if isinstance(value, dict) else str(value)
            for name, value in self.properties(dead_letter_arn).items()
        }


@dataclass(frozen=True)
class TableSpec:
    """The ledger table: on-demand, string partition key, TTL attribute, and a stream of
    ``stream_view`` (None: no stream)."""

    partition_key: str = PARTITION_KEY
    ttl_attribute: str = TTL_ATTRIBUTE
    stream_view: str | None = None

    def properties(self) -> dict[str, Any]:
        """``AWS::DynamoDB::Table`` properties: ``BillingMode``, ``KeySchema``,
        ``AttributeDefinitions``, ``TimeToLiveSpecification`` and, with a stream,
        ``StreamSpecification``."""
        out: dict[str, Any] = {
            "BillingMode": "PAY_PER_REQUEST",
            "KeySchema": [{"AttributeName": self.partition_key, "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": self.partition_key, "AttributeType": "S"}],
            "TimeToLiveSpecification": self.time_to_live(),
        }
        if self.stream_view is not None:
            out["StreamSpecification"] = {"StreamViewType": self.stream_view}
        return out

    def create_table_arguments(self) -> dict[str, Any]:
        """``CreateTable``'s arguments but the name and encryption: :meth:`properties` without
        the TTL (``UpdateTimeToLive`` sets it), the stream ``StreamEnabled``."""
        out = {k: v for k, v in self.properties().items() if k != "TimeToLiveSpecification"}
        if self.stream_view is not None:
            out["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": self.stream_view}
        return out

    def time_to_live(self) -> dict[str, Any]:
        """``TimeToLiveSpecification`` (CloudFormation's and ``UpdateTimeToLive``'s)."""
        return {"AttributeName": self.ttl_attribute, "Enabled": True}


@dataclass(frozen=True)
class RuleSpec:
    """An EventBridge rule's ``EventPattern`` and its archive's ``RetentionDays`` (same
    pattern, https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-archive.html)."""

    pattern: dict[str, Any]
    archive_retention_days: int


@dataclass(frozen=True)
class StackResources:
    """What :func:`describe` gives: each resource the local runtime creates as the stack does."""

    ingest_queue: QueueSpec
    dead_letter_queue: QueueSpec
    ledger: TableSpec
    ingest_rule: RuleSpec
    #: With ``changeStream``: the relay's own dead-letter queue and the change bus's rule.
    change_dead_letter_queue: QueueSpec | None = None
    change_rule: RuleSpec | None = None
    #: With ``historyTable``: the history writer's queue (a rule on the change bus sends every
    #: change to it) and its dead-letter queue.
    history_queue: QueueSpec | None = None
    history_dead_letter_queue: QueueSpec | None = None


def ingest_queues(settings: Settings) -> tuple[QueueSpec, QueueSpec]:
    """The ingest queue and its dead-letter queue: ``queueRetentionDays``,
    ``queueVisibilityTimeoutSeconds``, ``maxReceiveCount``, ``dlqRetentionDays``, and the
    bodies each takes (:mod:`s3ingest_fn.adapters.sqs`)."""
    queue = QueueSpec(
        retention_seconds=settings.queue_retention_days * DAY_SECONDS,
        visibility_timeout_seconds=settings.queue_visibility_timeout_seconds,
        max_message_bytes=INGEST_QUEUE_MAX_MESSAGE_BYTES,
        max_receive_count=settings.max_receive_count,
    )
    dead = QueueSpec(
        retention_seconds=settings.dlq_retention_days * DAY_SECONDS,
        max_message_bytes=DEAD_LETTER_MAX_MESSAGE_BYTES,
    )
    return queue, dead


def ledger(settings: Settings) -> TableSpec:
    """The ledger table; a ``NEW_IMAGE`` stream with ``changeStream``."""
    return TableSpec(stream_view=LEDGER_STREAM_VIEW if settings.change_stream else None)


def ingest_rule(settings: Settings, entries: Sequence[Mapping[str, Any]]) -> RuleSpec:
    """The ingest rule of the buckets ``entries`` (:func:`~s3ingest.settings.ingest_event_pattern`)
    and its archive (``archiveRetentionDays``)."""
    return RuleSpec(ingest_event_pattern(entries), settings.archive_retention_days)


def change_rule(settings: Settings) -> RuleSpec:
    """The change bus's rule, every change the relay publishes (``source`` ``s3ingest``), and
    the bus's archive (``archiveRetentionDays``)."""
    return RuleSpec(dict(CHANGE_PATTERN), settings.archive_retention_days)


def change_dead_letter_queue() -> QueueSpec:
    """The change relay's dead-letter queue (its role's ``dead_letter_days``)."""
    days = CHANGE_RELAY.dead_letter_days
    assert days is not None  # the relay's row has one
    return QueueSpec(retention_seconds=days * DAY_SECONDS)


#: The history writer's queue: a batch's commit takes seconds, the visibility timeout covers
#: the function's timeout (5 minutes) with room; a record failing 5 receives is dead-lettered.
HISTORY_VISIBILITY_SECONDS = 6 * 60
HISTORY_MAX_RECEIVE_COUNT = 5


def history_queues() -> tuple[QueueSpec, QueueSpec]:
    """The history writer's queue and its dead-letter queue (14 days, SQS's longest)."""
    queue = QueueSpec(
        retention_seconds=4 * DAY_SECONDS,
        visibility_timeout_seconds=HISTORY_VISIBILITY_SECONDS,
        max_receive_count=HISTORY_MAX_RECEIVE_COUNT,
    )
    return queue, QueueSpec(retention_seconds=14 * DAY_SECONDS)


def describe(settings: Settings, entries: Sequence[Mapping[str, Any]]) -> StackResources:
    """Every resource of :class:`StackResources` for ``settings``, the ingest rule matching the
    buckets ``entries`` (``[{"name", "prefixes", "suffixes", "account"?}]``)."""
    queue, dead = ingest_queues(settings)
    changes = settings.change_stream
    return StackResources(
        ingest_queue=queue,
        dead_letter_queue=dead,
        ledger=ledger(settings),
        ingest_rule=ingest_rule(settings, entries),
        change_dead_letter_queue=change_dead_letter_queue() if changes else None,
        change_rule=change_rule(settings) if changes else None,
        history_queue=history_queues()[0] if changes and settings.history_table else None,
        history_dead_letter_queue=(
            history_queues()[1] if changes and settings.history_table else None
        ),
    )
