"""DynamoDB requests per event with an effect hook: s3ingest's claim/commit protocol against
Powertools Idempotency around the same hook, in one run (CONTRACT C5, C8, C11).

One stream of EventBridge S3 events (:class:`~s3ingest.local.emulator.s3faithful.FaithfulS3` on a
versioned bucket, parsed by :func:`s3ingest_fn.core.events.parse_body`) is delivered, in the same
order, to four designs on one in-process moto (``mock_aws``), single-threaded:

* **A** s3ingest: ``IngestService`` with an ``EffectRunner``; the claim rides on the applying
  conditional write and a second write commits (:mod:`s3ingest_fn.core.effects`).
* **B** the ledger decision without effects (one conditional write), then, for ``applied`` only,
  the hook wrapped by Powertools ``idempotent_function`` (``DynamoDBPersistenceLayer`` on a
  second table, key ``id``, TTL attribute ``expiration``, in-progress expiry from a registered
  Lambda context) keyed by ``[bucket, key, sequencer]``.
* **B+dup** as B, but the hook also runs for ``duplicate`` outcomes: the variant that does not lose
  the effect when the worker dies between the ledger write and the hook (the retry is a
  duplicate), which is what C11 asks; Powertools deduplicates it.
* **N** the naive design most teams write: Powertools idempotency around the hook, no ordering
  ledger; every event goes through ``idempotent_function``.

Every event's category is known before delivery (per key: newer than every sequencer delivered
so far = applied, equal to the newest = duplicate, older = stale; CONTRACT C2), so requests are
counted per category (botocore ``before-call`` / ``after-call`` hooks on each design's DynamoDB
client). The hook is small and real: it reads the change's bytes pinned by version (CONTRACT C8),
hashes them and records ``(sequencer, sha256)`` per key, as a downstream store would; for removes it
drops the key. Correctness figures: hook runs of an older change after a newer one of the same key
ran, and keys whose final hook output is not the newest delivered change.

Targets (reported, not asserted): A applied 2 writes and 0 reads per event; A duplicate and stale 1
write and 0 reads. Write request units assume on-demand, 1 WRU per write of an item up to 1 KB (a
rejected conditional write is billed too); item sizes are estimated from the tables at the end.

A small crash sub-run follows: one put per key, the first delivery dies as the hook starts (no
release, no commit), and the retry of the same event arrives after the lease (A) or the in-progress
expiry (Powertools) has passed.

moto spends about 20 ms of CPU on one ledger UpdateItem (it parses the ~30-action update
expression twice and runs validation passes that are quadratic in the number of actions), so the
run installs the emulator's moto patches (:mod:`s3ingest.local.emulator.fast_moto`: memoised
parsing, the same answers and errors) while it runs (:func:`_fast_moto`). Counts are taken on the
client and do not depend on it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast

import boto3
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from moto import mock_aws

from bench.requests_per_event import READS, WRITES
from s3ingest.local.emulator import fast_moto
from s3ingest.local.emulator.s3faithful import FaithfulS3, SequencerClock
from s3ingest_fn.adapters.dynamo_ledger import DynamoLedger
from s3ingest_fn.adapters.s3_objects import S3ContentReader, S3Objects
from s3ingest_fn.core import sequencer
from s3ingest_fn.core.decide import IngestService
from s3ingest_fn.core.effects import AppliedChange, EffectRunner, PinnedContent, change_id
from s3ingest_fn.core.events import parse_body
from s3ingest_fn.core.model import Kind

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from s3ingest_fn.core.model import Change

BUCKET = "bench-landing"
REGION = "us-east-1"
TTL_SECONDS = 86_400
CATEGORIES = ("applied", "duplicate", "stale")
#: Per key: 1..MAX_OPS S3 writes; the last one (of two or more) is a delete marker this often.
MAX_OPS, DELETE_SHARE = 4, 0.15
#: Per key schedule: each adjacent pair of deliveries is swapped this often (the newer arrives
#: first: the older becomes stale), and each delivery is redelivered right after this often.
SWAP, REDELIVER = 0.35, 0.25
#: Lambda remaining time the fake context reports (ms): the lease and in-progress expiry length.
REMAINING_MS = 60_000
#: Keys in the crash sub-run (one put each).
CRASH_KEYS = 20
#: The Powertools in-progress expiry is computed from the real clock: the crash sub-run's
#: Powertools invocations report this little time left, then the run sleeps past it.
CRASH_REMAINING_MS = 150


class _Crash(BaseException):
    """The worker dies (a timeout or an OOM kill): no ``except Exception`` cleanup runs."""


@dataclass
class _Context:
    """The part of a Lambda context Powertools and ``EffectRunner`` read."""

    remaining_ms: int = REMAINING_MS
    function_name: str = "bench-effects"
    aws_request_id: str = "bench"

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


@dataclass(frozen=True)
class Delivery:
    """One delivered event and its category, known before delivery."""

    change: Change
    category: str


@dataclass
class Tally:
    """What one design did, per event category."""

    label: str
    category: str = ""
    events: Counter[str] = field(default_factory=Counter)
    calls: Counter[tuple[str, str]] = field(default_factory=Counter)
    rejected: Counter[str] = field(default_factory=Counter)
    hook_runs: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[tuple[str, str]] = field(default_factory=Counter)
    #: Hook runs of a change older than one of the same key whose hook already ran.
    older_after_newer: int = 0
    #: Per key, what the hook's downstream store holds: (normalised sequencer, sha256 or None).
    outputs: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    highest: dict[str, str] = field(default_factory=dict)
    runs_per_change: Counter[tuple[str, str]] = field(default_factory=Counter)
    crash_next: bool = False

    def attach(self, client: Any) -> None:
        client.meta.events.register("before-call.dynamodb", self._before)
        client.meta.events.register("after-call.dynamodb", self._after)

    def _before(self, model: Any, **_: Any) -> None:
        self.calls[(self.category, model.name)] += 1

    def _after(self, parsed: dict[str, Any], **_: Any) -> None:
        if parsed.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
            self.rejected[self.category] += 1

    def hook(self, change: AppliedChange, content: PinnedContent | None) -> None:
        """The effect: hash the change's pinned bytes and record them for its key."""
        if self.crash_next:
            self.crash_next = False
            raise _Crash(change.key)
        digest = hashlib.sha256(content.read()).hexdigest() if content is not None else None
        seq = sequencer.normalize(change.sequencer) or ""
        self.hook_runs[self.category] += 1
        self.runs_per_change[(change.key, seq)] += 1
        if seq < self.highest.get(change.key, ""):
            self.older_after_newer += 1
        else:
            self.highest[change.key] = seq
        if digest is None:
            self.outputs.pop(change.key, None)
        else:
            self.outputs[change.key] = (seq, digest)

    def per_event(self, category: str, ops: set[str] | None = None) -> float:
        n = self.events[category]
        total = sum(
            c
            for (cat, op), c in self.calls.items()
            if cat == category and (ops is None or op in ops)
        )
        return total / n if n else 0.0

    def ops(self, category: str) -> dict[str, int]:
        return dict(sorted((op, c) for (cat, op), c in self.calls.items() if cat == category))


