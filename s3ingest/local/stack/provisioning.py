"""The stack's resources on the emulator (:func:`provision`), from the same
:class:`~s3ingest.settings.Settings` as the CDK stack: the landing buckets (:class:`LocalBucket`:
created by the stack or existing, versioned or not, with key filters) and, as the stack's
description gives them (:mod:`s3ingest.stack_resources`), the ingest queue and its dead-letter
queue, the ledger, the ingest rule with its SQS target and archive and, with the change stream,
the change bus with its rule and archive and the relay's dead-letter queue.

Each landing bucket gets the stack's S3 Inventory configuration (:data:`INVENTORY_ID`); a bucket
the stack creates has EventBridge delivery on, an existing one keeps it off until onboarding
(:mod:`s3ingest.onboard`); ``foreign_config`` gives a bucket another team's SQS notification and
inventory configurations (:data:`FOREIGN_QUEUE_ID`, :data:`FOREIGN_INVENTORY_ID`), which
onboarding must leave intact.
"""

from __future__ import annotations

import json
import secrets
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from s3ingest import stack_resources
from s3ingest.local.emulator.encryption import (
    encrypt_bucket,
    key_id_argument,
    local_key,
    queue_attributes,
    table_encryption,
)
from s3ingest.local.emulator.server import ACCOUNT, REGION, Emulator, forward_events
from s3ingest.settings import (
    INVENTORY_ID,
    BucketSpec,
    Settings,
)
from s3ingest.settings.buckets import read_role_arn
from s3ingest.stack_resources import QueueSpec
from s3ingest_fn.core.scope import Scope


def _bucket_key(emu: Emulator, bucket: LocalBucket) -> str | None:
    """A ``kms`` bucket's own key, created in its owner's account; None otherwise."""
    if not bucket.kms:
        return None
    kms = emu.account_client("kms", bucket.spec.account)
    key = kms.create_key(Description=f"s3ingest local: {bucket.spec.name or 'a bucket'}'s key")
    return str(key["KeyMetadata"]["Arn"])


#: Ids of another team's configurations on a ``foreign_config`` bucket.
FOREIGN_QUEUE_ID = "other-team-queue"
FOREIGN_INVENTORY_ID = "other-team-weekly"


@dataclass(frozen=True)
class LocalBucket:
    """One landing bucket to provision: its :class:`~s3ingest.settings.BucketSpec` (name, key
    filters, ``existing``) plus what only the local runtime chooses.

    Attributes
    ----------
    spec : BucketSpec
        ``existing``: the bucket and its objects predate the pipeline and S3 sends no
        EventBridge events for it until onboarding switches delivery on.
    versioning : {"Enabled", "Suspended", None}
        The bucket's versioning status (``None``: never versioned).
    foreign_config : bool
        Another team's SQS queue notification configuration and inventory configuration
        exist on the bucket before the pipeline.
    kms : bool
        The bucket's default encryption is SSE-KMS under a customer-managed key of its own
        account, created with it (moto neither encrypts nor checks key permissions).
    """

    spec: BucketSpec = field(default_factory=BucketSpec)
    versioning: str | None = "Enabled"
    foreign_config: bool = False
    kms: bool = False

    @classmethod
    def of(cls, value: BucketSpec | LocalBucket) -> LocalBucket:
        """``value`` as a LocalBucket (a BucketSpec's ``versioned`` gives the versioning)."""
        if isinstance(value, LocalBucket):
            return value
        return cls(spec=value, versioning="Enabled" if value.versioned else None)


@dataclass(frozen=True)
class LandingBucket:
    """One provisioned landing bucket."""

    name: str
    versioning: str | None
    prefixes: tuple[str, ...] = ()
    suffixes: tuple[str, ...] = ()
    existing: bool = False
    foreign_config: bool = False
    #: The account owning the bucket when it is not the pipeline's (``buckets[].account``).
    account: str | None = None
    #: The role of :attr:`account` the pipeline reads the bucket through (``readRoleArn``,
    #: default the source stack's ``s3ingest-source-read-<region>``).
    read_role_arn: str | None = None
    #: The bucket's own SSE-KMS key (``LocalBucket.kms``), of its owner's account.
    kms_key_arn: str | None = None

    def scope_entry(self) -> dict[str, Any]:
        """``{"name", "prefixes", "suffixes"}`` (``SCOPE``'s entry)."""
        return {"name": self.name, "prefixes": list(self.prefixes), "suffixes": list(self.suffixes)}

    @property
    def owner(self) -> str:
        """The account that owns the bucket: :attr:`account`, else the emulator's own."""
        return self.account or ACCOUNT

    def pattern_entry(self) -> dict[str, Any]:
        """:meth:`scope_entry` with the bucket's ``account`` (the owner the ingest rule matches)."""
        return {**self.scope_entry(), "account": self.owner}

    def contains(self, key: str) -> bool:
        """Whether ``key`` passes the bucket's key filters."""
        return BucketSpec(prefixes=self.prefixes, suffixes=self.suffixes).contains(key)


