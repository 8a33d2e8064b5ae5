"""cdk-nag 3.x helpers: acknowledgements recorded on one construct, with the evidence; and
:func:`grant`, the identity-policy grant most of them acknowledge.

cdk-nag 3 reports through CDK's policy-validation framework and reads acknowledgements made with
``Validations.of(construct).acknowledge(...)``; a finding of a rule that reports several findings
per resource (``AwsSolutions-IAM5``) is acknowledged one at a time as ``RuleId[Finding]``
(https://github.com/cdklabs/cdk-nag#acknowledging-a-rule).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from aws_cdk import Acknowledgment, Stack, Validations
from aws_cdk import aws_iam as iam
from constructs import IConstruct


def grant(grantee: iam.IGrantable, actions: Sequence[str], *resource_arns: str) -> None:
    """``actions`` on ``resource_arns`` in ``grantee``'s identity policy
    (``iam.Grant.add_to_principal``)."""
    iam.Grant.add_to_principal(
        grantee=grantee, actions=list(actions), resource_arns=list(resource_arns)
    )


def acknowledge(construct: IConstruct, rule_id: str, reason: str) -> None:
    """Acknowledge one cdk-nag rule (or one finding of it) on ``construct`` and its children.

    Parameters
    ----------
    construct : constructs.IConstruct
        The resource the finding is about (never a stack or the app).
    rule_id : str
        ``"AwsSolutions-S1"`` or, for one finding, ``"AwsSolutions-IAM5[Resource::...]"``.
    reason : str
        Why the finding is acceptable, with the AWS evidence.
    """
    Validations.of(construct).acknowledge(Acknowledgment(id=rule_id, reason=reason))


def wildcard_resource_finding(scope: IConstruct, arn: str) -> str:
    """The ``AwsSolutions-IAM5`` finding id cdk-nag gives a wildcard resource ARN.

    Mirrors cdk-nag's ``flattenCfnReference`` (``Fn::GetAtt`` becomes ``<Id.Attr>``, ``Ref``
    becomes ``<Id>``, ``Fn::Join`` is joined), so the acknowledgement follows logical-id changes.

    Parameters
    ----------
    scope : constructs.IConstruct
        Any construct in the stack that resolves ``arn``.
    arn : str
        The ARN as used in the policy statement (tokens allowed), such as
        ``bucket.arn_for_objects("*")``.

    Returns
    -------
    str
        ``"AwsSolutions-IAM5[Resource::<Bucket1234.Arn>/*]"``.
    """
    return f"AwsSolutions-IAM5[Resource::{_flatten(Stack.of(scope).resolve(arn))}]"


def _flatten(node: Any) -> str:
    if node is None:
        return ""
    if isinstance(node, str):
        return node.replace("${", "<").replace("}", ">")
    if isinstance(node, dict):
        if "Fn::Join" in node:
            delimiter, items = node["Fn::Join"]
            return str(delimiter).join(_flatten(item) for item in items)
        if "Fn::Sub" in node:
            return _flatten(node["Fn::Sub"])
        if "Fn::GetAtt" in node:
            resource, attribute = node["Fn::GetAtt"]
            return f"<{_flatten(resource)}.{_flatten(attribute)}>"
        if "Fn::ImportValue" in node:
            return _flatten(node["Fn::ImportValue"])
        if "Ref" in node:
            return f"<{_flatten(node['Ref'])}>"
    return json.dumps(node, separators=(",", ":"))
