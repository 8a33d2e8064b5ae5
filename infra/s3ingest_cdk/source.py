"""The source side of buckets in other accounts (``docs/organisation.md``): what the bucket's
account deploys, in the bucket's Region, for a central pipeline in the same Region.

- A rule on the bucket account's default bus (the only bus S3 sends to,
  https://docs.aws.amazon.com/AmazonS3/latest/userguide/EventBridge.html) matching the buckets'
  ingest events with the pipeline's own pattern (:func:`s3ingest.settings.ingest_event_pattern`),
  targeting the central bus (bus to bus across accounts: the sending rule has an IAM role,
  https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-cross-account.html), with a
  dead-letter queue (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-rule-dlq.html).
- The pipeline's bucket-setup custom resource
  (:class:`~s3ingest_cdk.constructs.bucket_setup.BucketSetupProvider`): EventBridge delivery on,
  and the pipeline's daily inventory to the central inventory bucket (another account's, same
  Region, https://docs.aws.amazon.com/AmazonS3/latest/API/API_PutBucketInventoryConfiguration.html),
  keeping every other configuration of the bucket.
- The read role the central pipeline assumes, in the bucket's account: the bucket's owner
  needs no bucket-policy change (a role of the bucket's account reads under IAM alone unless
  the bucket policy denies, https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html),
  and the central roles need ``sts:AssumeRole`` on it
  (https://docs.aws.amazon.com/IAM/latest/UserGuide/id_roles_common-scenarios_aws-accounts.html).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from aws_cdk import Aws, Duration, Stack, Tags, Token
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from constructs import Construct

from s3ingest.settings import BucketSpec, SettingsError, ingest_event_pattern
from s3ingest.settings.buckets import ACCOUNT_RE, source_read_role_name
from s3ingest.version import version
from s3ingest_cdk.bundling import build_cache, function_code
from s3ingest_cdk.constructs.bucket_setup import BucketSetupProvider
from s3ingest_cdk.constructs.event_routing import event_pattern, rule_role
from s3ingest_cdk.constructs.ingest_queue import rule_dead_letter_queue
from s3ingest_cdk.constructs.landing_bucket import adopted_bucket, inventory_configuration
from s3ingest_cdk.deputy import hold_to_account
from s3ingest_cdk.flags import PINNED_FLAGS, STACK_FLAGS, pin_flags
from s3ingest_cdk.nag import acknowledge, wildcard_resource_finding
from s3ingest_cdk.remote import region_problem, require_region
from s3ingest_cdk.stack import VERSION_TAG

#: What the pipeline's readers call on a bucket (``s3ingest_fn.adapters``): HeadObject and
#: GetObject (``s3:GetObject``, ``s3:GetObjectVersion`` with a version id), on the objects;
#: ListObjectsV2 (``s3:ListBucket``), ListObjectVersions (``s3:ListBucketVersions``),
#: GetBucketVersioning (``s3:GetBucketVersioning``) and the delivery check's
#: GetBucketNotificationConfiguration (``s3:GetBucketNotification``), on the bucket
#: (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3.html).
OBJECT_READ_ACTIONS = ("s3:GetObject", "s3:GetObjectVersion")
BUCKET_READ_ACTIONS = (
    "s3:ListBucket",
    "s3:ListBucketVersions",
    "s3:GetBucketVersioning",
    "s3:GetBucketNotification",
    # ListBucketInventoryConfigurations: `s3ingest onboard` shows the bucket's configuration
    "s3:GetInventoryConfiguration",
)


def object_arns(bucket_arn: str, spec: BucketSpec) -> list[str]:
    """The object ARNs the read role may read: the keys under the prefixes (and with the
    suffixes), every key without filters."""
    prefixes = spec.prefixes or ("",)
    if spec.suffixes:
        return [f"{bucket_arn}/{p}*{x}" for p in prefixes for x in spec.suffixes]
    return [f"{bucket_arn}/{p}*" for p in prefixes]


class S3IngestSource(Construct):
    """A bucket account's part of a central pipeline: forwarding rule, bucket setup (delivery
    and inventory) and read role (module docstring).

    Parameters
    ----------
    scope : constructs.Construct
        A stack in the buckets' account and Region.
    central_account : str
        The pipeline's account (12 digits).
    central_region : str
        The pipeline's Region; the stack must be deployed there (checked at synth when the
        stack's Region is known, by a template rule otherwise).
    buckets : sequence of s3ingest.settings.BucketSpec
        The buckets (names required) with their key filters, as the central ``buckets``
        entries name them; ``inventory=True`` adds the pipeline's inventory (needs
        ``inventory_destination_arn``), ``event_bridge`` switches delivery on.
    reader_role_arns : sequence of str
        The central roles that may assume the read role (ARNs of ``central_account``; ``*``
        allowed, such as ``arn:aws:iam::<central>:role/S3Ingest-prod-*``): the trust names
        the account and checks ``aws:PrincipalArn``, so it does not need the roles to exist.
    central_bus_arn : str, optional
        The bus that receives the events; the central account's default bus by default.
    inventory_destination_arn : str, optional
        The central stack's inventory bucket (output ``InventoryBucketName``), same Region.
    organization_id : str, optional
        The organisation (``o-...``): the trust also requires ``aws:PrincipalOrgID``.
    role_name : str, optional
        The read role's name; ``s3ingest-source-read-<region>`` by default (what the central
        side assumes unless the bucket's entry names ``readRoleArn``).
    code : aws_cdk.aws_lambda.Code, optional
        The bucket-setup function's code; the bundled package by default (a StackSet's
        template needs code every target account can read: ``Code.from_bucket``).
    log_retention_days : int
        The bucket-setup functions' log retention, days.

    Attributes
    ----------
    dead_letter_queue : aws_cdk.aws_sqs.Queue
        Events the rule could not deliver.
    bucket_setup : BucketSetupProvider
        The set-up provider (one resource per bucket in ``setups``).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        central_account: str,
        central_region: str,
        buckets: Sequence[BucketSpec],
        reader_role_arns: Sequence[str],
        central_bus_arn: str | None = None,
        inventory_destination_arn: str | None = None,
        organization_id: str | None = None,
        role_name: str | None = None,
        code: lambda_.Code | None = None,
        log_retention_days: int = 365,
    ) -> None:
        super().__init__(scope, construct_id)
        problems = _problems(
            self,
            central_account,
            central_region,
            buckets,
            reader_role_arns,
            inventory_destination_arn,
        )
        if problems:
            raise SettingsError(problems)
        self.region_rule = require_region(self, "SameRegion", central_region, "The pipeline")
        bus_arn = central_bus_arn or (
            f"arn:{Aws.PARTITION}:events:{central_region}:{central_account}:event-bus/default"
        )
        imported = [
            adopted_bucket(self, spec.construct_id(i), str(spec.name))
            for i, spec in enumerate(buckets)
        ]
        self._forward(bus_arn, buckets, imported)
        self._set_up(
            buckets, imported, central_account, inventory_destination_arn, code, log_retention_days
        )
        self._read_role(
            buckets, imported, central_account, reader_role_arns, organization_id, role_name
        )
        hold_to_account(self)

    def _forward(self, bus_arn: str, specs: Sequence[BucketSpec], imported: list[Any]) -> None:
        # Its messages are S3 events the central bus missed: evidence, retained.
        self.dead_letter_queue = rule_dead_letter_queue(self, "ForwardDeadLetterQueue")
        central_bus = events.EventBus.from_event_bus_arn(self, "CentralBus", bus_arn)
        # the buckets are this account's: their events carry it (owners, not names)
        pattern = ingest_event_pattern(
            [
                {**spec.scope_entry(b.bucket_name), "account": Aws.ACCOUNT_ID}
                for spec, b in zip(specs, imported, strict=True)
            ]
        )
        self.rule = events.Rule(
            self,
            "Forward",
            description="s3ingest: the buckets' Object Created / Object Deleted events, to the "
            "central pipeline's bus",
            event_pattern=event_pattern(pattern),
        )
        # A rule sending to another account's bus needs a role: this account's rules only may
        # assume it (rule_role), and CDK grants it events:PutEvents on the central bus only.
        self.rule.add_target(
            targets.EventBus(
                central_bus, role=rule_role(self.rule), dead_letter_queue=self.dead_letter_queue
            )
        )

    def _set_up(
        self,
        specs: Sequence[BucketSpec],
        imported: list[Any],
        central_account: str,
        destination_arn: str | None,
        code: lambda_.Code | None,
        log_retention_days: int,
    ) -> None:
        if code is None:
            code = function_code(cache_dir=build_cache(self), tracing=False)
        self.bucket_setup = BucketSetupProvider(
            self, "BucketSetup", code=code, log_retention_days=log_retention_days
        )
        destination = (
            s3.Bucket.from_bucket_arn(self, "InventoryDestination", destination_arn)
            if destination_arn is not None
            else None
        )
        self.setups = []
        for index, (spec, bucket) in enumerate(zip(specs, imported, strict=True)):
            inventory = spec.inventory is True and destination is not None
            if not (spec.event_bridge or inventory):
                continue
            self.setups.append(
                self.bucket_setup.set_up(
                    self,
                    f"{spec.construct_id(index)}Setup",
                    bucket=bucket,
                    event_bridge=spec.event_bridge,
                    inventory=(
                        inventory_configuration(destination, account_id=central_account)
                        if inventory and destination is not None
                        else None
                    ),
                )
            )

    def _read_role(
        self,
        specs: Sequence[BucketSpec],
        imported: list[Any],
        central_account: str,
        reader_role_arns: Sequence[str],
        organization_id: str | None,
        role_name: str | None,
    ) -> None:
        conditions: dict[str, Any] = {"ArnLike": {"aws:PrincipalArn": list(reader_role_arns)}}
        if organization_id is not None:
            conditions["StringEquals"] = {"aws:PrincipalOrgID": organization_id}
        self.read_role = iam.Role(
            self,
            "ReadRole",
            role_name=role_name or source_read_role_name(Aws.REGION),
            description="s3ingest: the central pipeline's reads of this account's buckets",
            assumed_by=iam.AccountPrincipal(central_account).with_conditions(conditions),
            max_session_duration=Duration.hours(1),
        )
        # owners, not names: only this account's buckets of these names (s3:ResourceAccount,
        # https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html#condition-keys-resourceaccount)
        owned = {"StringEquals": {"s3:ResourceAccount": Aws.ACCOUNT_ID}}
        for spec, bucket in zip(specs, imported, strict=True):
            objects = object_arns(bucket.bucket_arn, spec)
            self.read_role.add_to_policy(
                iam.PolicyStatement(
                    actions=list(OBJECT_READ_ACTIONS), resources=objects, conditions=owned
                )
            )
            if spec.kms_key_arn is not None:
                # SSE-KMS: GetObject needs kms:Decrypt on the bucket's key, here only through
                # S3 (https://docs.aws.amazon.com/AmazonS3/latest/userguide/UsingKMSEncryption.html,
                # https://docs.aws.amazon.com/kms/latest/developerguide/conditions-kms.html#conditions-kms-via-service)
                self.read_role.add_to_policy(
                    iam.PolicyStatement(
                        actions=["kms:Decrypt"],
                        resources=[spec.kms_key_arn],
                        conditions={
                            "StringEquals": {"kms:ViaService": f"s3.{Aws.REGION}.amazonaws.com"}
                        },
                    )
                )
            actions = [a for a in BUCKET_READ_ACTIONS if spec.versioned or "Versions" not in a]
            listing: dict[str, Any] = {}
            if spec.prefixes:
                listing = {"StringLike": {"s3:prefix": [f"{p}*" for p in spec.prefixes]}}
            self.read_role.add_to_policy(
                iam.PolicyStatement(
                    actions=[a for a in actions if a.startswith("s3:List")],
                    resources=[bucket.bucket_arn],
                    conditions={**listing, **owned},
                )
            )
            self.read_role.add_to_policy(
                iam.PolicyStatement(
                    actions=[a for a in actions if not a.startswith("s3:List")],
                    resources=[bucket.bucket_arn],
                    conditions=owned,
                )
            )
            for arn in objects:
                acknowledge(
                    self.read_role,
                    wildcard_resource_finding(self, arn),
                    "The pipeline reads whichever object an event or a listing names under "
                    "the bucket's key filters: s3:GetObject and s3:GetObjectVersion on those "
                    "keys only (keys unknown in advance).",
                )


