"""Owners, not names: what keeps a role off a bucket of a landing bucket's name that another
account owns (``docs/organisation.md``).

A bucket name is global; when a configured bucket's name is free (not created yet, or
deleted), any account can create a bucket of that name. A role's grants name buckets by ARN,
and an S3 ARN holds no account, so each role that reads a landing bucket also requires the
bucket's owner: ``s3:ResourceAccount``
(https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html#condition-keys-resourceaccount).
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Aws
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3


def own_buckets_guard(buckets: Sequence[s3.IBucket]) -> iam.PolicyStatement:
    """The statement that keeps a role off any bucket of these names another account owns:
    ``Deny s3:*`` on the buckets and their objects unless ``s3:ResourceAccount`` is the
    stack's account (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html#condition-keys-resourceaccount).
    The grants stay as they are; an explicit deny wins over them
    (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html)."""
    resources: list[str] = []
    for bucket in buckets:
        resources += [bucket.bucket_arn, bucket.arn_for_objects("*")]
    return iam.PolicyStatement(
        sid="OwnBucketsOnly",
        effect=iam.Effect.DENY,
        actions=["s3:*"],
        resources=resources,
        conditions={"StringNotEquals": {"s3:ResourceAccount": Aws.ACCOUNT_ID}},
    )


#: The inline policy :func:`guard_role` adds to a role.
GUARD_POLICY = "s3ingest-own-buckets-only"


def guard_role(role: iam.IRole, buckets: Sequence[s3.IBucket]) -> None:
    """Give ``role`` (a role of this stack) the inline policy :data:`GUARD_POLICY` holding
    :func:`own_buckets_guard`: on the role itself, beside its grants (its ``AWS::IAM::Policy``
    resources stay as they are).

    Raises
    ------
    TypeError
        When ``role`` is not a role this stack defines (an imported one cannot be changed).
    """
    resource = role.node.default_child
    if not isinstance(resource, iam.CfnRole):
        raise TypeError(f"{role.node.path}: not a role of this stack")
    document = iam.PolicyDocument(statements=[own_buckets_guard(buckets)])
    if resource.policies is not None and not isinstance(resource.policies, list):
        raise TypeError(f"{role.node.path}: inline policies not known at synth")
    existing = list(resource.policies or [])
    resource.policies = [
        *existing,
        iam.CfnRole.PolicyProperty(policy_name=GUARD_POLICY, policy_document=document),
    ]
