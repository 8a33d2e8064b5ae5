"""What every s3ingest state machine shares: an encrypted execution log group and Lambda steps.

Not constructs of their own: like
:func:`s3ingest_cdk.constructs.python_function.python_function`, the helpers add their
children to the construct that owns the state machine
(``ReconcileStateMachine``, ``BackfillStateMachine``), so construct ids (and logical ids) stay
stable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_cdk import Aws, Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from s3ingest_cdk.constructs.dependencies import depend_on_policies_not_role
from s3ingest_cdk.constructs.python_function import retention
from s3ingest_cdk.encryption import pipeline_key


@dataclass(frozen=True)
class ExecutionLogs:
    """What :func:`execution_logs` creates.

    Attributes
    ----------
    log_key : aws_cdk.aws_kms.IKey
        The key that encrypts it (the pipeline's, with ``kmsKeyArn``).
    """

    log_group: logs.LogGroup
    log_key: kms.IKey


def execution_logs(scope: Construct, *, description: str, log_retention_days: int) -> ExecutionLogs:
    """Add ``LogKey`` (a rotated KMS key) and ``LogGroup`` (encrypted with it) to ``scope``.

    Both are retained on stack deletion, like the functions' log groups. With ``kmsKeyArn``
    the log group is encrypted with the pipeline's key instead and no ``LogKey`` is made.

    Parameters
    ----------
    log_retention_days : int
        Log retention, days; one of CloudWatch Logs' allowed values.

    Raises
    ------
    ValueError
        When ``log_retention_days`` is not a CloudWatch Logs retention value.
    """
    log_key = pipeline_key(scope)
    if log_key is None:
        log_key = kms.Key(
            scope,
            "LogKey",
            description=description,
            enable_key_rotation=True,
            removal_policy=RemovalPolicy.RETAIN,
        )
        # CloudWatch Logs encrypts with the key on the log group's behalf; the condition keeps the
        # grant to log groups of this account and region. The log group's own ARN cannot be named:
        # the log group refers to the key, so the key's policy referring back would be a cycle.
        # https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html
        log_key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowCloudWatchLogsOfThisAccountAndRegion",
                principals=[iam.ServicePrincipal(f"logs.{Aws.REGION}.amazonaws.com")],
                actions=[
                    "kms:Encrypt*",
                    "kms:Decrypt*",
                    "kms:ReEncrypt*",
                    "kms:GenerateDataKey*",
                    "kms:Describe*",
                ],
                resources=["*"],
                conditions={
                    "ArnLike": {
                        "kms:EncryptionContext:aws:logs:arn": (
                            f"arn:{Aws.PARTITION}:logs:{Aws.REGION}:{Aws.ACCOUNT_ID}:log-group:*"
                        )
                    }
                },
            )
        )
    log_group = logs.LogGroup(
        scope,
        "LogGroup",
        retention=retention(log_retention_days),
        encryption_key=log_key,
        removal_policy=RemovalPolicy.RETAIN,
    )
    return ExecutionLogs(log_group=log_group, log_key=log_key)


def lambda_step(
    scope: Construct,
    state_id: str,
    *,
    function: lambda_.IFunction,
    payload: sfn.TaskInput,
    result_selector: dict[str, Any] | None = None,
    result_path: str | None = None,
    output_path: str | None = None,
) -> tasks.LambdaInvoke:
    """One invocation of ``function``, retrying Lambda's transient errors and throttling.

    ``retry_on_service_exceptions`` (CDK's default) adds the retry on
    ``Lambda.ServiceException``, ``Lambda.AWSLambdaException``, ``Lambda.SdkClientException``
    and ``Lambda.ClientExecutionTimeoutException``
    (https://docs.aws.amazon.com/step-functions/latest/dg/bp-lambda-serviceexception.html); the
    second retrier backs off ``Lambda.TooManyRequestsException`` with full jitter.

    Parameters
    ----------
    result_selector, result_path, output_path
        As for :class:`aws_cdk.aws_stepfunctions_tasks.LambdaInvoke`.
    """
    step = tasks.LambdaInvoke(
        scope,
        state_id,
        lambda_function=function,
        payload=payload,
        retry_on_service_exceptions=True,
        result_selector=result_selector,
        result_path=result_path,
        output_path=output_path,
    )
    step.add_retry(
        errors=["Lambda.TooManyRequestsException"],
        interval=Duration.seconds(2),
        max_attempts=8,
        backoff_rate=2,
        jitter_strategy=sfn.JitterType.FULL,
    )
    return step


def logged_state_machine(
    scope: Construct,
    *,
    comment: str,
    definition: sfn.IChainable,
    log_group: logs.ILogGroup,
    timeout: Duration | None = None,
) -> sfn.StateMachine:
    """``StateMachine`` in ``scope``: a Standard workflow with X-Ray tracing, logging level ALL
    with execution data to ``log_group`` (:func:`execution_logs`'), made after its role's
    policies (:func:`~s3ingest_cdk.constructs.dependencies.depend_on_policies_not_role`)."""
    machine = sfn.StateMachine(
        scope,
        "StateMachine",
        comment=comment,
        definition_body=sfn.DefinitionBody.from_chainable(definition),
        state_machine_type=sfn.StateMachineType.STANDARD,
        logs=sfn.LogOptions(
            destination=log_group, level=sfn.LogLevel.ALL, include_execution_data=True
        ),
        tracing_enabled=True,
        timeout=timeout,
    )
    depend_on_policies_not_role(machine, machine.role)
    return machine
