"""The whole pipeline on one machine: faithful S3 events -> EventBridge -> SQS -> the real ingest
handler -> the DynamoDB ledger, all on the embedded emulator.

:class:`LocalRuntime` is one provisioned deployment, its object graph built by
:mod:`s3ingest_fn.wiring` as the Lambda functions build theirs, composed with:

* one :class:`~s3ingest.local.emulator.s3faithful.FaithfulS3` per landing bucket
  (:meth:`LocalRuntime.bucket`; :attr:`LocalRuntime.faithful` is the first), through which S3
  operations go and which records the events S3 would emit while the bucket's EventBridge
  delivery is on (an existing bucket's is off until :meth:`LocalRuntime.onboard`);
* the event sources of :mod:`s3ingest.local.stack.sources`: :meth:`LocalRuntime.flush` publishes the
  recorded events to the emulator's default bus under a
  :class:`~s3ingest.local.emulator.chaos.Chaos` schedule; :meth:`LocalRuntime.drain` plays the
  Lambda SQS event source of the ingest handler;
  :meth:`LocalRuntime.pump_changes` (run at the end of every drain and backfill, with the change
  stream on) plays the relay's DynamoDB stream event source and collects what a rule on the
  change bus delivered (:attr:`LocalRuntime.changes`); reconcile, replay and backfill run the
  real code paths, then drain;
* the oracles of :mod:`s3ingest.local.stack.oracles`: :meth:`LocalRuntime.compare` checks the ledger
  against the bucket (CONTRACT C15), :meth:`LocalRuntime.check_effects` the processor's runs
  (:attr:`LocalRuntime.effects`, CONTRACT C11) against the ledger;
* crash injection (:class:`~s3ingest.local.emulator.chaos.CrashInjector`): ``Chaos.crash`` kills a
  worker between an effect and its commit (its lease is then ended, as the invocation's timeout
  would) so the retried message must re-run the effect.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any, cast

from s3ingest import function_roles
from s3ingest.commands.review import matching
from s3ingest.local.emulator import environment
from s3ingest.local.emulator.chaos import Chaos, InjectedCrash, kill_after_effect
from s3ingest.local.emulator.encryption import encrypt_bucket
from s3ingest.local.emulator.faults import INGEST, FaultInjector
from s3ingest.local.emulator.function_logs import FunctionLogs, routed
from s3ingest.local.emulator.lambda_service import (
    LambdaContext,
    LocalFunction,
    reserved_environment,
    run_with_timeout,
)
from s3ingest.local.emulator.s3faithful import FaithfulS3, SequencerClock
from s3ingest.local.emulator.server import ACCOUNT, Emulator
from s3ingest.local.machines import (
    BACKFILL_BATCH_OPERATIONS,
    BACKFILL_DISTRIBUTED_MAP,
    BACKFILL_LISTING,
    REPROCESS,
)
from s3ingest.local.stack import history
from s3ingest.local.stack.delivery import publish_flush
from s3ingest.local.stack.executions import Execution, LocalMachines
from s3ingest.local.stack.oracles import (
    EXAMPLE_PROCESSOR,
    Comparison,
    EffectRecorder,
    EffectRun,
    Oracles,
)
from s3ingest.local.stack.provisioning import LocalBucket, Resources, provision
from s3ingest.local.stack.reconciling import Reconciliations
from s3ingest.local.stack.sources import (
    LOCAL_VISIBILITY_TIMEOUT,
    SqsEventSource,
    StreamEventSource,
    replay_archive,
    replay_target,
    run_backfill,
)
from s3ingest.onboard import OnboardTarget, OnProgress, onboard
from s3ingest.settings import BucketSpec, Settings, inventory_report_prefix
from s3ingest_fn import config as fn_config
from s3ingest_fn import wiring
from s3ingest_fn.adapters.bucket_owners import expect_owners
from s3ingest_fn.adapters.dynamo_ledger import DynamoLedger
from s3ingest_fn.adapters.s3_objects import S3Objects
from s3ingest_fn.config import use_env
from s3ingest_fn.config_roles import Inventory
from s3ingest_fn.core.effects import EffectRunner, ProcessorSpec
from s3ingest_fn.core.model import Result
from s3ingest_fn.core.row import LedgerRow
from s3ingest_fn.handlers.change_stream import relay
from s3ingest_fn.handlers.ingest import make_handler

#: ``backfill(engine=...)`` values, as ``backfillEngine`` (``s3ingest.settings``).
BATCH_OPERATIONS = "batch-operations"
DISTRIBUTED_MAP = "distributed-map"
BACKFILL_ENGINES = (BATCH_OPERATIONS, DISTRIBUTED_MAP)
#: The ingest function's handler (what :meth:`LocalRuntime._invoke_ingest` runs, in-process).
INGEST_HANDLER = function_roles.INGEST.handler
#: The change relay function as the stream event source invokes it (its handler: the stack's).
RELAY_FUNCTION = LocalFunction(
    function_roles.CHANGE_RELAY.name, function_roles.CHANGE_RELAY.handler, {}
)
#: The stack name the local runtime's onboarding runs are derived from (:func:`run_id`).
LOCAL_STACK = "S3Ingest-local"

__all__ = [
    "BACKFILL_ENGINES",
    "BATCH_OPERATIONS",
    "DISTRIBUTED_MAP",
    "EXAMPLE_PROCESSOR",
    "LOCAL_VISIBILITY_TIMEOUT",
    "Comparison",
    "Delivered",
    "EffectRun",
    "InjectedCrash",
    "LocalRuntime",
    "local_settings",
]


#: Who a local approval or rejection is recorded as (deployed: the caller's IAM identity).
LOCAL_ACTOR = f"local:{os.environ.get('USER') or 'operator'}"


def local_settings(**overrides: Any) -> Settings:
    """Settings for local demos and scenarios: the stack's defaults plus the example processor
    and the change stream, so local runs show effects and change events."""
    return Settings(**{"processor": EXAMPLE_PROCESSOR, "change_stream": True, **overrides})


@dataclass
class Delivered:
    """One processed record, for reports: the scenario step that delivered it and its Result."""

    step: int | None
    result: Result
    message_id: str


def describe_bucket(s3: Any, bucket: str) -> dict[str, Any]:
    """``{"notification": {...}, "inventory": [...]}``: the bucket's notification
    configuration (GetBucketNotificationConfiguration, without response metadata) and its
    inventory configurations (ListBucketInventoryConfigurations, sorted by id)."""
    notification = s3.get_bucket_notification_configuration(Bucket=bucket)
    notification.pop("ResponseMetadata", None)
    inventory: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"Bucket": bucket}
    while True:
        page = s3.list_bucket_inventory_configurations(**kwargs)
        inventory.extend(page.get("InventoryConfigurationList", []))
        if not page.get("IsTruncated"):
            break
        kwargs["ContinuationToken"] = page["NextContinuationToken"]
    return {"notification": notification, "inventory": sorted(inventory, key=lambda c: c["Id"])}


#: Ledger Scan segments of a local reprocess run (:meth:`LocalRuntime.reprocess`): a few, the
#: emulator's table being small (a deployed run's default is 16).
LOCAL_REPROCESS_SEGMENTS = 4


class LocalRuntime(Reconciliations):
    """One deployment of the pipeline on the emulator.

    Parameters
    ----------
    emu : Emulator
        A started emulator.
    settings : Settings
        The stack's settings (same defaults as ``cdk.json``).
    bucket : str, optional
        Landing bucket name (unique by default), when ``buckets`` is not given.
    versioning : {"Enabled", "Suspended", None}
        That bucket's versioning.
    seed : int
        Seeds the sequencer suffixes and the crash draws.
    buckets : sequence of BucketSpec or LocalBucket, optional
        Several landing buckets, created or existing, with key filters
        (:class:`~s3ingest.local.stack.provisioning.LocalBucket`); the first is :attr:`faithful` and
        ``resources.bucket``.
    resources : Resources, optional
        Resources already provisioned (a saved state restored): nothing is provisioned.
    log_dir : Path, optional
        The functions' and processors' logs, one file each (``local up``), else in memory
        (:class:`~s3ingest.local.emulator.function_logs.FunctionLogs`).
    """

    def __init__(
        self,
        emu: Emulator,
        settings: Settings | None = None,
        *,
        bucket: str | None = None,
        versioning: str | None = "Enabled",
        seed: int = 0,
        buckets: Sequence[BucketSpec | LocalBucket] | None = None,
        resources: Resources | None = None,
        log_dir: Path | None = None,
    ) -> None:
        self.emu = emu
        self.logs = FunctionLogs(log_dir)
        environment.install()  # team code reading os.environ sees its invocation's
        self.settings = settings or Settings()
        self.resources: Resources = resources or provision(
            emu, self.settings, bucket=bucket, versioning=versioning, buckets=buckets
        )
        self.s3 = expect_owners(
            emu.reading_through(self.resources.read_roles), self.resources.owners
        )
        self.sqs = emu.client("sqs")
        self.ddb = emu.client("dynamodb")
        self.events = emu.client("events")
        self._events_clients: dict[str, Any] = {ACCOUNT: self.events}
        clock = self.sequencer_clock = SequencerClock(seed)
        faithful = partial(FaithfulS3, clock=clock, follow_notification=True)
        #: One FaithfulS3 per landing bucket, in order (writing as the bucket's owner).
        self.buckets: dict[str, FaithfulS3] = {
            b.name: faithful(
                emu.account_client("s3", b.account),
                b.name,
                b.versioning,
                account=b.account or ACCOUNT,
            )
            for b in self.resources.buckets
        }
        self.faithful = self.buckets[self.resources.bucket]
        self.scope = self.resources.scope()
        self.service = wiring.ingest_service(
            s3=self.s3,
            dynamodb=self.ddb,
            table=self.resources.table,
            tombstone_ttl_seconds=self.settings.tombstone_ttl_seconds,
            scope=self.scope,
            trail=self.settings.trail_length,
        )
        self.ledger = cast(DynamoLedger, self.service.ledger)
        self.objects = cast(S3Objects, self.service.bucket)
        self.processor = wiring.message_processor(
            self.service, self.sqs, self.resources.dlq_url, owners=self.resources.owners
        )
        self.delivered: list[Delivered] = []
        self.dropped: list[dict[str, Any]] = []
        self.undelivered: list[dict[str, Any]] = []
        self.step: int | None = None
        self.handler = make_handler(
            self.processor, self.settings.record_concurrency, emit=self._emit
        )
        #: Called after every handler invocation (tests check invariants from it).
        self.after_batch: Callable[[LocalRuntime], None] | None = None
        self.recorder = EffectRecorder(lambda: self.step)
        #: Crashes and throttling of the workers (:mod:`s3ingest.local.emulator.faults`).
        self.crashes = FaultInjector.of_ledger(
            self.ledger, on_crash=self.recorder.mark_crashed, seed=seed, dynamodb=self.ddb
        )
        #: The key of :attr:`recorder` in the functions' environment (``S3INGEST_LOCAL_RECORDER``):
        #: every function of this deployment reports its processor runs to it.
        self.recorder_key = f"local-{uuid.uuid4().hex}"
        #: The ingest function's timeout, seconds (``functionTimeoutSeconds``, raised for the
        #: processor functions as the stack raises it): an invocation still running then has
        #: timed out (:meth:`_invoke_ingest`), and its effects' leases end with it.
        self.ingest_timeout_seconds = float(function_roles.INGEST.timeout(self.settings))
        #: Ingest invocations that timed out so far.
        self.ingest_timeouts = 0
        #: Where the runtime's own invocations print (their CloudWatch log, locally).
        self.function_logs = self.logs.sink(INGEST)
        #: Crash chaos of the last flush, applied to the next drain only (then cleared).
        self._flush_chaos: Chaos | None = None
        self._install_processors()
        self.ingest_source = SqsEventSource(
            self.sqs,
            self.resources.queue_url,
            self.resources.queue_arn,
            self.settings.batch_size,
            self.crashes.guard(INGEST, self._invoke_ingest),
        )
        self.stream_source: StreamEventSource | None = None
        if self.resources.stream_arn and self.resources.change_bus:
            bus, publisher = self.resources.change_bus, wiring.change_publisher(self.events)
            dead = wiring.change_dead_letters(self.sqs, self.resources.change_dlq_url)
            self.stream_source = StreamEventSource(
                emu.client("dynamodbstreams"),
                self.sqs,
                self.resources.stream_arn,
                lambda e: self._relay(publisher, bus, e, None, dead, self.settings.history_table),
                self.resources.change_queue_url,
                history.event_source(self.sqs, self.resources),
            )
        self._machines: LocalMachines | None = None
        self.oracles = Oracles(
            s3=self.s3,
            sqs=self.sqs,
            scanner=wiring.ledger_scanner(self.ddb, self.resources.table),
            resources=self.resources,
            processor=self.settings.processor,
            spec_of=self._spec_of,
            configured=self._configured,
        )

    def _install_processors(self) -> None:
        """The settings' processors on the ingest service, their runs recorded.

        Raises
        ------
        ValueError
            A processor given by ``functionArn``, or one that cannot be imported.
        """
        entries = self.settings.processor_entries()
        self.service.effects = None
        if not entries:
            return
        if any(entry.get("functionArn") for entry in entries):
            raise ValueError(
                "a processor given by functionArn runs only deployed; locally, name its "
                'Python handler instead ("handler": "package.module:handler")'
            )
        wiring.record_processor_runs(self.recorder_key, self._record_runs, self._kill_workers)
        self.service.effects = self._kill_workers(
            wiring.effect_runner(
                wiring.processor_specs(entries, wrap=self._record_runs),
                self.s3,
                holds=wiring.hold_policies(entries, self.settings.hold_env()),
            )
        )

    def _kill_workers(self, runner: EffectRunner) -> EffectRunner:
        """``runner`` with :attr:`crashes` killing workers between an effect and its commit."""
        return kill_after_effect(runner, self.crashes.after_effect)

    def configure(self, processors: Sequence[Mapping[str, Any]], hold: Any = None) -> None:
        """Deploy another processor configuration (the ``processors`` setting, and the
        stack-wide ``hold``): the ingest service and every function of the stack's machines
        run the new processors from now on, as after a ``cdk deploy``; the ledger keeps what
        it holds (rows of an added processor or a raised version are behind it until
        ``reprocess``).

        The first processors of a deployment set up without any get the processors' output
        bucket, as the stack creates it with them; the ingest function's timeout follows the
        new processor functions' (:attr:`ingest_timeout_seconds`).

        Raises
        ------
        ValueError
            Settings that do not validate (the problems joined), or a processor that cannot be
            imported.
        """
        settings = dataclasses.replace(
            self.settings, processor=None, processors=tuple(dict(p) for p in processors), hold=hold
        )
        problems = settings.problems()
        if problems:
            raise ValueError("; ".join(problems))
        if settings.processor_entries() and not self.resources.output_bucket:
            name = f"s3ingest-output-{uuid.uuid4().hex[:8]}"
            self.s3.create_bucket(Bucket=name)
            encrypt_bucket(self.s3, name, self.resources.kms_key_arn)
            self.resources = dataclasses.replace(self.resources, output_bucket=name)
            self.oracles.resources = self.resources
        previous = self.settings
        self.settings = settings
        try:
            self._install_processors()
        except ValueError:
            self.settings = previous
            self._install_processors()
            raise
        # the report checks the processor setting in force now (the example processor's
        # sidecars only while it is configured)
        self.oracles.processor = self.settings.processor
        # the ingest function's timeout, raised for the processor functions it now invokes
        self.ingest_timeout_seconds = float(self.settings.ingest_timeout_seconds)
        if self._machines is not None:
            self._machines.reconfigure(self.settings_env())

    def _record_runs(self, name: str, call: Any) -> Any:
        """``call`` (processor ``name``) recorded in :attr:`effects` when it completes, with
        the processor's version then."""
        recorded = self.recorder.wrap(call, name, lambda: self._version_of(name))
        return self.logs.processor(name, recorded)

    def _relay(self, *args: Any) -> Any:
        """The change relay's invocation (``relay(*args)``), printing to its log."""
        env = {**self.environment(), **reserved_environment(RELAY_FUNCTION)}
        with routed(self.logs.sink(RELAY_FUNCTION.name)):
            return environment.run_in(env, relay, *args)

    def _configured(self) -> tuple[str, ...]:
        runner = self.service.effects
        return runner.names if runner is not None else ()

    def _version_of(self, processor: str) -> int:
        spec = self._spec_of(processor)
        return spec.version if spec is not None else 1

    def _spec_of(self, processor: str) -> ProcessorSpec | None:
        """The configured processor named ``processor`` (the oracles' view), or None."""
        runner = self.service.effects
        return runner.spec(processor) if runner is not None else None

    # -- what ran ----------------------------------------------------------------------------

    @property
    def effects(self) -> list[EffectRun]:
        """Completed processor runs, in completion order (CONTRACT C11)."""
        return self.recorder.runs

    @property
    def changes(self) -> list[dict[str, Any]]:
        """Change-stream events a subscriber received (``{"detail-type", "source", "detail"}``)."""
        return self.stream_source.changes if self.stream_source else []

    @property
    def invocations(self) -> int:
        """Ingest handler invocations so far."""
        return self.ingest_source.invocations

    def bucket(self, name: str | None = None) -> FaithfulS3:
        """The FaithfulS3 of landing bucket ``name`` (the first when None).

        Raises
        ------
        KeyError
            When the deployment has no such bucket.
        """
        if name is None:
            return self.faithful
        if name not in self.buckets:
            raise KeyError(f"no landing bucket {name!r} (buckets: {', '.join(self.buckets)})")
        return self.buckets[name]

    def outcome_counts(self) -> Counter[str]:
        """Processed records per outcome."""
        return Counter(d.result.outcome.value for d in self.delivered)

    # -- the functions' environment and crashes -------------------------------------------

    @contextmanager
    def function_environment(self) -> Iterator[None]:
        """The environment the stack gives the functions that run the processor (``PROCESSOR``,
        ``OUTPUT_BUCKET``), with boto3's default chain pointed at the emulator, as the whole
        environment of what runs in the block (in this context only:
        :func:`s3ingest_fn.config.use_env`): the local runtime's invocations, as a Lambda
        function's."""
        with use_env(self.environment()):
            yield

    def environment(self) -> dict[str, str]:
        """The whole environment of the functions that run the processors here: the
        emulator's endpoint and credentials, and :meth:`settings_env` (nothing of the host's)."""
        return {**self.emu.function_environment(), **self.settings_env()}

    def settings_env(self) -> dict[str, str]:
        """What the settings and the buckets add to a function's environment: ``SCOPE``
        (:meth:`Resources.scope`), ``INVENTORIES`` (the stack's inventory of each bucket),
        ``CHECKPOINT_BUCKET_NAME`` (the inventory bucket), ``PROCESSORS`` or ``PROCESSOR`` (as
        the stack: :attr:`Settings.processors_variable`), ``OUTPUT_BUCKET``, ``HOLD`` and
        ``TRAIL_LENGTH`` (:meth:`~s3ingest.settings.Settings.hold_env`), ``LOG_KEYS``."""
        r = self.resources
        inventories = [
            Inventory(name, r.inventory_bucket, inventory_report_prefix(name))
            for name in r.bucket_names
        ]
        env = {
            fn_config.SCOPE: self.scope.to_json(),
            fn_config.INVENTORIES: Inventory.to_json(inventories),
            fn_config.CHECKPOINT_BUCKET_NAME: r.inventory_bucket,
            fn_config.LOCAL_RECORDER: self.recorder_key,
        }
        if self.settings.processors_variable:
            env[fn_config.PROCESSORS] = json.dumps(self.settings.processor_entries())
        elif self.settings.processor:
            env[fn_config.PROCESSOR] = self.settings.processor
        if self.settings.processor_entries() and self.resources.output_bucket:
            env[fn_config.OUTPUT_BUCKET] = self.resources.output_bucket
        if r.read_roles:
            env[fn_config.READ_ROLES] = json.dumps(r.read_roles)
        env[fn_config.BUCKET_OWNERS] = json.dumps(r.owners)
        env.update(self.settings.hold_env())
        env.update(fn_config.LogConfig(self.settings.log_keys, r.log_key_secret_arn).to_env())
        return env

    @property
    def machines(self) -> LocalMachines:
        """The stack's state machines on this deployment, run by moto's executor, their
        functions in-process (:class:`~s3ingest.local.stack.executions.LocalMachines`; set up on
        first use)."""
        if self._machines is None:
            env = self.settings_env()
            self._machines = LocalMachines(self.emu, self.resources, env, self.logs)
        return self._machines

    def __enter__(self) -> LocalRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Unregister this deployment's functions from the Lambda service, once they end."""
        if self._machines is not None:
            self._machines.close()
        wiring.record_processor_runs(self.recorder_key, None)
        self.logs.close()

    def crashing(self, chaos: Chaos | None) -> AbstractContextManager[None]:
        """Inject ``chaos.crash`` into the effects run inside the block, and only there."""
        return self.crashes.crashing(chaos)

    # -- event sources -----------------------------------------------------------------------

    def _emit(self, result: Result, message_id: str) -> None:
        self.delivered.append(Delivered(step=self.step, result=result, message_id=message_id))

    def _invoke_ingest(self, event: dict[str, Any]) -> dict[str, Any]:
        """One invocation of the ingest handler under the ingest function's timeout
        (:attr:`ingest_timeout_seconds`), as the local Lambda service runs its functions
        (:func:`~s3ingest.local.emulator.lambda_service.run_with_timeout`): an invocation that times
        out fails its whole batch (every message comes back after the visibility timeout), as
        Lambda's SQS event source does; an exception propagates to the caller."""
        timeout = self.ingest_timeout_seconds
        function = LocalFunction(INGEST, INGEST_HANDLER, {}, timeout_seconds=timeout)
        context = LambdaContext(function, str(uuid.uuid4()), time.monotonic() + timeout)
        outcome = run_with_timeout(
            lambda: self.handler(event, context),
            self.ingest_timeout_seconds,
            {**self.environment(), **reserved_environment(function)},
            self.function_logs,
            name="lambda-ingest",
            request_id=context.aws_request_id,
        )
        if outcome.error is not None:
            raise outcome.error
        if outcome.timed_out:
            self.ingest_timeouts += 1
            ids = [r["messageId"] for r in event.get("Records", [])]
            return {"batchItemFailures": [{"itemIdentifier": i} for i in ids]}
        return cast(dict[str, Any], outcome.result)

    def flush(self, chaos: Chaos | None = None) -> int:
        """Publish every pending S3 event to the bus under ``chaos``; return how many were sent.

        Dropped events are in :attr:`dropped` (lost: only reconciliation repairs them), archived
        undelivered ones in :attr:`undelivered` (a replay brings them back). ``chaos.crash``
        applies to the next :meth:`drain` only (this flush's messages), not to later steps.
        """
        chaos = chaos or Chaos()
        self._flush_chaos = chaos
        pending = [event for s3 in self.buckets.values() for event in s3.take_pending()]
        lost = (self.dropped, self.undelivered)  # chaos drop, undelivered (delivery.py)
        return publish_flush(
            self.events, self.sqs, self.resources, chaos, pending, *lost, self.events_of
        )

    def events_of(self, account: str) -> Any:
        """An EventBridge client of ``account`` (the emulator's own for its account), made once:
        S3 sends a bucket's events to its owner's default bus."""
        made = self._events_clients.get(account)
        if made is None:
            made = self._events_clients[account] = self.emu.account_client("events", account)
        return made

    def send_raw(self, body: str) -> None:
        """Put one message on the ingest queue exactly as given (a body as AWS would send it)."""
        self.ingest_source.send_raw(body)

    def drain(
        self, on_batch: Callable[[int], None] | None = None, timeout_seconds: float = 300.0
    ) -> None:
        """Play the Lambda SQS event source until the ingest queue is empty, then pump the
        change stream.

        Parameters
        ----------
        on_batch : callable, optional
            Called with the number of records of each invoked batch (progress bars).
        timeout_seconds : float
            Gives up (RuntimeError) when the queue has not emptied by then.
        """
        chaos, self._flush_chaos = self._flush_chaos, None
        with self.crashing(chaos):
            self.ingest_source.drain(
                on_batch=on_batch,
                after_batch=self._after_batch,
                timeout_seconds=timeout_seconds,
            )
        self.pump_changes()

    def _after_batch(self) -> None:
        if self.after_batch:
            self.after_batch(self)

    def pump_changes(self) -> int:
        """Play the relay's DynamoDB-stream event source once over everything new in the
        ledger's stream; return how many events the change bus delivered to the subscriber."""
        return self.stream_source.pump() if self.stream_source else 0

    # -- replay --------------------------------------------------------------------------------

    def replay_target(self) -> Any:
        """The archive, bus and ingest rule ARNs (the replay is scoped to the ingest rule)."""
        return replay_target(self.events, archive=self.resources.archive, rule=self.resources.rule)

    def replay(self, start: Any = None, end: Any = None, name: str | None = None) -> dict[str, Any]:
        """Replay the archive (default: everything archived so far) to the ingest rule, then
        drain. The emulator archives at once, so no ingestion lag is enforced here."""
        now = datetime.now(UTC)
        start = start or now - timedelta(days=1)  # before anything this runtime archived
        # nothing is archived after now, and the emulator archives at once: no lag to keep
        end = min(end or now, now) + timedelta(seconds=1)
        result = replay_archive(self.events, self.replay_target(), start, end, name=name)
        self.drain()
        return result

    # -- backfill ----------------------------------------------------------------------------

    def backfill(
        self,
        manifest_key: str | None = None,
        *,
        engine: str = BATCH_OPERATIONS,
        max_failures: int = 0,
        timeout_seconds: float = 600.0,
        bucket: str | None = None,
    ) -> dict[str, Any]:
        """Backfill from an S3 Inventory report (written now unless given), CONTRACT C13: an
        execution of the stack's backfill machine for ``engine`` (``maxFailures`` =
        ``max_failures``), its functions run in-process and, for ``batch-operations``, its job
        run by the emulator's S3 Control (:mod:`s3ingest.local.emulator.s3control_jobs`).

        Returns the execution's output (the counts; ``jobId`` and ``reportManifest`` for a job)
        plus ``"execution"`` (:meth:`~s3ingest.local.stack.executions.Execution.summary`), whatever
        its status.

        Raises
        ------
        ValueError
            For an unknown engine.
        TimeoutError
            When the execution has not ended within ``timeout_seconds``.
        """
        if engine not in BACKFILL_ENGINES:
            raise ValueError(f"engine must be one of {BACKFILL_ENGINES}, not {engine!r}")
        manifest_key = manifest_key or self.write_inventory(bucket)
        machine = (
            BACKFILL_DISTRIBUTED_MAP if engine == DISTRIBUTED_MAP else BACKFILL_BATCH_OPERATIONS
        )
        execution = self.backfill_execution(machine, manifest_key, max_failures, timeout_seconds)
        self.pump_changes()  # the functions wrote to the ledger outside drain()
        return {**(execution.output or {}), "execution": execution.summary()}

    def drive_backfill_job(
        self,
        manifest_key: str | None = None,
        between: Callable[[int], None] | None = None,
        chaos: Chaos | None = None,
    ) -> dict[str, Any]:
        """A Batch Operations job's tasks driven from this thread through the real backfill code
        path, without the state machine: for tests that act between tasks (``between(index)``
        runs before each) or kill workers inside them (``chaos.crash``: each killed task is a
        ``TemporaryFailure`` the job retries). Returns the job's report (``"execution": None``).
        """
        manifest_key = manifest_key or self.write_inventory()
        reconciler = self.reconciler()
        with self.crashing(chaos), self.function_environment():
            report = run_backfill(reconciler, self.service, manifest_key, between)
        self.pump_changes()  # the job wrote to the ledger outside drain()
        return {**report, "execution": None}

    def backfill_execution(
        self, machine: str, manifest_key: str, max_failures: int = 0, timeout_seconds: float = 600.0
    ) -> Execution:
        """One execution of backfill machine ``machine`` over ``manifest_key``, to its end."""
        return self.machines.run(
            machine,
            {"manifest": manifest_key, "maxFailures": max_failures},
            timeout_seconds,
        )

    # -- onboarding ------------------------------------------------------------------------

    def onboard_target(self, poll_seconds: float = 0.1) -> OnboardTarget:
        """This deployment as :func:`s3ingest.onboard.onboard` acts on it: its S3, the listing
        backfill machine run by :attr:`machines`, the inventory bucket holding the checkpoints,
        a listing reconciliation that drains its repairs, and the emulator's request counts."""

        def reconcile(bucket: str, on_rows: Callable[[str, int], None] | None) -> dict[str, Any]:
            return self.reconcile("listing", bucket=bucket, progress=on_rows).as_dict()

        def after_execution() -> None:
            self.machines.lambdas.quiesce()
            self.pump_changes()  # the functions wrote to the ledger outside drain()

        return OnboardTarget(
            stack=LOCAL_STACK,
            s3=self.s3,
            sfn=self.machines.sfn,
            machine_arn=self.machines.machine(BACKFILL_LISTING),
            checkpoint_bucket=self.resources.inventory_bucket,
            reconcile=reconcile,
            after_enable=lambda bucket: self.bucket(bucket).refresh_notification(),
            after_execution=after_execution,
            requests=self.emu.request_counts,
            poll_seconds=poll_seconds,
        )

    def onboard(
        self,
        bucket: str | None = None,
        *,
        confirm: Callable[[str, dict[str, Any]], bool] = lambda bucket, config: True,
        on_progress: OnProgress | None = None,
        between: Callable[[], None] | None = None,
    ) -> dict[str, Any]:
        """Onboard landing bucket ``bucket`` (the first when None) exactly as ``s3ingest
        onboard`` does on AWS (:func:`s3ingest.onboard.onboard`): EventBridge delivery on
        (keeping the bucket's other configurations), the listing backfill machine's execution
        followed to its end, then a listing reconciliation; returns its report.

        ``between`` runs at every progress poll while the backfill runs (live traffic in
        demos and tests: put objects, then :meth:`flush` and :meth:`drain`).
        """
        name = self.resources.landing(bucket).name
        target = self.onboard_target()

        def progress(phase: str, done: int, total: int | None, objects: int) -> None:
            if on_progress:
                on_progress(phase, done, total, objects)
            if between and phase == "backfill":
                between()

        with self.function_environment():
            report = onboard(target, name, confirm=confirm, on_progress=progress)
        self.drain()
        return report

    def backfill_listing(
        self, bucket: str | None = None, *, run: str | None = None, timeout_seconds: float = 600.0
    ) -> dict[str, Any]:
        """A listing backfill of landing bucket ``bucket`` (the first when None): an execution
        of the stack's listing backfill machine, input ``{"bucket", "run"}`` (``run`` default:
        a new run, so the whole bucket is listed again; give an earlier run's id to resume it).
        Returns its output plus ``"execution"``
        (:meth:`~s3ingest.local.stack.executions.Execution.summary`)."""
        name = self.resources.landing(bucket).name
        execution = self.machines.run(
            BACKFILL_LISTING,
            {"bucket": name, "run": run or f"listing-{uuid.uuid4().hex[:16]}"},
            timeout_seconds,
        )
        self.pump_changes()  # the functions wrote to the ledger outside drain()
        return {**(execution.output or {}), "execution": execution.summary()}

    def reprocess(
        self,
        processor: str,
        *,
        bucket: str | None = None,
        prefix: str = "",
        rate: float | None = None,
        dry_run: bool = False,
        remove: bool = False,
        segments: int = LOCAL_REPROCESS_SEGMENTS,
        concurrency: int | None = None,
        run: str | None = None,
        timeout_seconds: float = 600.0,
        between: Callable[[], None] | None = None,
    ) -> dict[str, Any]:
        """A reprocess run of ``processor`` over the ledger's rows (of ``bucket`` under
        ``prefix``; every bucket when None): an execution of the stack's reprocess machine
        (:mod:`s3ingest_cdk.constructs.checkpointed_run_state_machine`), input ``{"run",
        "processor", "bucket", "prefix", "rate", "dry_run", "remove", "segments",
        "concurrency"}`` (``run``
        default: a new run; give an earlier run's name, with the same request, to resume it).
        ``between`` runs while the execution runs, until it ends (live traffic in benchmarks
        and tests: put objects, then :meth:`flush` and :meth:`drain`).

        Returns
        -------
        dict
            The summary (:meth:`s3ingest_fn.services.reprocess.Reprocessor.summarize`: the
            request, ``version``, ``segments``, ``done``, ``counts``, ``requests``,
            ``estimated_cost_usd``) plus ``"execution"``
            (:meth:`~s3ingest.local.stack.executions.Execution.summary`); a failed execution has
            only ``"execution"`` (its ``error`` and ``cause``).
        """
        request: dict[str, Any] = {
            "run": run or f"{processor}-{uuid.uuid4().hex[:16]}",
            "processor": processor,
            "bucket": self.resources.landing(bucket).name if bucket else None,
            "prefix": prefix,
            "rate": rate,
            "dry_run": dry_run,
            "remove": remove,
            "segments": segments,
        }
        if concurrency is not None:
            request["concurrency"] = concurrency
        if between is None:
            execution = self.machines.run(REPROCESS, request, timeout_seconds)
        else:
            arn = self.machines.start(REPROCESS, request)
            while self.machines.running(arn):
                between()
            execution = self.machines.wait(arn, timeout_seconds)
        self.pump_changes()  # the segment functions wrote to the ledger outside drain()
        if remove and not dry_run and execution.status == "SUCCEEDED":
            self.recorder.forgot(processor)
        return {**(execution.output or {}), "execution": execution.summary()}

    def bucket_config(self) -> dict[str, Any]:
        """Per landing bucket, its notification and inventory configurations now
        (:func:`describe_bucket`): what onboarding left of other teams' entries (none of a
        bucket whose name another account took: the pipeline may not read it)."""
        return {
            name: describe_bucket(self.s3, name)
            for name in self.buckets
            if name not in self.oracles.foreign
        }

    # -- review (hold for review) --------------------------------------------------------------

    def held(self, bucket: str | None = None, prefix: str = "") -> list[dict[str, Any]]:
        """Every held change, of ``bucket`` (every landing bucket when None) under ``prefix``
        (a prefix needs a bucket), read as ``s3ingest held`` reads it
        (:func:`s3ingest.commands.review.matching`), sorted by bucket, key and processor."""
        names = self.service.effects.names if self.service.effects is not None else ()
        found = matching(self.ddb, self.resources.table, names, bucket, prefix)
        return [h.as_dict() for h in sorted(found, key=lambda h: (h.bucket, h.key, h.processor))]

    def review(
        self,
        key: str,
        decision: str,
        *,
        bucket: str | None = None,
        processor: str | None = None,
        change_id: str | None = None,
        actor: str = LOCAL_ACTOR,
    ) -> list[dict[str, Any]]:
        """Approve or reject ``key``'s held changes (:meth:`Reviewer.decide
        <s3ingest_fn.services.review.Reviewer.decide>`), then drain the ingest queue: an
        approved effect runs, as deployed, from the repair message the decision queued."""
        reviewer = wiring.reviewer(self.ledger, self.sqs, self.resources.queue_url)
        done = reviewer.decide(
            bucket or self.resources.bucket,
            key,
            decision,
            actor,
            processor=processor,
            change_id=change_id,
        )
        self.drain()
        return done

    # -- oracles -----------------------------------------------------------------------------

    def ledger_rows(self) -> list[LedgerRow]:
        """Every ledger row, sorted by key."""
        return self.oracles.ledger_rows()

    def bucket_objects(self, bucket: str | None = None) -> list[dict[str, Any]]:
        """Visible objects of landing bucket ``bucket`` (the first when None; see
        :meth:`Oracles.bucket_objects`)."""
        return self.oracles.bucket_objects(bucket)

    def dlq_messages(self) -> list[dict[str, Any]]:
        """Everything in the dead-letter queue (received without deleting)."""
        return self.oracles.dlq_messages()

    def dead_letters(self) -> list[dict[str, Any]]:
        """The dead-letter queue's messages as ``{"reason", "body"}``."""
        return self.oracles.dead_letters()

    def compare(self) -> Comparison:
        """Whether the ledger equals the bucket (CONTRACT C15, :meth:`Oracles.compare`)."""
        return self.oracles.compare()

    def check_effects(self) -> list[str]:
        """This run's effects against the ledger (CONTRACT C11, :meth:`Oracles.check_effects`)."""
        return self.oracles.check_effects(self.effects)

    def effects_not_current(self) -> list[str]:
        """Visible keys whose effect is not current for a configured processor at its version
        (:meth:`Oracles.effects_not_current`)."""
        return self.oracles.effects_not_current()

    def check_sidecars(self) -> list[str]:
        """The example processor's sidecars against the bucket (:meth:`Oracles.check_sidecars`)."""
        return self.oracles.check_sidecars()

    def effects_report(self) -> dict[str, Any]:
        """Effects and change events of this run with every problem found
        (:meth:`Oracles.effects_report`)."""
        return self.oracles.effects_report(self.effects, self.changes)
