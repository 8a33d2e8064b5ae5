"""Confused deputy: every resource-policy statement below a construct that lets an AWS service
act for one of this account's resources names the account as well as the resource.

CDK writes some of these statements itself, with ``aws:SourceArn`` only: an EventBridge rule
target's statement on an SQS queue (the ingest queue, the rule targets' dead-letter queues) and
the ``AWS::Lambda::Permission`` of a scheduled rule (``SourceArn``). The IAM User Guide asks for
both global keys (``aws:SourceArn`` and ``aws:SourceAccount``) in every statement that admits a
service principal (https://docs.aws.amazon.com/IAM/latest/UserGuide/confused-deputy.html;
Lambda's ``SourceAccount``:
https://docs.aws.amazon.com/lambda/latest/api/API_AddPermission.html). :func:`hold_to_account`
adds the missing ``aws:SourceAccount`` (the stack's account) once the constructs are composed,
to the statements as the template renders them (whatever was added to the policy since).

Trust policies and key policies the stack writes carry both keys where they are written
(``rule_role``, ``BatchOperationsRole``, the state machines' roles,
:mod:`s3ingest.encryption`); ``tests/infra/test_infra_confused_deputy.py`` walks every
template for any statement left without them.
"""

from __future__ import annotations

from typing import Any

import jsii
from aws_cdk import Aws, IAnyProducer, IResolveContext, Lazy, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import IConstruct

SOURCE_ACCOUNT = "aws:SourceAccount"
SOURCE_ARN = "aws:SourceArn"
#: The attribute that marks a policy whose document :func:`hold_to_account` wraps already.
_HELD = "_s3ingest_held_to_account"


def _is_service(principal: Any) -> bool:
    return isinstance(principal, dict) and "Service" in principal


def _condition_keys(statement: dict[str, Any]) -> set[str]:
    return {key for block in statement.get("Condition", {}).values() for key in block}


def _held(document: dict[str, Any]) -> list[int]:
    """The indices of ``document``'s Allow statements that admit a service principal for a
    source ARN without naming the account; those statements gain ``aws:SourceAccount`` (this
    stack's account) in place."""
    indices = []
    for index, statement in enumerate(document.get("Statement", [])):
        keys = _condition_keys(statement)
        if (
            statement.get("Effect") == "Allow"
            and _is_service(statement.get("Principal"))
            and SOURCE_ARN in keys
            and SOURCE_ACCOUNT not in keys
        ):
            condition = statement.setdefault("Condition", {})
            condition.setdefault("StringEquals", {})[SOURCE_ACCOUNT] = {"Ref": "AWS::AccountId"}
            indices.append(index)
    return indices


@jsii.implements(IAnyProducer)
class _HeldDocument:
    """The policy document, resolved when the template is written (so statements added after
    :func:`hold_to_account` are held too), its service statements held (:func:`_held`)."""

    def __init__(self, document: Any) -> None:
        self._document = document

    def produce(self, context: IResolveContext) -> Any:
        document = context.resolve(self._document)
        if isinstance(document, dict):
            _held(document)
        return document


def hold_to_account(root: IConstruct) -> list[str]:
    """Add ``aws:SourceAccount`` (this stack's account) to every Allow statement below ``root``
    of an SQS queue, SNS topic or S3 bucket policy that admits a service principal for a
    source ARN without naming the account (the document rendered through
    :class:`_HeldDocument`, when the template is written), and ``SourceAccount`` to every
    Lambda permission of a service principal with a ``SourceArn`` only. Returns what it holds
    now, as ``"<construct path>#<statement index>"`` (``#permission`` for a permission)."""
    stack = Stack.of(root)
    held: list[str] = []
    for node in root.node.find_all():
        if isinstance(node, sqs.CfnQueuePolicy | sns.CfnTopicPolicy | s3.CfnBucketPolicy):
            document = stack.resolve(node.policy_document) or {}
            held.extend(f"{node.node.path}#{index}" for index in _held(document))
            if not getattr(node, _HELD, False):  # once per policy
                node.policy_document = Lazy.uncached_any(_HeldDocument(node.policy_document))
                setattr(node, _HELD, True)
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
