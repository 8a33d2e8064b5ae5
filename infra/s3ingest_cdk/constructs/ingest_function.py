"""The ingest Lambda function, its own role and its own log group."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from s3ingest_cdk.constructs.python_function import python_function
from s3ingest_fn import config as fn_config
from s3ingest_fn.contract import INGEST_SERVICE

#: The function's entry point inside the bundled ``s3ingest_fn`` package.
HANDLER = "s3ingest_fn.handlers.ingest.handler"
SERVICE_NAME = INGEST_SERVICE


class IngestFunction(Construct):
    """The function that applies the queue's events to the ledger.

    Python 3.13 on ``arm64``; X-Ray active tracing with ``tracing``; JSON log format to an
    explicit log group with a bounded retention
    (https://docs.aws.amazon.com/lambda/latest/dg/monitoring-cloudwatchlogs-advanced.html);
    no reserved concurrency (the event source's maximum concurrency bounds it,
    https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html). The role is its own,
    with no managed policy: only the log-group write grant here; its feature grants the rest.

    The log group is retained when the stack is deleted: it holds the per-message outcome records
    (CONTRACT C9), which matter most after an incident; its retention still bounds it. Role, log
    group and function follow :func:`s3ingest_cdk.constructs.python_function.python_function`.

    Parameters
    ----------
    scope : constructs.Construct
        Parent construct.
    construct_id : str
        Construct id.
    code : aws_cdk.aws_lambda.Code
        The bundled ``functions/`` package.
    ledger_table : aws_cdk.aws_dynamodb.ITable
        The ledger (``LEDGER_TABLE_NAME``).
    bucket : aws_cdk.aws_s3.IBucket
        The landing bucket (``BUCKET_NAME``).
    dead_letter_queue : aws_cdk.aws_sqs.IQueue
        Where the function sends invalid messages (``DEAD_LETTER_QUEUE_URL``).
    tombstone_ttl_seconds : int
        Lifetime of a tombstone, seconds (``TOMBSTONE_TTL_SECONDS``).
    record_concurrency : int
        Records of one batch processed at once (``RECORD_CONCURRENCY``).
    timeout : aws_cdk.Duration
        Function timeout.
    memory_size_mib : int
        Function memory, MiB.
    log_retention_days : int
        Log retention, days; one of CloudWatch Logs' allowed values.
    tracing : bool
        X-Ray tracing (the ``tracing`` setting).

    Attributes
    ----------
    function : aws_cdk.aws_lambda.Function
        The ingest function.
    role : aws_cdk.aws_iam.Role
        Its execution role.
    log_group : aws_cdk.aws_logs.LogGroup
        Its log group.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: lambda_.Code,
        ledger_table: dynamodb.ITable,
        bucket: s3.IBucket,
        dead_letter_queue: sqs.IQueue,
        tombstone_ttl_seconds: int,
        record_concurrency: int,
        timeout: Duration,
        memory_size_mib: int,
        log_retention_days: int,
        tracing: bool,
    ) -> None:
        super().__init__(scope, construct_id)
        parts = python_function(
            self,
            description="s3ingest: applies S3 events from the ingest queue to the ledger",
            role_description="s3ingest ingest function",
            handler=HANDLER,
            code=code,
            timeout=timeout,
            memory_size_mib=memory_size_mib,
            log_retention_days=log_retention_days,
            tracing=tracing,
            service_name=SERVICE_NAME,
            environment=fn_config.IngestConfig(
                ledger_table_name=ledger_table.table_name,
                dead_letter_queue_url=dead_letter_queue.queue_url,
                tombstone_ttl_seconds=tombstone_ttl_seconds,
                record_concurrency=record_concurrency,
                bucket_name=bucket.bucket_name,
            ).to_env(),
        )
        self.function = parts.function
        self.role = parts.role
        self.log_group = parts.log_group