@dataclass(frozen=True)
class Resources:
    """Names and URLs of what :func:`provision` created; ``bucket`` and ``versioning`` are the
    first landing bucket's (:attr:`buckets` lists them all)."""

    bucket: str
    versioning: str | None
    queue_url: str
    queue_arn: str
    dlq_url: str
    table: str
    rule: str
    archive: str
    inventory_bucket: str
    #: The attestations' own bucket, under S3 Object Lock (``attestationRetentionDays``).
    attestation_bucket: str | None = None
    #: The processor's output bucket (with a processor configured).
    output_bucket: str | None = None
    #: Change stream (``changeStream``): the ledger's DynamoDB stream, the stack's own bus, and
    #: a queue subscribed to it by a rule (the local stand-in for the audit log group).
    stream_arn: str | None = None
    change_bus: str | None = None
    change_queue_url: str | None = None
    #: The relay's dead-letter queue: changes it can never publish, with their reason.
    change_dlq_url: str | None = None
    #: ``historyTable``: the history writer's queue (a rule on the change bus targets it) and
    #: its dead-letter queue.
    history_queue_url: str | None = None
    history_dlq_url: str | None = None
    #: Every landing bucket, in order (the first is :attr:`bucket`).
    buckets: tuple[LandingBucket, ...] = ()
    #: Another team's queue and inventory destination (``foreign_config`` buckets).
    foreign_queue_url: str | None = None
    foreign_inventory_bucket: str | None = None
    #: ``logKeys: hashed``: the secret keying the hash of keys in logs, as the stack generates.
    log_key_secret_arn: str | None = None
    #: ``kmsKeyArn``: the emulator's key the resources name
    #: (:mod:`s3ingest.local.emulator.encryption`).
    kms_key_arn: str | None = None

    @property
    def attestation_store(self) -> str:
        """Where attestations are kept: :attr:`attestation_bucket`, else the stack's bucket."""
        return self.attestation_bucket or self.inventory_bucket

    @property
    def read_roles(self) -> dict[str, str]:
        """``READ_ROLES``: each bucket of another account -> the role it is read through."""
        return {b.name: b.read_role_arn for b in self.buckets if b.read_role_arn}

    @property
    def owners(self) -> dict[str, str]:
        """``BUCKET_OWNERS``: each landing bucket -> the account that owns it."""
        return {b.name: b.owner for b in self.buckets}

    @property
    def bucket_names(self) -> tuple[str, ...]:
        """The landing buckets' names, in order."""
        return tuple(b.name for b in self.buckets) or (self.bucket,)

    def landing(self, name: str | None = None) -> LandingBucket:
        """The landing bucket called ``name`` (the first when None).

        Raises
        ------
        KeyError
            When the deployment has no such bucket.
        """
        buckets = self.buckets or (LandingBucket(self.bucket, self.versioning),)
        if name is None:
            return buckets[0]
        for b in buckets:
            if b.name == name:
                return b
        raise KeyError(f"no landing bucket {name!r} (buckets: {', '.join(self.bucket_names)})")

    def scope(self) -> Scope:
        """The pipeline's scope (:class:`s3ingest_fn.core.scope.Scope`): every landing bucket
        with its key filters, in order."""
        buckets = self.buckets or (LandingBucket(self.bucket, self.versioning),)
        return Scope.of(b.scope_entry() for b in buckets)


