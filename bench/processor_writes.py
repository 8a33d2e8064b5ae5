"""DynamoDB requests per applied change with N processors: s3ingest's effect protocol against
Powertools Idempotency around each of the same N processors, in one run (CONTRACT C5, C11).

One stream of EventBridge S3 events (:func:`bench.effects_cost.workload`: puts and delete markers
on many keys of a versioned bucket, each key's events swapped and redelivered, so the stream holds
applied changes, duplicates and stale events, each categorised before delivery) is delivered, in
the same order, for N = 1, 2, 3, 5 processors, to four designs on one in-process moto
(``mock_aws``), one delivery at a time:

* **ours** s3ingest: the ingest service as the deployed function builds it
  (:func:`s3ingest_fn.wiring.ingest_service`) given the N :class:`ProcessorSpec` s
  (:func:`ours`): the write that applies a change claims every processor it concerns; each
  processor's commit is one more write. Target per applied change: 1 + N writes, no read;
  a duplicate or a stale event: the one rejected conditional write. Processors in mode
  ``latest``.
* **ours-every** the same with the processors in mode ``every-change`` (each applied change's
  effect runs, in sequencer order per key).
* **powertools** the ledger decision without effects (one conditional write, the same service
  without processors), then, for an ``applied`` outcome, each of the same N processors wrapped by
  Powertools ``idempotent_function`` (``DynamoDBPersistenceLayer`` on a second table, key ``id``
  and TTL attribute ``expiration`` as the Powertools docs create it; ``event_key_jmespath="id"``:
  the change id; ``key_prefix`` the processor's name, so the N processors keep N records; the
  in-progress expiry from a registered Lambda context). Each wrapped processor costs a
  conditional PutItem (in progress) and an UpdateItem (completed): 1 + 2N writes per applied change.
* **powertools+dup** as powertools, but the processors also run for ``duplicate`` outcomes: the
  variant that does not lose an effect when the worker dies after the ledger write (the retried
  message is then a duplicate; ``python -m bench --only effects`` runs that crash). Each processor
  then pays a rejected PutItem per duplicate.

The processors are trivial (they record that they ran): the figures are the protocols' own.
Requests are counted per DynamoDB operation by botocore ``before-call`` / ``after-call`` hooks on
each design's client, per event category. Write request units are billed per write by the larger
of the item's sizes before and after it, 1 WRU per started KB, and a rejected conditional write
is billed too (Amazon DynamoDB Developer Guide, "DynamoDB read and write operations"); the bench
reads each written item's size before and after the write from moto's store, outside the API
(:func:`s3ingest_fn.adapters.dynamo_ledger.item_size`). moto's own ``ConsumedCapacity`` is a
constant 1 per write and is not used. Per ``applied`` event the figures are per applied change;
``all/applied`` divides every request of the run (duplicates and stale events included) by the
applied changes.

The emulator's memoised expression parsing (:mod:`s3ingest.local.emulator.fast_moto`, the same
answers and errors) is installed while the run lasts; counts are taken on the client and do not
depend on it. The processors of one change run concurrently (each commits on its own); each design's
requests are answered one at a time, as DynamoDB applies the writes to one item (see
:class:`Tally`).
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import boto3
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import dynamodb_backends

from bench.effects_cost import BUCKET, CATEGORIES, Delivery, workload
from bench.requests_per_event import READS, WRITES
from s3ingest.local.emulator import fast_moto
from s3ingest_fn import wiring
from s3ingest_fn.adapters.dynamo_ledger import item_size, write_units
from s3ingest_fn.core.effects import (
    CREATED,
    EVERY_CHANGE,
    LATEST,
    REMOVED,
    AppliedChange,
    PinnedContent,
    Processor,
    ProcessorSpec,
    change_id,
)
from s3ingest_fn.core.model import Kind

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from s3ingest_fn.core.decide import IngestService
    from s3ingest_fn.core.model import Change

REGION = "us-east-1"
TTL_SECONDS = 86_400
#: The processor counts of one run.
NS = (1, 2, 3, 5)
#: The designs, in print order.
OURS, OURS_EVERY = "ours", "ours-every"
POWERTOOLS, POWERTOOLS_DUP = "powertools", "powertools+dup"
DESIGNS = (OURS, OURS_EVERY, POWERTOOLS, POWERTOOLS_DUP)
#: Lambda remaining time the fake context reports (ms): the lease and in-progress expiry length.
REMAINING_MS = 60_000
#: The partition key of each table: the ledger's, and the one the Powertools docs create.
LEDGER_KEY, IDEMPOTENCY_KEY = "pk", "id"
COMMAND = "python -m bench --only processors"


@dataclass
class _Context:
    """The part of a Lambda context Powertools and the effect runner read."""

    remaining_ms: int = REMAINING_MS
    function_name: str = "bench-processors"
    aws_request_id: str = "bench"

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


@dataclass
class Tally:
    """What one design did for one N: requests per (category, operation), write units, runs."""

    design: str
    n: int
    category: str = ""
    events: Counter[str] = field(default_factory=Counter)
    calls: Counter[tuple[str, str]] = field(default_factory=Counter)
    rejected: Counter[str] = field(default_factory=Counter)
    wru: Counter[str] = field(default_factory=Counter)
    #: Processor runs per category, and per (processor, change id).
    runs: Counter[str] = field(default_factory=Counter)
    runs_per_change: Counter[tuple[str, str]] = field(default_factory=Counter)
    outcomes: Counter[tuple[str, str]] = field(default_factory=Counter)
    #: Items in the design's tables after the run (moto's store): ledger rows, idempotency records.
    ledger_items: int = 0
    idempotency_items: int = 0
    #: The largest item of each table after the run (bytes, DynamoDB's item size).
    ledger_bytes: int = 0
    idempotency_bytes: int = 0
    #: The largest item any write of the run billed (before or after it), bytes.
    peak_bytes: int = 0
    #: The processors of one change run concurrently, each committing on its own. The design's
    #: requests are answered one at a time (``_request``, held from ``before-call`` to
    #: ``after-call``): DynamoDB applies writes to one item one at a time, moto in-process does
    #: not lock (its UpdateItem copies the item while another thread changes it), and the sizes
    #: read before and after a write are then that write's. The counts are taken under
    #: ``_lock``; each thread's write in flight is its own (``_pending``).
    _request: threading.Lock = field(default_factory=threading.Lock)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _pending: threading.local = field(default_factory=threading.local)

    def attach(self, client: Any) -> None:
        """Count every DynamoDB request ``client`` makes (botocore event hooks)."""
        client.meta.events.register("before-parameter-build.dynamodb", self._params)
        client.meta.events.register("before-call.dynamodb", self._before)
        client.meta.events.register("after-call.dynamodb", self._after)
        client.meta.events.register("after-call-error.dynamodb", self._failed)

    def _params(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        self._pending.write = None
        if model.name not in ("PutItem", "UpdateItem", "DeleteItem"):
            return
        if "Key" in params:
            key = params["Key"]
        else:
            name = LEDGER_KEY if LEDGER_KEY in params["Item"] else IDEMPOTENCY_KEY
            key = {name: params["Item"][name]}
        new = item_size(params["Item"]) if "Item" in params else 0
        self._pending.write = (params["TableName"], key, new)

    def _size(self, table: str, key: dict[str, Any]) -> int:
        # Read from moto's store, not over the API: a GetItem costs more than the write measured
        item = dynamodb_backends[DEFAULT_ACCOUNT_ID][REGION].get_item(table, key)
        return item_size(item.to_json()["Attributes"]) if item is not None else 0

    def _before(self, model: Any, **_: Any) -> None:
        self._request.acquire()
        pending = getattr(self._pending, "write", None)
        if pending is not None:
            table, key, new = pending
            self._pending.write = (table, key, max(new, self._size(table, key)))
        with self._lock:
            self.calls[(self.category, model.name)] += 1

    def _after(self, model: Any, parsed: dict[str, Any], **_: Any) -> None:
        try:
            pending = getattr(self._pending, "write", None)
            self._pending.write = None
            units = 0
            if model.name in WRITES and pending is not None:
                table, key, before = pending
                size = max(before, self._size(table, key))
                units = write_units(size)
                self.peak_bytes = max(self.peak_bytes, size)
        finally:
            self._request.release()
        with self._lock:
            if parsed.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                self.rejected[self.category] += 1
            self.wru[self.category] += units

    def _failed(self, **_: Any) -> None:
        """No answer (botocore's ``after-call-error``): the request ends without ``after-call``."""
        self._pending.write = None
        self._request.release()

    def processor(self, name: str) -> Processor:
        """A trivial processor named ``name``: it records that it ran."""

        def process(change: AppliedChange, content: PinnedContent | None) -> None:
            with self._lock:
                self.runs[self.category] += 1
                self.runs_per_change[(name, change.change_id)] += 1

        return process

    def count(self, category: str, ops: set[str] | None = None) -> int:
        return sum(
            c
            for (cat, op), c in self.calls.items()
            if cat == category and (ops is None or op in ops)
        )

    def per_event(self, category: str, ops: set[str] | None = None) -> float:
        n = self.events[category]
        return self.count(category, ops) / n if n else 0.0

    def ops(self, category: str) -> dict[str, int]:
        """Requests of ``category`` by operation."""
        return dict(sorted((op, c) for (cat, op), c in self.calls.items() if cat == category))

    def per_applied(self, ops: set[str] | None = None) -> float:
        """Every request of the run (all categories) per applied change."""
        total = sum(c for (_, op), c in self.calls.items() if ops is None or op in ops)
        return total / self.events["applied"] if self.events["applied"] else 0.0


@contextlib.contextmanager
def _fast_moto() -> Iterator[None]:
    """The emulator's memoised expression parsing while the run lasts."""
    was = fast_moto.installed()
    fast_moto.install()
    try:
        yield
    finally:
        if not was:
            fast_moto.uninstall()


def _client(service: str) -> Any:
    return boto3.client(
        service,  # type: ignore[call-overload]
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def _create_table(ddb: Any, name: str, key: str, ttl_attribute: str) -> None:
    ddb.create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
    )
    ddb.update_time_to_live(
        TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl_attribute}
    )


