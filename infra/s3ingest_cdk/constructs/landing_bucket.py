"""The landing bucket: created with secure defaults and EventBridge delivery, or adopted as is."""

from __future__ import annotations

from aws_cdk import Aws, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from s3ingest.settings import INVENTORY_ID, INVENTORY_PREFIX

#: Optional inventory fields reconciliation reads (CONTRACT C12: ETag / versionId mismatches).
INVENTORY_OPTIONAL_FIELDS = (
    "Size",
    "LastModifiedDate",
    "ETag",
    "IsMultipartUploaded",
    "StorageClass",
)


def secure_bucket(
    scope: Construct,
    construct_id: str,
    *,
    versioned: bool,
    access_logs_bucket: s3.IBucket | None,
    access_logs_prefix: str | None,
) -> s3.Bucket:
    """A bucket with the defaults every bucket of the stack shares.

    S3-managed encryption (SSE-S3), all public access blocked, ACLs disabled (bucket owner
    enforced), a bucket policy denying any request not sent over TLS 1.2 or later, and retained on
    stack deletion (its objects are data).
    https://docs.aws.amazon.com/AmazonS3/latest/userguide/security-best-practices.html
    """
    return s3.Bucket(
        scope,
        construct_id,
        versioned=versioned,
        encryption=s3.BucketEncryption.S3_MANAGED,
        enforce_ssl=True,
        minimum_tls_version=1.2,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        server_access_logs_bucket=access_logs_bucket,
        server_access_logs_prefix=access_logs_prefix,
        removal_policy=RemovalPolicy.RETAIN,
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

    Parameters
    ----------
    bucket : aws_cdk.aws_s3.Bucket
        A bucket created in the app (not imported: an imported bucket's owner turns delivery on).

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


class LandingBucket(Construct):
    """The bucket whose objects the ledger tracks.

    Without ``bucket`` the construct creates the bucket: versioned (per
    ``versioned``), SSE-S3, TLS-only, public access blocked, retained, with server access logs to
    a logs bucket and EventBridge delivery switched on in its ``NotificationConfiguration``
    (https://docs.aws.amazon.com/AmazonS3/latest/userguide/EventBridge.html). With
    ``inventory_enabled`` it also gets a daily CSV S3 Inventory of all object versions, delivered to
    an inventory bucket whose policy lets only this bucket, in this account, write reports
    (https://docs.aws.amazon.com/AmazonS3/latest/userguide/configure-inventory.html).

    With ``bucket`` (the team's own, created in the app or imported) the bucket is used and left
    untouched: its notification configuration is its owner's, who must turn on "Send
    notifications to Amazon EventBridge" (:func:`enable_event_bridge`); no inventory is
    configured.

    Parameters
    ----------
    scope : constructs.Construct
        Parent construct.
    construct_id : str
        Construct id.
    bucket : aws_cdk.aws_s3.IBucket or None
        The bucket to use (:func:`adopted_bucket` for one known by name); ``None`` creates one.
    versioned : bool
        Versioning on the created bucket.
    inventory_enabled : bool
        Whether to configure the daily S3 Inventory on the created bucket.

    Attributes
    ----------
    bucket : aws_cdk.aws_s3.IBucket
        The landing bucket (created or adopted).
    owned : bool
        ``True`` when this construct created the bucket.
    access_logs_bucket : aws_cdk.aws_s3.Bucket or None
        Destination of the server access logs (created buckets only).
    inventory_bucket : aws_cdk.aws_s3.Bucket or None
        Destination of the inventory reports (when an inventory is configured).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        bucket: s3.IBucket | None,
        versioned: bool,
        inventory_enabled: bool,
    ) -> None:
        super().__init__(scope, construct_id)
        self.access_logs_bucket: s3.Bucket | None = None
        self.inventory_bucket: s3.Bucket | None = None
        self.bucket: s3.IBucket
        if bucket is not None:
            self.owned = False
            self.bucket = bucket
            return

        self.owned = True
        self.access_logs_bucket = secure_bucket(
            self, "AccessLogs", versioned=False, access_logs_bucket=None, access_logs_prefix=None
        )
        # No cdk-nag AwsSolutions-S1 finding here: the rule accepts a bucket that is itself a server
        # access logs destination (S3 advises against logging a bucket to itself,
        # https://docs.aws.amazon.com/AmazonS3/latest/userguide/ServerLogs.html).
        created = secure_bucket(
            self,
            "Bucket",
            versioned=versioned,
            access_logs_bucket=self.access_logs_bucket,
            access_logs_prefix="landing/",
        )
        cfn_bucket = created.node.default_child
        if not isinstance(cfn_bucket, s3.CfnBucket):  # pragma: no cover - CDK invariant
            raise TypeError("s3.Bucket's default child is not a CfnBucket")
        enable_event_bridge(created)
        self.bucket = created

        if inventory_enabled:
            self.inventory_bucket = secure_bucket(
                self,
                "Inventory",
                versioned=False,
                access_logs_bucket=self.access_logs_bucket,
                access_logs_prefix="inventory/",
            )
            self._configure_inventory(cfn_bucket, created, self.inventory_bucket)

    @staticmethod
    def _configure_inventory(
        cfn_bucket: s3.CfnBucket, source: s3.Bucket, destination: s3.Bucket
    ) -> None:
        """Daily CSV inventory of all versions, and the destination policy AWS documents.

        Set on the L1 resource: the L2 ``inventories`` prop grants ``s3.amazonaws.com`` without the
        ``aws:SourceAccount`` condition the S3 User Guide's destination policy carries.
        """
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
        destination.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowS3InventoryDelivery",
                effect=iam.Effect.ALLOW,
                principals=[iam.ServicePrincipal("s3.amazonaws.com")],
                actions=["s3:PutObject"],
                resources=[destination.arn_for_objects(f"{INVENTORY_PREFIX}/*")],
                conditions={
                    "ArnLike": {"aws:SourceArn": source.bucket_arn},
                    "StringEquals": {
                        "aws:SourceAccount": Aws.ACCOUNT_ID,
                        "s3:x-amz-acl": "bucket-owner-full-control",
                    },
                },
            )
        )
