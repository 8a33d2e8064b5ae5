"""An embedded AWS emulator (moto's server, in-process on 127.0.0.1) with the stack's resources.

:class:`Emulator` starts the server on a free loopback port; :func:`provision` creates, from the
same :class:`~s3ingest.settings.Settings` as the CDK stack, the landing bucket (versioned or not),
the ingest queue and its dead-letter queue (redrive policy), the ledger table (key ``pk``, TTL
``expires_at``), and the ingest rule with its SQS target and archive on the default bus, using the
stack's own event pattern (:func:`~s3ingest.settings.ingest_event_pattern`). S3 Control answers
S3 Batch Operations jobs (:mod:`s3ingest.local.s3control_jobs`).
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import uuid
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config

from s3ingest.local import fast_moto, moto_s3_markers, s3control_jobs
from s3ingest.local.in_process import serve_in_process
from s3ingest.settings import CHANGE_SOURCE, Settings, ingest_event_pattern
from s3ingest_fn.adapters.dynamo_ledger import PARTITION_KEY, TTL_ATTRIBUTE

REGION = "us-east-1"
ACCOUNT = "123456789012"


_ITEM_LOCK = threading.RLock()


def _serialize_item_writes() -> None:
    """Make the emulator's DynamoDB item operations atomic with respect to each other.

    Real DynamoDB evaluates a condition expression and applies the write atomically per item
    (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ConditionExpressions.html);
    moto's server handles requests on several threads without a lock, so two conditional writes
    to one item can both pass their condition. Without this, the emulator, not the product,
    would break CONTRACT C10. Applied once per process; idempotent.
    """
    from moto.dynamodb.models import DynamoDBBackend

    for name in ("put_item", "update_item", "delete_item", "get_item", "transact_write_items"):
        original = getattr(DynamoDBBackend, name)
        if getattr(original, "_s3ingest_locked", False):
            continue

        def locked(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            with _ITEM_LOCK:
                return _original(self, *args, **kwargs)

        locked._s3ingest_locked = True  # type: ignore[attr-defined]
        setattr(DynamoDBBackend, name, locked)


class Emulator:
    """moto's server running in this process on ``127.0.0.1:<free port>``.

    Use as a context manager; :meth:`client` returns boto3 clients bound to it with fake
    credentials (no AWS account is ever contacted). DynamoDB item writes are made atomic as in
    AWS (see :func:`_serialize_item_writes`); moto's expression parsing is memoised
    (:func:`s3ingest.local.fast_moto.install`). :attr:`batch_operations` holds the S3 Batch
    Operations jobs its S3 Control endpoint runs (:mod:`s3ingest.local.s3control_jobs`).
    """

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        _serialize_item_writes()
        fast_moto.install()
        moto_s3_markers.install()
        s3control_jobs.install()
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self.port = _free_port()
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
        s3control_jobs.drop_service(self.port)

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
        with self._session_lock:
            session: Any = self._session
            client = session.client(
                service,
                endpoint_url=self.endpoint_url,
                region_name=REGION,
                aws_access_key_id="testing",
                aws_secret_access_key="testing",
                config=self._config,
            )
        serve_in_process(client)
        return s3control_jobs.local_host(client) if service == "s3control" else client


@dataclass(frozen=True)
class Resources:
    """Names and URLs of what :func:`provision` created."""

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


def provision(
    emu: Emulator,
    settings: Settings,
    *,
    bucket: str | None = None,
    versioning: str | None = "Enabled",
) -> Resources:
    """Create the stack's resources in the emulator.

    Parameters
    ----------
    emu : Emulator
    settings : Settings
        The same settings the stack is synthesized from.
    bucket : str, optional
        Bucket name; a unique one by default.
    versioning : {"Enabled", "Suspended", None}
        The bucket's versioning status (``None``: never versioned).

    Returns
    -------
    Resources
    """
    suffix = uuid.uuid4().hex[:8]
    bucket = bucket or f"s3ingest-local-{suffix}"
    s3, sqs, ddb, events = (emu.client(s) for s in ("s3", "sqs", "dynamodb", "events"))
    s3.create_bucket(Bucket=bucket)
    inventory_bucket = f"s3ingest-inventory-{suffix}"
    s3.create_bucket(Bucket=inventory_bucket)
    if versioning:
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": versioning})
    day = 86_400
    dlq_url = sqs.create_queue(
        QueueName=f"ingest-dlq-{suffix}",
        Attributes={"MessageRetentionPeriod": str(settings.dlq_retention_days * day)},
    )["QueueUrl"]
    dlq_arn = _queue_arn(sqs, dlq_url)
    queue_url = sqs.create_queue(
        QueueName=f"ingest-{suffix}",
        Attributes={
            "MessageRetentionPeriod": str(settings.queue_retention_days * day),
            "VisibilityTimeout": str(settings.queue_visibility_timeout_seconds),
            "RedrivePolicy": json.dumps(
                {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": settings.max_receive_count}
            ),
        },
    )["QueueUrl"]
    queue_arn = _queue_arn(sqs, queue_url)
    table = f"ledger-{suffix}"
    stream: dict[str, Any] = {}
    if settings.change_stream:
        stream = {"StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"}}
    created = ddb.create_table(
        TableName=table,
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": PARTITION_KEY, "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": PARTITION_KEY, "AttributeType": "S"}],
        **stream,
    )
    ddb.update_time_to_live(
        TableName=table, TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE}
    )
    pattern = json.dumps(ingest_event_pattern(bucket))
    rule = f"ingest-{suffix}"
    events.put_rule(Name=rule, EventPattern=pattern, State="ENABLED")
    events.put_targets(Rule=rule, Targets=[{"Id": "ingest-queue", "Arn": queue_arn}])
    archive = f"ingest-archive-{suffix}"
    bus_arn = events.describe_event_bus()["Arn"]
    events.create_archive(
        ArchiveName=archive,
        EventSourceArn=bus_arn,
        EventPattern=pattern,
        RetentionDays=settings.archive_retention_days,
    )
    output_bucket = None
    if settings.processor:
        output_bucket = f"s3ingest-output-{suffix}"
        s3.create_bucket(Bucket=output_bucket)
    stream_arn = change_bus = change_queue_url = None
    if settings.change_stream:
        stream_arn = created["TableDescription"]["LatestStreamArn"]
        change_bus = f"s3ingest-changes-{suffix}"
        events.create_event_bus(Name=change_bus)
        change_queue_url = sqs.create_queue(QueueName=f"changes-{suffix}")["QueueUrl"]
        events.put_rule(
            Name=f"changes-{suffix}",
            EventBusName=change_bus,
            State="ENABLED",
            EventPattern=json.dumps({"source": [CHANGE_SOURCE]}),
        )
        events.put_targets(
            Rule=f"changes-{suffix}",
            EventBusName=change_bus,
            Targets=[{"Id": "subscriber", "Arn": _queue_arn(sqs, change_queue_url)}],
        )
    return Resources(
        bucket=bucket,
        versioning=versioning,
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
    )


def _queue_arn(sqs: Any, url: str) -> str:
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]
    return str(attrs["QueueArn"])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
