"""A reconcile Lambda function (the single run, or the fan-out's step function), with its own role
and log group."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from s3ingest.settings import inventory_report_prefix
from s3ingest_cdk.constructs.python_function import python_function
from s3ingest_fn import config as fn_config
from s3ingest_fn.contract import RECONCILE_SERVICE

#: Entry point of the single reconciliation run (``{"source", "prefix", "dryRun", ...}``).
RECONCILE_HANDLER = "s3ingest_fn.handlers.reconcile.handler"
#: Entry point of the fan-out's steps (``{"action": "plan" | "shard_inventory" | ...}``).
FANOUT_HANDLER = "s3ingest_fn.handlers.reconcile_fanout.handler"
SERVICE_NAME = RECONCILE_SERVICE


class ReconcileFunction(Construct):
    """A function that compares the bucket with the ledger and queues repairs (CONTRACT C12).

    Role, log group and function follow
    :func:`s3ingest_cdk.constructs.python_function.python_function` (as the ingest function); the
    feature (:mod:`s3ingest_cdk.features`) grants what it reads and writes.

    Parameters
    ----------
    scope : constructs.Construct
        Parent construct.
    construct_id : str
        Construct id.
    code : aws_cdk.aws_lambda.Code
        The bundled ``functions/`` package (the ingest function's asset).
    handler : str
        :data:`RECONCILE_HANDLER` or :data:`FANOUT_HANDLER`.
    description : str
        Function description.
    ledger_table : aws_cdk.aws_dynamodb.ITable
        The ledger (``LEDGER_TABLE_NAME``).
    queue : aws_cdk.aws_sqs.IQueue
        The ingest queue the repairs go to (``INGEST_QUEUE_URL``).
    bucket : aws_cdk.aws_s3.IBucket
        The landing bucket (``BUCKET_NAME``).
    inventory_bucket : aws_cdk.aws_s3.IBucket or None
        The stack's inventory bucket (``INVENTORY_BUCKET_NAME`` and ``INVENTORY_PREFIX``), or
        ``None`` when the stack owns no inventory (the function can then only list the bucket).
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
        handler: str,
        description: str,
        ledger_table: dynamodb.ITable,
        queue: sqs.IQueue,
        bucket: s3.IBucket,
        inventory_bucket: s3.IBucket | None,
        timeout: Duration,
        memory_size_mib: int,
        log_retention_days: int,
        tracing: bool,
    ) -> None:
        super().__init__(scope, construct_id)
        environment = fn_config.ReconcileConfig(
            ledger_table_name=ledger_table.table_name,
            ingest_queue_url=queue.queue_url,
            bucket_name=bucket.bucket_name,
            inventory_bucket_name=inventory_bucket.bucket_name if inventory_bucket else None,
            inventory_prefix=(
                inventory_report_prefix(bucket.bucket_name) if inventory_bucket else None
            ),
        ).to_env()
        parts = python_function(
            self,
            description=description,
            role_description=description,
            handler=handler,
            code=code,
            timeout=timeout,
            memory_size_mib=memory_size_mib,
            log_retention_days=log_retention_days,
            tracing=tracing,
            service_name=SERVICE_NAME,
            environment=environment,
        )
        self.function = parts.function
        self.role = parts.role
        self.log_group = parts.log_group
