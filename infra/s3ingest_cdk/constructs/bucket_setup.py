"""The bucket-setup custom resource: EventBridge delivery and the stack's inventory on an existing
bucket, without clobbering its owners' configuration (``docs/existing-buckets.md``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import CfnResource, CustomResource, Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import custom_resources as cr
from constructs import Construct

from s3ingest_cdk.constructs.python_function import python_function, retention
from s3ingest_cdk.nag import acknowledge, grant, wildcard_resource_finding
from s3ingest_fn.contract import BUCKET_SETUP_SERVICE

#: The onEvent handler (``s3ingest_fn.handlers.bucket_setup.on_event``).
BUCKET_SETUP_HANDLER = "s3ingest_fn.handlers.bucket_setup.on_event"
#: The resource type CloudFormation shows.
RESOURCE_TYPE = "Custom::S3IngestBucketSetup"
#: The actions the handler needs on each bucket it sets up: Get/PutBucketNotificationConfiguration
#: (s3:GetBucketNotification, s3:PutBucketNotification) and the inventory configuration calls
#: (Put/Delete/Get/ListBucketInventoryConfiguration(s): s3:PutInventoryConfiguration and
#: s3:GetInventoryConfiguration; Service Authorization Reference, Amazon S3,
#: https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3.html).
SETUP_ACTIONS = (
    "s3:GetBucketNotification",
    "s3:PutBucketNotification",
    "s3:GetInventoryConfiguration",
    "s3:PutInventoryConfiguration",
)


#: The provider framework function's memory, MiB: Lambda's default, given explicitly.
FRAMEWORK_MEMORY_MIB = 128
_DEPLOY_TIME_ONLY = (
    "A custom resource's function, run only while CloudFormation creates, updates or deletes "
    "the stack, on no request path: each run is in its log group and in the stack's events; "
    "X-Ray tracing would bill traces of deployments."
)


class BucketSetupProvider(Construct):
    """The provider (CDK's ``custom_resources.Provider``) of the bucket-setup resources, one
    per pipeline: our ``onEvent`` function (Python, its own role and log group as every
    s3ingest function) and the framework function CDK adds, with its own role and log group.

    Each :meth:`set_up` adds one ``Custom::S3IngestBucketSetup`` resource and grants the
    ``onEvent`` function :data:`SETUP_ACTIONS` on that bucket's ARN only.

    Attributes
    ----------
    provider : aws_cdk.custom_resources.Provider
        The provider (``service_token`` of the resources).
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, code: lambda_.Code, log_retention_days: int
    ) -> None:
        super().__init__(scope, construct_id)
        parts = python_function(
            self,
            description="s3ingest: switches an existing bucket's EventBridge delivery on and "
            "adds the stack's inventory, keeping its other configuration",
            role_description="s3ingest bucket setup (custom resource)",
            handler=BUCKET_SETUP_HANDLER,
            code=code,
            timeout=Duration.seconds(60),
            memory_size_mib=256,
            log_retention_days=log_retention_days,
            tracing=False,
            service_name=BUCKET_SETUP_SERVICE,
            environment={},
        )
        self.function = parts.function
        self.role = parts.role
        pinned = (
            "Python 3.13 is pinned on purpose: the function's dependency wheels are resolved "
            "for CPython 3.13 (s3ingest_cdk.bundling)."
        )
        acknowledge(self.function, "AwsSolutions-L1", pinned)
        acknowledge(self.function, "Serverless-LambdaLatestVersion", pinned)
        acknowledge(
            self.function,
            "Serverless-LambdaDLQ",
            "Invoked synchronously only, by CDK's provider framework function, which reports "
            "its failure to CloudFormation (the stack operation fails and rolls back): a "
            "function's dead-letter queue receives failed asynchronous invocations only "
            "(https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-retain-records.html).",
        )
        acknowledge(self.function, "Serverless-LambdaTracing", _DEPLOY_TIME_ONLY)
        framework_role = iam.Role(
            self,
            "FrameworkRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="s3ingest bucket setup: CDK's custom resource provider framework",
        )
        framework_logs = logs.LogGroup(
            self,
            "FrameworkLogGroup",
            retention=retention(log_retention_days),
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.provider = cr.Provider(
            self,
            "Provider",
            on_event_handler=self.function,
            framework_on_event_role=framework_role,
            log_group=framework_logs,
        )
        framework = self.provider.node.find_child("framework-onEvent")
        # CDK makes the framework function depend on its role as well as reading the role's
        # ARN: the GetAtt already orders them (cfn-lint W3005); its policy dependency stays.
        framework_cfn = framework.node.default_child
        policy = framework_role.node.try_find_child("DefaultPolicy")
        policy_cfn = policy.node.default_child if policy is not None else None
        if isinstance(framework_cfn, CfnResource) and isinstance(policy_cfn, CfnResource):
            framework_cfn.add_override("DependsOn", [policy_cfn.logical_id])
        # Lambda's default, said explicitly: the same function (Serverless-LambdaDefaultMemorySize)
        if isinstance(framework_cfn, lambda_.CfnFunction):
            framework_cfn.memory_size = FRAMEWORK_MEMORY_MIB
        acknowledge(
            framework,
            "Serverless-LambdaDLQ",
            "CDK's provider framework function, invoked by CloudFormation for each event of "
            "the custom resources (https://docs.aws.amazon.com/AWSCloudFormation/latest/"
            "UserGuide/crpg-ref.html): a failure fails the stack operation, which CloudFormation "
            "reports in the stack's events and rolls back; the event is sent again with the "
            "next deployment, nothing is left to replay from a dead-letter queue.",
        )
        acknowledge(framework, "Serverless-LambdaTracing", _DEPLOY_TIME_ONLY)
        acknowledge(
            framework,
            "AwsSolutions-L1",
            "CDK's custom resource provider framework function: its Node.js runtime is the "
            "one aws-cdk-lib ships the framework for (custom_resources.Provider).",
        )
        acknowledge(
            framework_role,
            wildcard_resource_finding(self, f"{self.function.function_arn}:*"),
            "CDK's provider framework invokes the onEvent function and its own versions and "
            "aliases only (lambda:InvokeFunction on <function ARN>:*, Provider's grant).",
        )
        self._framework_role = framework_role

    def set_up(
        self,
        scope: Construct,
        construct_id: str,
        *,
        bucket: s3.IBucket,
        event_bridge: bool,
        inventory: Mapping[str, Any] | None,
    ) -> CustomResource:
        """Add a bucket-setup resource for ``bucket`` to ``scope`` and grant the handler the
        setup actions on it.

        Parameters
        ----------
        event_bridge : bool
            Switch its EventBridge delivery on (and leave it as found on deletion).
        inventory : Mapping or None
            The stack's ``InventoryConfiguration`` to add (its own id only), or None.
        """
        grant(self.function, SETUP_ACTIONS, bucket.bucket_arn)
        properties: dict[str, Any] = {
            "BucketName": bucket.bucket_name,
            "EventBridge": "true" if event_bridge else "false",
        }
        if inventory is not None:
            properties["Inventory"] = dict(inventory)
        resource = CustomResource(
            scope,
            construct_id,
            service_token=self.provider.service_token,
            resource_type=RESOURCE_TYPE,
            properties=properties,
        )
        # Ordering: the resource needs the framework function (its ServiceToken), whose
        # environment names this function, which depends on its policy
        # (depend_on_policies_not_role): the grant exists before Create and after Delete.
        return resource
