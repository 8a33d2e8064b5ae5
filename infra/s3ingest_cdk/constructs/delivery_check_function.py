"""The scheduled EventBridge delivery check: is the landing bucket still sending its events?"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from constructs import Construct

from s3ingest_cdk.constructs.python_function import python_function
from s3ingest_fn.config import DeliveryCheckConfig
from s3ingest_fn.contract import DELIVERY_CHECK_SERVICE

#: Entry point of the check (any event; it reads ``DELIVERY_CHECK_BUCKETS``).
DELIVERY_CHECK_HANDLER = "s3ingest_fn.handlers.delivery_check.handler"
#: ``POWERTOOLS_SERVICE_NAME`` (its logger's own name; its metrics use ``service=s3ingest``).
DELIVERY_CHECK_SERVICE_NAME = DELIVERY_CHECK_SERVICE
#: How often it runs: the delivery alarm (30-minute periods) sees at least one run per period.
DELIVERY_CHECK_INTERVAL = Duration.minutes(15)
#: One GetBucketNotificationConfiguration per bucket: seconds, not the ingest's settings.
DELIVERY_CHECK_TIMEOUT = Duration.seconds(30)
DELIVERY_CHECK_MEMORY_MIB = 256


class DeliveryCheckFunction(Construct):
    """A function, run every 15 minutes by a scheduled rule (default bus), that reads the
    landing bucket's notification configuration and emits ``eventbridge_delivery_enabled``
    (1 on, 0 off; ``s3ingest_fn.handlers.delivery_check``).

    Another deploy that rewrites the bucket's notification configuration without
    ``EventBridgeConfiguration`` stops every event silently; the alarm on this metric (missing
    data breaching, so a check that stops running alarms too) is what notices. Role, log group
    and function follow :func:`s3ingest_cdk.constructs.python_function.python_function`; its only
    grant is ``s3:GetBucketNotification`` on the landing buckets (the permission
    GetBucketNotificationConfiguration needs); it checks every one of them
    (``DELIVERY_CHECK_BUCKETS``, comma-separated).

    Parameters
    ----------
    scope : constructs.Construct
        Parent construct.
    construct_id : str
        Construct id.
    code : aws_cdk.aws_lambda.Code
        The bundled ``functions/`` package.
    buckets : sequence of aws_cdk.aws_s3.IBucket
        The landing buckets (created or existing).
    environment : Mapping[str, str], optional
        More variables (the stack's ``SCOPE``).
    log_retention_days : int
        Log retention, days.
    tracing : bool
        X-Ray tracing (the ``tracing`` setting).

    Attributes
    ----------
    function : aws_cdk.aws_lambda.Function
        The check.
    role : aws_cdk.aws_iam.Role
        Its role.
    log_group : aws_cdk.aws_logs.LogGroup
        Its log group.
    rule : aws_cdk.aws_events.Rule
        The schedule.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: lambda_.Code,
        buckets: Sequence[s3.IBucket],
        log_retention_days: int,
        tracing: bool,
        environment: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        parts = python_function(
            self,
            description="s3ingest: checks that the landing bucket sends its events to EventBridge",
            role_description="s3ingest EventBridge delivery check",
            handler=DELIVERY_CHECK_HANDLER,
            code=code,
            timeout=DELIVERY_CHECK_TIMEOUT,
            memory_size_mib=DELIVERY_CHECK_MEMORY_MIB,
            log_retention_days=log_retention_days,
            tracing=tracing,
            service_name=DELIVERY_CHECK_SERVICE_NAME,
            environment={
                **DeliveryCheckConfig(tuple(b.bucket_name for b in buckets)).to_env(),
                **(environment or {}),
            },
        )
        self.function = parts.function
        self.role = parts.role
        self.log_group = parts.log_group
        # GetBucketNotificationConfiguration needs s3:GetBucketNotification, on this bucket only
        # (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetBucketNotificationConfiguration.html).
        iam.Grant.add_to_principal(
            grantee=self.function,
            actions=["s3:GetBucketNotification"],
            resource_arns=[b.bucket_arn for b in buckets],
        )
        self.rule = events.Rule(
            self,
            "Schedule",
            description="s3ingest: checks the landing bucket's EventBridge delivery",
            schedule=events.Schedule.rate(DELIVERY_CHECK_INTERVAL),
            targets=[targets.LambdaFunction(self.function)],
        )
