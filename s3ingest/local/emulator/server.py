"""An embedded AWS emulator: moto's server, in-process on 127.0.0.1 (:class:`Emulator`), and the
moto patches of S3, DynamoDB and the server's routes that live with it. S3 Control answers S3
Batch Operations jobs (:mod:`s3ingest.local.emulator.s3control_jobs`); moto's own EventBridge
notifications are off (:func:`silence_moto_event_bridge`: FaithfulS3 sends S3's). The stack's
resources on it: :mod:`s3ingest.local.stack.provisioning`.
"""

from __future__ import annotations

import functools
import json
import logging
import socket
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

import boto3
from botocore.config import Config

from s3ingest.local.emulator import moto_patches, requests, s3control_jobs
from s3ingest.local.emulator.in_process import serve_in_process
from s3ingest.settings import (
    ingest_event_pattern,
)

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
    beside :class:`~s3ingest.local.emulator.s3faithful.FaithfulS3`'s faithful ones. Its SQS, SNS and
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
    (:func:`s3ingest.local.emulator.moto_patches.install`: DynamoDB item writes atomic as in AWS,
    moto's expression parsing memoised, ...;
    :class:`~s3ingest.local.emulator.moto_patches.MotoPatchError` if the installed moto is outside a
    correctness patch's versions). :attr:`batch_operations` holds the S3 Batch Operations jobs its
    S3 Control endpoint runs (:mod:`s3ingest.local.emulator.s3control_jobs`).
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
        from s3ingest.local.emulator.stepfunctions import register_port

        self._server.start()
        register_port(self.port)  # moto's state machine executor's SDK clients reach it
        return self

    def __exit__(self, *exc: object) -> None:
        from s3ingest.local.emulator.stepfunctions import unregister_port

        unregister_port(self.port)
        self._server.stop()
        requests.forget(self.port)
        s3control_jobs.drop_service(self.port)

    def request_counts(self) -> Counter[str]:
        """Requests this emulator answered so far, by ``service:Operation``
        (:mod:`s3ingest.local.emulator.requests`)."""
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
        (:mod:`s3ingest.local.emulator.in_process`; S3 Control: sent to the emulator's host, see
        :func:`s3ingest.local.emulator.s3control_jobs.local_host`)."""
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

    def bucket_owners(self) -> dict[str, str]:
        """Every bucket the emulator holds, by name: its owner's account id. moto keeps its
        state per process, not per server: a bucket an earlier emulator of this process made is
        here too (moto 5.2.5's ``s3_backends.bucket_accounts``)."""
        from moto.s3.models import s3_backends

        return {name: account for name, (_, account) in s3_backends.bucket_accounts.items()}

    def remove_bucket(self, name: str) -> None:
        """Delete bucket ``name`` as its owner, with every version and delete marker in it
        (``DeleteObjects``, then ``DeleteBucket``); nothing when it is gone."""
        account = self.bucket_owners().get(name)
        if account is None:
            return
        s3 = self.account_client("s3", account)
        for page in s3.get_paginator("list_object_versions").paginate(Bucket=name):
            doomed = [
                {"Key": v["Key"], "VersionId": v["VersionId"]}
                for v in page.get("Versions", []) + page.get("DeleteMarkers", [])
            ]
            if doomed:
                s3.delete_objects(Bucket=name, Delete={"Objects": doomed, "Quiet": True})
        s3.delete_bucket(Bucket=name)

    def reading_through(self, read_roles: Mapping[str, str]) -> Any:
        """An S3 client of the emulator's account that reads each bucket of ``read_roles``
        through its role, as the functions' clients do
        (:class:`~s3ingest_fn.adapters.bucket_routes.BucketRoutedS3`); the plain client when
        there are none."""
        from s3ingest_fn.adapters.bucket_routes import reading_through

        sts = partial(self.client, "sts")
        return reading_through(self.client("s3"), read_roles, sts, REGION, serve_in_process)


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
