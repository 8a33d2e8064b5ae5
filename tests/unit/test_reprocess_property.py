"""The reprocess claim under concurrency (issue 27; CONTRACT C11): a property over live puts,
overwrites and deletes (duplicated, reordered), configuration changes (a processor added, a
version raised), reprocess attempts from stale and fresh rows, killed workers and failing
processors; then, once faults stop, ``behind`` + ``reprocess`` until nothing is behind.

Checked: every visible key is done, at each configured processor's version, for the row's
current change; no reprocess run was ever a tombstone's; per processor, a (key, change,
version) ran once, again only after a killed run; the fencing tokens of one processor's runs
of a key strictly increase.

Over the DynamoDB adapter on moto, as ``tests/unit/test_reprocess.py`` (whose harness this
copies in part).
"""

from __future__ import annotations

import itertools
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from s3ingest.local.emulator.chaos import kill_after_effect
from s3ingest_fn.adapters.dynamo_ledger import DynamoLedger
from s3ingest_fn.core.decide import IngestService
from s3ingest_fn.core.effects import (
    CREATED,
    EVERY_CHANGE,
    LATEST,
    REMOVED,
    AppliedChange,
    EffectRunner,
    PinnedContent,
    ProcessorSpec,
)
from s3ingest_fn.core.model import Change, Format, Kind, TransientError
from s3ingest_fn.core.row import DONE, PENDING, LedgerRow
from s3ingest_fn.core.scope import BucketScope, Scope
from s3ingest_fn.core.sequencer import normalize
from tests.fakes import FakeBucket, FakeContentReader
from tests.moto_ledger import moto_ledger_table

BUCKET = "landing"
NOW_MS = 1_700_000_000_000
KEYS = ("in/a.csv", "in/b c.csv", "out/ü.json", "in/d.csv")
KILL, FAIL = "kill", "fail"