def provision(
    emu: Emulator,
    settings: Settings,
    *,
    bucket: str | None = None,
    versioning: str | None = "Enabled",
    buckets: Sequence[BucketSpec | LocalBucket] | None = None,
) -> Resources:
    """Create the stack's resources in the emulator.

    Parameters
    ----------
    emu : Emulator
    settings : Settings
        The same settings the stack is synthesized from.
    bucket : str, optional
        One bucket's name (unique by default), when ``buckets`` is not given.
    versioning : {"Enabled", "Suspended", None}
        That bucket's versioning status (``None``: never versioned).
    buckets : sequence of BucketSpec or LocalBucket, optional
        The landing buckets (a name left None gets a unique one); names must be unique.

    Returns
    -------
    Resources

    Raises
    ------
    ValueError
        For an empty ``buckets`` or a name given twice.
    """
    suffix = uuid.uuid4().hex[:8]
    if buckets is None:
        buckets = [LocalBucket(BucketSpec(name=bucket), versioning=versioning)]
    wanted = [LocalBucket.of(b) for b in buckets]
    if not wanted:
        raise ValueError("a deployment needs at least one landing bucket")
    landing = tuple(
        LandingBucket(
            name=b.spec.name or (f"s3ingest-local-{suffix}" + (f"-{i + 1}" if i else "")),
            versioning=b.versioning,
            prefixes=tuple(b.spec.prefixes),
            suffixes=tuple(b.spec.suffixes),
            existing=b.spec.existing,
            foreign_config=b.foreign_config,
            account=b.spec.account,
            read_role_arn=read_role_arn(b.spec, REGION) if b.spec.account else None,
            kms_key_arn=_bucket_key(emu, b),
        )
        for i, b in enumerate(wanted)
    )
    names = [b.name for b in landing]
    if len(set(names)) != len(names):
        raise ValueError(f"a landing bucket is listed twice: {names}")
    held = emu.bucket_owners()
    taken = sorted(b.name for b in landing if not b.existing and b.name in held)
    if taken:  # as CloudFormation's AWS::S3::Bucket fails on a name that exists
        raise ValueError(
            f"landing bucket {', '.join(taken)} already exists: the stack creates the buckets "
            'it is given; mark one "existing" to onboard it'
        )
    central_s3, sqs, ddb, events = (emu.client(s) for s in ("s3", "sqs", "dynamodb", "events"))
    s3 = central_s3
    key_arn = local_key(emu, settings, suffix)  # kmsKeyArn (not enforced locally)
    inventory_bucket = f"s3ingest-inventory-{suffix}"
    s3.create_bucket(Bucket=inventory_bucket)
    encrypt_bucket(s3, inventory_bucket, key_arn)
    # versioned, as the stack's (it keeps the attestations: docs/attestation.md)
    s3.put_bucket_versioning(Bucket=inventory_bucket, VersioningConfiguration={"Status": "Enabled"})
    attestation_bucket = _attestation_bucket(s3, settings, suffix, key_arn)
    foreign_queue_url = foreign_inventory_bucket = None
    if any(b.foreign_config for b in landing):
        foreign_queue_url = sqs.create_queue(QueueName=f"other-team-{suffix}")["QueueUrl"]
        foreign_inventory_bucket = f"other-team-inventory-{suffix}"
        s3.create_bucket(Bucket=foreign_inventory_bucket)
    for b in landing:
        # a bucket of another account: its owner's; the source stack deployed there has
        # switched EventBridge delivery on and added the inventory configuration
        s3 = emu.account_client("s3", b.account) if b.account else central_s3
        s3.create_bucket(Bucket=b.name)
        if not b.existing:
            encrypt_bucket(s3, b.name, key_arn)
        encrypt_bucket(s3, b.name, b.kms_key_arn)
        if b.versioning:
            s3.put_bucket_versioning(
                Bucket=b.name, VersioningConfiguration={"Status": b.versioning}
            )
        notification: dict[str, Any] = {}
        if b.foreign_config:
            assert foreign_queue_url and foreign_inventory_bucket
            notification["QueueConfigurations"] = [
                {
                    "Id": FOREIGN_QUEUE_ID,
                    "QueueArn": _queue_arn(sqs, foreign_queue_url),
                    "Events": ["s3:ObjectCreated:*"],
                }
            ]
            s3.put_bucket_inventory_configuration(
                Bucket=b.name,
                Id=FOREIGN_INVENTORY_ID,
                InventoryConfiguration=_foreign_inventory(foreign_inventory_bucket),
            )
        if not b.existing or b.account:  # EventBridge delivery on from the start
            notification["EventBridgeConfiguration"] = {}
        if notification:
            s3.put_bucket_notification_configuration(
                Bucket=b.name, NotificationConfiguration=notification
            )
        # the stack's own inventory configuration (created and existing buckets alike)
        s3.put_bucket_inventory_configuration(
            Bucket=b.name,
            Id=INVENTORY_ID,
            InventoryConfiguration=stack_resources.inventory_configuration(
                f"arn:aws:s3:::{inventory_bucket}", ACCOUNT
            ),
        )
    s3 = central_s3
    bucket = landing[0].name
    described = stack_resources.describe(settings, [b.pattern_entry() for b in landing])
    dlq_url = _create_queue(sqs, f"ingest-dlq-{suffix}", described.dead_letter_queue, key_arn)
    dlq_arn = _queue_arn(sqs, dlq_url)
    queue_url = _create_queue(sqs, f"ingest-{suffix}", described.ingest_queue, key_arn, dlq_arn)
    queue_arn = _queue_arn(sqs, queue_url)
    table = f"ledger-{suffix}"
    created = ddb.create_table(
        TableName=table,
        **described.ledger.create_table_arguments(),
        **table_encryption(key_arn),
    )
    ddb.update_time_to_live(
        TableName=table, TimeToLiveSpecification=described.ledger.time_to_live()
    )
    pattern = json.dumps(described.ingest_rule.pattern)
    rule = f"ingest-{suffix}"
    events.put_rule(Name=rule, EventPattern=pattern, State="ENABLED")
    events.put_targets(Rule=rule, Targets=[{"Id": "ingest-queue", "Arn": queue_arn}])
    archive = f"ingest-archive-{suffix}"
    bus_arn = events.describe_event_bus()["Arn"]
    forward_remote_events(emu, landing, bus_arn, suffix)
    events.create_archive(
        ArchiveName=archive,
        EventSourceArn=bus_arn,
        EventPattern=pattern,
        RetentionDays=described.ingest_rule.archive_retention_days,
    )
    output_bucket = None
    if settings.processor_entries():
        output_bucket = f"s3ingest-output-{suffix}"
        s3.create_bucket(Bucket=output_bucket)
        encrypt_bucket(s3, output_bucket, key_arn)
    log_key_secret_arn = None
    if settings.log_keys == "hashed":  # as the stack's secret: 64 random characters
        log_key_secret_arn = emu.client("secretsmanager").create_secret(
            Name=f"s3ingest-log-key-{suffix}",
            SecretString=secrets.token_hex(32),
            **key_id_argument("KmsKeyId", key_arn),
        )["ARN"]
    stream_arn = change_bus = change_queue_url = change_dlq_url = None
    history_queue_url = history_dlq_url = None
    if described.change_rule and described.change_dead_letter_queue:
        stream_arn = created["TableDescription"]["LatestStreamArn"]
        change_bus = f"s3ingest-changes-{suffix}"
        bus = events.create_event_bus(
            Name=change_bus, **key_id_argument("KmsKeyIdentifier", key_arn)
        )["EventBusArn"]
        change_pattern = json.dumps(described.change_rule.pattern)
        events.create_archive(
            ArchiveName=f"changes-archive-{suffix}",
            EventSourceArn=bus,
            EventPattern=change_pattern,
            RetentionDays=described.change_rule.archive_retention_days,
        )
        # the local stand-in for the audit log group: a queue the change bus's rule targets
        change_queue_url = sqs.create_queue(
            QueueName=f"changes-{suffix}", Attributes=queue_attributes(key_arn)
        )["QueueUrl"]
        change_dlq_url = _create_queue(
            sqs, f"changes-dlq-{suffix}", described.change_dead_letter_queue, key_arn
        )
        events.put_rule(
            Name=f"changes-{suffix}",
            EventBusName=change_bus,
            State="ENABLED",
            EventPattern=change_pattern,
        )
        events.put_targets(
            Rule=f"changes-{suffix}",
            EventBusName=change_bus,
            Targets=[{"Id": "subscriber", "Arn": _queue_arn(sqs, change_queue_url)}],
        )
        history_queue_url, history_dlq_url = _history_queues(
            emu, described, change_bus, json.dumps(stack_resources.HISTORY_PATTERN), suffix, key_arn
        )
    return Resources(
        bucket=bucket,
        versioning=landing[0].versioning,
        queue_url=queue_url,
        queue_arn=queue_arn,
        dlq_url=dlq_url,
        table=table,
        rule=rule,
        archive=archive,
        inventory_bucket=inventory_bucket,
        attestation_bucket=attestation_bucket,
        output_bucket=output_bucket,
        stream_arn=stream_arn,
        change_bus=change_bus,
        change_queue_url=change_queue_url,
        change_dlq_url=change_dlq_url,
        history_queue_url=history_queue_url,
        history_dlq_url=history_dlq_url,
        buckets=landing,
        foreign_queue_url=foreign_queue_url,
        foreign_inventory_bucket=foreign_inventory_bucket,
        log_key_secret_arn=log_key_secret_arn,
        kms_key_arn=key_arn,
    )


