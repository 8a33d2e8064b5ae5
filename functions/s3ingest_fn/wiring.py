"""The one place that builds the object graph: adapters over clients, the core over ports, the
services over both.

Two layers: builders that take their clients and settings (the deployed CLI,
``s3ingest/deployed.py``, and the local runtime, ``s3ingest/local/runtime.py``, call them with
their own clients), and the Lambda handlers' cold-start builders, which read the function's
environment, make boto3 clients and cache the result once per process. Imports happen inside
the builders, so importing a handler module stays cheap (``bench/import_time.py`` measures it).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from s3ingest_fn.adapters.dynamo_ledger import DynamoLedger, DynamoLedgerScanner
    from s3ingest_fn.adapters.eventbridge import EventBridgePublisher
    from s3ingest_fn.adapters.s3_objects import S3EventDelivery, S3Objects
    from s3ingest_fn.core.decide import IngestService
    from s3ingest_fn.core.effects import AppliedChange, EffectRunner, Processor, ProcessorSpec
    from s3ingest_fn.core.hold import HoldPolicy
    from s3ingest_fn.core.model import Result
    from s3ingest_fn.core.ports import Ledger
    from s3ingest_fn.core.scope import BucketScope, Scope
    from s3ingest_fn.services.ingest import FunctionSettings, MessageProcessor
    from s3ingest_fn.services.listing_backfill import ListingBackfill
    from s3ingest_fn.services.reconcile import Reconciler
    from s3ingest_fn.services.review import Reviewer


# -- builders over given clients -------------------------------------------------------------


def ledger(
    dynamodb: Any,
    table: str,
    tombstone_ttl_seconds: int,
    clock: Callable[[], float] = time.time,
    trail: int | None = None,
) -> DynamoLedger:
    """The ledger adapter over a DynamoDB client and table; ``trail`` review decisions kept per
    row (None: ``TRAIL_LENGTH`` from the environment, else the default)."""
    from s3ingest_fn.adapters.dynamo_ledger import DynamoLedger
    from s3ingest_fn.core.row import TRAIL_SLOTS

    if trail is None:
        trail = int(os.environ.get("TRAIL_LENGTH") or TRAIL_SLOTS)
    return DynamoLedger(dynamodb, table, tombstone_ttl_seconds, clock=clock, trail=trail)


def hold_policies(
    entries: Sequence[Mapping[str, Any]], env: Mapping[str, str] | None = None
) -> dict[str, HoldPolicy]:
    """Each processor's hold policy (:mod:`s3ingest_fn.core.hold`): its entry's ``hold``, else
    the stack's (``HOLD``, a JSON object, from ``env``, default the environment).

    Raises
    ------
    ValueError
        A malformed policy, or a policy function that cannot be imported.
    """
    from s3ingest_fn.core.hold import HoldPolicy

    env = os.environ if env is None else env
    stack = json.loads(env.get("HOLD") or "null")
    return {str(entry["name"]): HoldPolicy.of(entry.get("hold", stack)) for entry in entries}


def ledger_scanner(
    dynamodb: Any, table: str, processors: Sequence[str] = ()
) -> DynamoLedgerScanner:
    """The ledger's row scanner over a DynamoDB client and table (parallel Scan, one request
    per page), reading the effects of ``processors`` (names) too."""
    from s3ingest_fn.adapters.dynamo_ledger import DynamoLedgerScanner

    return DynamoLedgerScanner(dynamodb, table, processors)


def objects(s3: Any) -> S3Objects:
    """The bucket adapter over an S3 client: an object's current state (HEAD, versions)."""
    from s3ingest_fn.adapters.s3_objects import S3Objects

    return S3Objects(s3)


def event_delivery(s3: Any) -> S3EventDelivery:
    """Whether a bucket still sends its events to EventBridge, read over an S3 client."""
    from s3ingest_fn.adapters.s3_objects import S3EventDelivery

    return S3EventDelivery(s3)


def change_publisher(events: Any) -> EventBridgePublisher:
    """The change bus's publisher over an EventBridge client (PutEvents)."""
    from s3ingest_fn.adapters.eventbridge import EventBridgePublisher

    return EventBridgePublisher(events)