class Serialized:
    """A boto3 client whose calls take turns (moto's in-process DynamoDB is not safe for two
    threads writing one item; each processor of a change commits from its own thread)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return method(*args, **kwargs)

        return call


@dataclass
class Run:
    """One processor call that returned (a failing call is not a run)."""

    processor: str
    key: str
    change_id: str
    token: int
    version: int
    kind: str
    via: str
    killed: bool = False


@dataclass
class World:
    """One ledger table, one bucket and its contents, the processors' recorded runs, and the
    faults armed for the next effect of each processor."""

    client: Any
    ms: int = NOW_MS
    seq: int = 0x1000
    bucket: FakeBucket = field(default_factory=FakeBucket)
    content: FakeContentReader = field(default_factory=FakeContentReader)
    runs: list[Run] = field(default_factory=list)
    faults: dict[str, str] = field(default_factory=dict)
    #: ``live`` or ``reprocess``: which path the current step drives.
    via: str = "live"
    #: change ids of every tombstone the ledger held
    tombstones: set[str] = field(default_factory=set)
    #: the processor calls made inside each one (for the race test)
    during: dict[str, Callable[[AppliedChange], None]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.client = cast(Any, Serialized(self.client))
        self.ledger = DynamoLedger(
            self.client, "ledger", tombstone_ttl_seconds=3600, clock=lambda: self.ms / 1000
        )

    def clock(self) -> int:
        return self.ms

    # -- processors and services -----------------------------------------------------------

    def processor(self, name: str, version: int) -> Callable[..., None]:
        def call(change: AppliedChange, content: PinnedContent | None) -> None:
            with self.lock:
                fault = self.faults.get(name)
                if fault == FAIL:
                    del self.faults[name]
            if fault == FAIL:
                raise RuntimeError("downstream unavailable")
            if content is not None:
                content.read()
            hook = self.during.get(name)
            if hook is not None:
                hook(change)
            with self.lock:
                self.runs.append(
                    Run(
                        name,
                        change.key,
                        change.change_id,
                        change.token,
                        version,
                        change.kind,
                        self.via,
                    )
                )

        return call

    def after_effect(self, change: AppliedChange) -> None:
        """As the local runtime's CrashInjector: the worker dies after the effect and before
        its commit; its lease is released (its invocation would have timed out by the retry)."""
        with self.lock:
            if self.faults.get(change.processor) != KILL:
                return
            del self.faults[change.processor]
            for run in reversed(self.runs):
                if (run.processor, run.key, run.token) == (
                    change.processor,
                    change.key,
                    change.token,
                ):
                    run.killed = True
                    break
            else:  # pragma: no cover - the processor returned, so it recorded its run
                raise AssertionError(f"no run of {change} to kill")
        self.ledger.release(change.bucket, change.key, change.token, change.processor)
        raise TransientError("worker-killed-before-commit")

    def service(
        self, versions: dict[str, int], modes: dict[str, str] | None = None
    ) -> IngestService:
        specs = [
            ProcessorSpec(
                name,
                self.processor(name, version),
                mode=(modes or {}).get(name, LATEST),
                version=version,
            )
            for name, version in versions.items()
        ]
        effects = kill_after_effect(
            EffectRunner(specs, self.content, clock_ms=self.clock), self.after_effect
        )
        return IngestService(
            ledger=self.ledger,
            bucket=self.bucket,
            effects=effects,
            scope=Scope((BucketScope(BUCKET),)),
            sleep=lambda _: None,
            clock=lambda: self.ms / 1000,
        )

    # -- the bucket and its events ---------------------------------------------------------

    def put(self, key: str) -> Change:
        """Write the object now; return its event (delivered later, or never)."""
        self.seq += 1
        raw = f"{self.seq:018X}"
        version, etag = f"v{self.seq}", f"etag-{self.seq}"
        self.bucket.put(BUCKET, key, version, etag)
        self.content.put(BUCKET, key, version, f"{key} {self.seq}".encode())
        return Change(
            bucket=BUCKET,
            key=key,
            raw_key=key,
            kind=Kind.CREATED,
            event_name="Object Created/PutObject",
            fmt=Format.EVENTBRIDGE,
            sequencer=normalize(raw),
            raw_sequencer=raw,
            version_id=version,
            etag=etag,
            size=5,
        )

    def delete(self, key: str) -> Change:
        self.seq += 1
        raw = f"{self.seq:018X}"
        self.bucket.hide(BUCKET, key)
        return Change(
            bucket=BUCKET,
            key=key,
            raw_key=key,
            kind=Kind.REMOVED,
            event_name="Object Deleted/DeleteObject",
            fmt=Format.EVENTBRIDGE,
            sequencer=normalize(raw),
            raw_sequencer=raw,
        )

    def deliver(self, service: IngestService, change: Change) -> None:
        via, self.via = self.via, "live"
        try:
            service.handle(change)
        finally:
            self.via = via
            self.note_tombstone(change.key)

    def note_tombstone(self, key: str) -> None:
        row = self.ledger.get(BUCKET, key)
        if row is not None and not row.present and row.change_id is not None:
            self.tombstones.add(row.change_id)

    def row(self, key: str) -> LedgerRow | None:
        return self.ledger.get(BUCKET, key)

    def reprocess(self, service: IngestService, row: LedgerRow, processor: str) -> str | None:
        """The reprocess run's step for one scanned row: ``behind``, then ``reprocess``."""
        if not service.behind(row, processor):
            return None
        via, self.via = self.via, "reprocess"
        try:
            return service.reprocess(row, processor)
        finally:
            self.via = via

    @contextmanager
    def armed(self, fault: tuple[str, str] | None) -> Iterator[None]:
        """``fault`` (kind, processor) for the next effect of that processor in the block."""
        if fault is not None:
            self.faults[fault[1]] = fault[0]
        try:
            yield
        finally:
            self.faults.clear()


@contextmanager
def world_on_moto() -> Iterator[World]:
    with moto_ledger_table("ledger") as client:
        yield World(client)


# -- the checks ----------------------------------------------------------------------------


def check_runs(world: World) -> None:
    """Rules 2-4 over the recorded runs."""
    # 2. no tombstone was ever run by a reprocess
    for run in world.runs:
        if run.via == "reprocess":
            assert run.kind == CREATED, run
            assert run.change_id not in world.tombstones, run
    # 3. per processor, per (key, change id, version): once, again only after a killed run
    groups: dict[tuple[str, str, str, int], list[Run]] = defaultdict(list)
    for run in world.runs:
        groups[(run.processor, run.key, run.change_id, run.version)].append(run)
    for group, runs in groups.items():
        assert all(r.killed for r in runs[:-1]), (group, runs)
    # 4. fencing tokens per (processor, key) strictly increase in run order, claim to claim
    # (an every-change claim runs its queue's changes in order under its one token:
    # docs/effects.md; those runs share it)
    ordered: dict[tuple[str, str], list[Run]] = defaultdict(list)
    for run in world.runs:
        ordered[(run.processor, run.key)].append(run)
    for claim, seen in ordered.items():
        for a, b in itertools.pairwise(seen):
            same_claim = a.token == b.token and not a.killed and a.change_id != b.change_id
            assert a.token < b.token or same_claim, (claim, a, b)


