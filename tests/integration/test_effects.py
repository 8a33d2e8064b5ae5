"""CONTRACT C8 and C11 against the emulator: the processor hook runs for the winning changes only,
in sequencer order, at least once when a worker dies between effect and commit and exactly once
otherwise; a stale worker can never commit; pinned reads return the event's bytes.

The ledger, the effect protocol and S3 are the real code on the emulator; the delivery loop here
is a plain at-least-once queue (a crashed message goes back to the end), so hypothesis can run
many schedules quickly. The end-to-end path through SQS and the Lambda handler is covered by the
scenario tests and ``s3ingest local demo``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
from collections import deque
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from s3ingest.local.emulator.chaos import kill_after_effect
from s3ingest.local.stack.runtime import LocalRuntime
from s3ingest_fn import wiring
from s3ingest_fn.core.decide import LEASE_WAITS
from s3ingest_fn.core.effects import (
    AppliedChange,
    Claim,
    PinnedContent,
    SupersededError,
)
from s3ingest_fn.core.events import parse_body
from s3ingest_fn.core.model import Change, Outcome, TransientError
from s3ingest_fn.core.row import RowState, WriteMeta
from s3ingest_fn.core.sequencer import normalize
from s3ingest_fn.services.reconcile import ReconcileRequest
from tests.integration.effects_support import Clock, Killed, RecordingLedger


class Harness:
    """A runtime whose ingest service runs a recording processor under the real protocol."""

    def __init__(
        self, emulator: Any, versioning: str | None, crash: float = 0.0, seed: int = 0
    ) -> None:
        import random

        self.rt = LocalRuntime(emulator, versioning=versioning)
        self.ledger = RecordingLedger(self.rt.ledger)
        self.rt.service.ledger = self.ledger
        self.clock = Clock()
        self.crash = crash
        self.rng = random.Random(seed)
        self.effects: list[AppliedChange] = []
        self.crashed: list[tuple[str, int]] = []
        self.read_errors: list[str] = []
        #: changes whose pinned read found a newer write (C8): they end superseded, no effect
        self.superseded: set[str] = set()
        #: body of every object version ever written, by version id (versioned) or ETag
        self.bodies: dict[str, bytes] = {}
        self.rt.service.effects = kill_after_effect(
            wiring.effect_runner(self.process, self.rt.s3, clock_ms=self.clock), self.maybe_crash
        )

    def put(self, key: str, body: bytes) -> None:
        op = self.rt.faithful.put(key, body)
        self.bodies[op.version_id or hashlib.md5(body).hexdigest()] = body

    def process(self, change: AppliedChange, content: PinnedContent | None) -> None:
        if content is not None:
            try:
                data = content.read()
            except SupersededError:  # the protocol ends the record superseded
                self.superseded.add(change.change_id)
                raise
            expected = self.bodies.get(change.version_id or str(change.etag))
            if data != expected:
                self.read_errors.append(f"{change.key}: read {data!r}, change wrote {expected!r}")
        self.effects.append(change)

    def maybe_crash(self, change: AppliedChange) -> None:
        if self.crash and self.rng.random() < self.crash:
            self.crashed.append((change.change_id, change.token))
            self.clock.expire_leases()
            raise Killed(change.key)

    def deliver(self, changes: list[Change]) -> list[Any]:
        """At-least-once delivery: a message whose worker died comes back at the end."""
        queue = deque(changes)
        results: list[Any] = []
        for _ in range(50 * len(changes) + 50):
            if not queue:
                return results
            change = queue.popleft()
            try:
                results.append(self.rt.service.handle(change))
            except (Killed, TransientError):
                queue.append(change)
        raise AssertionError("delivery did not become quiescent")


def _changes(rt: LocalRuntime) -> list[Change]:
    return [parse_body(json.dumps(e)).changes[0] for e in rt.faithful.take_pending()]


ops = st.lists(
    st.tuples(
        st.sampled_from(["put", "put", "put", "delete"]), st.sampled_from(["a", "b c", "d+e"])
    ),
    min_size=1,
    max_size=10,
)


@pytest.mark.contract("C11")
@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    history=ops,
    versioning=st.sampled_from(["Enabled", None]),
    crash=st.sampled_from([0.0, 0.0, 0.4]),
    data=st.data(),
)
def test_effects_are_the_winning_changes_in_sequencer_order(
    emulator: Any,
    history: list[tuple[str, str]],
    versioning: str | None,
    crash: float,
    data: st.DataObject,
) -> None:
    # GIVEN a history of puts and deletes, delivered with duplicates, in any order, with workers
    # killed between effect and commit
    h = Harness(emulator, versioning, crash=crash, seed=data.draw(st.integers(0, 999)))
    for i, (op, key) in enumerate(history):
        if op == "put":
            h.put(key, f"{key} body {i}".encode())
        else:
            h.rt.faithful.delete(key)
    events = _changes(h.rt)
    copies = data.draw(st.lists(st.integers(1, 3), min_size=len(events), max_size=len(events)))
    deliveries = data.draw(
        st.permutations([e for e, n in zip(events, copies, strict=True) for _ in range(n)])
    )

    # WHEN they are delivered until quiescent
    h.deliver(list(deliveries))

    # THEN per key the effects are exactly the winning changes, in the order they won (less
    # those whose content was already replaced when their effect read it: superseded, C8) ...
    ran: dict[str, list[AppliedChange]] = {}
    for change in h.effects:
        ran.setdefault(change.key, []).append(change)
    crashed = set(h.crashed)
    completed = {c.change_id for c in h.effects}
    for key, all_wins in h.ledger.wins.items():
        wins = [w for w in all_wins if w in completed or w not in h.superseded]
        ids = [c.change_id for c in ran.get(key, [])]
        collapsed = [x for i, x in enumerate(ids) if i == 0 or ids[i - 1] != x]
        assert collapsed == wins, key
        # ... a repeat only right after a run whose worker was killed ...
        runs = ran.get(key, [])
        for before, after in itertools.pairwise(runs):
            if before.change_id == after.change_id:
                assert (before.change_id, before.token) in crashed
        if not crash:
            assert ids == wins  # exactly once
        # ... in sequencer order, with strictly increasing fencing tokens ...
        seqs = [cast(str, normalize(c.sequencer)) for c in runs if c.sequencer]
        assert seqs == sorted(seqs)
        tokens = [c.token for c in runs]
        assert tokens == sorted(set(tokens))
    assert set(ran) <= set(h.ledger.wins)
    if versioning:
        assert not h.superseded  # a version stays readable by its id
    # ... every pinned read returned the bytes of its change ...
    assert h.read_errors == []
    # ... and nothing is left pending: the last effect committed is the row's change
    for row in h.rt.ledger_rows():
        if row.change_id in h.ledger.never_held:  # a delete of a key never held: no effect
            assert row.effect is None, row.key
            continue
        assert row.effect_status in ("done", "superseded"), row.key
        if row.effect_status == "done":
            assert ran[row.key][-1].change_id == row.change_id
    # and a reconciliation-free history of puts/deletes leaves the ledger equal to the bucket
    assert h.rt.compare().converged


@pytest.mark.contract("C11")
def test_a_stale_worker_whose_lease_expired_cannot_commit(emulator: Any) -> None:
    # GIVEN a change applied and claimed by worker 1, which then stalls past its lease
    h = Harness(emulator, "Enabled")
    h.put("k", b"one")
    (change,) = _changes(h.rt)
    ledger, clock = h.ledger, h.clock
    first = ledger.apply_if_newer(
        RowState(present=True, version_id=change.version_id, etag=change.etag),
        WriteMeta(
            bucket=change.bucket,
            key=change.key,
            raw_key=change.raw_key,
            event_name=change.event_name,
            reason="test",
            source="live",
            sequencer=change.sequencer,
            raw_sequencer=change.raw_sequencer,
        ),
        claim=Claim(clock(), clock() + 1000),
    )
    assert first.applied and first.token is not None
    # WHEN, before the lease ends, another worker tries to take the effect over: refused
    early = ledger.reclaim(
        change.bucket, change.key, first.token, Claim(clock() + 10, clock() + 2000)
    )
    assert not early.applied
    # and after the lease ended worker 2 re-claims it
    clock.advance(1001)
    second = ledger.reclaim(change.bucket, change.key, first.token, Claim(clock(), clock() + 1000))
    assert second.applied and second.token is not None and second.token > first.token
    # THEN worker 1's commit is refused and worker 2's goes through
    assert ledger.finish(change.bucket, change.key, first.token) is False
    assert ledger.finish(change.bucket, change.key, second.token) is True
    (row,) = h.rt.ledger_rows()
    assert row.effect is not None
    assert (
        row.effect_status == "done"
        and row.effect.lease_until_ms is None
        and row.effect.token == second.token
    )


@pytest.mark.contract("C11")
def test_a_newer_change_waits_while_an_older_effect_holds_a_live_lease(emulator: Any) -> None:
    # GIVEN the first put's effect is running (claimed, lease live, not committed)
    h = Harness(emulator, "Enabled")
    h.put("k", b"one")
    h.put("k", b"two")
    older, newer = _changes(h.rt)
    started: list[str] = []

    def slow(change: AppliedChange, content: PinnedContent | None) -> None:
        started.append(change.change_id)
        if len(started) == 1:
            # WHILE it runs, the newer event arrives at another worker: it must not overtake
            with pytest.raises(TransientError, match="effect-in-progress"):
                h.rt.service.handle(newer)

    h.rt.service.effects = wiring.effect_runner(slow, h.rt.s3, clock_ms=h.clock)
    waits: list[float] = []
    h.rt.service.sleep = waits.append  # the lease never ends while we wait on this thread
    assert h.rt.service.handle(older).outcome is Outcome.APPLIED
    assert waits == list(LEASE_WAITS)  # it waited, then gave up to an SQS retry
    # THEN once the older effect committed, the newer change applies and runs its effect
    assert h.rt.service.handle(newer).outcome is Outcome.APPLIED
    assert len(started) == 2 and started[0] != started[1]


@pytest.mark.contract("C11")
def test_a_newer_change_that_waits_for_a_short_effect_needs_no_retry(emulator: Any) -> None:
    # GIVEN the older change's effect takes 0.3 s on one thread
    import threading
    import time

    h = Harness(emulator, "Enabled")
    h.put("k", b"one")
    h.put("k", b"two")
    older, newer = _changes(h.rt)
    order: list[str] = []
    running = threading.Event()

    def slow(change: AppliedChange, content: PinnedContent | None) -> None:
        order.append(f"start {change.sequencer}")
        running.set()
        if change.sequencer == older.raw_sequencer:
            time.sleep(0.3)
        order.append(f"end {change.sequencer}")

    h.rt.service.effects = wiring.effect_runner(slow, h.rt.s3)
    worker = threading.Thread(target=h.rt.service.handle, args=(older,))
    worker.start()
    running.wait(5)
    # WHEN the newer event is handled meanwhile on another thread
    result = h.rt.service.handle(newer)
    worker.join()
    # THEN it waited for the lease instead of failing, and the effects did not overlap
    assert result.outcome is Outcome.APPLIED
    assert order == [
        f"start {older.raw_sequencer}",
        f"end {older.raw_sequencer}",
        f"start {newer.raw_sequencer}",
        f"end {newer.raw_sequencer}",
    ]


@pytest.mark.contract("C11", "C12")
def test_reconciliation_re_runs_an_effect_whose_message_reached_the_dlq(emulator: Any) -> None:
    # GIVEN a worker killed between effect and commit on every receive, and a message allowed
    # one receive: it goes to the dead-letter queue with its effect left pending
    from s3ingest.local.emulator.chaos import Chaos
    from s3ingest.local.stack.runtime import local_settings

    rt = LocalRuntime(
        emulator, local_settings(change_stream=False, max_receive_count=1), versioning="Enabled"
    )
    rt.faithful.put("stuck", "bytes")
    rt.flush(Chaos(crash=1.0))
    rt.drain()
    (row,) = rt.ledger_rows()
    assert row.effect_status == "pending" and len(rt.dlq_messages()) == 1
    rt.flush(Chaos())  # no more kills
    # WHEN reconciliation runs (the ledger agrees with the bucket: there is no drift)
    report = rt.reconcile("listing")
    # THEN it found the pending effect, queued a repair, and the repair re-ran the effect
    assert report.pending_effects == 1 and report.drift_total == 0
    assert report.repairs_queued == 1
    (row,) = rt.ledger_rows()
    assert row.effect_status == "done"
    assert [run.change_id for run in rt.effects] == [row.change_id] * 2


@pytest.mark.contract("C11")
def test_a_killed_worker_effect_is_re_run_by_the_next_delivery(emulator: Any) -> None:
    # GIVEN the worker dies after the effect and before the commit
    h = Harness(emulator, None, crash=1.0)
    h.put("k", b"one")
    (change,) = _changes(h.rt)
    with pytest.raises(Killed):
        h.rt.service.handle(change)
    (row,) = h.rt.ledger_rows()
    assert row.effect_status == "pending"
    # WHEN the message comes back (its lease has expired)
    h.crash = 0.0
    result = h.rt.service.handle(change)
    # THEN it is a duplicate for the ledger, but the effect ran again and committed
    assert result.outcome is Outcome.DUPLICATE
    assert result.extra["effect"] == "resumed-done"
    assert [c.change_id for c in h.effects] == [row.change_id] * 2
    assert h.rt.ledger_rows()[0].effect_status == "done"
    # and a further duplicate runs nothing
    assert h.rt.service.handle(change).outcome is Outcome.DUPLICATE
    assert len(h.effects) == 2


@pytest.mark.contract("C11")
def test_a_failing_processor_releases_its_claim_and_the_retry_runs_it(emulator: Any) -> None:
    h = Harness(emulator, "Enabled")
    h.put("k", b"one")
    (change,) = _changes(h.rt)
    calls: list[int] = []

    def flaky(change: AppliedChange, content: PinnedContent | None) -> None:
        calls.append(change.token)
        if len(calls) == 1:
            raise ConnectionError("downstream unavailable")

    h.rt.service.effects = wiring.effect_runner(flaky, h.rt.s3, clock_ms=h.clock)
    with pytest.raises(TransientError, match="processor-failed: ConnectionError"):
        h.rt.service.handle(change)
    # the retry comes at once (no clock change): the lease was released, not left to expire
    assert h.rt.service.handle(change).extra["effect"] == "resumed-done"
    assert len(calls) == 2 and calls[1] > calls[0]


@pytest.mark.contract("C8")
@pytest.mark.parametrize("versioning", ["Enabled", None])
def test_pinned_reads_return_the_event_bytes_not_newer_ones(
    emulator: Any, versioning: str | None
) -> None:
    # GIVEN two puts of one key; the first event is delivered after the second put happened
    h = Harness(emulator, versioning)
    h.put("k", b"first")
    h.put("k", b"second")
    first, second = _changes(h.rt)
    seen: list[bytes | str] = []

    def reader(change: AppliedChange, content: PinnedContent | None) -> None:
        assert content is not None
        try:
            seen.append(content.read())
        except SupersededError:
            seen.append("superseded")
            raise

    h.rt.service.effects = wiring.effect_runner(reader, h.rt.s3, clock_ms=h.clock)
    result = h.rt.service.handle(first)
    if versioning:
        # THEN by versionId the first version's bytes come back, though a newer one exists
        assert seen == [b"first"] and result.outcome is Outcome.APPLIED
    else:
        # THEN with If-Match on the first ETag S3 answers 412: superseded, not a retry (C8)
        assert seen == ["superseded"] and result.outcome is Outcome.SUPERSEDED
        assert result.reason == "content-superseded"
    assert h.rt.ledger_rows()[0].effect_status == ("done" if versioning else "superseded")
    # and the second change reads the second bytes
    assert h.rt.service.handle(second).outcome is Outcome.APPLIED
    assert seen[-1] == b"second"


@pytest.mark.contract("C5")
def test_without_a_processor_the_one_write_path_is_unchanged(emulator: Any) -> None:
    h = Harness(emulator, "Enabled")
    h.rt.service.effects = None
    calls: list[str] = []
    h.rt.ddb.meta.events.register(
        "before-call.dynamodb", lambda model, **_: calls.append(model.name)
    )
    h.put("k", b"one")
    (change,) = _changes(h.rt)
    assert h.rt.service.handle(change).outcome is Outcome.APPLIED
    assert h.rt.service.handle(change).outcome is Outcome.DUPLICATE
    assert calls == ["UpdateItem", "UpdateItem"]
    (row,) = h.rt.ledger_rows()
    assert row.effect is None and row.op == "apply"


@pytest.mark.contract("C5", "C11")
def test_the_applied_path_with_a_processor_costs_two_writes_and_no_read(emulator: Any) -> None:
    h = Harness(emulator, "Enabled")
    calls: list[str] = []
    h.rt.ddb.meta.events.register(
        "before-call.dynamodb", lambda model, **_: calls.append(model.name)
    )
    h.put("k", b"one")
    h.put("k", b"two")
    older, newer = _changes(h.rt)
    assert h.rt.service.handle(newer).outcome is Outcome.APPLIED
    assert calls == ["UpdateItem", "UpdateItem"]  # apply+claim, commit
    calls.clear()
    assert h.rt.service.handle(newer).outcome is Outcome.DUPLICATE
    assert h.rt.service.handle(older).outcome is Outcome.STALE
    assert calls == ["UpdateItem", "UpdateItem"]  # one rejected write each
    assert len(h.effects) == 1


@pytest.mark.contract("C11")
def test_through_the_handler_the_change_stream_publishes_every_applied_change(
    emulator: Any,
) -> None:
    # GIVEN the local pipeline with the example processor and the change stream, and workers
    # killed between effect and commit
    from s3ingest.local.emulator.chaos import Chaos
    from s3ingest.local.stack.runtime import local_settings

    rt = LocalRuntime(emulator, local_settings(), versioning="Enabled", seed=5)
    for i in range(12):
        rt.faithful.put(f"k{i % 4}", f"body {i}")
        if i % 5 == 4:
            rt.faithful.delete(f"k{i % 4}")
    # WHEN S3's events arrive duplicated and reordered
    rt.flush(Chaos(seed=9, duplicate=0.5, reorder=True, crash=0.3))
    rt.drain()
    rt.pump_changes()
    # THEN the effects kept the rules, some workers were killed, and the sidecars match the bucket
    assert rt.check_effects() == []
    assert rt.check_sidecars() == []
    assert any(run.crashed_before_commit for run in rt.effects)
    # and every change whose effect ran was published once, with its id, in per-key order;
    # the last event of each key is the row's current change
    published = [c["detail"]["id"] for c in rt.changes]
    assert len(published) == len(set(published))
    assert {run.change_id for run in rt.effects} <= set(published)
    last: dict[str, dict[str, Any]] = {}
    for c in rt.changes:
        assert c["source"] == "s3ingest"
        prev = last.get(c["detail"]["key"])
        assert prev is None or c["detail"]["rev"] > prev["rev"]
        last[c["detail"]["key"]] = c["detail"]
    for row in rt.ledger_rows():
        assert last[row.key]["id"] == row.change_id
    assert rt.compare().converged


# -- effects converge with the bucket (CONTRACT C11, C12, C15) ----------------------------------

converging_ops = st.lists(
    st.tuples(
        st.sampled_from(["put", "put", "delete", "flush", "flush"]),
        st.sampled_from(["a", "a", "b c"]),
        st.sampled_from([b"x", b"y"]),
    ),
    min_size=3,
    max_size=14,
)


@pytest.mark.contract("C11", "C12", "C15")
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    history=converging_ops,
    versioning=st.sampled_from(["Enabled", "Suspended", None]),
    crash=st.sampled_from([0.0, 0.4]),
    data=st.data(),
)
def test_after_one_reconciliation_every_effect_output_describes_the_bucket(
    emulator: Any,
    history: list[tuple[str, str, bytes]],
    versioning: str | None,
    crash: float,
    data: st.DataObject,
) -> None:
    # GIVEN a history whose keys return to identical bytes (same ETag, null versions when
    # unversioned or Suspended), delivered over several flushes that drop, duplicate and reorder
    # events and kill workers between effect and commit
    h = Harness(emulator, versioning, crash=crash, seed=data.draw(st.integers(0, 999)))
    #: what the effect output holds per key: the last completed run's (kind, version, ETag)
    output: dict[str, tuple[str, str | None, str | None]] = {}
    record = h.process

    def process(change: AppliedChange, content: PinnedContent | None) -> None:
        record(change, content)  # raises SupersededError before any output is written
        output[change.key] = (change.kind, change.version_id, change.etag)

    h.rt.service.effects = kill_after_effect(
        wiring.effect_runner(process, h.rt.s3, clock_ms=h.clock), h.maybe_crash
    )

    rng = random.Random(data.draw(st.integers(0, 2**16)))
    delayed: list[Change] = []

    def flush(last: bool = False) -> None:
        drop = rng.choice((0.0, 0.5, 0.8))  # each flush loses events at its own rate
        deliveries: list[Change] = []
        waiting = [*delayed, *_changes(h.rt)]
        delayed.clear()
        for e in waiting:
            fate = rng.random()
            if fate < drop:
                continue  # lost for good
            if fate < drop + (1 - drop) / 3 and not last:
                delayed.append(e)  # arrives in a later flush, after newer writes
                continue
            deliveries.extend([e] * rng.choice((1, 1, 2)))
        rng.shuffle(deliveries)
        h.deliver(deliveries)

    for op, key, body in history:
        if op == "put":
            h.put(key, body)
        elif op == "delete":
            h.rt.faithful.delete(key)
        else:
            flush()
    flush(last=True)

    # WHEN delivery is quiescent and one reconciliation runs, its repairs delivered the same way
    report = h.rt.reconciler().run(ReconcileRequest(source="listing", margin_ms=0))
    repairs = _queued(h.rt)
    assert len(repairs) == report.repairs_queued
    event(f"effects behind found: {report.effects_behind > 0}")
    h.deliver(repairs)

    # THEN the ledger equals the bucket, no effect is pending or behind its row, and every
    # visible key's effect output describes its current version and ETag; every other key's
    # output, if any, is a removal
    assert h.rt.compare().converged
    for row in h.rt.ledger_rows():
        if row.change_id in h.ledger.never_held:  # a delete of a key never held: no effect
            assert row.effect is None and not row.present, row
            continue
        assert row.effect_status == "done", row
        assert row.effect is not None and row.effect.done_change_id == row.change_id
    visible = {o["key"]: o for o in h.rt.bucket_objects()}
    for key, obj in visible.items():
        assert output.get(key) == ("created", obj["version_id"], obj["etag"]), key
    for key in set(output) - set(visible):
        assert output[key][0] == "removed", key
    assert h.read_errors == []


def _queued(rt: LocalRuntime) -> list[Change]:
    """Receive and delete every message of the ingest queue; return its changes."""
    changes: list[Change] = []
    while True:
        msgs = rt.sqs.receive_message(QueueUrl=rt.resources.queue_url, MaxNumberOfMessages=10).get(
            "Messages", []
        )
        if not msgs:
            return changes
        for m in msgs:
            changes.extend(parse_body(m["Body"]).changes)
            rt.sqs.delete_message(QueueUrl=rt.resources.queue_url, ReceiptHandle=m["ReceiptHandle"])


@pytest.mark.contract("C8", "C11", "C12")
def test_a_superseded_effect_whose_newer_events_were_lost_is_re_run_by_reconciliation(
    emulator: Any,
) -> None:
    # GIVEN an unversioned key written x, y, then x again; only the first event is delivered, so
    # its effect's pinned read (If-Match x) finds y: superseded
    h = Harness(emulator, None)
    h.put("k", b"x")
    first = _changes(h.rt)
    h.put("k", b"y")
    (result,) = h.deliver(first)
    h.put("k", b"x")
    _changes(h.rt)  # the events of y and of x again are lost for good
    assert result.outcome is Outcome.SUPERSEDED and result.extra["effect"] == "superseded"
    (row,) = h.rt.ledger_rows()
    assert row.effect_status == "superseded"
    assert row.effect is not None and row.effect.done_change_id is None
    # WHEN reconciliation runs: the row equals the bucket (same null version, same ETag), yet
    # the effect is behind
    report = h.rt.reconciler().run(ReconcileRequest(source="listing", margin_ms=0))
    assert report.drift_total == 0
    assert (report.effects_behind, report.pending_effects, report.repairs_queued) == (1, 0, 1)
    (repaired,) = h.deliver(_queued(h.rt))
    # THEN the repair re-ran the effect for the row's change against the current object
    assert repaired.outcome is Outcome.DUPLICATE
    assert repaired.extra["effect"] == "resumed-done"
    assert repaired.extra["resumed_change_id"] == row.change_id
    assert "change_id" not in repaired.extra  # the repair applied no change of its own
    (after,) = h.rt.ledger_rows()
    assert after.effect is not None and row.effect is not None
    assert after.effect.token is not None and row.effect.token is not None
    assert after.effect_status == "done" and after.effect.done_change_id == row.change_id
    assert after.effect.token > row.effect.token
    assert [c.change_id for c in h.effects] == [row.change_id]
    # and a second reconciliation finds nothing behind
    again = h.rt.reconciler().run(ReconcileRequest(source="listing", margin_ms=0))
    assert (again.effects_behind, again.repairs_queued) == (0, 0)
