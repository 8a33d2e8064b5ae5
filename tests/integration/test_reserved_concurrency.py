"""Reserved concurrency (issue 24): a backfill whose workers want more than the account's
unreserved concurrency runs beside live traffic, and with ``backfillReservedConcurrency`` set no
ingest invocation is refused and no ingest message is dead-lettered; without it, the same load
takes the whole account and the ingest messages reach the dead-letter queue.

Deterministic by gates, not timing: every backfill worker invocation (a listing shard, or a
Distributed Map data file) is held inside its Lambda invocation, so it keeps its concurrency
slot, until the test lets it go (:class:`Gate`); live ingest is drained while they are held.
With the reservation, the 6 workers beyond it are refused and the machine's own retrier
redrives them (``Lambda.TooManyRequestsException``: 8 retries, 2 s doubling, FULL jitter); its
intervals run at half of real time here (:func:`scaled`), so a worker would run out of retries
only if all 8 jittered sleeps (up to 1 s ... 128 s) fitted in the hold, which lasts until one
ingest invocation has run: about one chance in a million. Without it the 9 workers fit the
account and none is refused.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from s3ingest.local.emulator import stepfunctions
from s3ingest.local.emulator.chaos import Chaos
from s3ingest.local.emulator.faults import INGEST, Concurrency, limit_concurrency
from s3ingest.local.emulator.inventory_writer import write_inventory
from s3ingest.local.emulator.server import Emulator
from s3ingest.local.stack.runtime import DISTRIBUTED_MAP, LocalRuntime, local_settings
from s3ingest.settings import BucketSpec
from s3ingest_fn.handlers import backfill_control, listing_backfill

#: One listing shard per prefix (each holds few keys), one inventory data file per prefix.
PREFIXES = tuple(f"p{i}/" for i in range(9))
#: The account's concurrency: as many as the backfill's workers want at once.
ACCOUNT = len(PREFIXES)
#: ``backfillReservedConcurrency``: each of the two reserved workers (the listing shard and
#: the distributed-map control function) 3, leaving 3 unreserved: the ingest event source's 2
#: (``maxConcurrency``) plus one for a listing plan or summary step.
RESERVED = 3
#: Pre-existing objects the live traffic deletes (every third prefix's ``old-1.txt``).
DELETED = len(PREFIXES) // 3
LISTING = "listing"
#: The local Lambda service's names of each engine's worker function.
WORKER = {LISTING: "ListingShard", DISTRIBUTED_MAP: "BackfillControlFunction"}
#: How long a held worker waits for the test at most (the test fails long before).
HOLD_SECONDS = 120.0


class Gate:
    """Holds every backfill worker invocation until :meth:`release`; records, at each ingest
    invocation, how many worker invocations were running (:attr:`beside`)."""

    def __init__(self, pool: Concurrency, worker: str) -> None:
        self.pool = pool
        self.worker = worker
        self.released = threading.Event()
        #: Worker invocations running when each ingest invocation began (in its slot).
        self.beside: list[int] = []
        #: Set when an ingest invocation has ended while the workers were held.
        self.ingest_ran = threading.Event()
        self._lock = threading.Lock()

    def hold(self) -> None:
        """Inside a worker invocation: wait for :meth:`release`."""
        assert self.released.wait(HOLD_SECONDS), "held worker never released"

    def release(self) -> None:
        self.released.set()

    def ingest(self, handler: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        """``handler`` (the ingest handler) recording :attr:`beside`."""

        def recorded(event: Any, context: Any) -> Any:
            held = not self.released.is_set()
            with self._lock:
                self.beside.append(self.pool.in_use[self.worker])
            result = handler(event, context)
            if held:
                self.ingest_ran.set()
            return result

        return recorded


def _gate_workers(monkeypatch: pytest.MonkeyPatch, gate: Gate) -> None:
    """Hold the listing shard handler and the control function's ``backfill_file``; the local
    Lambda service looks a handler up at each invocation, after taking its slot."""
    shard = listing_backfill.list_shard
    control = backfill_control.handler

    def held_shard(event: dict[str, Any], context: Any) -> Any:
        gate.hold()
        return shard(event, context)

    def held_control(event: dict[str, Any], context: Any) -> Any:
        if event.get("action") == "backfill_file":
            gate.hold()
        return control(event, context)

    monkeypatch.setattr(listing_backfill, "list_shard", held_shard)
    monkeypatch.setattr(backfill_control, "handler", held_control)


@pytest.fixture
def scaled(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The machines' retry intervals at half of real time (see the module)."""
    monkeypatch.setattr(stepfunctions, "TIME_SCALE", 0.5)
    yield


