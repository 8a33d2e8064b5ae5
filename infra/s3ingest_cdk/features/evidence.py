"""cdk-nag evidence shared by the features: the reasons a finding is acceptable, with the AWS
reference each rests on, and the acknowledgements every s3ingest function carries (the
AwsSolutions pack's and the Serverless pack's, ``cdk_nag.ServerlessChecks``)."""

from __future__ import annotations

from aws_cdk import Arn, ArnFormat, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from constructs import IConstruct

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
TRACING_EVIDENCE = (
    "X-Ray active tracing is the 'tracing' setting, off by default: X-Ray bills every trace "
    "recorded and scanned (https://aws.amazon.com/xray/pricing/) and its SDK adds about 300 ms "
    "to a cold start (s3ingest_cdk.constructs.python_function). A team that wants traces sets "
    "tracing: true, and the finding goes away with this acknowledgement."
)
DEAD_LETTER_DOC = (
    "https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-retain-records.html"
    "#invocation-dlq"
)
SCHEDULED_EVIDENCE = (
    "Invoked asynchronously only by its EventBridge schedule, with a fixed input: a failed run "
    "is retried twice by Lambda and otherwise reports nothing, which its alarm treats as "
    "breaching, and the next scheduled run does the same work again; a dead-letter queue "
    "(DeadLetterConfig, "
    f"{DEAD_LETTER_DOC}) would hold schedule ticks, with nothing to replay."
)
SCHEDULE_TARGET_EVIDENCE = (
    "A schedule's target: each event is a tick with a fixed input, nothing to replay from a "
    "dead-letter queue; a tick EventBridge fails to deliver after its retries "
    "(https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-rule-retry-policy.html) "
    "is counted in the rule's FailedInvocations metric and the next tick starts the same run."
)
DEAD_LETTER_QUEUE_EVIDENCE = (
    "This queue is itself a dead-letter queue ({what}): its messages are read by the operator "
    "and moved back to their source with a redrive (SQS StartMessageMoveTask, "
    "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/"
    "sqs-configure-dead-letter-queue-redrive.html); a redrive policy on it would only move "
    "that evidence on to a second dead-letter queue."
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


#: Who invokes a state machine's step functions (:func:`synchronous_evidence`).
STATE_MACHINE_INVOKER = (
    "its state machine's LambdaInvoke task (RequestResponse), which retries a failed step and "
    "otherwise fails the execution, whose failure is alarmed"
)


def synchronous_evidence(invoked_by: str) -> str:
    """The Serverless-LambdaDLQ reason of a function invoked synchronously by ``invoked_by``
    (which sees each failure: it retries the work or records it)."""
    return (
        f"Invoked synchronously only, by {invoked_by}, which sees each failure and retries or "
        "records the work itself: a function's dead-letter queue (DeadLetterConfig) receives "
        f"failed asynchronous invocations only ({DEAD_LETTER_DOC})."
    )


def acknowledge_function(
    function: lambda_.IFunction, role: iam.IRole | None, *, tracing: bool, dead_letters: str
) -> None:
    """What every s3ingest function carries: its pinned runtime (AwsSolutions-L1,
    Serverless-LambdaLatestVersion), why it has no dead-letter queue of its own
    (Serverless-LambdaDLQ: ``dead_letters``, :data:`SCHEDULED_EVIDENCE` or
    :func:`synchronous_evidence`), and with ``tracing`` X-Ray's wildcard on its role (``None``:
    the caller acknowledges the role's ``*``), without it the tracing setting
    (Serverless-LambdaTracing)."""
    if role is not None:
        acknowledge_xray(role, tracing=tracing)
    acknowledge(function, "AwsSolutions-L1", RUNTIME_EVIDENCE)
    acknowledge(function, "Serverless-LambdaLatestVersion", RUNTIME_EVIDENCE)
    acknowledge(function, "Serverless-LambdaDLQ", dead_letters)
    if not tracing:
        acknowledge(function, "Serverless-LambdaTracing", TRACING_EVIDENCE)


def acknowledge_dead_letter_queue(queue: IConstruct, what: str) -> None:
    """A dead-letter queue's own missing redrive policy (Serverless-SQSRedrivePolicy): ``what``
    names whose dead-letter queue it is."""
    acknowledge(queue, "Serverless-SQSRedrivePolicy", DEAD_LETTER_QUEUE_EVIDENCE.format(what=what))


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