def _problems(
    scope: Construct,
    central_account: str,
    central_region: str,
    buckets: Sequence[BucketSpec],
    reader_role_arns: Sequence[str],
    inventory_destination_arn: str | None,
) -> list[str]:
    """What :class:`S3IngestSource`'s props break."""
    problems: list[str] = []
    stack = Stack.of(scope)
    if not ACCOUNT_RE.match(central_account):
        problems.append(f"central_account: {central_account!r} is not an account id")
    if not Token.is_unresolved(stack.region) and stack.region != central_region:
        problems.append(region_problem("source", stack.region, central_region))
    if not buckets:
        problems.append("buckets: name at least one bucket")
    for index, spec in enumerate(buckets):
        where = f"buckets[{index}]"
        if spec.name is None or Token.is_unresolved(spec.name):
            problems.append(f"{where}.name: the source stack names its buckets")
        problems.extend(spec.problems(where))
        if spec.region is not None and spec.region != central_region:
            problems.append(region_problem(where, spec.region, central_region))
        if spec.inventory is True and inventory_destination_arn is None:
            problems.append(
                f"{where}.inventory: the pipeline's inventory needs inventory_destination_arn "
                "(the central stack's InventoryBucketName); inventory=False lists the bucket"
            )
    if not reader_role_arns:
        problems.append("reader_role_arns: name the central roles that read the buckets")
    for arn in reader_role_arns:
        parts = arn.split(":")
        if len(parts) != 6 or parts[2] != "iam" or parts[4] != central_account:
            problems.append(f"reader_role_arns: {arn!r} is not a role ARN of {central_account}")
        elif not parts[5].startswith("role/"):
            problems.append(f"reader_role_arns: {arn!r} is not a role ARN")
    return problems


