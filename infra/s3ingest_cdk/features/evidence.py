"""cdk-nag evidence shared by the features: the reasons a finding is acceptable, with the AWS
reference each rests on, and the acknowledgements every s3ingest function carries."""

from __future__ import annotations

from aws_cdk import Arn, ArnFormat, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn

from s3ingest_cdk.nag import acknowledge, wildcard_resource_finding

XRAY_EVIDENCE = (
    "X-Ray active tracing: xray:PutTraceSegments and xray:PutTelemetryRecords support no "
    "resource-level permissions, so Resource must be '*' (Service Authorization Reference, "
    "AWS X-Ray: https://docs.aws.amazon.com/service-authorization/latest/reference/"
    "list_awsx-ray.html)."
)
SFN_LOGGING_EVIDENCE = (
    "Logging to CloudWatch Logs and X-Ray tracing: the logs:*LogDelivery, "
    "logs:PutResourcePolicy, logs:DescribeResourcePolicies, logs:DescribeLogGroups and "
    "xray:* actions Step Functions needs support no resource-level permissions "
    "(https://docs.aws.amazon.com/step-functions/latest/dg/cw-logs.html"
    "#cloudwatch-iam-policy, "
    "https://docs.aws.amazon.com/step-functions/latest/dg/concepts-xray-tracing.html)."
)
STREAM_EVIDENCE = (
    "dynamodb:ListStreams (CDK's DynamoEventSource grant), which has no resource type: its "
    "only resource is '*' (Service Authorization Reference, Amazon DynamoDB: "
    "https://docs.aws.amazon.com/service-authorization/latest/reference/"
    "list_amazondynamodb.html); the stream's records are read only from the ledger's stream "
    "(DescribeStream, GetRecords, GetShardIterator on its ARN)."
)
RUNTIME_EVIDENCE = (
    "Python 3.13 is pinned on purpose: the function's dependency wheels are resolved for "
    "CPython 3.13 (s3ingest_cdk.bundling) and Powertools for AWS Lambda 3.37 is tested on it; "
    "moving to a newer runtime is a deliberate upgrade, not a synth-time drift."
)
REPORTS_EVIDENCE = (
    "on this bucket's inventory reports only (inventory/<bucket>/s3ingest-daily/): each "
    "report's folder, manifest and data file names are chosen by S3 at delivery "
    "(https://docs.aws.amazon.com/AmazonS3/latest/userguide/storage-inventory-location.html)."
)


def acknowledge_xray(role: iam.IRole, *, tracing: bool) -> None:
    """X-Ray's wildcard on a function's role, with ``tracing`` only (off, the role has no
    xray:* statement and nothing is acknowledged)."""
    if tracing:
        acknowledge(role, "AwsSolutions-IAM5[Resource::*]", XRAY_EVIDENCE)


def acknowledge_function(function: lambda_.IFunction, role: iam.IRole, *, tracing: bool) -> None:
    """What every s3ingest function carries: its pinned runtime (AwsSolutions-L1) and, with
    ``tracing``, X-Ray's wildcard on its role."""
    acknowledge_xray(role, tracing=tracing)
    acknowledge(function, "AwsSolutions-L1", RUNTIME_EVIDENCE)


def acknowledge_state_machine_invoke(
    state_machine: sfn.StateMachine, function: lambda_.IFunction, what: str
) -> None:
    """CDK's LambdaInvoke grant on ``function`` (named ``what`` in the reason): the function and
    its own versions and aliases."""
    acknowledge(
        state_machine.role,
        wildcard_resource_finding(state_machine, f"{function.function_arn}:*"),
        f"lambda:InvokeFunction on {what} and its own versions and aliases only (CDK's "
        "LambdaInvoke grant: the function's resourceArnsForGrantInvoke).",
    )


def acknowledge_distributed_map(state_machine: sfn.StateMachine, label: str, item: str) -> None:
    """The child executions a Distributed Map's policy names (CDK's DistributedMapPolicy)."""
    distributed_map_policy = state_machine.node.find_child("DistributedMapPolicy")
    machine_name = Arn.split(
        state_machine.state_machine_arn, ArnFormat.COLON_RESOURCE_NAME
    ).resource_name
    for resource_name, why in (
        (f"{machine_name}:*", "states:DescribeExecution and states:StopExecution"),
        (f"{machine_name}/{label}:*", "states:RedriveExecution (this Map Run label only)"),
    ):
        executions = Stack.of(state_machine).format_arn(
            service="states",
            resource="execution",
            resource_name=resource_name,
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        acknowledge(
            distributed_map_policy,
            wildcard_resource_finding(state_machine, executions),
            "The Distributed Map runs one child execution of this state machine per "
            f"{item}, named by Step Functions at run time; {why} on this state "
            "machine's executions only "
            "(https://docs.aws.amazon.com/step-functions/latest/dg/iam-policies-eg-dist-map.html).",
        )