def _runtime(emulator: Emulator, engine: str, reserved: int | None) -> LocalRuntime:
    settings = local_settings(
        max_concurrency=2,
        batch_size=1,
        backfill_engine="distributed-map" if engine == DISTRIBUTED_MAP else "batch-operations",
        backfill_reserved_concurrency=reserved,
    )
    return LocalRuntime(emulator, settings, buckets=[BucketSpec(prefixes=PREFIXES)])


def _predating(rt: LocalRuntime) -> None:
    """Two objects under each prefix whose events never reached the pipeline."""
    for prefix in PREFIXES:
        for n in range(2):
            rt.faithful.put(f"{prefix}old-{n}.txt", f"before {prefix}{n}")
    rt.faithful.take_pending()


def _live_traffic(rt: LocalRuntime) -> None:
    """New keys, overwrites and deletes of pre-existing ones, published with duplicates."""
    for i, prefix in enumerate(PREFIXES):
        rt.faithful.put(f"{prefix}new.txt", f"live {i}")
        if i % 3 == 0:
            rt.faithful.put(f"{prefix}old-0.txt", f"overwritten {i}")
        if i % 3 == 1:  # DELETED of them
            rt.faithful.delete(f"{prefix}old-1.txt")
    rt.flush(Chaos(seed=24, duplicate=0.5))


def _inventory(rt: LocalRuntime) -> str:
    """An inventory report of the bucket now, one data file per prefix (one Map item each)."""
    return write_inventory(
        rt.s3,
        source_bucket=rt.resources.bucket,
        destination_bucket=rt.resources.inventory_bucket,
        rows_per_file=2,
    )


def _loaded(
    rt: LocalRuntime, monkeypatch: pytest.MonkeyPatch, engine: str
) -> tuple[Concurrency, str, Gate, str]:
    """The account's limits on ``rt``, its workers and ingest gated, the objects from before
    the pipeline, an inventory of them (the inventory engine meets the live traffic after it)
    and the live traffic: ``(pool, worker function, gate, manifest key)``."""
    pool = limit_concurrency(rt, account=ACCOUNT)
    worker = WORKER[engine]
    gate = Gate(pool, worker)
    _gate_workers(monkeypatch, gate)
    rt.handler = gate.ingest(rt.handler)
    _predating(rt)
    manifest = _inventory(rt)
    _live_traffic(rt)
    return pool, worker, gate, manifest


