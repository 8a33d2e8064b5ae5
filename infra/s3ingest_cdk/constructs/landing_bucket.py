"""The landing buckets: created with secure defaults and EventBridge delivery, or existing ones
set up without clobbering their owners' configuration."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import jsii
from aws_cdk import Aws, CfnResource, CustomResource, Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct, IValidation

from s3ingest.settings import (
    INVENTORY_ID,
    INVENTORY_PREFIX,
    BucketSpec,
    InventoryRef,
    inventory_report_prefix,
)
from s3ingest.stack_resources import INVENTORY_OPTIONAL_FIELDS
from s3ingest.stack_resources import inventory_configuration as _inventory_configuration
from s3ingest_fn import config as fn_config

if TYPE_CHECKING:
    from s3ingest_cdk.constructs.bucket_setup import BucketSetupProvider


#: The prefixes of the stack's bucket whose objects are overwritten (the fan-out's work, the
#: listing backfill's and the reprocess runs' checkpoints): their noncurrent versions expire.
OVERWRITTEN_PREFIXES = ("reconcile-work/", "backfill-listing/", "reprocess/")


def secure_bucket(
    scope: Construct,
    construct_id: str,
    *,
    versioned: bool,
    access_logs_bucket: s3.IBucket | None,
    access_logs_prefix: str | None,
    locked_days: int | None = None,
) -> s3.Bucket:
    """A bucket with the defaults every bucket of the stack shares.

    S3-managed encryption (SSE-S3), all public access blocked, ACLs disabled (bucket owner
    enforced), a bucket policy denying any request not sent over TLS 1.2 or later, and retained on
    stack deletion (its objects are data).
    https://docs.aws.amazon.com/AmazonS3/latest/userguide/security-best-practices.html

    Server access logs (``access_logs_bucket``) are delivered under the destination's bucket
    policy (:func:`server_access_logs`), whatever the app's feature flags say. ``locked_days``:
    S3 Object Lock on, every new object version kept ``locked_days`` days in compliance mode
    by default (versioned; https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-lock.html).
    """
    bucket = s3.Bucket(
        scope,
        construct_id,
        versioned=versioned or locked_days is not None,
        object_lock_enabled=True if locked_days is not None else None,
        object_lock_default_retention=(
            s3.ObjectLockRetention.compliance(Duration.days(locked_days))
            if locked_days is not None
            else None
        ),
        encryption=s3.BucketEncryption.S3_MANAGED,
        enforce_ssl=True,
        minimum_tls_version=1.2,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        removal_policy=RemovalPolicy.RETAIN,
    )
    if access_logs_bucket is not None:
        server_access_logs(bucket, access_logs_bucket, access_logs_prefix)
    return bucket


def server_access_logs(source: s3.Bucket, destination: s3.IBucket, prefix: str | None) -> None:
    """Server access logs of ``source`` to ``destination`` under ``prefix``, delivered under the
    destination's bucket policy (``logging.s3.amazonaws.com`` may put objects under ``prefix``
    for ``source`` of this account only), never by the ``LogDeliveryWrite`` ACL.

    What ``s3.Bucket(server_access_logs_bucket=...)`` writes with the feature flag
    ``@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy``; without the flag it would set that ACL,
    which a bucket with ACLs disabled (``BUCKET_OWNER_ENFORCED``) refuses at synth. Set here on
    the L1 resource, so no app's flags decide it.
    https://docs.aws.amazon.com/AmazonS3/latest/userguide/enable-server-access-logging.html
    """
    cfn_bucket = source.node.default_child
    if not isinstance(cfn_bucket, s3.CfnBucket):  # pragma: no cover - CDK invariant
        raise TypeError("s3.Bucket's default child is not a CfnBucket")
    cfn_bucket.logging_configuration = s3.CfnBucket.LoggingConfigurationProperty(
        destination_bucket_name=destination.bucket_name, log_file_prefix=prefix
    )
    destination.add_to_resource_policy(
        iam.PolicyStatement(
            effect=iam.Effect.ALLOW,
            principals=[iam.ServicePrincipal("logging.s3.amazonaws.com")],
            actions=["s3:PutObject"],
            resources=[destination.arn_for_objects(f"{prefix}*" if prefix else "*")],
            conditions={
                "ArnLike": {"aws:SourceArn": source.bucket_arn},
                "StringEquals": {"aws:SourceAccount": Stack.of(source).account},
            },
        )
    )


def adopted_bucket(scope: Construct, construct_id: str, bucket_name: str) -> s3.IBucket:
    """An existing bucket, by name: as ``Bucket.from_bucket_name``, with the ARN built from the
    partition pseudo-parameter (``from_bucket_name`` would write the partition of the synth-time
    region literally). Creates no resource."""
    return s3.Bucket.from_bucket_attributes(
        scope,
        construct_id,
        bucket_name=bucket_name,
        bucket_arn=f"arn:{Aws.PARTITION}:s3:::{bucket_name}",
    )


def enable_event_bridge(bucket: s3.Bucket) -> None:
    """Turn on the bucket's delivery of its events to EventBridge on the bucket resource itself
    (``NotificationConfiguration.EventBridgeConfiguration``,
    https://docs.aws.amazon.com/AmazonS3/latest/userguide/EventBridge.html).

    The L2 ``event_bridge_enabled`` prop would add a ``Custom::S3BucketNotifications`` resource
    backed by a singleton Lambda (managed policy, extra runtime, cdk-nag findings) to do what this
    native CloudFormation property does. Other notification configurations set on the L1 are kept.

    ``bucket``: created in the app (an imported bucket's owner turns delivery on).

    Raises
    ------
    TypeError
        When ``bucket`` has no ``CfnBucket`` (an imported bucket), or its notification
        configuration is not a ``NotificationConfigurationProperty`` that can be extended.
    """
    cfn_bucket = bucket.node.default_child
    if not isinstance(cfn_bucket, s3.CfnBucket):
        raise TypeError("enable_event_bridge needs a bucket created in the app (s3.Bucket)")
    existing = cfn_bucket.notification_configuration
    if existing is not None and not isinstance(
        existing, s3.CfnBucket.NotificationConfigurationProperty
    ):
        raise TypeError("the bucket's NotificationConfiguration is not a property object")
    cfn_bucket.notification_configuration = s3.CfnBucket.NotificationConfigurationProperty(
        event_bridge_configuration=s3.CfnBucket.EventBridgeConfigurationProperty(
            event_bridge_enabled=True
        ),
        lambda_configurations=existing.lambda_configurations if existing else None,
        queue_configurations=existing.queue_configurations if existing else None,
        topic_configurations=existing.topic_configurations if existing else None,
    )


#: The resource type of CDK's own notifications handler (``s3.Bucket(event_bridge_enabled=True)``,
#: ``Bucket.add_event_notification``), a child ``Notifications/Resource`` of the bucket.
CDK_NOTIFICATIONS_TYPE = "Custom::S3BucketNotifications"


def event_bridge_delivery(bucket: s3.IBucket) -> bool | None:
    """Whether a bucket of the app sends its events to EventBridge, as far as the app says.

    ``True`` when its ``CfnBucket`` has ``EventBridgeConfiguration.EventBridgeEnabled`` (what
    :func:`enable_event_bridge` sets), or CDK's notifications resource of the bucket has an
    ``EventBridgeConfiguration`` (``event_bridge_enabled=True``,
    ``enable_event_bridge_notification()``); ``False`` otherwise; ``None`` for an imported bucket
    (its owner's configuration is not in the app) or a configuration set as a token. Call it once
    the app is built (at synth).
    """
    cfn_bucket = bucket.node.default_child
    if not isinstance(cfn_bucket, s3.CfnBucket):
        return None
    try:
        configuration = cfn_bucket.notification_configuration
    except KeyError:  # a token (jsii cannot return it to Python): the app's to know
        return None
    if isinstance(configuration, s3.CfnBucket.NotificationConfigurationProperty):
        event_bridge = configuration.event_bridge_configuration
        if (
            isinstance(event_bridge, s3.CfnBucket.EventBridgeConfigurationProperty)
            and event_bridge.event_bridge_enabled is True
        ):
            return True
    notifications = bucket.node.try_find_child("Notifications")
    resource = notifications.node.try_find_child("Resource") if notifications else None
    if isinstance(resource, CfnResource) and resource.cfn_resource_type == CDK_NOTIFICATIONS_TYPE:
        properties = Stack.of(bucket).resolve(resource._cfn_properties)
        if "EventBridgeConfiguration" in (properties.get("NotificationConfiguration") or {}):
            return True
    return False


@jsii.implements(IValidation)
class EventBridgeDeliveryCheck:
    """Synth fails when a bucket of the app given to the pipeline, which the pipeline does not
    set up, sends no events to EventBridge (the pipeline would record nothing of it); imported
    buckets pass (their owner's configuration is not in the app; the delivery check alarms).

    ``as_source``: it came as a :class:`~s3ingest_cdk.pipeline.LandingBucketSource` (whose
    ``spec.event_bridge`` is ``False``), not as the ``bucket`` prop: the fix named differs.
    """

    def __init__(self, bucket: s3.IBucket, *, as_source: bool) -> None:
        self.bucket = bucket
        self.as_source = as_source

    def validate(self) -> list[str]:
        """The problem, if delivery is off (CDK's ``IValidation``)."""
        if event_bridge_delivery(self.bucket) is not False:
            return []
        setup = (
            "or set event_bridge=True in its LandingBucketSource's BucketSpec"
            if self.as_source
            else "or pass it as buckets=[LandingBucketSource(BucketSpec(existing=True), bucket)]"
        )
        return [
            f"the landing bucket {self.bucket.node.path} does not send its events to "
            "EventBridge, so the pipeline would record none of its changes: call "
            "s3ingest_cdk.enable_event_bridge(bucket) (on the bucket resource, no custom "
            "resource) or create it with s3.Bucket(..., event_bridge_enabled=True), "
            f"{setup} for the pipeline's set-up resource to switch delivery on "
            "(docs/existing-buckets.md)"
        ]


@dataclass(frozen=True)
class SharedBuckets:
    """The buckets every landing bucket of a pipeline shares (created by the first
    :class:`LandingBucket`).

    ``access_logs`` receives the server access logs of the created landing buckets and of
    ``inventory``; ``inventory`` the stack's own inventory reports of every landing bucket
    (``inventory/<bucket>/s3ingest-daily/``), the Batch Operations completion reports, the
    fan-out's work files and the listing backfill's checkpoints
    (``backfill-listing/<bucket>/<run>/``).
    """

    access_logs: s3.Bucket
    inventory: s3.Bucket


def inventory_configuration(
    destination: s3.IBucket, account_id: str | None = None
) -> dict[str, Any]:
    """The stack's daily inventory (id ``s3ingest-daily``) as PutBucketInventoryConfiguration
    takes it: CSV, all versions, the optional fields reconciliation reads, to ``destination``
    under ``inventory/`` (the bucket-setup custom resource writes it on an existing bucket).

    ``account_id``: the account that owns ``destination`` (``AccountId``, checked by S3 before
    it writes; the destination may be another account's, in the source's Region,
    https://docs.aws.amazon.com/AmazonS3/latest/API/API_PutBucketInventoryConfiguration.html);
    ``None``: the stack's account. :func:`s3ingest.stack_resources.inventory_configuration`,
    the local runtime's too."""
    account = account_id if account_id is not None else Aws.ACCOUNT_ID
    return _inventory_configuration(destination.bucket_arn, account)


def allow_inventory_delivery(
    destination: s3.Bucket, sources: list[s3.IBucket], account: str | None = None
) -> None:
    """The destination policy the S3 User Guide gives for inventory reports: ``s3:PutObject``
    under ``inventory/`` by ``s3.amazonaws.com``, only for these source buckets of ``account``
    (None: this stack's; another account's gets a statement of its own, its id suffixed with
    the account) (https://docs.aws.amazon.com/AmazonS3/latest/userguide/configure-inventory.html)."""
    source_arns: Any = [b.bucket_arn for b in sources]
    destination.add_to_resource_policy(
        iam.PolicyStatement(
            sid=f"AllowS3InventoryDelivery{account or ''}",
            effect=iam.Effect.ALLOW,
            principals=[iam.ServicePrincipal("s3.amazonaws.com")],
            actions=["s3:PutObject"],
            resources=[destination.arn_for_objects(f"{INVENTORY_PREFIX}/*")],
            conditions={
                "ArnLike": {
                    "aws:SourceArn": source_arns[0] if len(source_arns) == 1 else source_arns
                },
                "StringEquals": {
                    "aws:SourceAccount": account or Aws.ACCOUNT_ID,
                    "s3:x-amz-acl": "bucket-owner-full-control",
                },
            },
        )
    )


class LandingBucket(Construct):
    """One bucket whose objects the ledger tracks (one ``buckets`` entry, :class:`BucketSpec`).

    Created (no ``bucket`` and not ``spec.existing``): versioned (per ``spec.versioned``),
    SSE-S3, TLS-only, public access blocked, retained, with server access logs to the shared
    logs bucket and EventBridge delivery switched on in its ``NotificationConfiguration``
    (https://docs.aws.amazon.com/AmazonS3/latest/userguide/EventBridge.html); with
    ``spec.inventory`` a daily CSV S3 Inventory of all object versions to the shared inventory
    bucket (https://docs.aws.amazon.com/AmazonS3/latest/userguide/configure-inventory.html).

    Existing (``bucket`` given, or ``spec.existing``: imported by name, partition-aware): nothing
    of the bucket is replaced. With ``setup`` (the bucket-setup provider,
    :class:`s3ingest_cdk.constructs.bucket_setup.BucketSetupProvider`) a ``Setup`` custom
    resource switches its EventBridge delivery on (``spec.event_bridge``) keeping every other
    notification configuration, and adds the stack's own inventory configuration
    (``spec.inventory is True``), both undone on deletion (``docs/existing-buckets.md``).
    ``spec.inventory`` an :class:`InventoryRef`: the owner's inventory, read where it lands.

    The first landing bucket of a pipeline creates the :class:`SharedBuckets` (children
    ``AccessLogs`` and ``Inventory``, the ids the single-bucket stack always had); the others
    get them as ``shared``.

    ``construct_id`` is ``spec.construct_id(index)``; ``spec.name`` may be a CDK token for a
    bucket of the app. ``bucket``: the existing bucket to use (``None``: created, or imported by
    name when ``spec.existing``); ``setup`` ``None``: an existing bucket is not reconfigured at
    all. ``owned``: this construct created the bucket; ``access_logs_bucket`` (created buckets
    only), ``inventory_bucket`` (the stack's own inventory), ``report_bucket`` and
    ``report_prefix`` (where its inventory reports land, the stack's or the owner's) and
    ``setup`` (the custom resource) are ``None`` where they do not apply.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        spec: BucketSpec,
        bucket: s3.IBucket | None = None,
        shared: SharedBuckets | None = None,
        setup: BucketSetupProvider | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.spec = spec
        if shared is None:
            access_logs = secure_bucket(
                self,
                "AccessLogs",
                versioned=False,
                access_logs_bucket=None,
                access_logs_prefix=None,
            )
            shared = SharedBuckets(
                access_logs=access_logs,
                # versioned: it keeps the attestations (attestations/<bucket>/, issue 38)
                inventory=secure_bucket(
                    self,
                    "Inventory",
                    versioned=True,
                    access_logs_bucket=access_logs,
                    access_logs_prefix="inventory/",
                ),
            )
            # the runs' checkpoints are overwritten as they go: their old versions expire
            for prefix in OVERWRITTEN_PREFIXES:
                shared.inventory.add_lifecycle_rule(
                    id=f"ExpireOld{prefix.title().replace('-', '').rstrip('/')}Versions",
                    prefix=prefix,
                    noncurrent_version_expiration=Duration.days(7),
                )
        self.shared = shared
        self.access_logs_bucket: s3.Bucket | None = None
        self.inventory_bucket: s3.Bucket | None = None
        self.report_bucket: s3.IBucket | None = None
        self.report_prefix: str | None = None
        self.setup: CustomResource | None = None
        if bucket is None and spec.existing:
            if spec.name is None:  # pragma: no cover - BucketSpec.problems() rules it out
                raise ValueError("an existing bucket needs its name")
            bucket = adopted_bucket(self, "Imported", spec.name)
        if bucket is not None:
            self.owned = False
            self.bucket: s3.IBucket = bucket
            if setup is None or not spec.event_bridge:
                # delivery is not the pipeline's to switch on: a bucket of the app must have it
                self.node.add_validation(
                    EventBridgeDeliveryCheck(bucket, as_source=setup is not None)
                )
            if spec.inventory is True:
                self.inventory_bucket = shared.inventory
            if setup is not None and (spec.event_bridge or spec.inventory is True):
                self.setup = setup.set_up(
                    self,
                    "Setup",
                    bucket=bucket,
                    event_bridge=spec.event_bridge,
                    inventory=(
                        inventory_configuration(shared.inventory)
                        if spec.inventory is True
                        else None
                    ),
                )
        else:
            self.owned = True
            self.access_logs_bucket = shared.access_logs
            # No cdk-nag AwsSolutions-S1 finding on the logs bucket: the rule accepts a bucket
            # that is itself a server access logs destination (S3 advises against logging a
            # bucket to itself, https://docs.aws.amazon.com/AmazonS3/latest/userguide/ServerLogs.html).
            created = secure_bucket(
                self,
                "Bucket",
                versioned=spec.versioned,
                access_logs_bucket=shared.access_logs,
                access_logs_prefix=(
                    "landing/" if construct_id == "Landing" else f"landing-{construct_id}/"
                ),
            )
            enable_event_bridge(created)
            self.bucket = created
            if spec.inventory is True:
                self.inventory_bucket = shared.inventory
                self._configure_inventory(created, shared.inventory)
        if isinstance(spec.inventory, InventoryRef):
            self.report_bucket = adopted_bucket(self, "Reports", spec.inventory.bucket)
            self.report_prefix = spec.inventory.report_prefix(self.bucket.bucket_name)
        elif self.inventory_bucket is not None:
            self.report_bucket = self.inventory_bucket
            self.report_prefix = inventory_report_prefix(self.bucket.bucket_name)

    @property
    def scope_entry(self) -> dict[str, Any]:
        """``SCOPE``'s entry for this bucket (its name a token for a created bucket)."""
        return self.spec.scope_entry(self.bucket.bucket_name)

    @property
    def owner(self) -> str:
        """The account that owns the bucket: ``spec.account``, else the stack's own (a token)."""
        return self.spec.account or Aws.ACCOUNT_ID

    @property
    def pattern_entry(self) -> dict[str, Any]:
        """:attr:`scope_entry` with its ``account``, the owner
        (:func:`s3ingest.settings.ingest_event_pattern`)."""
        return {**self.scope_entry, "account": self.owner}

    @staticmethod
    def _configure_inventory(source: s3.Bucket, destination: s3.Bucket) -> None:
        """Daily CSV inventory of all versions on the created bucket's L1 resource.

        Set on the L1 resource: the L2 ``inventories`` prop grants ``s3.amazonaws.com`` without
        the ``aws:SourceAccount`` condition the S3 User Guide's destination policy carries; the
        pipeline adds that policy once for every source (:func:`allow_inventory_delivery`).
        """
        cfn_bucket = source.node.default_child
        if not isinstance(cfn_bucket, s3.CfnBucket):  # pragma: no cover - CDK invariant
            raise TypeError("s3.Bucket's default child is not a CfnBucket")
        cfn_bucket.inventory_configurations = [
            s3.CfnBucket.InventoryConfigurationProperty(
                id=INVENTORY_ID,
                enabled=True,
                schedule_frequency="Daily",
                included_object_versions="All",
                optional_fields=list(INVENTORY_OPTIONAL_FIELDS),
                destination=s3.CfnBucket.DestinationProperty(
                    bucket_arn=destination.bucket_arn,
                    format="CSV",
                    prefix=INVENTORY_PREFIX,
                    bucket_account_id=Aws.ACCOUNT_ID,
                ),
            )
        ]


@dataclass(frozen=True)
class Landings:
    """The pipeline's landing buckets, in the settings' order, as the features use them.

    ``entries``: one per ``buckets`` entry, the first the default bucket (``BUCKET_NAME``, the
    ``BucketName`` output).
    """

    entries: tuple[LandingBucket, ...]
    shared: SharedBuckets

    @property
    def first(self) -> LandingBucket:
        """The first (default) landing bucket."""
        return self.entries[0]

    @property
    def buckets(self) -> list[s3.IBucket]:
        """The landing buckets."""
        return [entry.bucket for entry in self.entries]

    @property
    def with_reports(self) -> list[LandingBucket]:
        """The landing buckets an inventory covers (the stack's own or an existing one)."""
        return [e for e in self.entries if e.report_bucket is not None]

    @property
    def all_inventoried(self) -> bool:
        """Whether every landing bucket has an inventory (``Settings.owns_inventory``)."""
        return len(self.with_reports) == len(self.entries)

    def scope_json(self, scope: Construct) -> str:
        """``SCOPE``: ``[{"name", "prefixes", "suffixes"}, ...]`` as JSON (tokens resolved by
        CloudFormation, ``Stack.to_json_string``)."""
        return Stack.of(scope).to_json_string([entry.scope_entry for entry in self.entries])

    def owners_json(self, scope: Construct) -> str:
        """``BUCKET_OWNERS``: ``{"<bucket>": "<owner account>"}`` as JSON (tokens resolved by
        CloudFormation): the ``ExpectedBucketOwner`` of every S3 call on the bucket and the
        ``account`` its events must carry (``docs/organisation.md``)."""
        return Stack.of(scope).to_json_string({e.bucket.bucket_name: e.owner for e in self.entries})

    def inventories_json(self, scope: Construct) -> str:
        """``INVENTORIES``: ``[{"name", "bucket", "prefix"}, ...]`` as JSON, one per bucket
        with an inventory: its name, its reports' bucket and their folder."""
        return Stack.of(scope).to_json_string(
            [
                {
                    "name": e.bucket.bucket_name,
                    "bucket": e.report_bucket.bucket_name,
                    "prefix": e.report_prefix,
                }
                for e in self.with_reports
                if e.report_bucket is not None
            ]
        )

    def scope_environment(self, scope: Construct) -> dict[str, str]:
        """``{"SCOPE": ...}``."""
        return {fn_config.SCOPE: self.scope_json(scope)}

    def inventory_environment(self, scope: Construct) -> dict[str, str]:
        """``SCOPE`` and ``INVENTORIES``, plus ``INVENTORY_BUCKET_NAME`` and
        ``INVENTORY_PREFIX`` of the first bucket when it has an inventory (back compat)."""
        env = {**self.scope_environment(scope), fn_config.INVENTORIES: self.inventories_json(scope)}
        first = self.first
        if first.report_bucket is not None and first.report_prefix is not None:
            env[fn_config.INVENTORY_BUCKET_NAME] = first.report_bucket.bucket_name
            env[fn_config.INVENTORY_PREFIX] = first.report_prefix
        return env
