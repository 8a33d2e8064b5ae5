"""The stack's Lambda function roles, one row each: handler, Powertools service name, the
configuration model the function reads, memory and timeout (from the settings), descriptions.

Read by the CDK constructs (``s3ingest_cdk.constructs.function.RoleFunction`` builds one
function from a row) and by the local runtime (the handlers and names it invokes), so a new
role is one row here plus the feature that deploys it. CDK-free, and in ``s3ingest`` rather
than ``s3ingest_fn``: the deployment's knowledge (memory, timeouts, descriptions) stays out of
the function bundle, and ``infra`` imports ``s3ingest``, never the reverse.

Memory and timeout are functions of :class:`~s3ingest.settings.Settings` (MiB, seconds): most
follow a setting, some are fixed (:func:`fixed`); the defaults are their values on
``Settings()``. Lambda's limits: https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from s3ingest_fn import config as fn_config
from s3ingest_fn import config_roles as fn_roles
from s3ingest_fn import contract

if TYPE_CHECKING:
    from s3ingest.settings import Settings

#: Settings -> a value (seconds or MiB).
Sized = Callable[["Settings"], int]


def fixed(value: int) -> Sized:
    """A size that no setting changes."""
    return lambda _settings: value


def _function_timeout(s: Settings) -> int:
    return s.function_timeout_seconds


def _function_memory(s: Settings) -> int:
    return s.function_memory_mb


def _reconcile_timeout(s: Settings) -> int:
    return s.reconcile_timeout_seconds


def _reconcile_memory(s: Settings) -> int:
    return s.reconcile_memory_mb


def _ingest_side_reconcile_timeout(s: Settings) -> int:
    # it runs the processors (raised for the processor functions it invokes)
    return s.ingest_side_timeout(s.reconcile_timeout_seconds)


@dataclass(frozen=True)
class FunctionRole:
    """One Lambda function role of the stack.

    Attributes
    ----------
    name : str
        Its name in the local runtime (``"ingest"``, ``"change-relay"``).
    construct_id : str
        Its construct id in its feature (``"IngestFunction"``); a processor's is its name.
    handler : str
        Entry point in the bundle (``"s3ingest_fn.handlers.ingest.handler"``).
    service : str
        ``POWERTOOLS_SERVICE_NAME`` (:mod:`s3ingest_fn.contract`).
    config : type or None
        The configuration model of :mod:`s3ingest_fn.config` its environment is (``None``: the
        processor's own, ``OUTPUT_BUCKET`` only).
    description, role_description : str
        The function's and its IAM role's descriptions; ``{name}`` and ``{handler}`` are filled
        for a processor.
    timeout, memory : callable
        Settings -> timeout (seconds) and memory (MiB).
    dead_letter_days : int or None
        Retention (days) of a dead-letter queue of its own (the change relay's), else ``None``.
    packages : tuple of str
        Names of ``functions/packages.lock`` (pinned, hashed: :data:`ROLE_PACKAGES_LOCK`)
        installed for the Lambda platform into this role's asset only, with what they need
        from that lock (``s3ingest_cdk.bundling.function_code``); ``()``: the shared asset.
    """

    name: str
    construct_id: str
    handler: str
    service: str
    config: type | None
    description: str
    role_description: str
    timeout: Sized = _function_timeout
    memory: Sized = _function_memory
    dead_letter_days: int | None = None
    packages: tuple[str, ...] = ()


#: The lock the roles' :attr:`FunctionRole.packages` are pinned in (beside the functions' own
#: ``requirements.lock``; generated from ``functions/packages.txt`` by ``make lock``).
ROLE_PACKAGES_LOCK = "packages.lock"


#: How long the change relay's dead-letter queue keeps a dead-lettered change or a dropped
#: batch's position, days: SQS's maximum. The stream itself keeps records 24 hours; this is the
#: time left to re-publish from the ledger.
CHANGE_DEAD_LETTER_DAYS = 14
#: The checkpointed runs' plan and summarize steps: 5 minutes, 512 MiB.
STEP_TIMEOUT_SECONDS = 300
STEP_MEMORY_MIB = 512
_STEP_TIMEOUT, _STEP_MEMORY = fixed(STEP_TIMEOUT_SECONDS), fixed(STEP_MEMORY_MIB)
_HANDLERS = "s3ingest_fn.handlers."


def _backfill_control_timeout(s: Settings) -> int:
    # distributed-map: it runs the processors (raised for the processor functions)
    if s.backfill_engine == "batch-operations":
        return s.reconcile_timeout_seconds
    return s.ingest_side_timeout(s.reconcile_timeout_seconds)


def _step(
    feature: str,
    module: str,
    service: str,
    config: type,
    name: str,
    construct_id: str,
    function: str,
    what: str,
    timeout: Sized = _STEP_TIMEOUT,
    memory: Sized = _STEP_MEMORY,
) -> FunctionRole:
    """A step function of a checkpointed run (``feature``: the listing backfill, reprocess)."""
    return FunctionRole(
        name,
        construct_id,
        f"{_HANDLERS}{module}.{function}",
        service,
        config,
        f"s3ingest: {what}",
        f"s3ingest {feature}: {what}",
        timeout,
        memory,
    )


_listing = partial(
    _step,
    "listing backfill",
    "listing_backfill",
    contract.LISTING_SERVICE,
    fn_roles.ListingBackfillConfig,
)
_reprocess = partial(
    _step, "reprocess", "reprocess", contract.REPROCESS_SERVICE, fn_roles.ReprocessConfig
)


_RECONCILE = "s3ingest: compares the bucket with the ledger and queues repairs (reconciliation)"
_FANOUT = "s3ingest: one step of the fan-out reconciliation (plan, shard, diff, summarize)"
_CONTROL = "s3ingest: one step of the backfill (prepare, report, backfill_file, summarize)"

INGEST = FunctionRole(
    "ingest",
    "IngestFunction",
    f"{_HANDLERS}ingest.handler",
    contract.INGEST_SERVICE,
    fn_config.IngestConfig,
    "s3ingest: applies S3 events from the ingest queue to the ledger",
    "s3ingest ingest function",
    # functionTimeoutSeconds, raised for the processor functions it invokes
    timeout=lambda s: s.ingest_timeout_seconds,
)
RECONCILE = FunctionRole(
    "reconcile",
    "ReconcileFunction",
    f"{_HANDLERS}reconcile.handler",
    contract.RECONCILE_SERVICE,
    fn_roles.ReconcileConfig,
    _RECONCILE,
    _RECONCILE,
    _reconcile_timeout,
    _reconcile_memory,
    # the columnar reconciliation (s3ingest_fn.services.reconcile_columnar): docs/reconciliation.md
    packages=("pyarrow",),
)
RECONCILE_FANOUT = FunctionRole(
    "reconcile-fanout",
    "ReconcileFanOutFunction",
    f"{_HANDLERS}reconcile_fanout.handler",
    contract.RECONCILE_SERVICE,
    fn_roles.FanOutConfig,
    _FANOUT,
    _FANOUT,
    _reconcile_timeout,
    _reconcile_memory,
)
BACKFILL = FunctionRole(
    "backfill",
    "BackfillFunction",
    f"{_HANDLERS}backfill.handler",
    contract.BACKFILL_SERVICE,
    fn_roles.BackfillConfig,
    "s3ingest: backfills one object per S3 Batch Operations task (ledger rules)",
    "s3ingest backfill function (S3 Batch Operations tasks)",
    timeout=lambda s: s.ingest_side_timeout(s.backfill_function_timeout_seconds),
)
BACKFILL_CONTROL = FunctionRole(
    "backfill-control",
    "BackfillControlFunction",
    f"{_HANDLERS}backfill_control.handler",
    contract.BACKFILL_SERVICE,
    fn_roles.BackfillControlConfig,
    _CONTROL,
    _CONTROL,
    _backfill_control_timeout,
    _reconcile_memory,
)
CHANGE_RELAY = FunctionRole(
    "change-relay",
    "ChangeRelay",
    f"{_HANDLERS}change_stream.handler",
    contract.CHANGE_RELAY_SERVICE,
    fn_roles.ChangeRelayConfig,
    "s3ingest: publishes the ledger's applied changes to the change bus",
    "s3ingest change-stream relay",
    dead_letter_days=CHANGE_DEAD_LETTER_DAYS,
)
#: The history writer (``historyTable``): one SQS batch of change events per invocation, one
#: Iceberg commit each (seconds); pyarrow and pyiceberg want the memory.
HISTORY = FunctionRole(
    "history",
    "HistoryWriter",
    f"{_HANDLERS}history.handler",
    contract.HISTORY_SERVICE,
    fn_roles.HistoryConfig,
    "s3ingest: writes the change stream to the history table (Apache Iceberg)",
    "s3ingest history writer",
    fixed(300),
    fixed(1024),
    # the Iceberg writer (s3ingest_fn.services.history) with its Glue catalog: docs/history.md
    packages=("pyiceberg",),
)
DELIVERY_CHECK = FunctionRole(
    "delivery-check",
    "DeliveryCheck",
    f"{_HANDLERS}delivery_check.handler",
    contract.DELIVERY_CHECK_SERVICE,
    fn_roles.DeliveryCheckConfig,
    "s3ingest: checks that the landing bucket sends its events to EventBridge",
    "s3ingest EventBridge delivery check",
    # one GetBucketNotificationConfiguration per bucket: seconds, not the ingest's settings
    fixed(30),
    fixed(256),
)
#: A processor function the stack deploys (a ``processors`` entry with a ``handler``); its
#: construct id, handler and timeout are its entry's.
PROCESSOR = FunctionRole(
    "processor",
    "{name}",
    "{handler}",
    contract.PROCESSOR_SERVICE,
    None,
    "s3ingest: processor {name} ({handler}), invoked under the claim",
    "s3ingest processor function {name}",
)
LISTING_PLAN = _listing(
    "listing-plan", "ListingPlan", "plan", "plans the listing backfill's key-range shards"
)
LISTING_SHARD = _listing(
    "listing-shard",
    "ListingShard",
    "list_shard",
    "lists one key range and records it by the ledger rules (listing backfill)",
    _ingest_side_reconcile_timeout,
    _reconcile_memory,
)
LISTING_SUMMARIZE = _listing(
    "listing-summarize",
    "ListingSummarize",
    "summarize",
    "adds the listing backfill's shard counts up",
)
REPROCESS_PLAN = _reprocess(
    "reprocess-plan", "ReprocessPlan", "plan", "plans a reprocess run's ledger segments"
)
REPROCESS_SEGMENT = _reprocess(
    "reprocess-segment",
    "ReprocessSegment",
    "segment",
    "runs a processor over one ledger segment's rows behind for it (reprocess)",
    _ingest_side_reconcile_timeout,
    _reconcile_memory,
)
REPROCESS_SUMMARIZE = _reprocess(
    "reprocess-summarize",
    "ReprocessSummarize",
    "summarize",
    "adds a reprocess run's segment counts up",
)

#: Every role, by :attr:`FunctionRole.name`.
ROLES: dict[str, FunctionRole] = {
    role.name: role
    for role in (
        INGEST,
        RECONCILE,
        RECONCILE_FANOUT,
        BACKFILL,
        BACKFILL_CONTROL,
        CHANGE_RELAY,
        HISTORY,
        DELIVERY_CHECK,
        PROCESSOR,
        LISTING_PLAN,
        LISTING_SHARD,
        LISTING_SUMMARIZE,
        REPROCESS_PLAN,
        REPROCESS_SEGMENT,
        REPROCESS_SUMMARIZE,
    )
}