def ours(
    *, s3: Any, dynamodb: Any, table: str, specs: Sequence[ProcessorSpec], context: Any
) -> IngestService:
    """s3ingest's side: the ingest service over ``table`` with the processors ``specs``, built by
    :func:`s3ingest_fn.wiring.ingest_service` as the deployed function builds it."""
    service = wiring.ingest_service(
        s3=s3,
        dynamodb=dynamodb,
        table=table,
        tombstone_ttl_seconds=TTL_SECONDS,
        processor=list(specs),
    )
    service.bind_context(context)
    return service


def applied_change(change: Change, processor: str) -> AppliedChange:
    """The change as a processor sees it, for the Powertools designs (no fencing token)."""
    present = change.kind is Kind.CREATED
    version, etag = (change.version_id, change.etag) if present else (None, None)
    return AppliedChange(
        bucket=change.bucket,
        key=change.key,
        kind=CREATED if present else REMOVED,
        sequencer=change.raw_sequencer,
        version_id=version,
        etag=etag,
        size=change.size if present else None,
        source="live",
        event_name=change.event_name,
        change_id=change_id(change.bucket, change.key, change.sequencer, present, version, etag),
        token=0,
        processor=processor,
    )


class PowertoolsDesign:
    """The ledger decision (one conditional write), then each concerned processor wrapped by
    Powertools ``idempotent_function``, keyed on the change id, for the outcomes ``run_on``."""

    def __init__(
        self,
        *,
        s3: Any,
        dynamodb: Any,
        table: str,
        idempotency_table: str,
        specs: Sequence[ProcessorSpec],
        context: _Context,
        run_on: frozenset[str],
    ) -> None:
        self.service = wiring.ingest_service(
            s3=s3, dynamodb=dynamodb, table=table, tombstone_ttl_seconds=TTL_SECONDS
        )
        self.run_on = run_on
        layer = DynamoDBPersistenceLayer(table_name=idempotency_table, boto3_client=dynamodb)
        config = IdempotencyConfig(
            event_key_jmespath="id",
            raise_on_no_idempotency_key=True,
            expires_after_seconds=3600,
        )
        config.register_lambda_context(cast("LambdaContext", context))
        self.wrapped = [(spec, self._wrap(spec, layer, config)) for spec in specs]

    @staticmethod
    def _wrap(
        spec: ProcessorSpec, layer: DynamoDBPersistenceLayer, config: IdempotencyConfig
    ) -> Callable[..., None]:
        @idempotent_function(
            data_keyword_argument="change",
            persistence_store=layer,
            config=config,
            key_prefix=spec.name,
        )
        def run(applied: AppliedChange, change: dict[str, Any]) -> None:
            spec.call(applied, None)

        return cast("Callable[..., None]", run)

    def deliver(self, change: Change) -> str:
        outcome = self.service.handle(change).outcome.value
        if outcome in self.run_on:
            kind = CREATED if change.kind is Kind.CREATED else REMOVED
            for spec, run in self.wrapped:
                if spec.concerns(change.key, kind):
                    applied = applied_change(change, spec.name)
                    run(applied, change=applied.as_dict())
        return outcome