class S3IngestSourceStack(Stack):
    """The stack a bucket's account deploys (directly, or to every account of an
    organisational unit with a StackSet, ``examples/organisation/``): one
    :class:`S3IngestSource` (``Source``), tagged with the s3ingest version.

    Parameters
    ----------
    **kwargs
        :class:`S3IngestSource`'s props, and :class:`aws_cdk.Stack`'s (``env``,
        ``synthesizer``, ``description``, ...).

    Attributes
    ----------
    source : S3IngestSource
    """

    #: The props that go to :class:`S3IngestSource`: its keyword-only parameters.
    SOURCE_PROPS = tuple(
        name
        for name, parameter in inspect.signature(S3IngestSource.__init__).parameters.items()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY
    )

    def __init__(self, scope: Construct, construct_id: str, **kwargs: Any) -> None:
        props = {k: kwargs.pop(k) for k in self.SOURCE_PROPS if k in kwargs}
        kwargs.setdefault(
            "description", "s3ingest source: forwards a bucket account's events to a pipeline"
        )
        # the version as a stack tag, as S3IngestStack's (a release changes no resource)
        kwargs["tags"] = {**(kwargs.get("tags") or {}), VERSION_TAG: version()}
        super().__init__(scope, construct_id, **kwargs)
        pin_flags(self, {**PINNED_FLAGS, **STACK_FLAGS})
        Tags.of(self).add("project", "s3ingest")
        self.source = S3IngestSource(self, "Source", **props)
