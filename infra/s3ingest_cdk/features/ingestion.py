"""Ingestion: the landing bucket's events -> EventBridge rule (archived) -> SQS (+DLQ) -> the
ingest function -> the ledger (CONTRACT C1-C11)."""

from __future__ import annotations

from aws_cdk import Duration
from constructs import Construct

from s3ingest import function_roles, stack_resources
from s3ingest_cdk.constructs import IngestQueue, IngestRouting
from s3ingest_cdk.constructs.function import RoleFunction
from s3ingest_cdk.constructs.python_function import reserve_concurrency
from s3ingest_cdk.features.evidence import (
    acknowledge_dead_letter_queue,
)
from s3ingest_cdk.features.role_function import add_queue_source
from s3ingest_cdk.features.service import Given, grant_ingest_service
from s3ingest_cdk.nag import acknowledge
from s3ingest_fn import config as fn_config


class Ingestion(Construct):
    """The live path: the ingest rule and its archive, the ingest queue and its dead-letter
    queue, and the ingest function with its grants and its cdk-nag acknowledgements.

    Attributes
    ----------
    ingest_queue : s3ingest_cdk.constructs.IngestQueue
        ``queue`` and ``dead_letter_queue``.
    routing : s3ingest_cdk.constructs.IngestRouting
        ``rule``, ``archive`` and the rule target's ``target_dead_letter_queue``.
    ingest : s3ingest_cdk.constructs.function.RoleFunction
        ``function``, ``role``, ``log_group``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        given: Given,
    ) -> None:
        super().__init__(scope, construct_id)
        settings, code, landings, ledger_table, output_bucket, processors = given
        # the stack's description, which the local runtime provisions from too
        spec, dead_spec = stack_resources.ingest_queues(settings)
        assert spec.visibility_timeout_seconds is not None and spec.max_receive_count is not None
        self.ingest_queue = IngestQueue(
            self,
            "Ingest",
            visibility_timeout=Duration.seconds(spec.visibility_timeout_seconds),
            retention_period=Duration.seconds(spec.retention_seconds),
            dead_letter_retention_period=Duration.seconds(dead_spec.retention_seconds),
            max_receive_count=spec.max_receive_count,
        )
        queue = self.ingest_queue.queue
        dead_letter_queue = self.ingest_queue.dead_letter_queue
        rule = stack_resources.ingest_rule(settings, [e.pattern_entry for e in landings.entries])
        self.routing = IngestRouting(
            self,
            "Routing",
            pattern=rule.pattern,
            queue=queue,
            archive_retention=Duration.days(rule.archive_retention_days),
            dead_letter_retention_period=Duration.seconds(dead_spec.retention_seconds),
        )
        acknowledge(
            self.routing.target_dead_letter_queue,
            "AwsSolutions-SQS3",
            "This queue is a dead-letter queue: the ingest rule target's DeadLetterConfig "
            "(https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-rule-dlq.html); "
            "cdk-nag only recognises SQS redrive and Lambda DLQs.",
        )
        acknowledge_dead_letter_queue(
            self.routing.target_dead_letter_queue, "the ingest rule target's DeadLetterConfig"
        )
        acknowledge_dead_letter_queue(
            dead_letter_queue, "the ingest queue's redrive policy, and invalid messages"
        )
        self.ingest = RoleFunction(
            self,
            row=function_roles.INGEST,
            settings=settings,
            code=code,
            environment=fn_config.IngestConfig(
                ledger_table_name=ledger_table.table_name,
                dead_letter_queue_url=dead_letter_queue.queue_url,
                tombstone_ttl_seconds=settings.tombstone_ttl_seconds,
                record_concurrency=settings.record_concurrency,
                bucket_name=landings.first.bucket.bucket_name,
            ).to_env(),
        )
        function = self.ingest.function
        # Live ingest keeps its share whatever else runs (a backfill included).
        reserve_concurrency(function, settings.ingest_reserved_concurrency)
        for name, value in landings.scope_environment(self).items():
            function.add_environment(name, value)
        grant_ingest_service(
            function,
            ledger_table=ledger_table,
            buckets=landings.buckets,
            processor=settings.processor,
            output_bucket=output_bucket,
            processors=processors,
            objects_reason="The function reads whichever object an event names: s3:GetObject "
            "and s3:GetObjectVersion on the landing bucket's objects only (key unknown in "
            "advance).",
        )
        # Invalid messages go to the DLQ with their reason (C9).
        dead_letter_queue.grant(function, "sqs:SendMessage")
        add_queue_source(
            self.ingest,
            queue,
            name="ingest",
            tracing=settings.tracing,
            batch_size=settings.batch_size,
            max_batching_window=Duration.seconds(settings.max_batching_window_seconds),
            max_concurrency=settings.max_concurrency,
        )