def specs_of(tally: Tally, mode: str = LATEST) -> list[ProcessorSpec]:
    """``tally.n`` trivial processors on every key, in ``mode``."""
    return [
        ProcessorSpec(f"p{i}", tally.processor(f"p{i}"), mode=mode) for i in range(1, tally.n + 1)
    ]


@dataclass
class Report:
    """What :func:`run` measured: per N, per design, its :class:`Tally`."""

    deliveries: list[Delivery]
    tallies: dict[int, dict[str, Tally]]


def run(events: int = 200, seed: int = 11, ns: Sequence[int] = NS) -> Report:
    """Deliver about ``events`` deliveries to each design for each N in ``ns``; print the table
    and return the figures."""
    tallies: dict[int, dict[str, Tally]] = {}
    with mock_aws(), _fast_moto():
        s3, admin = _client("s3"), _client("dynamodb")
        s3.create_bucket(Bucket=BUCKET)
        s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        deliveries = workload(s3, events, seed)
        context = _Context()
        for n in ns:
            tallies[n] = {}
            for design in DESIGNS:
                ledger, idem = f"ledger-{design}-{n}", f"idem-{design}-{n}"
                _create_table(admin, ledger, LEDGER_KEY, "expires_at")
                _create_table(admin, idem, IDEMPOTENCY_KEY, "expiration")
                ddb = _client("dynamodb")
                tally = Tally(design, n)
                specs = specs_of(tally, EVERY_CHANGE if design == OURS_EVERY else LATEST)
                deliver: Callable[[Change], str]
                if design in (OURS, OURS_EVERY):
                    service = ours(s3=s3, dynamodb=ddb, table=ledger, specs=specs, context=context)
                    deliver = _outcome_of(service)
                else:
                    deliver = PowertoolsDesign(
                        s3=s3,
                        dynamodb=ddb,
                        table=ledger,
                        idempotency_table=idem,
                        specs=specs,
                        context=context,
                        run_on=frozenset({"applied"})
                        if design == POWERTOOLS
                        else frozenset({"applied", "duplicate"}),
                    ).deliver
                tally.attach(ddb)
                for d in deliveries:
                    tally.category = d.category
                    tally.events[d.category] += 1
                    tally.outcomes[(d.category, deliver(d.change))] += 1
                tally.ledger_items, tally.ledger_bytes = _items(ledger)
                tally.idempotency_items, tally.idempotency_bytes = _items(idem)
                tallies[n][design] = tally
    report = Report(deliveries, tallies)
    _print(report)
    return report