def _in_thread(name: str, call: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    """``call`` on its own thread; its result (``"report"``) or what it raised (``"error"``,
    the main thread reports it) in the returned dict once it ends."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["report"] = call()
        except BaseException as exc:
            out["error"] = exc

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread, out


def _start_backfill(
    rt: LocalRuntime, engine: str, manifest: str
) -> tuple[threading.Thread, dict[str, Any]]:
    """The backfill on its own thread (the inventory engine over ``manifest``)."""
    if engine == DISTRIBUTED_MAP:
        return _in_thread(
            f"backfill-{engine}", lambda: rt.backfill(manifest, engine=DISTRIBUTED_MAP)
        )
    return _in_thread(f"backfill-{engine}", rt.backfill_listing)


def _finish(gate: Gate, thread: threading.Thread, out: dict[str, Any]) -> dict[str, Any]:
    gate.release()
    thread.join(HOLD_SECONDS)
    assert not thread.is_alive(), "backfill did not end"
    if "error" in out:
        raise out["error"]
    report: dict[str, Any] = out["report"]
    return report


@pytest.mark.slow
@pytest.mark.contract("C13", "C15")
@pytest.mark.parametrize("engine", [LISTING, DISTRIBUTED_MAP])
def test_reserved_backfill_beside_live_traffic_dead_letters_nothing(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch, scaled: None, engine: str
) -> None:
    # GIVEN an account of 9, the backfill workers reserved 3 each, ingest at maxConcurrency 2,
    # and objects under 9 prefixes from before the pipeline (9 shards or data files)
    rt = _runtime(emulator, engine, RESERVED)
    try:
        pool, worker, gate, manifest = _loaded(rt, monkeypatch, engine)
        assert pool.reserved[worker] == RESERVED and pool.unreserved == 3
        objects = len(rt.bucket_objects())  # what the listing meets
        # WHEN the backfill runs, its workers held at their reservation (the other 6 refused)
        thread, out = _start_backfill(rt, engine, manifest)
        assert pool.wait_for(lambda p: p.in_use[worker] == RESERVED and p.throttled[worker] > 0)
        # AND live ingest is drained beside them (released once one ingest invocation ran)
        drainer, drained = _in_thread("drain", rt.drain)
        assert gate.ingest_ran.wait(HOLD_SECONDS), "no ingest invocation beside the workers"
        report = _finish(gate, thread, out)
        drainer.join(HOLD_SECONDS)
        assert not drainer.is_alive() and "error" not in drained, drained
        # THEN the workers never ran more than their reservation, ingest ran beside them
        assert pool.peak[worker] == RESERVED
        assert RESERVED in gate.beside
        # AND ingest was never refused, and nothing was dead-lettered
        assert pool.throttled[INGEST] == 0
        assert rt.ingest_source.throttled == 0
        assert rt.dlq_messages() == []
        # AND the backfill completed over every shard or data file
        execution = report["execution"]
        assert execution["status"] == "SUCCEEDED", execution
        (map_run,) = execution["map_runs"]
        assert map_run["executions"]["succeeded"] == len(PREFIXES)
        if engine == DISTRIBUTED_MAP:
            assert (report["total"], report["failed"]) == (2 * len(PREFIXES), 0)
        else:
            assert report["shards"] == report["done"] == len(PREFIXES)
            # every visible object, and each delete marker the live deletes left (not visible)
            counts = report["counts"]
            assert (counts["listed"], counts["not_visible"]) == (objects + DELETED, DELETED)
        # AND after quiescence and one reconciliation the ledger equals the bucket
        rt.drain()
        rt.reconcile("listing")
        assert rt.dlq_messages() == []
        assert rt.compare().differences == []
        assert rt.compare().converged
    finally:
        rt.close()


@pytest.mark.slow
@pytest.mark.parametrize("engine", [LISTING, DISTRIBUTED_MAP])
def test_without_the_reservation_the_backfill_starves_ingest(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch, scaled: None, engine: str
) -> None:
    # GIVEN the same account, load and traffic without backfillReservedConcurrency
    rt = _runtime(emulator, engine, None)
    try:
        pool, worker, gate, manifest = _loaded(rt, monkeypatch, engine)
        assert pool.reserved == {}
        # WHEN the backfill's 9 workers run at once, held: the whole account
        thread, out = _start_backfill(rt, engine, manifest)
        assert pool.wait_for(lambda p: p.in_use[worker] == ACCOUNT)
        rt.drain()  # ends when every message has used its receives
        # THEN every ingest invocation was refused and the messages were dead-lettered
        assert gate.beside == []
        assert pool.throttled[INGEST] > 0
        assert len(rt.dlq_messages()) > 0
        report = _finish(gate, thread, out)
        assert report["execution"]["status"] == "SUCCEEDED", report["execution"]
    finally:
        rt.close()
