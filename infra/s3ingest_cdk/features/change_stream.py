"""The ordered change stream (CONTRACT C11): the ledger's DynamoDB stream -> the relay -> the
change bus, with its archive and audit log."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from constructs import Construct

from s3ingest import function_roles, stack_resources
from s3ingest.settings import Settings
from s3ingest_cdk.constructs import ChangeBus
from s3ingest_cdk.constructs.change_bus import change_bus_name
from s3ingest_cdk.constructs.function import RoleFunction
from s3ingest_cdk.features.evidence import (
    STREAM_EVIDENCE,
    XRAY_EVIDENCE,
    acknowledge_dead_letter_queue,
    acknowledge_function,
    synchronous_evidence,
)
from s3ingest_cdk.nag import acknowledge
from s3ingest_fn import config_roles as fn_roles
from s3ingest_fn.adapters.dynamo_ledger import EFFECT_STREAM_FILTER, STREAM_FILTER

#: The change stream's batch: records of one shard per invocation (the relay publishes them in
#: order, at most ten and 256 KB per PutEvents request).
CHANGE_BATCH_SIZE = 100
#: How old a stream record may get before Lambda stops retrying its batch and sends the batch's
#: position to the relay's dead-letter queue: well inside the stream's 24-hour retention, so the
#: records can still be read from the stream for 18 hours after the alarm
#: (https://docs.aws.amazon.com/lambda/latest/dg/services-ddb-params.html).
CHANGE_MAX_RECORD_AGE = Duration.hours(6)
#: Retries of a failing batch before the same: bounds a batch that fails every time (a crash
#: bisected down to one record), while an outage of PutEvents is bounded by the record age.
CHANGE_RETRY_ATTEMPTS = 1000


class ChangeStream(Construct):
    """Publish every applied change, in order per key, to the pipeline's own bus.

    Attributes
    ----------
    change_bus : s3ingest_cdk.constructs.ChangeBus
        ``bus``, ``archive``, ``audit_log_group`` and the audit ``rule``.
    change_relay : s3ingest_cdk.constructs.function.RoleFunction
        ``function``, ``role``, ``log_group`` and the mapping's ``dead_letter_queue``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        code: lambda_.Code,
        ledger_table: dynamodb.ITable,
    ) -> None:
        super().__init__(scope, construct_id)
        self.change_bus = ChangeBus(
            self,
            "ChangeBus",
            bus_name=change_bus_name(settings.stage),
            # the stack's description, which the local runtime provisions from too
            archive_retention=Duration.days(
                stack_resources.change_rule(settings).archive_retention_days
            ),
            log_retention_days=settings.log_retention_days,
            log_keys=settings.log_keys,
        )
        acknowledge(
            self.change_bus.rule,
            "Serverless-EventBusDLQ",
            "The change audit log's rule: every change it matches is also in the change bus's "
            "archive (replayable for archiveRetentionDays, "
            "https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-archive.html) and in "
            "the ledger, the source of truth; a dead-letter queue would hold a third copy.",
        )
        bus_name = self.change_bus.bus.event_bus_name
        # Effects done are published for the history table only: no rule of the stack matches
        # them otherwise, and each would cost a PutEvents entry (and a relay invocation).
        effects = settings.history_table
        self.change_relay = RoleFunction(
            self,
            row=function_roles.CHANGE_RELAY,
            settings=settings,
            code=code,
            environment=lambda owner: fn_roles.ChangeRelayConfig(
                bus_name, owner.dead_letter_queue.queue_url, effect_events=effects
            ).to_env(),
        )
        relay = self.change_relay.function
        # Its role's "*" (X-Ray and dynamodb:ListStreams) is acknowledged below, in one reason.
        acknowledge_function(
            relay,
            None,
            tracing=settings.tracing,
            dead_letters=synchronous_evidence(
                "its DynamoDB stream event source mapping, whose on-failure destination is its "
                "own dead-letter queue (the change relay's DeadLetterQueue)"
            ),
        )
        # PutEvents on the change bus only; the bus's policy admits no one else.
        self.change_bus.bus.grant_put_events_to(relay)
        self.change_bus.admit_only(self.change_relay.role)
        # The relay dead-letters changes it can never publish (their reason and the change).
        self.change_relay.dead_letter_queue.grant_send_messages(relay)
        # The mapping reads the stream (CDK grants the stream read) and sends given-up batches'
        # positions to the same dead-letter queue (CDK grants sqs:SendMessage on it).
        self.change_source = event_sources.DynamoEventSource(
            ledger_table,
            starting_position=lambda_.StartingPosition.TRIM_HORIZON,
            batch_size=CHANGE_BATCH_SIZE,
            # Order: one concurrent batch per shard, so a key's changes (one item's stream records
            # stay in one shard, in write order) are published one after another.
            parallelization_factor=1,
            # A function error halves the batch until the failing record is alone; a change the
            # bus refused for now is reported by sequence number and Lambda retries from it. A
            # change that can never be published does not stop the batch: the relay sends it to
            # its dead-letter queue with the reason (s3ingest_fn.services.changes.publish).
            bisect_batch_on_error=True,
            report_batch_item_failures=True,
            # Bounded retries: a batch still failing after CHANGE_RETRY_ATTEMPTS retries or
            # CHANGE_MAX_RECORD_AGE is dropped, and its position (shard, sequence numbers) goes
            # to the dead-letter queue, whose alarm sends the operator to read the records from
            # the stream while they last, or re-publish them from the ledger rows, which still
            # hold them (docs/runbook.md#change-stream-dlq). Nothing expires unseen.
            # https://docs.aws.amazon.com/lambda/latest/dg/services-ddb-params.html
            retry_attempts=CHANGE_RETRY_ATTEMPTS,
            max_record_age=CHANGE_MAX_RECORD_AGE,
            # Applied changes and reviews (never effect claims, nor TTL deletions), and with the
            # history table effects committed done: the relay's own filters, so they cannot
            # drift. Without it the mapping is as it was, one filter.
            filters=[
                lambda_.FilterCriteria.filter(f)
                for f in (STREAM_FILTER, *((EFFECT_STREAM_FILTER,) if effects else ()))
            ],
            on_failure=event_sources.SqsDlq(self.change_relay.dead_letter_queue),
        )
        relay.add_event_source(self.change_source)
        acknowledge(
            self.change_relay.role,
            "AwsSolutions-IAM5[Resource::*]",
            f"{XRAY_EVIDENCE} And {STREAM_EVIDENCE}" if settings.tracing else STREAM_EVIDENCE,
        )
        acknowledge(
            self.change_relay.dead_letter_queue,
            "AwsSolutions-SQS3",
            "This queue is a dead-letter queue: the change relay's event source mapping's "
            "on-failure destination (DestinationConfig.OnFailure, "
            "https://docs.aws.amazon.com/lambda/latest/dg/services-dynamodb-errors.html) and the "
            "relay's own for changes it can never publish; cdk-nag only recognises SQS redrive "
            "and Lambda DLQs.",
        )
        acknowledge_dead_letter_queue(
            self.change_relay.dead_letter_queue,
            "the change relay's event source mapping's on-failure destination",
        )