def processor_entries(env: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The processors of a function's environment: ``PROCESSORS`` (a JSON list of entries,
    ``docs/processor-api.md``), else the single ``PROCESSOR`` (``package.module:function``) as
    ``[{"name": "default", "module": ...}]``, else none.

    Raises
    ------
    ValueError
        When ``PROCESSORS`` is not a JSON list of objects.
    """
    from s3ingest_fn.core.row import DEFAULT_PROCESSOR

    env = os.environ if env is None else env
    text = env.get("PROCESSORS")
    if text:
        entries = json.loads(text)
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise ValueError("PROCESSORS must be a JSON list of processor objects")
        return entries
    single = env.get("PROCESSOR")
    return [{"name": DEFAULT_PROCESSOR, "module": single}] if single else []


def processor_specs(
    entries: Sequence[Mapping[str, Any]],
    *,
    lambda_client: Callable[[int], Any] | None = None,
    wrap: Callable[[str, Processor], Processor] | None = None,
) -> list[ProcessorSpec]:
    """:class:`~s3ingest_fn.core.effects.ProcessorSpec` of each entry: ``module`` imported
    in-process; ``functionArn`` invoked synchronously through ``lambda_client(timeout_s)``
    (a Lambda client); ``handler`` (local runtime) invoked in-process as a Lambda handler.
    ``wrap(name, call)`` decorates each call (the local runtime records the runs).

    Raises
    ------
    ValueError
        When an entry names no way to run, or its module or handler cannot be imported.
    """
    from s3ingest_fn.adapters.processor_function import (
        FunctionProcessor,
        handler_invoker,
        lambda_invoker,
    )
    from s3ingest_fn.core.effects import KINDS, LATEST, ProcessorSpec, load_processor

    specs = []
    for entry in entries:
        name = str(entry["name"])
        timeout_s = int(entry.get("timeoutSeconds") or 30)
        timeout_ms: int | None = timeout_s * 1000
        call: Processor
        if entry.get("module"):
            call, timeout_ms = load_processor(str(entry["module"])), None
        elif entry.get("functionArn"):
            if lambda_client is None:
                raise ValueError(f"processor {name!r}: a function needs a Lambda client")
            invoke = lambda_invoker(
                lambda_client(timeout_s), str(entry["functionArn"]), timeout_s=timeout_s
            )
            call = FunctionProcessor(invoke)
        elif entry.get("handler"):
            call = FunctionProcessor(handler_invoker(str(entry["handler"]), timeout_s=timeout_s))
        else:
            raise ValueError(f"processor {name!r} names no module, functionArn or handler")
        specs.append(
            ProcessorSpec(
                name=name,
                call=wrap(name, call) if wrap is not None else call,
                mode=str(entry.get("mode") or LATEST),
                prefixes=tuple(entry.get("prefixes") or ()),
                suffixes=tuple(entry.get("suffixes") or ()),
                kinds=tuple(entry.get("kinds") or KINDS),
                timeout_ms=timeout_ms,
            )
        )
    return specs


def effect_runner(
    processor: Processor | Sequence[ProcessorSpec],
    s3: Any,
    *,
    clock_ms: Callable[[], int] | None = None,
    after_effect: Callable[[AppliedChange], None] | None = None,
    holds: Mapping[str, HoldPolicy] | None = None,
) -> EffectRunner:
    """The effect runner for a team's processor (or several), reading pinned content through
    S3, with their hold policies (``holds``, by name)."""
    from s3ingest_fn.adapters.s3_objects import S3ContentReader
    from s3ingest_fn.core.effects import EffectRunner

    return EffectRunner(
        processor, S3ContentReader(s3), clock_ms=clock_ms, after_effect=after_effect, holds=holds
    )


def ingest_service(
    *,
    s3: Any,
    dynamodb: Any,
    table: str,
    tombstone_ttl_seconds: int,
    scope_bucket: str | None = None,
    processor: Processor | Sequence[ProcessorSpec] | None = None,
    clock: Callable[[], float] = time.time,
    scope: Scope | None = None,
    holds: Mapping[str, HoldPolicy] | None = None,
    trail: int | None = None,
) -> IngestService:
    """The ingest decision over the ledger and the bucket, with the processors' effects when
    any are given (one callable, or :class:`ProcessorSpec` s; CONTRACT C11). ``scope`` (the
    buckets and key filters tracked) wins over ``scope_bucket`` (one bucket, the single-bucket
    form); neither: every key."""
    from s3ingest_fn.adapters.s3_objects import S3Objects
    from s3ingest_fn.core.decide import IngestService

    return IngestService(
        ledger=ledger(dynamodb, table, tombstone_ttl_seconds, clock, trail),
        bucket=S3Objects(s3),
        scope_bucket=scope_bucket,
        effects=effect_runner(processor, s3, holds=holds) if processor else None,
        scope=scope,
    )


def reviewer(ledger: Ledger, sqs: Any, queue_url: str) -> Reviewer:
    """Approvals and rejections of held changes over the ledger, queueing each approval's
    repair message on the ingest queue (``queue_url``)."""
    from s3ingest_fn.adapters.sqs import SqsRepairQueue
    from s3ingest_fn.services.review import Reviewer

    return Reviewer(ledger, SqsRepairQueue(sqs, queue_url))


def message_processor(
    service: IngestService,
    sqs: Any,
    dead_letter_queue_url: str,
    on_result: Callable[[Result], None] | None = None,
) -> MessageProcessor:
    """One SQS message to one outcome, dead-lettering invalid input to the given queue."""
    from s3ingest_fn.adapters.sqs import DeadLetter
    from s3ingest_fn.services.ingest import MessageProcessor

    return MessageProcessor(
        service=service,
        dead_letter=DeadLetter(sqs, dead_letter_queue_url),
        on_result=on_result,
    )


def reconciler(
    *,
    s3: Any,
    dynamodb: Any,
    sqs: Any,
    bucket: str,
    table: str,
    queue_url: str,
    inventory_bucket: str | None = None,
    inventory_prefix: str = "",
    clock: Callable[[], float] = time.time,
    scope: BucketScope | None = None,
    processors: Sequence[str] = (),
) -> Reconciler:
    """Reconciliation of ``bucket`` against the ledger ``table``, repairs to ``queue_url``: the
    bucket's HEAD and listing, the inventory bucket's objects (and the fan-out's shards) over
    ``s3``, the ledger's Scan over ``dynamodb``, the repairs over ``sqs``; only the keys of
    ``scope`` (the bucket's key filters; None: every key) count; the effects of
    ``processors`` (names) are checked with the default one's."""
    from s3ingest_fn.adapters.dynamo_ledger import DynamoLedgerScanner
    from s3ingest_fn.adapters.inventory import S3InventoryStore
    from s3ingest_fn.adapters.s3_objects import S3Listing, S3Objects
    from s3ingest_fn.adapters.sqs import SqsRepairQueue
    from s3ingest_fn.services.reconcile import Reconciler

    return Reconciler(
        objects=S3Objects(s3),
        listing=S3Listing(s3),
        inventory=S3InventoryStore(s3),
        repairs=SqsRepairQueue(sqs, queue_url),
        scanner=DynamoLedgerScanner(dynamodb, table, processors),
        bucket=bucket,
        table=table,
        queue_url=queue_url,
        inventory_bucket=inventory_bucket,
        inventory_prefix=inventory_prefix,
        clock=clock,
        scope=scope,
    )


def listing_backfill(
    *,
    s3: Any,
    service: IngestService,
    checkpoint_bucket: str,
    record_concurrency: int = 8,
    **options: Any,
) -> ListingBackfill:
    """The listing backfill over ``s3`` (the landing buckets' listings and the checkpoint
    bucket) recording through ``service``; ``options`` are
    :class:`~s3ingest_fn.services.listing_backfill.ListingBackfill`'s tuning fields
    (``page_size``, ``probe_size``, ``max_shards``, ``max_probes``, ``shard_keys``,
    ``margin_ms``)."""
    from s3ingest_fn.adapters.inventory import S3InventoryStore
    from s3ingest_fn.adapters.s3_objects import S3ShardListing
    from s3ingest_fn.services.listing_backfill import ListingBackfill

    return ListingBackfill(
        listing=S3ShardListing(s3),
        store=S3InventoryStore(s3),
        checkpoint_bucket=checkpoint_bucket,
        service=service,
        record_concurrency=record_concurrency,
        **options,
    )


# -- the handlers' cold start: from the function's environment, once per process -------------


@cache
def function_settings() -> FunctionSettings:
    """The ingest-side environment, validated (see :class:`FunctionSettings`).

    Raises
    ------
    ValueError
        Naming every missing or malformed variable.
    """
    from s3ingest_fn.services.ingest import FunctionSettings

    return FunctionSettings.from_env()


@cache
def function_ingest_service() -> IngestService:
    """The ingest decision logic over the ledger (``LEDGER_TABLE_NAME``,
    ``TOMBSTONE_TTL_SECONDS``) and the landing buckets (``SCOPE``, else ``BUCKET_NAME``), with
    the team's processors (``PROCESSORS``, or the single ``PROCESSOR``:
    :func:`processor_entries`; C11).

    Raises
    ------
    ValueError
        When the environment is incomplete or a processor cannot be imported.
    """
    import boto3

    settings = function_settings()
    entries = processor_entries()
    specs = processor_specs(entries, lambda_client=lambda_client)
    return ingest_service(
        holds=hold_policies(entries),
        s3=boto3.client("s3"),
        dynamodb=boto3.client("dynamodb"),
        table=settings.ledger_table_name,
        tombstone_ttl_seconds=settings.tombstone_ttl_seconds,
        scope=settings.scope,
        processor=specs or None,
    )


def lambda_client(timeout_s: int) -> Any:
    """A Lambda client for invoking a processor function synchronously: reads wait past its
    timeout (``timeout_s`` + 10 s) and an invoke is never retried by the SDK (a failed effect
    is retried through the message instead: CONTRACT C11)."""
    from s3ingest_fn.adapters.processor_function import invoke_config

    return _lambda_client(timeout_s, invoke_config)


@cache
def _lambda_client(timeout_s: int, config: Callable[[int], Any]) -> Any:
    import boto3

    return boto3.client("lambda", config=config(timeout_s))


def function_message_processor() -> MessageProcessor:
    """The ingest function's message processor (``DEAD_LETTER_QUEUE_URL``)."""
    import boto3

    return message_processor(
        function_ingest_service(), boto3.client("sqs"), function_settings().dead_letter_queue_url
    )


def function_scope() -> Scope:
    """The pipeline's buckets and key filters: ``SCOPE``, else ``BUCKET_NAME`` alone
    (:meth:`~s3ingest_fn.core.scope.Scope.from_env`; read each time: it is cheap).

    Raises
    ------
    ValueError
        When ``SCOPE`` is malformed.
    """
    from s3ingest_fn.core.scope import Scope

    return Scope.from_env(os.environ)


def inventories_from_env(env: Any, first_bucket: str | None) -> dict[str, tuple[str, str]]:
    """Each bucket's inventory reports, ``{source bucket: (destination bucket, report
    folder)}``: ``INVENTORIES`` (JSON ``[{"name", "bucket", "prefix"}, ...]``), and for
    ``first_bucket`` when it names none, ``INVENTORY_BUCKET_NAME`` and ``INVENTORY_PREFIX``.

    Raises
    ------
    ValueError
        When ``INVENTORIES`` is not a JSON list of such objects.
    """
    import json

    found: dict[str, tuple[str, str]] = {}
    raw = env.get("INVENTORIES")
    if raw:
        try:
            entries = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ValueError(f"INVENTORIES is not JSON: {exc.msg}") from exc
        if not isinstance(entries, list):
            raise ValueError("INVENTORIES must be a JSON list")
        for entry in entries:
            if not (
                isinstance(entry, dict)
                and isinstance(entry.get("name"), str)
                and isinstance(entry.get("bucket"), str)
            ):
                raise ValueError(f"INVENTORIES entry without name or bucket: {entry!r}")
            found[entry["name"]] = (entry["bucket"], str(entry.get("prefix") or ""))
    legacy = env.get("INVENTORY_BUCKET_NAME")
    if first_bucket and first_bucket not in found and legacy:
        found[first_bucket] = (legacy, env.get("INVENTORY_PREFIX", ""))
    return found


def function_reconcile_buckets() -> tuple[str, ...]:
    """The buckets a scheduled reconciliation covers, in order: ``SCOPE``'s, else
    ``BUCKET_NAME``."""
    names = function_scope().names
    return names or ((os.environ["BUCKET_NAME"],) if os.environ.get("BUCKET_NAME") else ())


@cache
def function_reconciler(bucket: str | None = None) -> Reconciler:
    """Reconciliation of ``bucket`` (default: the first of :func:`function_reconcile_buckets`)
    over ``LEDGER_TABLE_NAME`` and ``INGEST_QUEUE_URL``, with its key filters from ``SCOPE``
    and its inventory from :func:`inventories_from_env` (none: it can only be listed).

    Raises
    ------
    ValueError
        Naming every missing variable, or a bucket that is not one of the pipeline's.
    """
    import boto3

    required = ("LEDGER_TABLE_NAME", "INGEST_QUEUE_URL")
    missing = [name for name in required if not os.environ.get(name)]
    buckets = function_reconcile_buckets()
    if not buckets:
        missing.append("BUCKET_NAME")
    if missing:
        raise ValueError("reconcile function misconfigured: missing " + ", ".join(missing))
    name = bucket or buckets[0]
    scope = function_scope()
    found = scope.bucket(name)
    if scope.buckets and found is None:
        raise ValueError(f"bucket {name!r} is not one of the pipeline's: {list(scope.names)}")
    inventory = inventories_from_env(os.environ, buckets[0]).get(name)
    return reconciler(
        s3=boto3.client("s3"),
        dynamodb=boto3.client("dynamodb"),
        sqs=boto3.client("sqs"),
        bucket=name,
        table=os.environ["LEDGER_TABLE_NAME"],
        queue_url=os.environ["INGEST_QUEUE_URL"],
        inventory_bucket=inventory[0] if inventory else None,
        inventory_prefix=inventory[1] if inventory else "",
        scope=found,
        processors=[n for n in os.environ.get("PROCESSOR_NAMES", "").split(",") if n]
        or [str(entry["name"]) for entry in processor_entries()],
    )


@cache
def function_change_publisher() -> EventBridgePublisher:
    """The change relay's publisher to the change bus (the bus itself is named by
    ``CHANGE_BUS_NAME`` in each entry)."""
    import boto3

    return change_publisher(boto3.client("events"))


@cache
def function_event_delivery() -> S3EventDelivery:
    """The delivery check's reader of bucket notification configurations."""
    import boto3

    return event_delivery(boto3.client("s3"))


def s3_client() -> Any:
    """A boto3 S3 client (the bucket-setup custom resource,
    :mod:`s3ingest_fn.handlers.bucket_setup`)."""
    import boto3

    return boto3.client("s3")


@cache
def function_listing_backfill() -> ListingBackfill:
    """The listing backfill function's service: the ingest service of
    :func:`function_ingest_service` (same environment), ``CHECKPOINT_BUCKET_NAME`` for the
    checkpoints, ``RECORD_CONCURRENCY`` entries recorded at once.

    Raises
    ------
    ValueError
        When ``CHECKPOINT_BUCKET_NAME`` or the ingest environment is missing.
    """
    import boto3

    checkpoint_bucket = os.environ.get("CHECKPOINT_BUCKET_NAME")
    if not checkpoint_bucket:
        raise ValueError("listing backfill function misconfigured: missing CHECKPOINT_BUCKET_NAME")
    return listing_backfill(
        s3=boto3.client("s3"),
        service=function_ingest_service(),
        checkpoint_bucket=checkpoint_bucket,
        record_concurrency=function_settings().record_concurrency,
    )