@contextlib.contextmanager
def _fast_moto() -> Iterator[None]:
    """Speed up moto's expression handling for the duration of the run (see the module
    docstring): :func:`s3ingest.local.emulator.fast_moto.install`, restored afterwards when it was
    not in force before."""
    was = fast_moto.installed()
    fast_moto.install()
    try:
        yield
    finally:
        if not was:
            fast_moto.uninstall()


def _client(service: Literal["dynamodb", "s3"]) -> Any:
    return boto3.client(
        service, region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing"
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


def _key_schedule(events: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
    order = list(events)
    for i in range(len(order) - 1):
        if rng.random() < SWAP:
            order[i], order[i + 1] = order[i + 1], order[i]
    out: list[dict[str, Any]] = []
    for event in order:
        out.append(event)
        if rng.random() < REDELIVER:
            out.append(event)
    return out


def workload(s3: Any, events: int, seed: int) -> list[Delivery]:
    """S3 writes on the versioned landing bucket, then about ``events`` deliveries of their
    events, keys interleaved at random, each key's events swapped and redelivered; categorised
    before delivery."""
    rng = random.Random(seed)
    faithful = FaithfulS3(s3, BUCKET, "Enabled", SequencerClock(seed))
    per_key: list[list[dict[str, Any]]] = []
    total = 0
    while total < events:
        i = len(per_key)
        key = f"data/{i:05d}/file {i}+x.csv"
        ops = rng.randint(1, MAX_OPS)
        for j in range(ops):
            if j == ops - 1 and j > 0 and rng.random() < DELETE_SHARE:
                faithful.delete(key)
            else:
                faithful.put(key, f"{key} v{j} {rng.random()}\n")
        schedule = _key_schedule(faithful.take_pending(), rng)
        per_key.append(schedule)
        total += len(schedule)
    slots = [k for k, schedule in enumerate(per_key) for _ in schedule]
    rng.shuffle(slots)
    cursor = [0] * len(per_key)
    newest: dict[str, str] = {}
    out: list[Delivery] = []
    for k in slots:
        event = per_key[k][cursor[k]]
        cursor[k] += 1
        (change,) = parse_body(json.dumps(event)).changes
        seq, top = change.sequencer or "", newest.get(change.key, "")
        category = "applied" if seq > top else "duplicate" if seq == top else "stale"
        newest[change.key] = max(seq, top)
        out.append(Delivery(change, category))
    return out


def _applied_change(change: Change) -> AppliedChange:
    """The change as the hook sees it, for the Powertools designs (no fencing token)."""
    present = change.kind is Kind.CREATED
    version, etag = (change.version_id, change.etag) if present else (None, None)
    return AppliedChange(
        bucket=change.bucket,
        key=change.key,
        kind="created" if present else "removed",
        sequencer=change.raw_sequencer,
        version_id=version,
        etag=etag,
        size=change.size if present else None,
        source="live",
        event_name=change.event_name,
        change_id=change_id(change.bucket, change.key, change.sequencer, present, version, etag),
        token=0,
    )


class S3ingestDesign:
    """Design A: ``IngestService`` + ``EffectRunner`` (claim in the applying write, commit)."""

    def __init__(
        self,
        label: str,
        s3: Any,
        table: str,
        context: _Context,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        ddb = _client("dynamodb")
        self.tally = Tally(label)
        self.tally.attach(ddb)
        self.service = IngestService(
            ledger=DynamoLedger(ddb, table, TTL_SECONDS),
            bucket=S3Objects(s3),
            effects=EffectRunner(self.tally.hook, S3ContentReader(s3), clock_ms=clock_ms),
        )
        self.service.bind_context(context)

    def deliver(self, change: Change) -> str:
        return self.service.handle(change).outcome.value


class PowertoolsDesign:
    """Designs B, B+dup and N: Powertools ``idempotent_function`` around the same hook, after the
    ledger decision (``table`` set) or alone (``table`` None)."""

    def __init__(
        self,
        label: str,
        s3: Any,
        table: str | None,
        idempotency_table: str,
        context: _Context,
        hook_on: frozenset[str],
    ) -> None:
        ddb = _client("dynamodb")
        self.tally = Tally(label)
        self.tally.attach(ddb)
        self.service = (
            IngestService(ledger=DynamoLedger(ddb, table, TTL_SECONDS), bucket=S3Objects(s3))
            if table
            else None
        )
        self.hook_on = hook_on
        layer = DynamoDBPersistenceLayer(table_name=idempotency_table, boto3_client=ddb)
        config = IdempotencyConfig(
            event_key_jmespath="[bucket, key, sequencer]",
            raise_on_no_idempotency_key=True,
            expires_after_seconds=3600,
        )
        config.register_lambda_context(cast("LambdaContext", context))
        tally = self.tally

        @idempotent_function(data_keyword_argument="change", persistence_store=layer, config=config)
        def effect(change: dict[str, Any]) -> None:
            applied = AppliedChange(
                bucket=change["bucket"],
                key=change["key"],
                kind=change["kind"],
                sequencer=change["sequencer"],
                version_id=change["versionId"],
                etag=change["etag"],
                size=change["size"],
                source=change["source"],
                event_name=change["eventName"],
                change_id=change["id"],
                token=change["token"],
            )
            content = (
                PinnedContent(S3ContentReader(s3), applied) if applied.kind == "created" else None
            )
            tally.hook(applied, content)

        self._effect = effect

    def deliver(self, change: Change) -> str:
        if self.service is None:
            outcome, run = "no-ledger", True
        else:
            outcome = self.service.handle(change).outcome.value
            run = outcome in self.hook_on
        if run:
            self._effect(change=_applied_change(change).as_dict())
        return outcome


def _item_bytes(item: dict[str, Any]) -> int:
    """DynamoDB's item size: attribute names plus values (Developer Guide, "Item sizes")."""
    return sum(len(name.encode()) + _value_bytes(av) for name, av in item.items())


def _value_bytes(av: dict[str, Any]) -> int:
    ((typ, val),) = av.items()
    if typ == "S":
        return len(val.encode())
    if typ == "N":
        digits = len(val.lstrip("-").replace(".", "").strip("0")) or 1
        return (digits + 1) // 2 + 1
    if typ in ("BOOL", "NULL"):
        return 1
    if typ == "M":
        return 3 + sum(len(k.encode()) + _value_bytes(v) + 1 for k, v in val.items())
    if typ == "L":
        return 3 + sum(_value_bytes(v) + 1 for v in val)
    return len(val)


def _max_item_bytes(ddb: Any, tables: list[str]) -> int:
    biggest = 0
    for table in tables:
        for page in ddb.get_paginator("scan").paginate(TableName=table):
            for item in page["Items"]:
                biggest = max(biggest, _item_bytes(item))
    return biggest


@dataclass
class Report:
    """What :func:`run` measured (the unit smoke test reads it)."""

    deliveries: list[Delivery]
    tallies: dict[str, Tally]
    wrong_keys: dict[str, int]
    #: Per design, the largest item it writes (bytes, estimated from the final items).
    item_bytes: dict[str, int]
    crash: dict[str, dict[str, float]] = field(default_factory=dict)


def _wrong_keys(tally: Tally, deliveries: list[Delivery]) -> int:
    """Keys whose final hook output is not the newest delivered change of the key."""
    newest: dict[str, Delivery] = {}
    for d in deliveries:
        top = newest.get(d.change.key)
        if top is None or (d.change.sequencer or "") > (top.change.sequencer or ""):
            newest[d.change.key] = d
    wrong = 0
    for key, d in newest.items():
        out = tally.outputs.get(key)
        if d.change.kind is Kind.CREATED:
            wrong += out is None or out[0] != d.change.sequencer
        else:
            wrong += out is not None
    return wrong


def _crash_run(s3: Any, seed: int, keys: int) -> dict[str, dict[str, float]]:
    """One put per key; the first delivery dies as the hook starts, the retry comes after the
    lease / in-progress expiry. Returns per design: completed effects, DynamoDB writes per key."""
    offset = {"ms": 0}
    faithful = FaithfulS3(s3, BUCKET, "Enabled", SequencerClock(seed + 1))
    for i in range(keys):
        faithful.put(f"crash/{i:03d}.csv", f"crash {i}\n")
    changes = [parse_body(json.dumps(e)).changes[0] for e in faithful.take_pending()]
    deliveries = [Delivery(c, "applied") for c in changes]
    short = _Context(remaining_ms=CRASH_REMAINING_MS)
    designs: dict[str, S3ingestDesign | PowertoolsDesign] = {
        "A": S3ingestDesign(
            "A",
            s3,
            "crash-ledger-a",
            _Context(),
            clock_ms=lambda: int(time.time() * 1000) + offset["ms"],
        ),
        "B": PowertoolsDesign(
            "B", s3, "crash-ledger-b", "crash-idem-b", short, frozenset({"applied"})
        ),
        "B+dup": PowertoolsDesign(
            "B+dup",
            s3,
            "crash-ledger-b2",
            "crash-idem-b2",
            short,
            frozenset({"applied", "duplicate"}),
        ),
        "N": PowertoolsDesign("N", s3, None, "crash-idem-n", short, frozenset()),
    }
    for design in designs.values():
        design.tally.category = "crashed"
        for d in deliveries:
            design.tally.crash_next = True
            try:
                design.deliver(d.change)
            except _Crash:
                pass
            design.tally.crash_next = False
    offset["ms"] = REMAINING_MS + 10_000  # A's lease has expired
    time.sleep(CRASH_REMAINING_MS / 1000 + 0.05)  # Powertools' in-progress expiry has passed
    out: dict[str, dict[str, float]] = {}
    for label, design in designs.items():
        design.tally.category = "retry"
        for d in deliveries:
            design.deliver(d.change)
        t = design.tally
        writes = sum(c for (_, op), c in t.calls.items() if op in WRITES)
        reads = sum(c for (_, op), c in t.calls.items() if op in READS)
        out[label] = {
            "completed": len(t.outputs),
            "keys": len(deliveries),
            "writes": writes / len(deliveries),
            "reads": reads / len(deliveries),
        }
    return out


def run(events: int = 500, seed: int = 11, crash_keys: int = CRASH_KEYS) -> Report:
    """Run the four designs on one stream of about ``events`` deliveries, then the crash sub-run
    on ``crash_keys`` keys (0: none); print the figures and return them."""
    with mock_aws(), _fast_moto():
        s3, admin = _client("s3"), _client("dynamodb")
        for bucket in (BUCKET,):
            s3.create_bucket(Bucket=bucket)
            s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        for name in (
            "ledger-a",
            "ledger-b",
            "ledger-b2",
            "crash-ledger-a",
            "crash-ledger-b",
            "crash-ledger-b2",
        ):
            _create_table(admin, name, "pk", "expires_at")
        for name in (
            "idem-b",
            "idem-b2",
            "idem-n",
            "crash-idem-b",
            "crash-idem-b2",
            "crash-idem-n",
        ):
            _create_table(admin, name, "id", "expiration")  # as the Powertools docs create it
        deliveries = workload(s3, events, seed)
        context = _Context()
        designs: dict[str, S3ingestDesign | PowertoolsDesign] = {
            "A": S3ingestDesign("A  s3ingest claim+commit", s3, "ledger-a", context),
            "B": PowertoolsDesign(
                "B  ledger + Powertools(hook) on applied",
                s3,
                "ledger-b",
                "idem-b",
                context,
                frozenset({"applied"}),
            ),
            "B+dup": PowertoolsDesign(
                "B+dup  ledger + Powertools(hook) on applied|duplicate",
                s3,
                "ledger-b2",
                "idem-b2",
                context,
                frozenset({"applied", "duplicate"}),
            ),
            "N": PowertoolsDesign(
                "N  Powertools(hook) only, no ledger", s3, None, "idem-n", context, frozenset()
            ),
        }
        for design in designs.values():
            t = design.tally
            for d in deliveries:
                t.category = d.category
                t.events[d.category] += 1
                t.outcomes[(d.category, design.deliver(d.change))] += 1
        tallies = {name: d.tally for name, d in designs.items()}
        item_bytes = {
            "A": _max_item_bytes(admin, ["ledger-a"]),
            "B": _max_item_bytes(admin, ["ledger-b", "idem-b"]),
            "B+dup": _max_item_bytes(admin, ["ledger-b2", "idem-b2"]),
            "N": _max_item_bytes(admin, ["idem-n"]),
        }
        crash_figures = _crash_run(s3, seed, crash_keys) if crash_keys else {}
    report = Report(
        deliveries=deliveries,
        tallies=tallies,
        wrong_keys={n: _wrong_keys(t, deliveries) for n, t in tallies.items()},
        item_bytes=item_bytes,
        crash=crash_figures,
    )
    _print(report)
    return report


def _print(report: Report) -> None:
    mix = Counter(d.category for d in report.deliveries)
    keys = len({d.change.key for d in report.deliveries})
    print(
        f"   {len(report.deliveries)} deliveries over {keys} keys (versioned bucket, puts and "
        f"delete markers): " + ", ".join(f"{c} {mix[c]}" for c in CATEGORIES)
    )
    print(
        f"     {'category':<9} {'writes/ev':>9} {'reads/ev':>8} {'req/ev':>7} "
        f"{'rejected/ev':>11} {'hook runs':>9}  DynamoDB calls; outcomes"
    )
    for t in report.tallies.values():
        print(f"   {t.label}")
        for c in CATEGORIES:
            n = t.events[c] or 1
            outcomes = {o: k for (cat, o), k in sorted(t.outcomes.items()) if cat == c}
            print(
                f"     {c:<9} {t.per_event(c, WRITES):9.3f} {t.per_event(c, READS):8.3f} "
                f"{t.per_event(c):7.3f} {t.rejected[c] / n:11.3f} {t.hook_runs[c]:9d}  "
                f"{json.dumps(t.ops(c))}; {json.dumps(outcomes)}"
            )
        total = sum(t.events.values())
        writes = sum(c for (_, op), c in t.calls.items() if op in WRITES)
        print(
            f"     {'all':<9} {writes / total:9.3f} "
            f"{sum(c for (_, op), c in t.calls.items() if op in READS) / total:8.3f} "
            f"{sum(t.calls.values()) / total:7.3f} {sum(t.rejected.values()) / total:11.3f} "
            f"{sum(t.hook_runs.values()):9d}"
        )
    a = report.tallies["A"]
    print("   targets (A): applied 2 writes 0 reads, duplicate and stale 1 write 0 reads")
    for c, want in (("applied", 2), ("duplicate", 1), ("stale", 1)):
        w, r = a.per_event(c, WRITES), a.per_event(c, READS)
        print(
            f"     A {c:<9} {w:.3f} writes {r:.3f} reads  (target {want} / 0: "
            f"{'met' if math.isclose(w, want) and r == 0 else 'NOT met'})"
        )
    base = a.per_event("applied")
    all_a = sum(a.calls.values()) / sum(a.events.values())
    for name, t in report.tallies.items():
        if name == "A":
            continue
        print(
            f"   ratio {name}/A requests per applied event "
            f"{t.per_event('applied') / base:6.3f}; per event, all categories "
            f"{sum(t.calls.values()) / sum(t.events.values()) / all_a:6.3f}"
        )
    print(
        "   write request units (on-demand: 1 WRU per write of an item up to 1 KB; a rejected "
        "conditional write is billed too):"
    )
    for name, t in report.tallies.items():
        unit = max(1, math.ceil(report.item_bytes[name] / 1024))
        writes = sum(c for (_, op), c in t.calls.items() if op in WRITES)
        total = sum(t.events.values())
        print(
            f"     {name:<6} largest item {report.item_bytes[name]:4d} B -> {unit} WRU/write; "
            f"{writes * unit / total:6.3f} WRU/event, "
            f"{writes * unit / total * 1e6:,.0f} WRU per million events"
        )
    print("   correctness (same events, same hook):")
    for name, t in report.tallies.items():
        again = sum(1 for k in t.runs_per_change.values() if k > 1)
        print(
            f"     {name:<6} hook runs {sum(t.hook_runs.values()):5d}, on stale events "
            f"{t.hook_runs['stale']:4d}, older change after a newer one "
            f"{t.older_after_newer:4d}, changes run twice {again:3d}, keys whose final "
            f"output is not the newest change {report.wrong_keys[name]:4d}"
        )
    if report.crash:
        crash_keys = next(iter(report.crash.values()))["keys"]
        print(
            f"   crash sub-run: {crash_keys:.0f} keys, one put each; the first delivery dies as "
            "the hook starts, the retry comes after the lease / in-progress expiry"
        )
        for name, f in report.crash.items():
            lost = f["keys"] - f["completed"]
            print(
                f"     {name:<6} effects completed {f['completed']:.0f}/{f['keys']:.0f} "
                f"(lost {lost:.0f}); DynamoDB writes per key {f['writes']:.2f}, "
                f"reads {f['reads']:.2f} (crashed delivery + retry)"
            )
