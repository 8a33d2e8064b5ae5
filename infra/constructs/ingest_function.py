"""The ingest Lambda function, its own role and its own log group."""

from __future__ import annotations

from typing import Any

import jsii
from aws_cdk import CfnResource, Duration, IAnyProducer, IResolveContext, Lazy, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.bundling import ARCHITECTURE, RUNTIME

#: The function's entry point inside the bundled ``s3ingest_fn`` package.
HANDLER = "s3ingest_fn.handlers.ingest.handler"
SERVICE_NAME = "s3ingest"
METRICS_NAMESPACE = "S3Ingest"

#: CloudWatch Logs retention values (days) and the CDK enum member of each.
RETENTION_DAYS: dict[int, logs.RetentionDays] = {
    1: logs.RetentionDays.ONE_DAY,
    3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS,
    90: logs.RetentionDays.THREE_MONTHS,
    120: logs.RetentionDays.FOUR_MONTHS,
    150: logs.RetentionDays.FIVE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
    400: logs.RetentionDays.THIRTEEN_MONTHS,
    545: logs.RetentionDays.EIGHTEEN_MONTHS,
    731: logs.RetentionDays.TWO_YEARS,
    1096: logs.RetentionDays.THREE_YEARS,
    1827: logs.RetentionDays.FIVE_YEARS,
    2192: logs.RetentionDays.SIX_YEARS,
    2557: logs.RetentionDays.SEVEN_YEARS,
    2922: logs.RetentionDays.EIGHT_YEARS,
    3288: logs.RetentionDays.NINE_YEARS,
    3653: logs.RetentionDays.TEN_YEARS,
}


@jsii.implements(IAnyProducer)
class _DependsOnWithoutRole:
    """The function's ``DependsOn`` minus its role.

    CDK makes a function depend on its role construct (role and default policy). The dependency on
    the role itself is already implied by the ``Role`` property's ``Fn::GetAtt``, and cfn-lint
    reports the duplicate (W3005); the dependency on the policy is kept, so the function is not
    created before it may write logs or poll the queue.
    """

    def __init__(self, function: CfnResource, role: CfnResource) -> None:
        self._function = function
        self._role_path = role.node.path

    def produce(self, context: IResolveContext) -> Any:
        stack = Stack.of(self._function)
        depends_on = sorted(
            stack.resolve(dependency.logical_id)
            for dependency in self._function.obtain_dependencies()
            if isinstance(dependency, CfnResource) and dependency.node.path != self._role_path
        )
        return depends_on or None


class IngestFunction(Construct):
    """The function that applies the queue's events to the ledger.

    Python 3.13 on ``arm64``; X-Ray active tracing; JSON log format to an explicit log group with
    a bounded retention (https://docs.aws.amazon.com/lambda/latest/dg/monitoring-cloudwatchlogs-advanced.html);
    no reserved concurrency (the event source's maximum concurrency bounds it,
    https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html). The role is its own,
    with no managed policy: only the log-group write grant here; the stack grants the rest.

    The log group is retained when the stack is deleted: it holds the per-message outcome records
    (CONTRACT C9), which matter most after an incident; its retention still bounds it.

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
    ) -> None:
        super().__init__(scope, construct_id)
        if log_retention_days not in RETENTION_DAYS:
            raise ValueError(f"log_retention_days {log_retention_days} is not a CloudWatch value")
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="s3ingest ingest function",
        )
        self.log_group = logs.LogGroup(
            self,
            "LogGroup",
            retention=RETENTION_DAYS[log_retention_days],
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.function = lambda_.Function(
            self,
            "Function",
            description="s3ingest: applies S3 events from the ingest queue to the ledger",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=HANDLER,
            code=code,
            role=self.role,
            timeout=timeout,
            memory_size=memory_size_mib,
            tracing=lambda_.Tracing.ACTIVE,
            logging_format=lambda_.LoggingFormat.JSON,
            log_group=self.log_group,
            environment={
                "LEDGER_TABLE_NAME": ledger_table.table_name,
                "DEAD_LETTER_QUEUE_URL": dead_letter_queue.queue_url,
                "TOMBSTONE_TTL_SECONDS": str(tombstone_ttl_seconds),
                "RECORD_CONCURRENCY": str(record_concurrency),
                "BUCKET_NAME": bucket.bucket_name,
                "POWERTOOLS_SERVICE_NAME": SERVICE_NAME,
                "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
                "POWERTOOLS_LOG_LEVEL": "INFO",
            },
        )
        # Replaces the AWSLambdaBasicExecutionRole managed policy: write to this log group only.
        self.log_group.grant_write(self.role)
        cfn_function = self.function.node.default_child
        cfn_role = self.role.node.default_child
        if isinstance(cfn_function, CfnResource) and isinstance(cfn_role, CfnResource):
            cfn_function.add_override(
                "DependsOn", Lazy.uncached_any(_DependsOnWithoutRole(cfn_function, cfn_role))
            )
