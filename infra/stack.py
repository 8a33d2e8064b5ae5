"""The s3ingest stack: composes the constructs and wires the least-privilege grants."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Duration, Stack, Tags
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from constructs import Construct

from infra.bundling import function_code
from infra.constructs import IngestFunction, IngestQueue, IngestRouting, LandingBucket, LedgerTable
from infra.nag import acknowledge, wildcard_resource_finding
from s3ingest.settings import Settings, ingest_event_pattern


class S3IngestStack(Stack):
    """S3 -> EventBridge (default bus, archived) -> SQS (+DLQ) -> Lambda -> DynamoDB ledger.

    Parameters
    ----------
    scope : constructs.Construct
        The app.
    construct_id : str
        Stack id; also the CloudFormation stack name (``settings.stack_name``).
    settings : s3ingest.settings.Settings
        Validated deployment settings.
    code : aws_cdk.aws_lambda.Code, optional
        The function's code; the locally bundled ``functions/`` package by default.
    **kwargs
        Passed to :class:`aws_cdk.Stack` (``env``, ...).

    Attributes
    ----------
    landing, ingest_queue, routing, ledger, ingest : Construct
        The composed constructs, exposing the resources they create.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        code: lambda_.Code | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            description="s3ingest: per-key DynamoDB ledger of an S3 bucket, fed by EventBridge",
            **kwargs,
        )
        self.settings = settings
        Tags.of(self).add("project", "s3ingest")
        Tags.of(self).add("stage", settings.stage)

        self.landing = LandingBucket(
            self,
            "Landing",
            existing_bucket_name=settings.bucket_name,
            versioned=settings.versioned,
            inventory_enabled=settings.inventory_enabled,
        )
        bucket = self.landing.bucket
        self.ingest_queue = IngestQueue(
            self,
            "Ingest",
            visibility_timeout=Duration.seconds(settings.queue_visibility_timeout_seconds),
            retention_period=Duration.days(settings.queue_retention_days),
            dead_letter_retention_period=Duration.days(settings.dlq_retention_days),
            max_receive_count=settings.max_receive_count,
        )
        queue = self.ingest_queue.queue
        dead_letter_queue = self.ingest_queue.dead_letter_queue
        self.routing = IngestRouting(
            self,
            "Routing",
            pattern=ingest_event_pattern(bucket.bucket_name),
            queue=queue,
            archive_retention=Duration.days(settings.archive_retention_days),
            dead_letter_retention_period=Duration.days(settings.dlq_retention_days),
        )
        self.ledger = LedgerTable(self, "Ledger")
        self.ingest = IngestFunction(
            self,
            "IngestFunction",
            code=code if code is not None else function_code(),
            ledger_table=self.ledger.table,
            bucket=bucket,
            dead_letter_queue=dead_letter_queue,
            tombstone_ttl_seconds=settings.tombstone_ttl_seconds,
            record_concurrency=settings.record_concurrency,
            timeout=Duration.seconds(settings.function_timeout_seconds),
            memory_size_mib=settings.function_memory_mb,
            log_retention_days=settings.log_retention_days,
        )
        function = self.ingest.function

        # Least privilege, granted here at the composition root.
        # Ledger: one conditional UpdateItem per event (C5); GetItem/PutItem for observations (C7).
        self.ledger.table.grant(
            function, "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"
        )
        # Bucket: HEAD/GET pinned to a version or ETag (C7, C8). ListBucket makes a HEAD of a
        # missing key answer 404 rather than 403
        # (https://docs.aws.amazon.com/AmazonS3/latest/API/API_HeadObject.html#API_HeadObject_RequestSyntax).
        objects_arn = bucket.arn_for_objects("*")
        iam.Grant.add_to_principal(
            grantee=function,
            actions=["s3:GetObject", "s3:GetObjectVersion"],
            resource_arns=[objects_arn],
        )
        iam.Grant.add_to_principal(
            grantee=function, actions=["s3:ListBucket"], resource_arns=[bucket.bucket_arn]
        )
        # Invalid messages go to the DLQ with their reason (C9).
        dead_letter_queue.grant(function, "sqs:SendMessage")
        function.add_event_source(
            event_sources.SqsEventSource(
                queue,
                batch_size=settings.batch_size,
                max_batching_window=Duration.seconds(settings.max_batching_window_seconds),
                max_concurrency=settings.max_concurrency,
                report_batch_item_failures=True,
            )
        )

        self._acknowledge(objects_arn)
        self._outputs()

    def _acknowledge(self, objects_arn: str) -> None:
        """cdk-nag findings accepted, each on its resource, with the evidence."""
        role = self.ingest.role
        acknowledge(
            role,
            "AwsSolutions-IAM5[Resource::*]",
            "X-Ray active tracing: xray:PutTraceSegments and xray:PutTelemetryRecords support no "
            "resource-level permissions, so Resource must be '*' (Service Authorization Reference, "
            "AWS X-Ray: https://docs.aws.amazon.com/service-authorization/latest/reference/"
            "list_awsx-ray.html).",
        )
        acknowledge(
            role,
            wildcard_resource_finding(self, objects_arn),
            "The function reads whichever object an event names: s3:GetObject and "
            "s3:GetObjectVersion on the landing bucket's objects only (key unknown in advance).",
        )
        acknowledge(
            self.ingest.function,
            "AwsSolutions-L1",
            "Python 3.13 is pinned on purpose: the function's dependency wheels are resolved for "
            "CPython 3.13 (infra/bundling.py) and Powertools for AWS Lambda 3.37 is tested on it; "
            "moving to a newer runtime is a deliberate upgrade, not a synth-time drift.",
        )
        acknowledge(
            self.routing.target_dead_letter_queue,
            "AwsSolutions-SQS3",
            "This queue is a dead-letter queue: the ingest rule target's DeadLetterConfig "
            "(https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-rule-dlq.html); "
            "cdk-nag only recognises SQS redrive and Lambda DLQs.",
        )

    def _outputs(self) -> None:
        """Stack outputs the operator CLI and the README read."""
        outputs = {
            "BucketName": self.landing.bucket.bucket_name,
            "QueueUrl": self.ingest_queue.queue.queue_url,
            "DeadLetterQueueUrl": self.ingest_queue.dead_letter_queue.queue_url,
            "EventTargetDeadLetterQueueUrl": self.routing.target_dead_letter_queue.queue_url,
            "LedgerTableName": self.ledger.table.table_name,
            "FunctionName": self.ingest.function.function_name,
            "ArchiveName": self.routing.archive.archive_name,
            "ArchiveArn": self.routing.archive.archive_arn,
            "RuleName": self.routing.rule.rule_name,
            "RuleArn": self.routing.rule.rule_arn,
        }
        if self.landing.inventory_bucket is not None:
            outputs["InventoryBucketName"] = self.landing.inventory_bucket.bucket_name
        for output_id, value in outputs.items():
            CfnOutput(self, output_id, value=value)