def _foreign_inventory(destination: str) -> dict[str, Any]:
    """Another team's weekly CSV inventory of current versions to ``destination``
    (https://docs.aws.amazon.com/AmazonS3/latest/API/API_InventoryConfiguration.html)."""
    target = {"Bucket": f"arn:aws:s3:::{destination}", "Format": "CSV", "Prefix": "reports"}
    return {
        "Id": FOREIGN_INVENTORY_ID,
        "IsEnabled": True,
        "Destination": {"S3BucketDestination": target},
        "Schedule": {"Frequency": "Weekly"},
        "IncludedObjectVersions": "Current",
        "OptionalFields": ["Size", "LastModifiedDate", "ETag"],
    }


def _history_queues(
    emu: Emulator,
    described: Any,
    change_bus: str,
    pattern: str,
    suffix: str,
    key_arn: str | None,
) -> tuple[str | None, str | None]:
    """The history writer's queue and dead-letter queue, and the rule ``history-<suffix>`` on
    the change bus sending every change and effect done (``pattern``) to the queue (as the
    stack's history feature); None, None without ``historyTable``."""
    if not (described.history_queue and described.history_dead_letter_queue):
        return None, None
    sqs, events = emu.client("sqs"), emu.client("events")
    dlq = _create_queue(sqs, f"history-dlq-{suffix}", described.history_dead_letter_queue, key_arn)
    queue = _create_queue(
        sqs, f"history-{suffix}", described.history_queue, key_arn, _queue_arn(sqs, dlq)
    )
    rule = f"history-{suffix}"
    events.put_rule(Name=rule, EventBusName=change_bus, State="ENABLED", EventPattern=pattern)
    events.put_targets(
        Rule=rule,
        EventBusName=change_bus,
        Targets=[{"Id": "history", "Arn": _queue_arn(sqs, queue)}],
    )
    return queue, dlq