def check_converged(world: World, service: IngestService, versions: dict[str, int]) -> None:
    """Rule 1: every visible key is done, at each processor's version, for its change."""
    for key in KEYS:
        seen = world.bucket.objects.get((BUCKET, key))
        row = world.row(key)
        if seen is None:
            assert row is None or not row.present, (key, row)
            continue
        assert row is not None and row.present and row.version_id == seen.version_id, key
        for name, version in versions.items():
            effect = row.effect_of(name)
            assert effect is not None, (key, name)
            assert effect.status == DONE, (key, name, effect)
            assert effect.done_change_id == row.change_id, (key, name, effect)
            assert effect.version == version, (key, name, effect)
            assert not service.behind(row, name)


def settle(world: World, service: IngestService, versions: dict[str, int]) -> None:
    """The reprocess run over every row for every processor, until nothing is behind."""
    for _ in range(6):
        ran = False
        for key in KEYS:
            for name in versions:
                row = world.row(key)
                if row is not None and world.reprocess(service, row, name) is not None:
                    ran = True
        if not ran:
            return
    raise AssertionError("rows still behind after 6 rounds of reprocess")


def note(what: str) -> None:
    """A statistic of the property (``--hypothesis-show-statistics``)."""
    if currently_in_test_context():
        event(what)


# -- the property --------------------------------------------------------------------------

processors = st.sampled_from(["p1", "p2"])
faults = st.one_of(
    st.none(),
    st.none(),
    st.tuples(st.sampled_from([KILL, FAIL]), processors),
)


def steps(keys: int) -> dict[str, st.SearchStrategy[tuple[Any, ...]]]:
    """The kinds of step over ``keys`` keys."""
    key = st.integers(0, keys - 1)
    return {
        # an S3 write and its event: delivered now, held back, or twice
        "op": st.tuples(
            st.just("op"),
            st.sampled_from(["put", "put", "delete"]),
            key,
            st.sampled_from(["now", "now", "delay", "twice"]),
            faults,
        ),
        # a held-back event (any of them: out of order) or, `again`, any earlier event
        "deliver": st.tuples(st.just("deliver"), st.integers(0, 30), st.booleans(), faults),
        "configure": st.tuples(
            st.just("configure"), st.sampled_from(["add-p2", "add-p2", "raise-p1", "raise-p2"])
        ),
        "scan": st.tuples(st.just("scan")),  # every key's row as it is now
        # a reprocess attempt on a key: from an earlier scan (stale) or a fresh read (None)
        # (`changed`: the processor the last configuration change added or raised)
        "reprocess": st.tuples(
            st.just("reprocess"),
            key,
            st.sampled_from(["changed", "changed", "p1", "p2"]),
            st.none() | st.integers(0, 30),
            faults,
        ),
        "tick": st.tuples(st.just("tick"), st.integers(0, 2_500)),
    }


@st.composite
def histories(draw: st.DrawFn) -> tuple[str, list[tuple[Any, ...]]]:
    """p2's mode, and the steps over 2 to 4 keys: some traffic and scans, a configuration
    change (so that rows are behind), then any steps, further configuration changes
    included."""
    keys = draw(st.integers(2, 4))
    kinds = steps(keys)
    seeded = [("op", "put", k, "now", None) for k in range(keys)]  # objects already there
    before = draw(
        st.lists(
            st.one_of(kinds["op"], kinds["op"], kinds["deliver"], kinds["scan"], kinds["tick"]),
            max_size=6,
        )
    )
    change = draw(kinds["configure"])
    after = draw(
        st.lists(
            st.one_of(
                kinds["op"],
                kinds["deliver"],
                kinds["configure"],
                kinds["scan"],
                kinds["reprocess"],
                kinds["reprocess"],
                kinds["reprocess"],
                kinds["reprocess"],
                kinds["tick"],
            ),
            min_size=3,
            max_size=16,
        )
    )
    mode = draw(st.sampled_from([LATEST, LATEST, EVERY_CHANGE]))
    return mode, [*seeded, *before, change, *after]


@pytest.mark.contract("C11", "C15")
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(history=histories())
def test_reprocess_and_live_traffic_converge_with_each_change_run_once_per_version(
    history: tuple[str, list[tuple[Any, ...]]],
) -> None:
    mode, plan = history
    with world_on_moto() as world:
        run_history(world, plan, {"p2": mode})