def _items(table: str) -> tuple[int, int]:
    """Items in ``table`` and the largest one's size (bytes)."""
    items = dynamodb_backends[DEFAULT_ACCOUNT_ID][REGION].get_table(table).all_items()
    return len(items), max((item_size(i.to_json()["Attributes"]) for i in items), default=0)


def _outcome_of(service: IngestService) -> Callable[[Change], str]:
    return lambda change: service.handle(change).outcome.value


def _print(report: Report) -> None:
    mix = Counter(d.category for d in report.deliveries)
    keys = len({d.change.key for d in report.deliveries})
    print(
        f"   {len(report.deliveries)} deliveries over {keys} keys (versioned bucket, puts and "
        "delete markers): " + ", ".join(f"{c} {mix[c]}" for c in CATEGORIES)
    )
    print(
        "   per event of each category: DynamoDB writes / reads / write request units "
        "(WRU, by item size); 'all/applied': every request of the run per applied change"
    )
    print(
        f"   {'N':>2} {'design':<15} {'applied w/r/WRU':>17} {'duplicate w/r/WRU':>17} "
        f"{'stale w/r/WRU':>17} {'all/applied w/r/WRU':>20} {'runs/applied':>12}  "
        "applied: calls"
    )
    for n, designs in report.tallies.items():
        for design, t in designs.items():
            cells = []
            for c in CATEGORIES:
                k = t.events[c] or 1
                cells.append(
                    f"{t.per_event(c, WRITES):5.2f}/{t.per_event(c, READS):4.2f}/"
                    f"{t.wru[c] / k:5.2f}"
                )
            applied = t.events["applied"] or 1
            total = (
                f"{t.per_applied(WRITES):5.2f}/{t.per_applied(READS):4.2f}/"
                f"{sum(t.wru.values()) / applied:5.2f}"
            )
            print(
                f"   {n:>2} {design:<15} {cells[0]:>17} {cells[1]:>17} {cells[2]:>17} "
                f"{total:>20} {t.runs['applied'] / applied:12.2f}  {t.ops('applied')}"
            )
    print("   target (ours): applied 1 + N writes, 0 reads; duplicate and stale 1 write, 0 reads")
    print("   ratios powertools/ours: per applied change (writes, WRU); the whole run's writes")
    for n, designs in report.tallies.items():
        base, dup = designs[POWERTOOLS], designs[POWERTOOLS_DUP]
        for name in (OURS, OURS_EVERY):
            ours_t = designs[name]
            w, r = ours_t.per_event("applied", WRITES), ours_t.per_event("applied", READS)
            met = (
                math.isclose(w, 1 + n)
                and r == 0
                and all(
                    math.isclose(ours_t.per_event(c, WRITES), 1) and ours_t.per_event(c, READS) == 0
                    for c in ("duplicate", "stale")
                )
            )
            print(
                f"     N={n} {name:<10} {w:.3f} writes {r:.3f} reads per applied change "
                f"({'met' if met else 'NOT met'}); powertools/{name}: writes "
                f"{base.per_event('applied', WRITES) / w:.3f}, WRU "
                f"{base.wru['applied'] / max(1, ours_t.wru['applied']):.3f}; whole run: "
                f"powertools {base.per_applied(WRITES) / ours_t.per_applied(WRITES):.3f}, "
                f"powertools+dup {dup.per_applied(WRITES) / ours_t.per_applied(WRITES):.3f}"
            )
    print("   effects (every design): runs per applied change = N; per duplicate or stale event:")
    for n, designs in report.tallies.items():
        for design, t in designs.items():
            again = sum(1 for k in t.runs_per_change.values() if k > 1)
            print(
                f"     N={n} {design:<15} runs on duplicates {t.runs['duplicate']:4d}, on stale "
                f"{t.runs['stale']:4d}; (processor, change) pairs run more than once {again}; "
                f"items at the end (largest): ledger {t.ledger_items} ({t.ledger_bytes} B), "
                f"idempotency {t.idempotency_items} ({t.idempotency_bytes} B); largest item "
                f"written {t.peak_bytes} B"
            )
    print(f"   command: {COMMAND}")
