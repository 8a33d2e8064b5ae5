"""An embedded AWS emulator (moto's server, in-process on 127.0.0.1) with the stack's resources.

:class:`Emulator` starts the server on a free loopback port (or a given one); :func:`provision`
creates, from the same :class:`~s3ingest.settings.Settings` as the CDK stack, the landing buckets
(:class:`LocalBucket`: created by the stack or existing, versioned or not, with key filters) and,
as the stack's description gives them (:mod:`s3ingest.stack_resources`, which the CDK features
read too), the ingest queue and its dead-letter queue, the ledger table, the ingest rule with its
SQS target and its archive on the default bus and, with the change stream, the change bus with
its rule and archive and the relay's dead-letter queue. S3 Control answers S3 Batch Operations
jobs (:mod:`s3ingest.local.s3control_jobs`).

Each landing bucket gets the stack's S3 Inventory configuration (:data:`INVENTORY_ID`); a bucket
the stack creates has EventBridge delivery on, an existing one keeps it off until onboarding
(:mod:`s3ingest.onboard`); ``foreign_config`` gives a bucket another team's SQS notification
and inventory configurations (:data:`FOREIGN_QUEUE_ID`, :data:`FOREIGN_INVENTORY_ID`), which
onboarding must leave intact. moto's own EventBridge notifications are switched off
(:func:`silence_moto_event_bridge`): :class:`~s3ingest.local.s3faithful.FaithfulS3` emits the
events S3 would send.
"""

from __future__ import annotations

import functools
import json
import logging
import secrets
import socket
import threading
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import boto3
from botocore.config import Config

from s3ingest import stack_resources
from s3ingest.local import moto_patches, requests, s3control_jobs
from s3ingest.local.encryption import (
    encrypt_bucket,
    key_id_argument,
    local_key,
    queue_attributes,
    table_encryption,
)
from s3ingest.local.in_process import serve_in_process
from s3ingest.settings import (
    INVENTORY_ID,
    BucketSpec,
    Settings,
    ingest_event_pattern,
)
from s3ingest.settings.buckets import read_role_arn
from s3ingest.stack_resources import QueueSpec
from s3ingest_fn.core.scope import Scope

REGION = "us-east-1"
ACCOUNT = "123456789012"


_ITEM_LOCK = threading.RLock()


