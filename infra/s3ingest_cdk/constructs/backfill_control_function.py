"""The backfill state machine's step function (prepare, report, backfill_file, summarize), with its
own role and log group."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from s3ingest.settings import inventory_report_prefix
from s3ingest_cdk.constructs.backfill_function import BACKFILL_SERVICE_NAME
from s3ingest_cdk.constructs.python_function import python_function
from s3ingest_fn import config as fn_config

#: Entry point of the state machine's steps (``{"action": "prepare" | "report" | ...}``).
BACKFILL_CONTROL_HANDLER = "s3ingest_fn.handlers.backfill_control.handler"
#: Where S3 Batch Operations writes the jobs' completion reports in the inventory bucket
#: (``s3ingest_fn.services.backfill_control.REPORT_PREFIX``; the job's ``Report.Prefix``).
REPORT_PREFIX = "backfill-reports"


class BackfillControlFunction(Construct):
    """The function behind the backfill state machine's Lambda steps (CONTRACT C13).

    ``prepare`` finds and checks the inventory manifest, ``report`` reads a finished job's
    completion report, ``backfill_file`` (``distributed-map`` engine) observes every key of one
    inventory data file by the ledger rules, ``summarize`` adds the files' counts up. Its
    environment is the reconcile function's (the inventory it reads) plus the backfill function's
    (the ledger rules it applies) plus ``REPORT_BUCKET_NAME``. Role, log group and function follow
    :func:`s3ingest_cdk.constructs.python_function.python_function`, as the reconcile functions; the
    feature (:mod:`s3ingest_cdk.features`) grants what it reads and writes.

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
    queue : aws_cdk.aws_sqs.IQueue
        The ingest queue (``INGEST_QUEUE_URL``, required by the inventory reader's settings; no
        step sends to it).
    dead_letter_queue : aws_cdk.aws_sqs.IQueue
        The ingest dead-letter queue (``DEAD_LETTER_QUEUE_URL``, validated, never written to).
    bucket : aws_cdk.aws_s3.IBucket
        The landing bucket (``BUCKET_NAME``).
    inventory_bucket : aws_cdk.aws_s3.IBucket
        The stack's inventory bucket (``INVENTORY_BUCKET_NAME``, ``INVENTORY_PREFIX``), also where
        the completion reports are (``REPORT_BUCKET_NAME``).
    tombstone_ttl_seconds : int
        Lifetime of a tombstone, seconds (``TOMBSTONE_TTL_SECONDS``).
    timeout : aws_cdk.Duration
        Function timeout (one ``backfill_file`` step observes a whole data file).
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
        queue: sqs.IQueue,
        dead_letter_queue: sqs.IQueue,
        bucket: s3.IBucket,
        inventory_bucket: s3.IBucket,
        tombstone_ttl_seconds: int,
        timeout: Duration,
        memory_size_mib: int,
        log_retention_days: int,
        tracing: bool,
    ) -> None:
        super().__init__(scope, construct_id)
        description = (
            "s3ingest: one step of the backfill (prepare, report, backfill_file, summarize)"
        )
        parts = python_function(
            self,
            description=description,
            role_description=description,
            handler=BACKFILL_CONTROL_HANDLER,
            code=code,
            timeout=timeout,
            memory_size_mib=memory_size_mib,
            log_retention_days=log_retention_days,
            tracing=tracing,
            service_name=BACKFILL_SERVICE_NAME,
            environment={
                fn_config.LEDGER_TABLE_NAME: ledger_table.table_name,
                fn_config.INGEST_QUEUE_URL: queue.queue_url,
                fn_config.DEAD_LETTER_QUEUE_URL: dead_letter_queue.queue_url,
                fn_config.TOMBSTONE_TTL_SECONDS: str(tombstone_ttl_seconds),
                fn_config.BUCKET_NAME: bucket.bucket_name,
                fn_config.INVENTORY_BUCKET_NAME: inventory_bucket.bucket_name,
                fn_config.INVENTORY_PREFIX: inventory_report_prefix(bucket.bucket_name),
                fn_config.REPORT_BUCKET_NAME: inventory_bucket.bucket_name,
            },
        )
        self.function = parts.function
        self.role = parts.role
        self.log_group = parts.log_group
