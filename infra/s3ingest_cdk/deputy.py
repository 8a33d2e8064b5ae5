"""Confused deputy: every resource-policy statement below a construct that lets an AWS service
act for one of this account's resources names the account as well as the resource.

CDK writes some of these statements itself, with ``aws:SourceArn`` only: an EventBridge rule
target's statement on an SQS queue (the ingest queue, the rule targets' dead-letter queues) and
the ``AWS::Lambda::Permission`` of a scheduled rule (``SourceArn``). The IAM User Guide asks for
both global keys (``aws:SourceArn`` and ``aws:SourceAccount``) in every statement that admits a
service principal (https://docs.aws.amazon.com/IAM/latest/UserGuide/confused-deputy.html;
Lambda's ``SourceAccount``:
https://docs.aws.amazon.com/lambda/latest/api/API_AddPermission.html). :func:`hold_to_account`
adds the missing ``aws:SourceAccount`` (the stack's account) once the constructs are composed.

Trust policies and key policies the stack writes carry both keys where they are written
(``rule_role``, ``BatchOperationsRole``, the state machines' roles,
:mod:`s3ingest.encryption`); ``tests/infra/test_infra_confused_deputy.py`` walks every
template for any statement left without them.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Aws, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import IConstruct

SOURCE_ACCOUNT = "aws:SourceAccount"
SOURCE_ARN = "aws:SourceArn"


def _is_service(principal: Any) -> bool:
    return isinstance(principal, dict) and "Service" in principal


def _condition_keys(statement: dict[str, Any]) -> set[str]:
    return {key for block in statement.get("Condition", {}).values() for key in block}


def hold_to_account(root: IConstruct) -> list[str]:
    """Add ``aws:SourceAccount`` (this stack's account) to every Allow statement below ``root``
    of an SQS queue, SNS topic or S3 bucket policy that admits a service principal for a
    source ARN without naming the account, and ``SourceAccount`` to every Lambda permission
    of a service principal with a ``SourceArn`` only. Returns what was held, as
    ``"<construct path>#<statement index>"`` (``#permission`` for a Lambda permission)."""
    stack = Stack.of(root)
    held: list[str] = []
    for node in root.node.find_all():
        if isinstance(node, sqs.CfnQueuePolicy | sns.CfnTopicPolicy | s3.CfnBucketPolicy):
            document = stack.resolve(node.policy_document) or {}
            for index, statement in enumerate(document.get("Statement", [])):
                keys = _condition_keys(statement)
                if (
                    statement.get("Effect") == "Allow"
                    and _is_service(statement.get("Principal"))
                    and SOURCE_ARN in keys
                    and SOURCE_ACCOUNT not in keys
                ):
                    node.add_property_override(
                        f"PolicyDocument.Statement.{index}.Condition.StringEquals.{SOURCE_ACCOUNT}",
                        Aws.ACCOUNT_ID,
                    )
                    held.append(f"{node.node.path}#{index}")
        elif isinstance(node, lambda_.CfnPermission):
            principal = stack.resolve(node.principal)
            if (
                isinstance(principal, str)
                and principal.endswith(".amazonaws.com")
                and node.source_arn is not None
                and node.source_account is None
            ):
                node.source_account = Aws.ACCOUNT_ID
                held.append(f"{node.node.path}#permission")
    return held