def _create_queue(
    sqs: Any, name: str, spec: QueueSpec, key_arn: str | None, dead_letter_arn: str | None = None
) -> str:
    """Create queue ``name`` as ``spec`` describes it (encrypted with ``key_arn``, redriven to
    ``dead_letter_arn``); return its URL."""
    attributes = {**spec.attributes(dead_letter_arn), **queue_attributes(key_arn)}
    return str(sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"])


def _queue_arn(sqs: Any, url: str) -> str:
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]
    return str(attrs["QueueArn"])


def forward_remote_events(
    emu: Emulator, landing: Sequence[LandingBucket], bus_arn: str, suffix: str
) -> None:
    """In each account owning a landing bucket of another account, the source stack's rule
    (:class:`s3ingest_cdk.source.S3IngestSource`): on that account's default bus, the ingest
    pattern of its buckets with its account, targeting the central default bus ``bus_arn``
    (the emulator keeps a forwarded event's account:
    :func:`s3ingest.local.emulator.moto_accounts.forwarded_events_keep_their_account`)."""
    for account in sorted({b.account for b in landing if b.account}):
        mine = [b.pattern_entry() for b in landing if b.account == account]
        forward_events(emu, account, mine, bus_arn, f"s3ingest-source-forward-{suffix}")


def _attestation_bucket(
    s3: Any, settings: Settings, suffix: str, key_arn: str | None
) -> str | None:
    """The stack's ``Attestations`` bucket with ``attestationRetentionDays``: Object Lock on,
    each new version kept that many days in compliance mode (None without the setting)."""
    days = settings.attestation_retention_days
    if days is None:
        return None
    name = f"s3ingest-attestations-{suffix}"
    s3.create_bucket(Bucket=name, ObjectLockEnabledForBucket=True)
    encrypt_bucket(s3, name, key_arn)
    s3.put_object_lock_configuration(
        Bucket=name,
        ObjectLockConfiguration={
            "ObjectLockEnabled": "Enabled",
            "Rule": {"DefaultRetention": {"Mode": "COMPLIANCE", "Days": days}},
        },
    )
    return name
