"""The central side of buckets in other accounts of the same Region (``docs/organisation.md``).

A bucket's S3 events reach EventBridge only on the default bus of the bucket's own account and
Region (https://docs.aws.amazon.com/AmazonS3/latest/userguide/EventBridge.html), so the bucket's
account runs a rule (:class:`s3ingest_cdk.source.S3IngestSource`) that forwards them to the
central account's **default** bus: the ingest rule and its archive already live there and match
each bucket's name with its owner's account (the event's ``account``, which EventBridge sets and
a forwarding rule keeps), so a remote bucket's events take the same path (rule, archive, replay)
as a local one's, and no second rule or archive is needed; a bucket of a configured name in
another account matches nothing. That bus gets one resource-policy statement per remote account
admitting ``events:PutEvents`` only from that account's rules (``aws:SourceAccount``: the
account of the rule that sends) and only S3's ingest shapes (``events:source``,
``events:detail-type``;
https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-conditions.html,
https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-cross-account.html). A bus policy
has no condition key for an event's bucket name, so which names an account may send is the
ingest rule's pattern (and the handler's ``wrong-account``), not the policy's.

S3 Inventory may write to another account's bucket in the source bucket's Region only
(https://docs.aws.amazon.com/AmazonS3/latest/API/API_PutBucketInventoryConfiguration.html): the
stack's inventory bucket admits each remote account's buckets by ``aws:SourceAccount`` and
``aws:SourceArn`` (https://docs.aws.amazon.com/AmazonS3/latest/userguide/configure-inventory.html).
One pipeline per Region: a bucket of another Region is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import Aws, CfnRule, CfnRuleAssertion, Fn, Stack, Token
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from constructs import Construct

from s3ingest.settings import BucketSpec, ingest_event_pattern
from s3ingest.settings.buckets import read_role_arn as settings_read_role_arn
from s3ingest_cdk.constructs.landing_bucket import allow_inventory_delivery
from s3ingest_cdk.encryption import flatten

#: The event shapes the central bus admits from other accounts: the ingest rule's.
S3_SOURCE = ingest_event_pattern("bucket")["source"]
S3_DETAIL_TYPES = ingest_event_pattern("bucket")["detail-type"]


def region_problem(where: str, region: str, stack_region: str) -> str:
    """The refusal of a bucket in ``region`` for a pipeline in ``stack_region``."""
    return (
        f"{where}.region: the bucket is in {region} and this pipeline in {stack_region}: S3 "
        "events and inventories stay in their Region, so deploy an s3ingest pipeline in "
        f"{region} for it (one pipeline per Region, docs/organisation.md)"
    )


def remote_problems(scope: Construct, specs: Sequence[BucketSpec]) -> list[str]:
    """Every rule the ``buckets`` entries' ``account`` and ``region`` break for the stack of
    ``scope``: a Region other than the stack's (when the stack's is known; otherwise the
    template's rule refuses it at deploy, :func:`require_region`), two Regions named, the
    stack's own account named as another's."""
    stack = Stack.of(scope)
    problems: list[str] = []
    regions = sorted({s.region for s in specs if s.region is not None})
    for index, spec in enumerate(specs):
        where = f"buckets[{index}]"
        if (
            spec.region is not None
            and not Token.is_unresolved(stack.region)
            and spec.region != stack.region
        ):
            problems.append(region_problem(where, spec.region, stack.region))
        if (
            spec.account is not None
            and not Token.is_unresolved(stack.account)
            and spec.account == stack.account
        ):
            problems.append(
                f"{where}.account: {spec.account} is the stack's own account: leave account "
                "out for a bucket of this account"
            )
    if len(regions) > 1 and Token.is_unresolved(stack.region):
        problems.append(
            f"buckets: the buckets name several Regions ({', '.join(regions)}): one pipeline "
            "per Region, deploy one in each (docs/organisation.md)"
        )
    return problems


def require_region(scope: Construct, construct_id: str, region: str, what: str) -> CfnRule | None:
    """A template rule that refuses to deploy the stack of ``scope`` outside ``region`` when
    its Region is not known at synth (an environment-agnostic stack, a StackSet's template);
    ``None`` when it is known (synth checks it).
    https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/rules-section-structure.html
    """
    if not Token.is_unresolved(Stack.of(scope).region):
        return None
    return CfnRule(
        scope,
        construct_id,
        assertions=[
            CfnRuleAssertion(
                assert_=Fn.condition_equals(Aws.REGION, region),
                assert_description=f"{what} is in {region}: deploy this stack in {region} "
                "(one s3ingest pipeline per Region, docs/organisation.md)",
            )
        ],
    )


def read_role_arn(spec: BucketSpec, scope: Construct) -> str:
    """:func:`s3ingest.settings.buckets.read_role_arn` in the stack of ``scope`` (its Region
    and partition)."""
    return settings_read_role_arn(spec, Stack.of(scope).region, Aws.PARTITION)


def bus_statement(scope: Construct, sid: str, accounts: Sequence[str]) -> dict[str, Any]:
    """The default bus's statement admitting the accounts' forwarding rules: ``PutEvents`` by
    those accounts, from their rules (``aws:SourceAccount``), of S3's ingest events only
    (:class:`RemoteSources` makes one per account)."""
    stack = Stack.of(scope)
    return {
        "Sid": sid,
        "Effect": "Allow",
        "Principal": {"AWS": [f"arn:{Aws.PARTITION}:iam::{a}:root" for a in accounts]},
        "Action": "events:PutEvents",
        "Resource": f"arn:{Aws.PARTITION}:events:{stack.region}:{stack.account}:event-bus/default",
        "Condition": {
            "StringEquals": {
                "aws:SourceAccount": list(accounts),
                "events:source": list(S3_SOURCE),
                "events:detail-type": list(S3_DETAIL_TYPES),
            }
        },
    }


class RemoteSources(Construct):
    """The central pipeline's side of its buckets in other accounts: the default bus's
    statement (:func:`bus_statement`), the inventory bucket's delivery statement per remote
    account, and the Region rule of an environment-agnostic stack (:func:`require_region`).

    Parameters
    ----------
    stage : str
        The pipeline's stage (the statement ids ``s3ingest-<stage>-remote-<account>``).

    Attributes
    ----------
    bus_policies : dict of str to aws_cdk.aws_events.CfnEventBusPolicy
        The default bus's statement of each remote account (``s3ingest-<stage>-remote-<account>``).
    bus_policy : aws_cdk.aws_events.CfnEventBusPolicy or None
        The first account's statement (with remote buckets).
    region_rule : aws_cdk.CfnRule or None
        The Region assertion (a named Region, the stack's unknown at synth).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        entries: Sequence[tuple[BucketSpec, s3.IBucket]],
        inventory: s3.Bucket,
    ) -> None:
        super().__init__(scope, construct_id)
        remote = [(spec, bucket) for spec, bucket in entries if spec.remote]
        self.accounts = sorted({str(spec.account) for spec, _ in remote})
        self.bus_policies: dict[str, events.CfnEventBusPolicy] = {}
        for account in self.accounts:
            sid = f"s3ingest-{stage}-remote-{account}"
            # a statement of its own per account on the default bus: other statements stay
            self.bus_policies[account] = events.CfnEventBusPolicy(
                self,
                f"BusPolicy{account}",
                event_bus_name="default",
                statement_id=sid,
                statement=bus_statement(self, sid, [account]),
            )
        self.bus_policy = next(iter(self.bus_policies.values()), None)
        for account in self.accounts:
            delivered = [b for s, b in remote if s.account == account and s.inventory is True]
            if delivered:
                allow_inventory_delivery(inventory, delivered, account)
        regions = sorted({s.region for s, _ in entries if s.region is not None})
        self.region_rule = (
            require_region(self, "SameRegion", regions[0], "a landing bucket")
            if len(regions) == 1
            else None
        )


def reads_buckets(function: lambda_.Function, bucket_arns: Sequence[str]) -> bool:
    """Whether ``function``'s role may call S3 on one of the buckets (``bucket_arns``, as a
    policy names them): on the bucket or its objects, any ``s3:`` action. Only such a function
    is given the buckets' read roles (``sts:AssumeRole``): least privilege
    (https://docs.aws.amazon.com/IAM/latest/UserGuide/best-practices.html#grant-least-privilege)."""
    role = function.role
    policy = role.node.try_find_child("DefaultPolicy") if role is not None else None
    if not isinstance(policy, iam.Policy):
        return False
    stack = Stack.of(function)
    buckets = [flatten(stack.resolve(arn)) for arn in bucket_arns]
    document = stack.resolve(policy.document.to_json()) or {}
    for statement in document.get("Statement", []):
        actions = statement.get("Action", [])
        actions = [actions] if isinstance(actions, str) else actions
        if statement.get("Effect") != "Allow" or not any(a.startswith("s3:") for a in actions):
            continue
        resources = statement.get("Resource", [])
        for resource in resources if isinstance(resources, list) else [resources]:
            named = flatten(resource)
            if any(named == b or named.startswith(f"{b}/") for b in buckets):
                return True
    return False