def serialize_item_writes() -> None:
    """Make the emulator's DynamoDB item operations atomic with respect to each other.

    Real DynamoDB evaluates a condition expression and applies the write atomically per item
    (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ConditionExpressions.html);
    moto's server handles requests on several threads without a lock, so two conditional writes
    to one item can both pass their condition. Without this, the emulator, not the product,
    would break CONTRACT C10. The request handlers of single items are locked too: moto's
    UpdateItem deep-copies the stored item, and GetItem serialises it, outside the backend call,
    and another thread's write to the item (several processors committing on one row) would
    change it under them. Applied once per process; idempotent.
    """
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.responses import DynamoHandler

    item_operations = ("put_item", "update_item", "delete_item", "get_item")
    for cls, names in (
        (DynamoDBBackend, (*item_operations, "transact_write_items")),
        (DynamoHandler, item_operations),
    ):
        for name in names:
            original = getattr(cls, name)
            if getattr(original, "_s3ingest_locked", False):
                continue

            @functools.wraps(original)
            def locked(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
                with _ITEM_LOCK:
                    return _original(self, *args, **kwargs)

            locked._s3ingest_locked = True  # type: ignore[attr-defined]
            setattr(cls, name, locked)


def silence_moto_event_bridge() -> None:
    """Stop moto from sending its own EventBridge events for buckets with EventBridge delivery
    on: they are not S3's (``docs/payloads.md`` section 9) and would reach the ingest rule
    beside :class:`~s3ingest.local.s3faithful.FaithfulS3`'s faithful ones. Its SQS, SNS and
    Lambda notifications (another team's queue) stay. Applied once per process; idempotent."""
    from moto.s3 import notifications

    notifications._send_event_bridge_message = lambda *args, **kwargs: None


def route_keys_with_newlines() -> None:
    """Let moto's server route a request whose object key holds a newline (``a%0Ab``): its URL
    rules match the key with ``.+``, which stops at a newline, so every operation on such a key
    answered a bare 404 (a DeleteObject S3 answers 204; a removal effect retried until the
    dead-letter queue). S3 allows any UTF-8 in a key
    (https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-keys.html). Each rule's
    pattern matches newlines too (``(?s:...)``). Applied once per process, before moto's apps
    are built; idempotent."""
    from moto.moto_server.utilities import RegexConverter

    original = RegexConverter.__init__
    if getattr(original, "_s3ingest_patched", False):
        return

    def __init__(self: Any, url_map: Any, *items: Any) -> None:
        original(self, url_map, *items)
        self.regex = f"(?s:{self.regex})"

    __init__._s3ingest_patched = True  # type: ignore[attr-defined]
    RegexConverter.__init__ = __init__  # type: ignore[method-assign]


def report_event_bridge_configuration() -> None:
    """Make moto's GetBucketNotificationConfiguration answer ``EventBridgeConfiguration``
    (``{}``) when EventBridge delivery is on, as S3 does
    (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetBucketNotificationConfiguration.html):
    moto stores it but leaves it out of the answer, so a read-modify-write of the configuration
    (onboarding, the delivery check) would see delivery off. Applied once per process;
    idempotent."""
    from moto.core.common_types import TYPE_RESPONSE
    from moto.core.responses import ActionResult
    from moto.s3.responses import S3Response

    original = S3Response.get_bucket_notification
    if getattr(original, "_s3ingest_patched", False):
        return

    def get_bucket_notification(self: Any) -> TYPE_RESPONSE:
        config = self.backend.get_bucket_notification_configuration(self.bucket_name)
        if not config or config.event_bridge is None:
            return original(self)
        result: dict[str, Any] = {
            "TopicConfigurations": [_moto_item(t, "TopicArn") for t in config.topic],
            "QueueConfigurations": [_moto_item(q, "QueueArn") for q in config.queue],
            "LambdaFunctionConfigurations": [
                _moto_item(f, "LambdaFunctionArn") for f in config.cloud_function
            ],
            "EventBridgeConfiguration": {},
        }
        self.data["Action"] = "GetBucketNotificationConfiguration"
        return self.serialized(ActionResult(result))

    get_bucket_notification._s3ingest_patched = True  # type: ignore[attr-defined]
    S3Response.get_bucket_notification = get_bucket_notification  # type: ignore[method-assign]


def delete_one_inventory_configuration() -> None:
    """Make moto's DeleteBucketInventoryConfiguration (``DELETE /?inventory&id=``) delete that
    one configuration, as S3 does
    (https://docs.aws.amazon.com/AmazonS3/latest/API/API_DeleteBucketInventoryConfiguration.html):
    moto routes it to DeleteBucket, which deletes an empty bucket instead. Applied once per
    process; idempotent."""
    from moto.s3.responses import S3Response

    original = S3Response._bucket_response_delete
    if getattr(original, "_s3ingest_patched", False):
        return

    def bucket_response_delete(self: Any, bucket_name: str, querystring: dict[str, Any]) -> Any:
        if "inventory" not in querystring:
            return original(self, bucket_name, querystring)
        bucket = self.backend.get_bucket(bucket_name)
        ident = querystring["id"][0]
        if ident not in bucket.inventory_configs:
            return (
                404,
                {},
                "<Error><Code>NoSuchConfiguration</Code>"
                "<Message>The specified configuration does not exist.</Message></Error>",
            )
        del bucket.inventory_configs[ident]
        return 204, {}, ""

    bucket_response_delete._s3ingest_patched = True  # type: ignore[attr-defined]
    S3Response._bucket_response_delete = bucket_response_delete  # type: ignore[method-assign]


def _moto_item(item: Any, arn_key: str) -> dict[str, Any]:
    config: dict[str, Any] = {"Id": item.id, arn_key: item.arn, "Events": item.events}
    if item.filters:
        config["Filter"] = {"Key": {"FilterRules": item.filters["S3Key"]["FilterRule"]}}
    return config


class PortInUseError(ValueError):
    """The port asked for is taken (another process listens on it)."""


class Emulator:
    """moto's server running in this process on ``127.0.0.1:<port>`` (``port``, else a free
    one; :class:`PortInUseError` when ``port`` is taken).

    Use as a context manager; :meth:`client` returns boto3 clients bound to it with fake
    credentials (no AWS account is ever contacted). Creating one installs the moto patches
    (:func:`s3ingest.local.moto_patches.install`: DynamoDB item writes atomic as in AWS, moto's
    expression parsing memoised, ...; :class:`~s3ingest.local.moto_patches.MotoPatchError` if the
    installed moto is outside a correctness patch's versions). :attr:`batch_operations` holds the
    S3 Batch Operations jobs its S3 Control endpoint runs (:mod:`s3ingest.local.s3control_jobs`).
    """

    def __init__(self, port: int | None = None) -> None:
        from moto.server import ThreadedMotoServer

        moto_patches.install()
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        # moto's state machine executor logs each failed state's whole context as an error; a
        # failed execution's error and cause are read from the execution itself
        logging.getLogger("moto.stepfunctions.parser.asl.component.eval_component").setLevel(
            logging.CRITICAL
        )
        # more of the executor's SDK calls at once than a pool keeps: harmless
        logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
        self.port = _free_port() if port is None else check_port(port)
        self.endpoint_url = f"http://127.0.0.1:{self.port}"
        self.batch_operations = s3control_jobs.service_for(self.port)
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self._config = Config(
            retries={"max_attempts": 2, "mode": "standard"}, max_pool_connections=64
        )
        self._session = boto3.session.Session()
        self._session_lock = threading.Lock()

    def __enter__(self) -> Emulator:
        from s3ingest.local.stepfunctions import register_port

        self._server.start()
        register_port(self.port)  # moto's state machine executor's SDK clients reach it
        return self

    def __exit__(self, *exc: object) -> None:
        from s3ingest.local.stepfunctions import unregister_port

        unregister_port(self.port)
        self._server.stop()
        requests.forget(self.port)
        s3control_jobs.drop_service(self.port)

    def request_counts(self) -> Counter[str]:
        """Requests this emulator answered so far, by ``service:Operation``
        (:mod:`s3ingest.local.requests`)."""
        return requests.counts(self.port)

    def function_environment(self) -> dict[str, str]:
        """What a Lambda function's environment gives boto3's default chain, pointed at the
        emulator: a client a processor creates with ``boto3.client(...)`` reaches it
        (``AWS_ENDPOINT_URL``,
        https://docs.aws.amazon.com/sdkref/latest/guide/feature-ss-endpoints.html)."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
        }

    def client(self, service: str) -> Any:
        """A boto3 client for ``service`` bound to the emulator, answered in this process
        (:mod:`s3ingest.local.in_process`; S3 Control: sent to the emulator's host, see
        :func:`s3ingest.local.s3control_jobs.local_host`)."""
        # by name: boto3's typed overloads need a literal service name; the caller's is a str.
        # One session for the emulator's clients (it caches the service models: a client costs
        # ~30 ms of CPU instead of ~130); each client still has its own event hooks. A session
        # is not thread-safe, hence the lock.
        client = self._client(service, aws_access_key_id="testing", aws_secret_access_key="testing")
        return s3control_jobs.local_host(client) if service == "s3control" else client

    def _client(self, service: str, **credentials: str) -> Any:
        """A client of ``service`` on the emulator with ``credentials``, answered in process."""
        with self._session_lock:
            session: Any = self._session
            client = session.client(
                service,
                endpoint_url=self.endpoint_url,
                region_name=REGION,
                config=self._config,
                **credentials,
            )
        return serve_in_process(client)

    def account_client(self, service: str, account: str | None) -> Any:
        """A client of ``service`` acting as account ``account`` (12 digits): credentials of
        ``sts:AssumeRole`` on its ``OrganizationAccountAccessRole`` (the administrator role
        AWS Organizations creates in a member account,
        https://docs.aws.amazon.com/organizations/latest/userguide/orgs_manage_accounts_access.html);
        moto acts in the account of the assumed role. ``None`` or the emulator's own account:
        :meth:`client`."""
        if account is None or account == ACCOUNT:
            return self.client(service)
        creds = self.client("sts").assume_role(
            RoleArn=f"arn:aws:iam::{account}:role/OrganizationAccountAccessRole",
            RoleSessionName="s3ingest-local",
        )["Credentials"]
        return self._client(
            service,
            aws_access_key_id=creds["AccessKeyId"],
            aws_secret_access_key=creds["SecretAccessKey"],
            aws_session_token=creds["SessionToken"],
        )

    def reading_through(self, read_roles: Mapping[str, str]) -> Any:
        """An S3 client of the emulator's account that reads each bucket of ``read_roles``
        through its role, as the functions' clients do
        (:class:`~s3ingest_fn.adapters.bucket_routes.BucketRoutedS3`); the plain client when
        there are none."""
        from s3ingest_fn.adapters.bucket_routes import reading_through

        sts = partial(self.client, "sts")
        return reading_through(self.client("s3"), read_roles, sts, REGION, serve_in_process)


def forward_remote_events(
    emu: Emulator, landing: Sequence[LandingBucket], bus_arn: str, suffix: str
) -> None:
    """In each account owning a landing bucket of another account, the source stack's rule
    (:class:`s3ingest_cdk.source.S3IngestSource`): on that account's default bus, the ingest
    pattern of its buckets with its account, targeting the central default bus ``bus_arn``
    (the emulator keeps a forwarded event's account:
    :func:`s3ingest.local.moto_accounts.forwarded_events_keep_their_account`)."""
    for account in sorted({b.account for b in landing if b.account}):
        mine = [b.pattern_entry() for b in landing if b.account == account]
        forward_events(emu, account, mine, bus_arn, f"s3ingest-source-forward-{suffix}")


def forward_events(
    emu: Emulator,
    account: str,
    entries: Sequence[Mapping[str, Any]],
    bus_arn: str,
    name: str,
) -> None:
    """A rule ``name`` on ``account``'s default bus matching ``entries``' ingest events
    (:func:`~s3ingest.settings.ingest_event_pattern`), targeting the bus ``bus_arn``."""
    events = emu.account_client("events", account)
    events.put_rule(
        Name=name, EventPattern=json.dumps(ingest_event_pattern(entries)), State="ENABLED"
    )
    events.put_targets(Rule=name, Targets=[{"Id": "central-bus", "Arn": bus_arn}])


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
    #: The processor's output bucket (with a processor configured).
    output_bucket: str | None = None
    #: Change stream (``changeStream``): the ledger's DynamoDB stream, the stack's own bus, and
    #: a queue subscribed to it by a rule (the local stand-in for the audit log group).
    stream_arn: str | None = None
    change_bus: str | None = None
    change_queue_url: str | None = None
    #: The relay's dead-letter queue: changes it can never publish, with their reason.
    change_dlq_url: str | None = None
    #: Every landing bucket, in order (the first is :attr:`bucket`).
    buckets: tuple[LandingBucket, ...] = ()
    #: Another team's queue and inventory destination (``foreign_config`` buckets).
    foreign_queue_url: str | None = None
    foreign_inventory_bucket: str | None = None
    #: ``logKeys: hashed``: the secret keying the hash of keys in logs, as the stack generates.
    log_key_secret_arn: str | None = None
    #: ``kmsKeyArn``: the emulator's key the resources name (:mod:`s3ingest.local.encryption`).
    kms_key_arn: str | None = None

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
    central_s3, sqs, ddb, events = (emu.client(s) for s in ("s3", "sqs", "dynamodb", "events"))
    s3 = central_s3
    key_arn = local_key(emu, settings, suffix)  # kmsKeyArn (not enforced locally)
    inventory_bucket = f"s3ingest-inventory-{suffix}"
    s3.create_bucket(Bucket=inventory_bucket)
    encrypt_bucket(s3, inventory_bucket, key_arn)
    # versioned, as the stack's (it keeps the attestations: docs/attestation.md)
    s3.put_bucket_versioning(Bucket=inventory_bucket, VersioningConfiguration={"Status": "Enabled"})
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
        output_bucket=output_bucket,
        stream_arn=stream_arn,
        change_bus=change_bus,
        change_queue_url=change_queue_url,
        change_dlq_url=change_dlq_url,
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


def check_port(port: int) -> int:
    """``port`` when this host's loopback may listen on it (as moto's server binds:
    ``SO_REUSEADDR``, so a port a stopped stack left in TIME_WAIT is free).

    Raises
    ------
    PortInUseError
        Another process listens on it, or it is not a port (1 to 65535).
    """
    if not 0 < port < 65536:
        raise PortInUseError(f"port {port}: give a port from 1 to 65535")
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            raise PortInUseError(
                f"port {port} is in use on 127.0.0.1 ({exc.strerror}): stop what listens "
                "there, or give another --port (or none: a free one)"
            ) from exc
    return port


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
