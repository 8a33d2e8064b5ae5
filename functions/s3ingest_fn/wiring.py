"""The one place that builds the object graph: adapters over clients, the core over ports, the
services over both.

Two layers: builders that take their clients and settings (the deployed CLI,
``s3ingest/deployed.py``, and the local runtime, ``s3ingest/local/stack/runtime.py``, call them with
their own clients), and the Lambda handlers' cold-start builders, which read the function's
environment, make boto3 clients and cache the result once per process. Imports happen inside
the builders, so importing a handler module stays cheap (``bench/bundle_cold_start.py``
measures it, on the built bundle).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache, partial
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar, cast

if TYPE_CHECKING:
    from s3ingest_fn.adapters.dynamo_ledger import DynamoLedger, DynamoLedgerScanner
    from s3ingest_fn.adapters.eventbridge import EventBridgePublisher
    from s3ingest_fn.adapters.s3_objects import S3EventDelivery, S3Objects
    from s3ingest_fn.config import ClientConfig, IngestConfig
    from s3ingest_fn.config import IngestConfig as FunctionSettings
    from s3ingest_fn.config_roles import ListingBackfillConfig, ReconcileConfig, ReprocessConfig
    from s3ingest_fn.core.decide import IngestService
    from s3ingest_fn.core.effects import (
        EffectRunner,
        EffectTarget,
        Processor,
        ProcessorSpec,
    )
    from s3ingest_fn.core.hold import HoldPolicy
    from s3ingest_fn.core.model import Result
    from s3ingest_fn.core.ports import DeadLetters, Ledger
    from s3ingest_fn.core.scope import BucketScope, Scope
    from s3ingest_fn.log_keys import KeyPolicy
    from s3ingest_fn.services.ingest import MessageProcessor
    from s3ingest_fn.services.listing_backfill import ListingBackfill
    from s3ingest_fn.services.reconcile import Reconciler
    from s3ingest_fn.services.reprocess import Reprocessor
    from s3ingest_fn.services.review import Reviewer

_C = TypeVar("_C", bound="Any")
_P = ParamSpec("_P")
_R = TypeVar("_R")
_R_co = TypeVar("_R_co", covariant=True)


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
        from s3ingest_fn.config import TRAIL_LENGTH, invocation_env

        trail = int(invocation_env().get(TRAIL_LENGTH) or TRAIL_SLOTS)
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
    from s3ingest_fn.config import HOLD, invocation_env
    from s3ingest_fn.core.hold import HoldPolicy

    env = invocation_env() if env is None else env
    stack = json.loads(env.get(HOLD) or "null")
    return {str(entry["name"]): HoldPolicy.of(entry.get("hold", stack)) for entry in entries}


def ledger_scanner(
    dynamodb: Any, table: str, processors: Sequence[str] = ()
) -> DynamoLedgerScanner:
    """The ledger's row scanner over a DynamoDB client and table (parallel Scan, one request
    per page), reading the effects of ``processors`` (names) too; into columns where pyarrow is
    importable (the CLI's ``arrow`` extra), else row by row (the deployed functions)."""
    from importlib.util import find_spec

    from s3ingest_fn.adapters.dynamo_ledger import DynamoLedgerScanner

    if find_spec("pyarrow") is None:
        return DynamoLedgerScanner(dynamodb, table, processors)
    from s3ingest_fn.adapters.dynamo_ledger.scan_arrow import decode

    return DynamoLedgerScanner(dynamodb, table, processors, decode)


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


def change_dead_letters(sqs: Any, queue_url: str | None) -> DeadLetters | None:
    """The change relay's dead-letter queue over an SQS client (None without a queue)."""
    from s3ingest_fn.adapters.sqs import DeadLetter

    return DeadLetter(sqs, queue_url) if queue_url else None


def key_policy(secretsmanager: Any, mode: str, secret_arn: str | None) -> KeyPolicy:
    """How logs show object keys (``logKeys``): ``mode``, and for ``hashed`` the hash key, the
    value of secret ``secret_arn`` read with ``secretsmanager`` (a boto3 client; one
    GetSecretValue,
    https://docs.aws.amazon.com/secretsmanager/latest/apireference/API_GetSecretValue.html).

    Raises
    ------
    ValueError
        ``hashed`` without a secret.
    botocore.exceptions.ClientError
        When the secret cannot be read.
    """
    from s3ingest_fn.log_keys import KeyPolicy

    if mode != "hashed":
        return KeyPolicy(mode)
    if not secret_arn:
        raise ValueError("logKeys hashed needs the log key secret")
    value = secretsmanager.get_secret_value(SecretId=secret_arn)["SecretString"]
    return KeyPolicy("hashed", str(value).encode("utf-8"))


def processor_entries(env: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The processors of a function's environment: ``PROCESSORS`` (a JSON list of entries,
    ``docs/processor-api.md``), else the single ``PROCESSOR`` (``package.module:function``) as
    ``[{"name": "default", "module": ...}]``, else none.

    Raises
    ------
    ValueError
        When ``PROCESSORS`` is not a JSON list of objects.
    """
    from s3ingest_fn.config import ConfigError, invocation_env, read_processors

    problems: list[str] = []
    entries = read_processors(invocation_env() if env is None else env, problems)
    if problems:
        raise ConfigError("processors", problems)
    return [entry.as_dict() for entry in entries]


def processor_specs(
    entries: Sequence[Mapping[str, Any]],
    *,
    lambda_client: Callable[[int], Any] | None = None,
    wrap: Callable[[str, Processor], Processor] | None = None,
) -> list[ProcessorSpec]:
    """:class:`~s3ingest_fn.core.effects.ProcessorSpec` of each entry: ``module`` imported
    in-process; ``functionArn`` invoked synchronously through ``lambda_client(timeout_s)``
    (a Lambda client); ``handler`` (local runtime) invoked in-process as a Lambda handler; with
    the entry's ``version`` (default 1). ``wrap(name, call)`` decorates each call (the local
    runtime records the runs).

    Raises
    ------
    ValueError
        When an entry names no way to run, or its module or handler cannot be imported.
    """
    from s3ingest_fn.adapters.processor_function import (
        FunctionProcessor,
        handler_invoker,
        lambda_invoker,
        url_seconds_for,
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
            call = FunctionProcessor(invoke, url_seconds=url_seconds_for(timeout_s))
        elif entry.get("handler"):
            call = FunctionProcessor(
                handler_invoker(str(entry["handler"]), timeout_s=timeout_s),
                url_seconds=url_seconds_for(timeout_s),
            )
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
                version=int(entry.get("version") or 1),
            )
        )
    return specs


def effect_runner(
    processor: Processor | Sequence[ProcessorSpec],
    s3: Any,
    *,
    clock_ms: Callable[[], int] | None = None,
    holds: Mapping[str, HoldPolicy] | None = None,
) -> EffectRunner:
    """The effect runner for a team's processor (or several), reading pinned content through
    S3, with their hold policies (``holds``, by name)."""
    from s3ingest_fn.adapters.s3_objects import S3ContentReader
    from s3ingest_fn.core.effects import EffectRunner

    return EffectRunner(processor, S3ContentReader(s3), clock_ms=clock_ms, holds=holds)


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
    wrap_effects: Callable[[EffectRunner], EffectRunner] | None = None,
) -> IngestService:
    """The ingest decision over the ledger and the bucket, with the processors' effects when
    any are given (one callable, or :class:`ProcessorSpec` s; CONTRACT C11), their runner
    decorated by ``wrap_effects`` when given. ``scope`` (the buckets and key filters tracked)
    wins over ``scope_bucket`` (one bucket, the single-bucket form); neither: every key."""
    from s3ingest_fn.adapters.s3_objects import S3Objects
    from s3ingest_fn.core.decide import IngestService

    return IngestService(
        ledger=ledger(dynamodb, table, tombstone_ttl_seconds, clock, trail),
        bucket=S3Objects(s3),
        scope_bucket=scope_bucket,
        effects=(wrap_effects or _same)(effect_runner(processor, s3, holds=holds))
        if processor
        else None,
        scope=scope,
    )


def _same(runner: EffectRunner) -> EffectRunner:
    return runner


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
    clock: Callable[[], float] = time.time,
    owners: Mapping[str, str] | None = None,
) -> MessageProcessor:
    """One SQS message to one outcome, dead-lettering invalid input to the given queue;
    ``clock`` (Unix seconds) judges how far ahead a sequencer's time may be; ``owners``
    (bucket -> account, ``BUCKET_OWNERS``) refuses an event of another account
    (``wrong-account``)."""
    from s3ingest_fn.adapters.sqs import DeadLetter
    from s3ingest_fn.services.ingest import MessageProcessor

    return MessageProcessor(
        service=service,
        dead_letter=DeadLetter(sqs, dead_letter_queue_url),
        on_result=on_result,
        clock=clock,
        owners=dict(owners or {}),
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
    targets: Sequence[EffectTarget] = (),
) -> Reconciler:
    """Reconciliation of ``bucket`` against the ledger ``table``, repairs to ``queue_url``: the
    bucket's HEAD and listing, the inventory bucket's objects (and the fan-out's shards) over
    ``s3``, the ledger's Scan over ``dynamodb``, the repairs over ``sqs``; only the keys of
    ``scope`` (the bucket's key filters; None: every key) count; the effects of
    ``processors`` (names) are checked with the default one's; rows behind each of
    ``targets`` are counted."""
    from s3ingest_fn.adapters.inventory import S3InventoryStore
    from s3ingest_fn.adapters.s3_objects import S3Listing, S3Objects
    from s3ingest_fn.adapters.sqs import SqsRepairQueue
    from s3ingest_fn.services.reconcile import Reconciler

    return Reconciler(
        objects=S3Objects(s3),
        listing=S3Listing(s3),
        inventory=S3InventoryStore(s3),
        repairs=SqsRepairQueue(sqs, queue_url),
        scanner=ledger_scanner(dynamodb, table, processors),
        bucket=bucket,
        table=table,
        queue_url=queue_url,
        inventory_bucket=inventory_bucket,
        inventory_prefix=inventory_prefix,
        clock=clock,
        scope=scope,
        targets=targets,
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


def reprocessor(
    *,
    s3: Any,
    dynamodb: Any,
    table: str,
    service: IngestService,
    checkpoint_bucket: str,
    **options: Any,
) -> Reprocessor:
    """The reprocess run over ``dynamodb`` (the ledger ``table`` read by parallel Scan segments)
    and ``s3`` (the run's plan and checkpoints in ``checkpoint_bucket``), running the
    processors of ``service``; ``options`` are
    :class:`~s3ingest_fn.services.reprocess.Reprocessor`'s tuning fields (``concurrency``,
    ``page_size``, ``margin_ms``)."""
    from s3ingest_fn.adapters.dynamo_ledger import DynamoLedgerSegments
    from s3ingest_fn.adapters.inventory import S3InventoryStore
    from s3ingest_fn.services.reprocess import Reprocessor

    return Reprocessor(
        segments=DynamoLedgerSegments(dynamodb, table),
        store=S3InventoryStore(s3),
        checkpoint_bucket=checkpoint_bucket,
        service=service,
        **options,
    )


# -- the handlers' cold start: from the invocation's environment, once per configuration ------


_CACHE_SIZE = 16


class Clearable(Protocol[_P, _R_co]):
    """A cold-start builder whose cache can be cleared (``cache_clear``), as tests do."""

    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R_co: ...

    def cache_clear(self) -> None:
        """Forget what the builder's caches hold."""


def _clears(*caches: str) -> Callable[[Callable[_P, _R]], Clearable[_P, _R]]:
    """Give a builder ``cache_clear``, clearing the module's caches named ``caches``."""

    def decorate(fn: Callable[_P, _R]) -> Clearable[_P, _R]:
        def cache_clear() -> None:
            for name in caches:
                globals()[name].cache_clear()

        fn.cache_clear = cache_clear  # type: ignore[attr-defined]
        return cast(Clearable[_P, _R], fn)

    return decorate


@lru_cache(maxsize=_CACHE_SIZE)
def _config(model: Any, items: tuple[tuple[str, str], ...]) -> Any:
    return model.from_env(dict(items))


def function_config(model: type[_C], env: Mapping[str, str] | None = None) -> _C:
    """``model`` (a role of :mod:`s3ingest_fn.config`) read from ``env`` (default the
    invocation's environment, :func:`~s3ingest_fn.config.invocation_env`), validated once per
    distinct environment. Raises ``ConfigError`` naming every missing or malformed variable."""
    from s3ingest_fn.config import invocation_env

    env = invocation_env() if env is None else env
    return cast(_C, _config(cast(Any, model), tuple(sorted(env.items()))))


_SESSIONS: dict[ClientConfig, Any] = {}
#: The boto3 session (for S3's clients) on each configuration's botocore session.
_S3_SESSIONS: dict[ClientConfig, Any] = {}
_SESSIONS_LOCK = threading.Lock()


def client(clients: ClientConfig, service: str, **kwargs: Any) -> Any:
    """A boto3 client of ``service`` made from ``clients`` (the function's region, endpoint and
    credentials; unset fields: botocore's default chain), one botocore session per configuration
    (a session caches the service models; it is not thread-safe, hence the lock). For ``s3``
    with buckets of other accounts (``clients.read_roles``), a
    :class:`~s3ingest_fn.adapters.bucket_routes.BucketRoutedS3`: each of those buckets is read
    through its account's role; every call on a bucket of ``clients.bucket_owners`` names its
    owner (:func:`~s3ingest_fn.adapters.bucket_owners.expect_owners`)."""
    own = _client(clients, service, **kwargs)
    if service != "s3":
        return own
    from s3ingest_fn.adapters.bucket_owners import expect_owners, parse_owners

    owners = parse_owners(clients.bucket_owners_json)
    if not clients.read_roles:
        return expect_owners(own, owners)
    from s3ingest_fn.adapters.bucket_routes import reading_through

    sts = partial(_client, clients, "sts")
    routed = reading_through(own, clients.read_roles, sts, clients.region, **kwargs)
    return expect_owners(routed, owners)


def _client(clients: ClientConfig, service: str, **kwargs: Any) -> Any:
    """A client from the configuration's botocore session; ``s3``'s through a boto3 session on
    that botocore session (boto3 adds S3's transfer methods, ``upload_file`` and the like, that a
    team's processor may call). The other services' clients are botocore's own, as boto3 would
    make them: the cold start skips importing boto3 (and ``s3transfer``, which it imports)."""
    import botocore.session

    with _SESSIONS_LOCK:
        core: Any = _SESSIONS.get(clients)
        if core is None:
            core = _SESSIONS[clients] = botocore.session.Session()
            if clients.region:
                core.set_config_variable("region", clients.region)
            if clients.access_key_id or clients.secret_access_key or clients.session_token:
                core.set_credentials(
                    clients.access_key_id, clients.secret_access_key, clients.session_token
                )
        if clients.endpoint_url and "endpoint_url" not in kwargs:
            kwargs["endpoint_url"] = clients.endpoint_url
        if service != "s3":
            return core.create_client(service, **kwargs)
        s3_session: Any = _S3_SESSIONS.get(clients)
        if s3_session is None:
            import boto3.session

            s3_session = _S3_SESSIONS[clients] = boto3.session.Session(botocore_session=core)
        return s3_session.client(service, **kwargs)


class LazyClient:
    """A boto3 client made by ``factory`` on its first attribute access (one, under a lock:
    the ingest function's record threads share it), then that client's attributes: the cold
    start skips the clients the common path never calls (S3 for a held or replayed object's
    content and a processor's reads, SQS for a dead letter)."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self._factory: Callable[[], Any] | None = factory
        self._client: Any = None
        self._lock = threading.Lock()

    @property
    def made(self) -> bool:
        """Whether the client has been made."""
        return self._factory is None

    def __getattr__(self, name: str) -> Any:
        if self._factory is not None:
            with self._lock:
                if self._factory is not None:
                    self._client = self._factory()
                    self._factory = None
        return getattr(self._client, name)


def lazy_client(clients: ClientConfig, service: str, **kwargs: Any) -> LazyClient:
    """:func:`client` made on first use (:class:`LazyClient`)."""
    return LazyClient(partial(client, clients, service, **kwargs))


def function_clients(env: Mapping[str, str] | None = None) -> ClientConfig:
    """What the function's boto3 clients are made from (region, endpoint, credentials of the
    invocation's environment)."""
    from s3ingest_fn.config import ClientConfig

    return function_config(ClientConfig, env)


@_clears("_config")
def function_settings() -> FunctionSettings:
    """The ingest-side environment, validated (:class:`~s3ingest_fn.config.IngestConfig`).

    Raises
    ------
    ValueError
        Naming every missing or malformed variable.
    """
    from s3ingest_fn.config import IngestConfig

    return function_config(IngestConfig)


#: Processor-run recorders by key (the local runtime's; :func:`record_processor_runs`).
_RECORDERS: dict[str, Callable[[str, Processor], Processor]] = {}
#: The local runtime's effect-runner decorators by the same key (:func:`record_processor_runs`).
_WRAP_EFFECTS: dict[str, Callable[[EffectRunner], EffectRunner]] = {}


def record_processor_runs(
    key: str,
    wrap: Callable[[str, Processor], Processor] | None,
    wrap_effects: Callable[[EffectRunner], EffectRunner] | None = None,
) -> None:
    """Decorate the processors of every ingest service built for a configuration whose
    ``S3INGEST_LOCAL_RECORDER`` is ``key`` with ``wrap(name, call)``, and their effect runner
    with ``wrap_effects`` (the local runtime's crash injection), or forget ``key`` (``wrap``
    None): the local runtime's one recording and crash path for processor runs, whatever
    function runs them (ingest, backfills, listing shards, reprocess segments)."""
    _WRAP_EFFECTS.pop(key, None)
    if wrap is None:
        _RECORDERS.pop(key, None)
        return
    _RECORDERS[key] = wrap
    if wrap_effects is not None:
        _WRAP_EFFECTS[key] = wrap_effects


@_clears("build_ingest_service")
def function_ingest_service() -> IngestService:
    """The ingest decision logic of the invocation's :class:`~s3ingest_fn.config.IngestConfig`
    (ledger, landing buckets, processors, hold policies; C11), built once per configuration.

    Raises
    ------
    ValueError
        When the environment is incomplete or a processor cannot be imported.
    """
    return build_ingest_service(function_settings(), function_clients())


@lru_cache(maxsize=_CACHE_SIZE)
def build_ingest_service(settings: IngestConfig, clients: ClientConfig) -> IngestService:
    """The ingest service of ``settings`` over clients of ``clients`` (cached per value)."""
    entries = settings.processor_entries()
    wrap = _RECORDERS.get(settings.local_recorder) if settings.local_recorder else None
    wrap_effects = _WRAP_EFFECTS.get(settings.local_recorder) if settings.local_recorder else None
    specs = processor_specs(entries, lambda_client=lambda t: lambda_client(t, clients), wrap=wrap)
    return ingest_service(
        wrap_effects=wrap_effects,
        holds=hold_policies(entries, {"HOLD": settings.hold_json or ""}),
        s3=lazy_client(clients, "s3"),
        dynamodb=client(clients, "dynamodb"),
        table=settings.ledger_table_name,
        tombstone_ttl_seconds=settings.tombstone_ttl_seconds,
        scope=settings.scope,
        processor=specs or None,
        trail=settings.trail_length or _default_trail(),
    )


def _default_trail() -> int:
    from s3ingest_fn.core.row import TRAIL_SLOTS

    return TRAIL_SLOTS


def lambda_client(timeout_s: int, clients: ClientConfig | None = None) -> Any:
    """A Lambda client for invoking a processor function synchronously: reads wait past its
    timeout (``timeout_s`` + 10 s) and an invoke is never retried by the SDK (a failed effect
    is retried through the message instead: CONTRACT C11)."""
    from s3ingest_fn.adapters.processor_function import invoke_config

    return _lambda_client(timeout_s, invoke_config, clients or function_clients())


@lru_cache(maxsize=_CACHE_SIZE)
def _lambda_client(timeout_s: int, config: Callable[[int], Any], clients: ClientConfig) -> Any:
    return client(clients, "lambda", config=config(timeout_s))


def function_message_processor() -> MessageProcessor:
    """The ingest function's message processor (``DEAD_LETTER_QUEUE_URL``)."""
    return _message_processor(function_settings(), function_clients())


@lru_cache(maxsize=_CACHE_SIZE)
def _message_processor(settings: IngestConfig, clients: ClientConfig) -> MessageProcessor:
    from s3ingest_fn.adapters.bucket_owners import parse_owners

    return message_processor(
        build_ingest_service(settings, clients),
        lazy_client(clients, "sqs"),
        settings.dead_letter_queue_url,
        owners=parse_owners(clients.bucket_owners_json),
    )


def function_scope() -> Scope:
    """The pipeline's buckets and key filters: ``SCOPE``, else ``BUCKET_NAME`` alone
    (:meth:`~s3ingest_fn.core.scope.Scope.from_env`; read each time: it is cheap).

    Raises
    ------
    ValueError
        When ``SCOPE`` is malformed.
    """
    from s3ingest_fn.config import invocation_env
    from s3ingest_fn.core.scope import Scope

    return Scope.from_env(invocation_env())


def inventories_from_env(env: Any, first_bucket: str | None) -> dict[str, tuple[str, str]]:
    """Each bucket's inventory reports, ``{source bucket: (destination bucket, report
    folder)}``: ``INVENTORIES`` (:class:`~s3ingest_fn.config_roles.Inventory`), and for
    ``first_bucket`` when it names none, ``INVENTORY_BUCKET_NAME`` and ``INVENTORY_PREFIX``.

    Raises
    ------
    ValueError
        When ``INVENTORIES`` is not a JSON list of such objects.
    """
    from s3ingest_fn.config import INVENTORIES, INVENTORY_BUCKET_NAME, INVENTORY_PREFIX
    from s3ingest_fn.config_roles import Inventory

    found = {e.name: (e.bucket, e.prefix) for e in Inventory.parse(env.get(INVENTORIES))}
    legacy = env.get(INVENTORY_BUCKET_NAME)
    if first_bucket and first_bucket not in found and legacy:
        found[first_bucket] = (legacy, env.get(INVENTORY_PREFIX, ""))
    return found


def function_reconcile_config() -> ReconcileConfig:
    """The invocation's :class:`~s3ingest_fn.config_roles.ReconcileConfig`.

    Raises
    ------
    ConfigError
        Naming every missing or malformed variable.
    """
    from s3ingest_fn.config_roles import ReconcileConfig

    return function_config(ReconcileConfig)


def function_reconcile_buckets() -> tuple[str, ...]:
    """The buckets a scheduled reconciliation covers, in order: ``SCOPE``'s, else
    ``BUCKET_NAME``."""
    from s3ingest_fn.config import BUCKET_NAME, invocation_env

    env = invocation_env()
    names = function_scope().names
    return names or ((env[BUCKET_NAME],) if env.get(BUCKET_NAME) else ())


@_clears("build_reconciler")
def function_reconciler(bucket: str | None = None) -> Reconciler:
    """Reconciliation of ``bucket`` (default: the first of the configuration's buckets) over
    the invocation's :class:`~s3ingest_fn.config_roles.ReconcileConfig` (ledger, ingest queue, key
    filters, inventories: none, it can only be listed).

    Raises
    ------
    ValueError
        Naming every missing variable, or a bucket that is not one of the pipeline's.
    """
    return build_reconciler(function_reconcile_config(), function_clients(), bucket)


@lru_cache(maxsize=_CACHE_SIZE)
def build_reconciler(
    settings: ReconcileConfig, clients: ClientConfig, bucket: str | None = None
) -> Reconciler:
    """The reconciler of ``bucket`` under ``settings`` (cached per value).

    Raises
    ------
    ValueError
        For a bucket that is not one of the pipeline's.
    """
    name = bucket or settings.buckets[0]
    scope = settings.scope
    found = scope.bucket(name)
    if scope.buckets and found is None:
        raise ValueError(f"bucket {name!r} is not one of the pipeline's: {list(scope.names)}")
    inventory = settings.inventory_of(name)
    return reconciler(
        s3=client(clients, "s3"),
        dynamodb=client(clients, "dynamodb"),
        sqs=client(clients, "sqs"),
        bucket=name,
        table=settings.ledger_table_name,
        queue_url=settings.ingest_queue_url,
        inventory_bucket=inventory[0] if inventory else None,
        inventory_prefix=inventory[1] if inventory else "",
        scope=found,
        processors=list(settings.processor_names),
        targets=settings.processor_targets,
    )


def function_key_policy() -> KeyPolicy:
    """How this invocation's logs show object keys (:class:`~s3ingest_fn.config.LogConfig`;
    the secret read once per configuration: once per cold start, deployed).

    Raises
    ------
    ConfigError
        A malformed ``LOG_KEYS``, or ``hashed`` without ``LOG_KEY_SECRET_ARN``.
    """
    from s3ingest_fn.config import LogConfig

    config = function_config(LogConfig)
    if config.log_keys != "hashed":
        from s3ingest_fn.log_keys import KeyPolicy

        return KeyPolicy(config.log_keys)
    return _key_policy(config, function_clients())


@lru_cache(maxsize=_CACHE_SIZE)
def _key_policy(config: Any, clients: ClientConfig) -> KeyPolicy:
    return key_policy(client(clients, "secretsmanager"), config.log_keys, config.secret_arn)


def function_change_publisher() -> EventBridgePublisher:
    """The change relay's publisher to the change bus (the bus itself is named by
    ``CHANGE_BUS_NAME`` in each entry)."""
    return _change_publisher(function_clients())


@lru_cache(maxsize=_CACHE_SIZE)
def _change_publisher(clients: ClientConfig) -> EventBridgePublisher:
    return change_publisher(client(clients, "events"))


def function_change_dead_letters(queue_url: str | None) -> DeadLetters | None:
    """The change relay's dead-letter queue (``DEAD_LETTER_QUEUE_URL``), or None."""
    return _change_dead_letters(function_clients(), queue_url)


@lru_cache(maxsize=_CACHE_SIZE)
def _change_dead_letters(clients: ClientConfig, queue_url: str | None) -> DeadLetters | None:
    return change_dead_letters(client(clients, "sqs"), queue_url)


def function_event_delivery() -> S3EventDelivery:
    """The delivery check's reader of bucket notification configurations."""
    return _event_delivery(function_clients())


@lru_cache(maxsize=_CACHE_SIZE)
def _event_delivery(clients: ClientConfig) -> S3EventDelivery:
    return event_delivery(client(clients, "s3"))


def s3_client(owners: Mapping[str, str] | None = None) -> Any:
    """A boto3 S3 client (the bucket-setup custom resource,
    :mod:`s3ingest_fn.handlers.bucket_setup`); every call on a bucket of ``owners`` (bucket ->
    account) names its owner (``ExpectedBucketOwner``)."""
    from s3ingest_fn.adapters.bucket_owners import expect_owners

    return expect_owners(client(function_clients(), "s3"), owners or {})


@_clears("_listing_backfill")
def function_listing_backfill() -> ListingBackfill:
    """The listing backfill function's service over the invocation's
    :class:`~s3ingest_fn.config_roles.ListingBackfillConfig`: the ingest service of its ingest part,
    ``CHECKPOINT_BUCKET_NAME`` for the checkpoints, ``RECORD_CONCURRENCY`` entries recorded
    at once.

    Raises
    ------
    ValueError
        When ``CHECKPOINT_BUCKET_NAME`` or the ingest environment is missing.
    """
    from s3ingest_fn.config_roles import ListingBackfillConfig

    return _listing_backfill(function_config(ListingBackfillConfig), function_clients())


@lru_cache(maxsize=_CACHE_SIZE)
def _listing_backfill(settings: ListingBackfillConfig, clients: ClientConfig) -> ListingBackfill:
    return listing_backfill(
        s3=client(clients, "s3"),
        service=build_ingest_service(settings.ingest(), clients),
        checkpoint_bucket=settings.checkpoint_bucket_name,
        record_concurrency=settings.record_concurrency,
    )


@_clears("_reprocessor")
def function_reprocessor() -> Reprocessor:
    """The reprocess functions' service over the invocation's
    :class:`~s3ingest_fn.config_roles.ReprocessConfig`: the ingest service of its ingest part (the
    ledger, the processors and their hold policies), ``CHECKPOINT_BUCKET_NAME`` for the plan
    and checkpoints, ``RECORD_CONCURRENCY`` rows of a page run at once.

    Raises
    ------
    ValueError
        When ``CHECKPOINT_BUCKET_NAME`` or the ingest environment is missing, or a processor
        cannot be imported.
    """
    from s3ingest_fn.config_roles import ReprocessConfig

    return _reprocessor(function_config(ReprocessConfig), function_clients())


@lru_cache(maxsize=_CACHE_SIZE)
def _reprocessor(settings: ReprocessConfig, clients: ClientConfig) -> Reprocessor:
    return reprocessor(
        s3=client(clients, "s3"),
        dynamodb=client(clients, "dynamodb"),
        table=settings.ledger_table_name,
        service=build_ingest_service(settings.ingest(), clients),
        checkpoint_bucket=settings.checkpoint_bucket_name,
        concurrency=settings.record_concurrency,
    )