def run_history(world: World, plan: list[tuple[Any, ...]], modes: dict[str, str]) -> None:
    versions = {"p1": 1}
    service = world.service(versions, modes)
    events: list[Change] = []
    held: list[Change] = []
    retried: list[Change] = []
    scans: list[dict[str, LedgerRow]] = []
    changed = "p1"

    def deliver(change: Change, fault: tuple[str, str] | None) -> None:
        with world.armed(fault):
            try:
                world.deliver(service, change)
            except TransientError as exc:
                note(f"live: {str(exc)[:28]}")
                retried.append(change)  # SQS shows the message again

    for step in plan:
        world.ms += 7
        kind = step[0]
        if kind == "op":
            _, op, k, when, fault = step
            change = world.put(KEYS[k]) if op == "put" else world.delete(KEYS[k])
            events.append(change)
            if when == "delay":
                held.append(change)
                continue
            deliver(change, fault)
            if when == "twice":
                deliver(change, None)
        elif kind == "deliver":
            _, i, again, fault = step
            if held and not again:
                deliver(held.pop(i % len(held)), fault)
            elif events:
                deliver(events[i % len(events)], fault)
        elif kind == "configure":
            what = step[1]
            if what == "add-p2" and "p2" not in versions:
                versions["p2"] = 1
            elif what == "raise-p1":
                versions["p1"] += 1
            elif what == "raise-p2" and "p2" in versions:
                versions["p2"] += 1
            changed = "p1" if what == "raise-p1" else "p2"
            service = world.service(versions, modes)
        elif kind == "scan":
            rows = {key: world.row(key) for key in KEYS}
            scans.append({key: row for key, row in rows.items() if row is not None})
        elif kind == "reprocess":
            _, k, name, scanned, fault = step
            name = changed if name == "changed" else name
            if name not in versions:
                continue
            stale = scanned is not None and bool(scans)
            found = scans[scanned % len(scans)].get(KEYS[k]) if stale else world.row(KEYS[k])
            if found is None:
                continue
            with world.armed(fault):
                try:
                    outcome = world.reprocess(service, found, name)
                except TransientError as exc:
                    outcome = "killed" if "killed" in str(exc) else "failed"
            note(f"reprocess {'stale' if stale else 'fresh'}: {outcome}")
        elif kind == "tick":
            world.ms += step[1]

    # faults stop; the retried messages and the events never delivered arrive (in order),
    # then the reprocess run
    world.ms += 1_000
    for change in [*retried, *held]:
        world.deliver(service, change)
    before = len(world.runs)
    settle(world, service, versions)
    note(f"settle ran {min(len(world.runs) - before, 3)}+")
    note(f"killed runs: {min(sum(r.killed for r in world.runs), 2)}+")
    check_converged(world, service, versions)
    check_runs(world)


# -- edge cases ----------------------------------------------------------------------------


def test_a_stale_snapshot_of_a_key_deleted_since_is_skipped_and_runs_no_tombstone() -> None:
    with world_on_moto() as world:
        v1 = world.service({"p1": 1})
        world.deliver(v1, world.put(KEYS[0]))
        stale = world.row(KEYS[0])
        assert stale is not None
        both = world.service({"p1": 1, "p2": 1})
        assert both.behind(stale, "p2")
        world.deliver(both, world.delete(KEYS[0]))  # p2's removal runs on the live path
        assert [(r.processor, r.kind, r.via) for r in world.runs if r.processor == "p2"] == [
            ("p2", REMOVED, "live")
        ]

        assert world.reprocess(both, stale, "p2") == "skipped"
        assert world.reprocess(both, stale, "p1") is None  # done at its version: not behind

        row = world.row(KEYS[0])
        assert row is not None and not row.present
        assert not both.behind(row, "p2")
        check_runs(world)


def test_a_stale_snapshot_of_a_key_deleted_before_the_processor_existed_runs_nothing() -> None:
    with world_on_moto() as world:
        v1 = world.service({"p1": 1})
        world.deliver(v1, world.put(KEYS[0]))
        stale = world.row(KEYS[0])
        assert stale is not None
        world.deliver(v1, world.delete(KEYS[0]))
        both = world.service({"p1": 1, "p2": 1})

        assert world.reprocess(both, stale, "p2") == "skipped"
        assert not [r for r in world.runs if r.processor == "p2"]
        row = world.row(KEYS[0])
        assert row is not None and row.effect_of("p2") is None


