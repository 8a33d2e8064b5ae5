"""The pattern every s3ingest Lambda function follows: its own role, its own log group, one setup.

Not a construct of its own: :func:`python_function` adds ``Role``, ``LogGroup`` and ``Function``
to the construct that owns the function
(:class:`~s3ingest_cdk.constructs.function.RoleFunction`), so each keeps its construct ids (and
so its logical ids) stable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from s3ingest_cdk.bundling import ARCHITECTURE, RUNTIME
from s3ingest_cdk.constructs.dependencies import depend_on_policies_not_role
from s3ingest_fn.contract import METRICS_NAMESPACE, STACK_ENV

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


def retention(days: int) -> logs.RetentionDays:
    """The CDK retention of ``days``.

    Raises
    ------
    ValueError
        When ``days`` is not a CloudWatch Logs retention value.
    """
    if days not in RETENTION_DAYS:
        raise ValueError(f"log_retention_days {days} is not a CloudWatch value")
    return RETENTION_DAYS[days]


@dataclass(frozen=True)
class PythonFunction:
    """What :func:`python_function` creates.

    Attributes
    ----------
    role : aws_cdk.aws_iam.Role
        Its execution role (no managed policy; only the log-group write grant).
    """

    function: lambda_.Function
    role: iam.Role
    log_group: logs.LogGroup


def python_function(
    scope: Construct,
    *,
    description: str,
    role_description: str,
    handler: str,
    code: lambda_.Code,
    timeout: Duration,
    memory_size_mib: int,
    log_retention_days: int,
    tracing: bool,
    service_name: str,
    environment: Mapping[str, str],
) -> PythonFunction:
    """Add an s3ingest Python function with its own role and log group to ``scope``.

    Python 3.13 on ``arm64`` (the bundle's target, :mod:`s3ingest_cdk.bundling`); X-Ray active
    tracing with ``tracing``, otherwise none (no tracing configuration, so no X-Ray permission, and
    ``POWERTOOLS_TRACE_DISABLED=true`` so the handlers never load the X-Ray SDK); JSON log format
    to an explicit log group with a bounded retention, retained on stack deletion
    (https://docs.aws.amazon.com/lambda/latest/dg/monitoring-cloudwatchlogs-advanced.html); no
    reserved concurrency (a feature sets it with :func:`reserve_concurrency`). The role is the
    function's own, with no managed policy: the log-group write grant replaces
    ``AWSLambdaBasicExecutionRole``; the feature grants the rest.

    Parameters
    ----------
    scope : constructs.Construct
        The construct that owns the function; gets the children ``Role``, ``LogGroup`` and
        ``Function``.
    memory_size_mib : int
        Function memory, MiB.
    log_retention_days : int
        Log retention, days; one of CloudWatch Logs' allowed values.
    tracing : bool
        X-Ray active tracing (the ``tracing`` setting; off by default: the X-Ray SDK adds about
        300 ms to a cold start).
    environment : Mapping[str, str]
        The function's own variables; the Powertools variables (service name, metrics namespace
        ``S3Ingest``, log level ``INFO``) and ``S3INGEST_STACK`` (the stack's name, the ``stack``
        dimension of every metric the function emits) are added.

    Raises
    ------
    ValueError
        When ``log_retention_days`` is not a CloudWatch Logs retention value.
    """
    log_retention = retention(log_retention_days)
    role = iam.Role(
        scope,
        "Role",
        assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
        description=role_description,
    )
    log_group = logs.LogGroup(
        scope, "LogGroup", retention=log_retention, removal_policy=RemovalPolicy.RETAIN
    )
    function = lambda_.Function(
        scope,
        "Function",
        description=description,
        runtime=RUNTIME,
        architecture=ARCHITECTURE,
        handler=handler,
        code=code,
        role=role,
        timeout=timeout,
        memory_size=memory_size_mib,
        # Unset (not PASS_THROUGH, which CDK grants X-Ray for) when off: no TracingConfig, no
        # xray:* statement on the role.
        tracing=lambda_.Tracing.ACTIVE if tracing else None,
        logging_format=lambda_.LoggingFormat.JSON,
        log_group=log_group,
        environment={
            **environment,
            "POWERTOOLS_SERVICE_NAME": service_name,
            "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
            "POWERTOOLS_LOG_LEVEL": "INFO",
            STACK_ENV: Stack.of(scope).stack_name,
            **({} if tracing else {"POWERTOOLS_TRACE_DISABLED": "true"}),
        },
    )
    # Replaces the AWSLambdaBasicExecutionRole managed policy: write to this log group only.
    log_group.grant_write(role)
    depend_on_policies_not_role(function, role)
    return PythonFunction(function=function, role=role, log_group=log_group)


def reserve_concurrency(function: lambda_.Function, executions: int | None) -> None:
    """Reserve ``executions`` of the account's concurrency for ``function`` (``None``: leave it
    unreserved): the function can never run more at once, and no other function can take them
    (https://docs.aws.amazon.com/lambda/latest/dg/configuration-concurrency.html)."""
    if executions is not None:
        cfn = function.node.default_child
        assert isinstance(cfn, lambda_.CfnFunction)
        cfn.reserved_concurrent_executions = executions
