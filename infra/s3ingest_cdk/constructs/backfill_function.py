"""The backfill Lambda function S3 Batch Operations invokes, with its own role and log group."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from s3ingest_cdk.constructs.python_function import python_function
from s3ingest_fn import config as fn_config
from s3ingest_fn.contract import BACKFILL_SERVICE

#: Entry point of the Batch Operations task handler (invocation schema 2.0 or 1.0).
BACKFILL_HANDLER = "s3ingest_fn.handlers.backfill.handler"
#: ``POWERTOOLS_SERVICE_NAME`` of both backfill functions (their handlers' logger service).
BACKFILL_SERVICE_NAME = BACKFILL_SERVICE


class BackfillFunction(Construct):
    """The function an S3 Batch Operations job invokes once per inventory row (CONTRACT C13).

    Each task is observed by the same ledger rules as a repair (C7) and answered with a
    schema-2.0 response (``results`` with the task ids and result codes,
    https://docs.aws.amazon.com/AmazonS3/latest/userguide/batch-ops-invoke-lambda.html). Role, log
    group and function follow
    :func:`s3ingest_cdk.constructs.python_function.python_function`; its feature grants
    what it reads and writes, and which role may invoke it.

    Parameters
    ----------
    scope : constructs.Construct
        Parent construct.
    construct_id : str
        Construct id.
    code : aws_cdk.aws_lambda.Code
        The bundled ``functions/`` package (the ingest function's asset).
    ledger_table : aws_cdk.aws_dynamodb.ITable
        The ledger (``LEDGER_TABLE_NAME``).
    bucket : aws_cdk.aws_s3.IBucket
        The landing bucket (``BUCKET_NAME``): only its objects are backfilled.
    dead_letter_queue : aws_cdk.aws_sqs.IQueue
        The ingest dead-letter queue (``DEAD_LETTER_QUEUE_URL``); validated by the handler's
        settings like the ingest function's, never written to (an invalid task is a
        ``PermanentFailure`` in the job's report instead).
    tombstone_ttl_seconds : int
        Lifetime of a tombstone, seconds (``TOMBSTONE_TTL_SECONDS``).
    record_concurrency : int
        ``RECORD_CONCURRENCY``, as the ingest function's.
    timeout : aws_cdk.Duration
        Function timeout (``backfillFunctionTimeoutSeconds``).
    memory_size_mib : int
        Function memory, MiB.
    log_retention_days : int
        Log retention, days; one of CloudWatch Logs' allowed values.
    tracing : bool
        X-Ray tracing (the ``tracing`` setting).

    Attributes
    ----------
    function : aws_cdk.aws_lambda.Function
        The function.
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
        description = "s3ingest: backfills one object per S3 Batch Operations task (ledger rules)"
        parts = python_function(
            self,
            description=description,
            role_description="s3ingest backfill function (S3 Batch Operations tasks)",
            handler=BACKFILL_HANDLER,
            code=code,
            timeout=timeout,
            memory_size_mib=memory_size_mib,
            log_retention_days=log_retention_days,
            tracing=tracing,
            service_name=BACKFILL_SERVICE_NAME,
            environment=fn_config.BackfillConfig(
                ledger_table_name=ledger_table.table_name,
                dead_letter_queue_url=dead_letter_queue.queue_url,
                tombstone_ttl_seconds=tombstone_ttl_seconds,
                bucket_name=bucket.bucket_name,
                record_concurrency=record_concurrency,
            ).to_env(),
        )
        self.function = parts.function
        self.role = parts.role
        self.log_group = parts.log_group