def test_a_live_overwrite_during_a_reprocess_waits_for_its_lease_then_runs_itself() -> None:
    with world_on_moto() as world:
        v1 = world.service({"p1": 1})
        world.deliver(v1, world.put(KEYS[0]))
        both = world.service({"p1": 1, "p2": 1})
        first = world.row(KEYS[0])
        assert first is not None
        newer = world.put(KEYS[0])  # in the bucket now; its event arrives during p2's run
        refused: list[str] = []

        def overwrite(change: AppliedChange) -> None:
            world.during.clear()
            try:
                world.deliver(both, newer)
            except TransientError as exc:
                refused.append(str(exc))

        world.during["p2"] = overwrite
        # p2's pinned read is of the first version, still readable: its run is not superseded
        assert world.reprocess(both, first, "p2") == "run"
        assert refused and "effect-in-progress" in refused[0]  # the lease held it off
        slept: list[float] = []
        both.sleep = slept.append
        after = world.row(KEYS[0])
        assert after is not None and after.change_id == first.change_id
        effect = after.effect_of("p2")
        assert effect is not None and effect.status == DONE
        assert effect.done_change_id == first.change_id

        world.deliver(both, newer)  # the retried message
        assert not slept
        final = world.row(KEYS[0])
        assert final is not None and final.change_id != first.change_id
        for name in ("p1", "p2"):
            effect = final.effect_of(name)
            assert effect is not None and effect.status == DONE
            assert effect.done_change_id == final.change_id
        p2_runs = [(r.change_id, r.via) for r in world.runs if r.processor == "p2"]
        assert p2_runs == [(first.change_id, "reprocess"), (final.change_id, "live")]
        check_runs(world)


def test_a_version_raised_twice_refuses_the_older_scan_and_runs_each_version_once() -> None:
    with world_on_moto() as world:
        v1 = world.service({"p1": 1})
        world.deliver(v1, world.put(KEYS[0]))
        scan_v1 = world.row(KEYS[0])
        assert scan_v1 is not None
        v2 = world.service({"p1": 2})
        assert world.reprocess(v2, scan_v1, "p1") == "run"
        world.ms += 1_000
        v3 = world.service({"p1": 3})
        # the first Scan's row says done at version 1 under the first token: behind at 3, but
        # its claim is refused (the token moved with the version-2 run)
        assert v3.behind(scan_v1, "p1")
        assert world.reprocess(v3, scan_v1, "p1") == "skipped"
        assert world.reprocess(v2, scan_v1, "p1") == "skipped"
        fresh = world.row(KEYS[0])
        assert fresh is not None
        assert world.reprocess(v2, fresh, "p1") is None  # done at 2: not behind for v2
        assert world.reprocess(v3, fresh, "p1") == "run"
        assert world.reprocess(v3, fresh, "p1") == "skipped"  # the same Scan, twice

        row = world.row(KEYS[0])
        assert row is not None
        effect = row.effect_of("p1")
        assert effect is not None and (effect.status, effect.version) == (DONE, 3)
        assert [r.version for r in world.runs] == [1, 2, 3]
        check_runs(world)


def test_a_reprocess_killed_before_its_commit_is_resumed_once_by_a_duplicate_event() -> None:
    with world_on_moto() as world:
        v1 = world.service({"p1": 1})
        put = world.put(KEYS[0])
        world.deliver(v1, put)
        both = world.service({"p1": 1, "p2": 1})
        scan = world.row(KEYS[0])
        assert scan is not None
        with world.armed((KILL, "p2")):
            try:
                world.reprocess(both, scan, "p2")
            except TransientError as exc:
                assert "killed" in str(exc)
            else:  # pragma: no cover
                raise AssertionError("the worker was not killed")
        row = world.row(KEYS[0])
        assert row is not None
        effect = row.effect_of("p2")
        assert effect is not None and effect.status == PENDING and effect.lease_until_ms == 0
        assert both.behind(row, "p2")

        world.ms += 1_000
        world.deliver(both, put)  # a duplicate: resumes the dead worker's effect
        assert world.reprocess(both, scan, "p2") == "skipped"  # the older Scan, again
        row = world.row(KEYS[0])
        assert row is not None and not both.behind(row, "p2")
        assert world.reprocess(both, row, "p2") is None
        assert [(r.via, r.killed) for r in world.runs if r.processor == "p2"] == [
            ("reprocess", True),
            ("live", False),
        ]
        check_converged(world, both, {"p1": 1, "p2": 1})
        check_runs(world)
