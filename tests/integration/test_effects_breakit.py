"""Adversarial tests of the effect protocol and the change stream (CONTRACT C5, C7, C8, C11, C15;
docs/effects.md).

Each test states one guarantee and tries to break it on the emulator with the real ledger, the
real effect protocol and the real S3 reads. The processor here only records what it was given.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import Counter
from typing import Any, cast

import pytest

from s3ingest.local.emulator.chaos import Chaos, kill_after_effect
from s3ingest.local.stack.runtime import LocalRuntime, local_settings
from s3ingest_fn import wiring
from s3ingest_fn.core.effects import (
    AppliedChange,
    PinnedContent,
    SupersededError,
)
from s3ingest_fn.core.events import parse_body
from s3ingest_fn.core.model import Change, Kind, Outcome, TransientError
from s3ingest_fn.core.row import LedgerRow
from s3ingest_fn.core.sequencer import normalize
from s3ingest_fn.services.backfill import handle_invocation
from tests.integration.effects_support import Clock, Killed, RecordingLedger

# -- harness ---------------------------------------------------------------------------------


class Rig:
    """A runtime whose service runs a recording processor under the real protocol.

    ``fail`` is a list of actions consumed one per processor call: ``"raise"`` (processor
    error), ``"superseded"`` (processor raises SupersededError), ``"crash"`` (killed after the
    effect, before the commit, lease expired), ``"crash-live"`` (killed, lease still live), or
    ``None`` (run normally).
    """

    def __init__(
        self,
        emulator: Any,
        versioning: str | None = "Enabled",
        *,
        settings: Any = None,
        delay: float = 0.0,
    ) -> None:
        self.rt = LocalRuntime(emulator, settings, versioning=versioning)
        self.ledger = RecordingLedger(self.rt.ledger)
        self.rt.service.ledger = self.ledger
        self.clock = Clock()
        self.delay = delay
        self.fail: list[str | None] = []
        self.runs: list[AppliedChange] = []
        #: (change, start monotonic, end monotonic) of every completed processor call
        self.spans: list[tuple[AppliedChange, float, float]] = []
        self.crashed: list[tuple[str, int]] = []
        #: change ids whose pinned read found the version gone or replaced (C8)
        self.superseded: list[str] = []
        self._lock = threading.Lock()
        self.rt.service.effects = kill_after_effect(
            wiring.effect_runner(self.process, self.rt.s3, clock_ms=self.clock), self.after
        )
        # the fake lease clock never moves while a change waits for a live lease: do not sleep
        self.rt.service.sleep = lambda seconds: None

    def process(self, change: AppliedChange, content: PinnedContent | None) -> None:
        start = time.monotonic()
        with self._lock:
            action = self.fail.pop(0) if self.fail else None
        if action == "raise":
            raise ConnectionError("downstream unavailable")
        if action == "superseded":
            raise SupersededError("processor says superseded")
        if content is not None:
            try:
                content.read()
            except SupersededError:
                with self._lock:
                    self.superseded.append(change.change_id)
                raise
        if self.delay:
            time.sleep(self.delay)
        with self._lock:
            self.runs.append(change)
            self.spans.append((change, start, time.monotonic()))
            if action in ("crash", "crash-live"):
                self.crashed.append((change.change_id, change.token))
                if action == "crash":
                    self.clock.expire_leases()
                self._crash_next = True

    _crash_next = False

    def after(self, change: AppliedChange) -> None:
        with self._lock:
            crash, self._crash_next = self._crash_next, False
        if crash:
            raise Killed(change.key)

    def changes(self) -> list[Change]:
        """The S3 events emitted since the last call, parsed."""
        return [parse_body(json.dumps(e)).changes[0] for e in self.rt.faithful.take_pending()]

    def repair(self, key: str) -> Change:
        body = {
            "s3ingestRepair": {"bucket": self.rt.resources.bucket, "key": key, "reason": "test"}
        }
        return parse_body(json.dumps(body)).changes[0]

    def handle(self, change: Change) -> Any:
        return self.rt.service.handle(change)

    def deliver(self, changes: list[Change], max_rounds: int = 50) -> list[Any]:
        """At-least-once: a message whose worker died or that was retried comes back last."""
        queue = list(changes)
        results: list[Any] = []
        for _ in range(max_rounds * (len(changes) + 1)):
            if not queue:
                return results
            change = queue.pop(0)
            try:
                results.append(self.handle(change))
            except (Killed, TransientError):
                queue.append(change)
        raise AssertionError("delivery did not become quiescent")

    def rows(self) -> dict[str, LedgerRow]:
        return {r.key: r for r in self.rt.ledger_rows()}

    def effects_of(self, key: str) -> list[AppliedChange]:
        return [c for c in self.runs if c.key == key]

    def version_of(self, c: AppliedChange) -> tuple[str, str | None, str | None]:
        return (c.kind, c.version_id, c.etag)


def _no_pending(rig: Rig) -> None:
    pending = {k: r for k, r in rig.rows().items() if r.effect_status not in ("done", "superseded")}
    assert pending == {}, f"rows left without a committed effect: {pending}"


# -- observations: repairs, backfill, version deletes, verify path ---------------------------


@pytest.mark.contract("C7", "C11")
def test_a_late_live_event_for_the_version_a_repair_already_processed_runs_no_second_effect(
    emulator: Any,
) -> None:
    # GIVEN an object whose live event is late, and a repair that observed the same version first
    rig = Rig(emulator, "Enabled")
    rig.rt.faithful.put("k", b"one")
    (late,) = rig.changes()
    assert rig.handle(rig.repair("k")).outcome is Outcome.APPLIED
    assert len(rig.runs) == 1
    # WHEN the live event of that very version arrives
    rig.handle(late)
    # THEN the ledger takes its sequencer, but the version's effect is not run a second time and
    # no second change is published for it (C11: effectively once per version; "a duplicate
    # triggers a second side effect" is a failure the product exists to prevent)
    assert [rig.version_of(c) for c in rig.runs] == [rig.version_of(rig.runs[0])], [
        (c.change_id, c.sequencer, c.source) for c in rig.runs
    ]
    assert len(rig.ledger.applied) == 1, "a second applied change (op=apply) was written"
    _no_pending(rig)


@pytest.mark.contract("C11")
def test_a_resumed_effect_is_given_its_change_as_applied_not_the_rows_last_write(
    emulator: Any,
) -> None:
    # GIVEN a repair that applied the object's version, its processor failing
    rig = Rig(emulator, "Enabled")
    rig.rt.faithful.put("k", b"one")
    (late,) = rig.changes()
    rig.fail = ["raise", "raise"]
    with pytest.raises(TransientError, match="processor-failed"):
        rig.handle(rig.repair("k"))
    # and the late live event of that version, which moves the row's sequencer (no new change)
    # and resumes the effect, failing again
    with pytest.raises(TransientError, match="processor-failed"):
        rig.handle(late)
    row = rig.rows()["k"]
    assert (row.source, row.change_seq, row.effect_status) == ("live", None, "pending")
    # WHEN the live event comes back and resumes the effect once more
    assert rig.handle(late).extra.get("effect") == "resumed-done"
    # THEN the processor was given the repair's change as it was applied: an observation (no
    # sequencer) from a repair, not a live change without a sequencer
    (run,) = rig.runs
    assert run.change_id == row.change_id
    assert (run.source, run.sequencer, run.event_name) == ("repair", None, "Repair/test")
    _no_pending(rig)


@pytest.mark.contract("C7", "C11")
def test_stale_events_over_an_observed_row_do_not_re_run_the_current_versions_effect(
    emulator: Any,
) -> None:
    # GIVEN two puts whose events are both late; a repair observed the second version
    rig = Rig(emulator, "Enabled")
    rig.rt.faithful.put("k", b"one")
    rig.rt.faithful.put("k", b"two")
    first, second = rig.changes()
    assert rig.handle(rig.repair("k")).outcome is Outcome.APPLIED
    # WHEN the older event, a duplicate of it, and the newer one arrive
    outcomes = [rig.handle(c).outcome for c in (first, first, second)]
    # THEN the second version's effect ran once; the older event did not add effects
    versions = Counter(rig.version_of(c) for c in rig.runs)
    assert max(versions.values()) == 1, (
        outcomes,
        [(c.sequencer, c.version_id, c.change_id) for c in rig.runs],
    )
    _no_pending(rig)
    assert rig.rt.compare().converged


@pytest.mark.contract("C4", "C11")
def test_deleting_a_non_current_version_does_not_re_run_the_visible_versions_effect(
    emulator: Any,
) -> None:
    # GIVEN v1 then v2 of a key, both applied and processed
    rig = Rig(emulator, "Enabled")
    v1 = rig.rt.faithful.put("k", b"one")
    rig.rt.faithful.put("k", b"two")
    rig.deliver(rig.changes())
    assert len(rig.runs) == 2
    # WHEN the non-current v1 is permanently deleted (the key stays visible as v2)
    rig.rt.faithful.delete("k", version_id=v1.version_id)
    (removal,) = rig.changes()
    assert removal.kind is Kind.VERSION_REMOVED
    rig.handle(removal)
    # THEN nothing visible changed, so no effect re-runs for v2
    assert [rig.version_of(c) for c in rig.runs].count(rig.version_of(rig.runs[1])) == 1, [
        (c.sequencer, c.version_id) for c in rig.runs
    ]
    _no_pending(rig)


@pytest.mark.contract("C4", "C11")
def test_deleting_the_current_version_runs_the_effect_of_the_version_it_exposes(
    emulator: Any,
) -> None:
    # GIVEN v1 then v2, and v2 permanently deleted (v1 is visible again); events in any order
    for order in ((0, 1, 2), (2, 1, 0), (1, 2, 0)):
        rig = Rig(emulator, "Enabled")
        v1 = rig.rt.faithful.put("k", b"one")
        v2 = rig.rt.faithful.put("k", b"two")
        rig.rt.faithful.delete("k", version_id=v2.version_id)
        events = rig.changes()
        # WHEN they are delivered (with duplicates)
        rig.deliver([events[i] for i in order] + [events[order[0]]])
        # THEN the last effect describes the visible v1, every applied change whose version
        # was still readable ran its effect once, in sequencer order, and the row's change is
        # committed
        last = rig.runs[-1]
        assert (last.kind, last.version_id) == ("created", v1.version_id), order
        ids = [c.change_id for c in rig.runs]
        assert len(ids) == len(set(ids)), order
        seqs = [cast(str, normalize(c.sequencer)) for c in rig.runs if c.sequencer]
        assert seqs == sorted(seqs), order
        assert ids == [cid for _, cid, _ in rig.ledger.applied if cid not in rig.superseded], order
        _no_pending(rig)
        assert rig.rt.compare().converged


@pytest.mark.contract("C11")
def test_distinct_observed_tombstones_of_one_key_get_distinct_change_ids(emulator: Any) -> None:
    # GIVEN a key created, deleted (event lost, repaired), created again, deleted again (event
    # lost, repaired)
    rig = Rig(emulator, "Enabled")
    tombstone_ids = []
    for body in (b"one", b"two"):
        rig.rt.faithful.put("k", body)
        rig.deliver(rig.changes())
        rig.rt.faithful.delete("k")
        rig.changes()  # the delete event is lost
        assert rig.handle(rig.repair("k")).outcome is Outcome.APPLIED
        tombstone_ids.append(rig.runs[-1].change_id)
        assert rig.runs[-1].kind == "removed"
    # THEN the two tombstones are two changes: a consumer or processor that drops repeated ids
    # (as the docs tell it to: "Use it as an idempotency key downstream") must not drop the
    # second one
    applied_ids = [cid for _, cid, _ in rig.ledger.applied]
    assert len(applied_ids) == len(set(applied_ids)), applied_ids
    assert tombstone_ids[0] != tombstone_ids[1]


@pytest.mark.contract("C11")
def test_unversioned_reupload_of_the_same_bytes_after_a_repaired_delete_gets_a_new_change_id(
    emulator: Any,
) -> None:
    # GIVEN an unversioned key: "same" uploaded (repaired), deleted (repaired), "same" again
    # (repaired): three changes, two of which have the same ETag
    rig = Rig(emulator, None)
    for op in ("put", "delete", "put"):
        if op == "put":
            rig.rt.faithful.put("k", b"same")
        else:
            rig.rt.faithful.delete("k")
        rig.changes()  # every event lost
        assert rig.handle(rig.repair("k")).outcome is Outcome.APPLIED
    ids = [c.change_id for c in rig.runs]
    # THEN the three effects have three ids
    assert len(ids) == 3 and len(set(ids)) == 3, ids


@pytest.mark.contract("C11")
def test_a_resumed_effect_is_given_the_same_change_as_the_original_run(emulator: Any) -> None:
    # GIVEN a sequenced create applied, then a repair that observed a newer, event-less write,
    # whose worker is killed after the effect
    rig = Rig(emulator, "Enabled")
    rig.rt.faithful.put("k", b"one")
    rig.deliver(rig.changes())
    rig.rt.faithful.put("k", b"two")
    rig.changes()  # lost
    rig.fail = ["crash"]
    with pytest.raises(Killed):
        rig.handle(rig.repair("k"))
    # WHEN the repair message comes back, the effect is resumed
    result = rig.handle(rig.repair("k"))
    assert result.extra.get("effect") == "resumed-done"
    first, again = rig.runs[-2], rig.runs[-1]
    # THEN the processor sees the same change (only the fencing token differs)
    assert first.change_id == again.change_id
    assert {**first.as_dict(), "token": 0} == {**again.as_dict(), "token": 0}


@pytest.mark.contract("C11", "C13")
def test_backfill_runs_each_objects_effect_once_and_a_second_run_changes_nothing(
    emulator: Any,
) -> None:
    # GIVEN objects that existed before deployment (no events), one task's processor fails once
    rig = Rig(emulator, "Enabled")
    for i in range(4):
        rig.rt.faithful.put(f"pre/{i}", f"body {i}".encode())
    rig.changes()
    rig.fail = [None, "raise"]
    tasks = [
        {
            "taskId": f"t{i}",
            "s3Bucket": rig.rt.resources.bucket,
            "s3Key": f"pre/{i}",
            "s3VersionId": None,
        }
        for i in range(4)
    ]
    event = {
        "invocationSchemaVersion": "2.0",
        "invocationId": "inv",
        "job": {"id": "j"},
        "tasks": tasks,
    }
    # WHEN the backfill invocation runs, then (a second backfill) runs again, twice
    first = handle_invocation(event, rig.rt.service)
    # the failed effect's row is written: the task succeeded, its effect pending (issue 34)
    codes = Counter(r["resultCode"] for r in first["results"])
    assert codes == Counter({"Succeeded": 4})
    pending = [r for r in first["results"] if r["resultString"].startswith("effects-pending: ")]
    assert len(pending) == 1 and "processor-failed" in pending[0]["resultString"]
    handle_invocation(event, rig.rt.service)
    again = handle_invocation(event, rig.rt.service)
    # THEN every object's effect completed exactly once, nothing is pending
    assert all(r["resultCode"] == "Succeeded" for r in again["results"])
    assert sorted(c.key for c in rig.runs) == [f"pre/{i}" for i in range(4)]
    _no_pending(rig)


# -- concurrency: the lease keeps effects of one key from overlapping -----------------------


def _race(rig: Rig, changes: list[Change], attempts: int = 400) -> list[Any]:
    """Handle every change on its own thread, all released at once; a retried change (live
    lease, row moved) is tried again on its thread, as SQS would bring it back."""
    barrier = threading.Barrier(len(changes))
    results: list[Any] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def worker(change: Change) -> None:
        barrier.wait()
        for _ in range(attempts):
            try:
                result = rig.handle(change)
            except TransientError:
                time.sleep(0.005)
                continue
            except BaseException as exc:  # reported below
                with lock:
                    errors.append(exc)
                return
            with lock:
                results.append(result)
            return
        with lock:
            errors.append(AssertionError(f"never settled: {change.raw_sequencer}"))

    threads = [threading.Thread(target=worker, args=(c,)) for c in changes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    return results


def _assert_serial_effects(rig: Rig) -> None:
    """Per key: effects never overlapped in time, ran in claim (token) order, sequenced ones in
    sequencer order, and the last is the row's committed change."""
    rows = rig.rows()
    keys = {c.key for c, _, _ in rig.spans}
    for key in keys:
        spans = sorted((s for s in rig.spans if s[0].key == key), key=lambda s: s[1])
        for (a, _, a_end), (b, b_start, _) in itertools.pairwise(spans):
            assert a_end <= b_start, (
                f"{key}: effect {a.change_id} (token {a.token}) still "
                f"running when {b.change_id} (token {b.token}) started"
            )
        tokens = [c.token for c, _, _ in spans]
        assert tokens == sorted(set(tokens)), tokens
        # sequenced live changes in sequencer order; a resumed effect of a row holding the
        # bucket's observed state (a live event the bucket had moved past, C7) has no sequencer
        # to order by
        seqs = [
            cast(str, normalize(c.sequencer))
            for c, _, _ in spans
            if c.source == "live" and c.sequencer
        ]
        assert seqs == sorted(seqs), key
        row = rows[key]
        assert row.effect_status in ("done", "superseded")
        if row.effect_status == "done":
            assert spans[-1][0].change_id == row.change_id


@pytest.mark.contract("C10", "C11")
def test_racing_threads_with_a_slow_processor_never_overlap_effects_of_one_key(
    emulator: Any,
) -> None:
    # GIVEN 5 versions of one key, each event delivered 3 times, and a processor taking 40 ms
    rig = Rig(emulator, "Enabled", delay=0.04)
    for i in range(5):
        rig.rt.faithful.put("hot", f"body {i}".encode())
    events = rig.changes()
    # WHEN 15 threads handle them at the same moment
    _race(rig, [e for e in events for _ in range(3)])
    # THEN effects of the key ran one at a time, in order, and the newest one is the row's
    _assert_serial_effects(rig)
    assert rig.runs[-1].sequencer == events[-1].raw_sequencer
    ids = [c.change_id for c in rig.runs]
    assert len(ids) == len(set(ids)), "an effect ran twice without a crash"
    assert rig.rt.compare().converged


@pytest.mark.contract("C10", "C11")
def test_racing_mixed_paths_with_failures_keep_effects_serial_and_nothing_pending(
    emulator: Any,
) -> None:
    # GIVEN puts, a delete marker and a version delete of one key, repairs and a backfill-style
    # observation racing with them, a slow processor that fails twice along the way
    rig = Rig(emulator, "Enabled", delay=0.02)
    rig.fail = [None, "raise", None, None, "raise"]
    v1 = rig.rt.faithful.put("hot", b"one")
    rig.rt.faithful.put("hot", b"two")
    rig.rt.faithful.delete("hot")
    rig.rt.faithful.put("hot", b"three")
    rig.rt.faithful.delete("hot", version_id=v1.version_id)
    events = rig.changes()
    work = [e for e in events for _ in range(2)] + [rig.repair("hot") for _ in range(4)]
    # WHEN all of it is handled at once
    _race(rig, work)
    # and delivery goes quiet with one more repair (as reconciliation would send)
    rig.deliver([rig.repair("hot")])
    # THEN effects never overlapped, nothing is pending, and the ledger equals the bucket
    _assert_serial_effects(rig)
    _no_pending(rig)
    assert rig.rt.compare().converged


# -- crash timing -----------------------------------------------------------------------------


@pytest.mark.contract("C11")
def test_repeated_crashes_re_run_the_same_effect_with_growing_tokens_until_it_commits(
    emulator: Any,
) -> None:
    # GIVEN a worker killed after the effect three times in a row
    rig = Rig(emulator, "Enabled")
    rig.rt.faithful.put("k", b"one")
    (event,) = rig.changes()
    rig.fail = ["crash", "crash", "crash"]
    # WHEN the message keeps coming back
    rig.deliver([event])
    # THEN the same change ran 4 times with strictly increasing tokens, and committed once
    assert len({c.change_id for c in rig.runs}) == 1 and len(rig.runs) == 4
    tokens = [c.token for c in rig.runs]
    assert tokens == sorted(set(tokens))
    k = rig.rows()["k"]
    assert k.effect_status == "done" and k.effect is not None and k.effect.token == tokens[-1]
    # and a further duplicate runs nothing
    assert rig.handle(event).outcome is Outcome.DUPLICATE and len(rig.runs) == 4


@pytest.mark.contract("C11")
def test_a_crash_with_a_live_lease_holds_back_the_newer_event_and_duplicates_do_not_resume(
    emulator: Any,
) -> None:
    # GIVEN the first put's worker killed after its effect, its lease still live
    rig = Rig(emulator, "Enabled")
    rig.rt.faithful.put("k", b"one")
    rig.rt.faithful.put("k", b"two")
    older, newer = rig.changes()
    rig.fail = ["crash-live"]
    with pytest.raises(Killed):
        rig.handle(older)
    # WHEN the newer event and a duplicate of the older arrive while the lease is live
    with pytest.raises(TransientError, match="effect-in-progress"):
        rig.handle(newer)
    assert rig.handle(older).outcome is Outcome.DUPLICATE
    assert len(rig.runs) == 1
    # THEN once the lease ran out, the older message's retry re-runs its effect, then the newer
    rig.clock.expire_leases()
    assert rig.handle(older).extra.get("effect") == "resumed-done"
    assert rig.handle(newer).outcome is Outcome.APPLIED
    assert [c.sequencer for c in rig.runs] == [
        older.raw_sequencer,
        older.raw_sequencer,
        newer.raw_sequencer,
    ]
    _no_pending(rig)


@pytest.mark.contract("C11")
def test_a_stale_event_resumes_the_crashed_effect_of_the_newest_change(emulator: Any) -> None:
    # GIVEN v1, v2; v2's worker killed after its effect (lease expired); v2's retry not yet back
    rig = Rig(emulator, "Enabled")
    rig.rt.faithful.put("k", b"one")
    rig.rt.faithful.put("k", b"two")
    older, newer = rig.changes()
    rig.fail = ["crash"]
    with pytest.raises(Killed):
        rig.handle(newer)
    # WHEN the older (stale) event arrives first
    result = rig.handle(older)
    # THEN it is stale for the ledger but re-runs v2's effect, and v2's retry then runs nothing
    assert result.outcome is Outcome.STALE and result.extra.get("effect") == "resumed-done"
    assert rig.handle(newer).outcome is Outcome.DUPLICATE
    assert [c.sequencer for c in rig.runs] == [newer.raw_sequencer] * 2
    _no_pending(rig)


@pytest.mark.contract("C11")
def test_a_crash_then_a_newer_event_takes_over_and_the_old_effect_is_not_re_run_over_it(
    emulator: Any,
) -> None:
    # GIVEN v1's worker killed after its effect (lease expired), v2's event waiting
    rig = Rig(emulator, "Enabled")
    rig.rt.faithful.put("k", b"one")
    rig.rt.faithful.put("k", b"two")
    older, newer = rig.changes()
    rig.fail = ["crash"]
    with pytest.raises(Killed):
        rig.handle(older)
    # WHEN v2 arrives before v1's retry
    assert rig.handle(newer).outcome is Outcome.APPLIED
    assert rig.handle(older).outcome is Outcome.STALE
    # THEN v1's effect is never run after v2's
    assert [c.sequencer for c in rig.runs] == [older.raw_sequencer, newer.raw_sequencer]
    _no_pending(rig)


@pytest.mark.contract("C8", "C11")
def test_a_processor_raising_superseded_commits_superseded_and_is_not_retried(
    emulator: Any,
) -> None:
    # GIVEN a processor that says the change is superseded
    rig = Rig(emulator, "Enabled")
    rig.rt.faithful.put("k", b"one")
    (event,) = rig.changes()
    rig.fail = ["superseded"]
    # WHEN the event is handled, and delivered again
    result = rig.handle(event)
    # THEN the record ends superseded (no retry) and the duplicate runs nothing
    assert result.outcome is Outcome.SUPERSEDED and result.extra.get("effect") == "superseded"
    assert rig.handle(event).outcome is Outcome.DUPLICATE
    assert rig.runs == [] and rig.rows()["k"].effect_status == "superseded"


@pytest.mark.contract("C11")
def test_a_failed_effect_then_a_newer_event_the_newer_runs_and_nothing_is_left_pending(
    emulator: Any,
) -> None:
    # GIVEN v1's processor failed (claim released), v2 arrives before v1's retry
    rig = Rig(emulator, "Enabled")
    rig.rt.faithful.put("k", b"one")
    rig.rt.faithful.put("k", b"two")
    older, newer = rig.changes()
    rig.fail = ["raise"]
    with pytest.raises(TransientError, match="processor-failed"):
        rig.handle(older)
    # WHEN v2 and then v1's retry are handled
    assert rig.handle(newer).outcome is Outcome.APPLIED
    assert rig.handle(older).outcome is Outcome.STALE
    # THEN (documented, docs/effects.md) v1's effect is obsolete and never completes; v2's did
    assert [c.sequencer for c in rig.runs] == [newer.raw_sequencer]
    _no_pending(rig)


@pytest.mark.contract("C7", "C11")
def test_a_crash_during_a_repair_effect_is_resumed_by_the_repairs_retry(emulator: Any) -> None:
    # GIVEN a repair (event lost) whose worker is killed after the effect, twice
    rig = Rig(emulator, None)
    rig.rt.faithful.put("k", b"one")
    rig.changes()
    rig.fail = ["crash", "crash"]
    # WHEN the repair message keeps coming back
    rig.deliver([rig.repair("k")])
    # THEN the effect ran until committed, once per crash plus one
    assert len(rig.runs) == 3 and len({c.change_id for c in rig.runs}) == 1
    _no_pending(rig)


# -- no processor: C5 unchanged ----------------------------------------------------------------


@pytest.mark.contract("C5")
def test_without_a_processor_every_sequenced_event_is_one_update_item_and_rows_have_no_fx(
    emulator: Any,
) -> None:
    # GIVEN the service without a processor, creates, overwrites and delete markers of keys
    rig = Rig(emulator, "Enabled")
    rig.rt.service.effects = None
    calls: list[str] = []
    rig.rt.ddb.meta.events.register(
        "before-call.dynamodb", lambda model, **_: calls.append(model.name)
    )
    for i in range(9):
        rig.rt.faithful.put(f"k{i % 3}", f"v{i}".encode())
        if i % 4 == 3:
            rig.rt.faithful.delete(f"k{i % 3}")
    events = rig.changes()
    # WHEN every event is delivered twice, newest first
    deliveries = list(reversed(events)) * 2
    outcomes = Counter(rig.handle(e).outcome for e in deliveries)
    # THEN one DynamoDB request per event: its UpdateItem, or for a delete the bucket
    # contradicts (delivered after the key's re-put, C4) one GetItem; no effects, no fx
    assert len(calls) == len(deliveries)
    assert set(calls) <= {"UpdateItem", "GetItem"}
    assert calls.count("GetItem") <= sum(e.kind is not Kind.CREATED for e in deliveries)
    assert outcomes[Outcome.APPLIED] == 3
    assert rig.runs == []
    for row in rig.rows().values():
        assert row.effect is None and row.op == "apply"


# -- change stream and replay, through SQS, the handler and the relay ------------------------


def _chaotic_run(
    emulator: Any, versioning: str | None, seed: int
) -> tuple[LocalRuntime, RecordingLedger]:
    rt = LocalRuntime(emulator, local_settings(), versioning=versioning, seed=seed)
    recording = RecordingLedger(rt.ledger)
    rt.service.ledger = recording
    for i in range(14):
        key = f"k{i % 4}"
        op = rt.faithful.put(key, f"body {i}")
        if versioning and i % 7 == 3:
            rt.faithful.delete(key, version_id=op.version_id)
        elif i % 5 == 4:
            rt.faithful.delete(key)
    rt.flush(Chaos(seed=seed, duplicate=0.5, reorder=True, drop=0.15, crash=0.3))
    rt.drain()
    rt.reconcile("listing")
    rt.pump_changes()
    return rt, recording


@pytest.mark.contract("C11", "C15")
@pytest.mark.parametrize(("versioning", "seed"), [("Enabled", 7), (None, 8)])
def test_after_a_chaotic_run_every_applied_change_is_published_exactly_once(
    emulator: Any, versioning: str | None, seed: int
) -> None:
    # GIVEN puts, delete markers and version deletes of 4 keys, delivered duplicated, reordered,
    # partly dropped, with workers killed between effect and commit, then one reconciliation
    # (these seeds include crashes, drops and applied repairs; seeds 1-8 of both kinds were
    # also run by hand and held)
    rt, recording = _chaotic_run(emulator, versioning, seed=seed)
    # THEN the ledger equals the bucket, the effects kept their rules, nothing is pending ...
    assert rt.compare().converged
    assert rt.check_effects() == []
    assert rt.check_sidecars() == []
    # ... and the change stream carried each applied write once: no loss, and no republication
    # from claim, release or commit writes
    published = Counter(c["detail"]["id"] for c in rt.changes)
    applied = Counter(cid for _, cid, _ in recording.applied)
    assert published == applied
    # ... in per-key revision order, ending with each row's current change
    last: dict[str, dict[str, Any]] = {}
    for c in rt.changes:
        prev = last.get(c["detail"]["key"])
        assert prev is None or c["detail"]["rev"] > prev["rev"]
        last[c["detail"]["key"]] = c["detail"]
    for row in rt.ledger_rows():
        assert last[row.key]["id"] == row.change_id


@pytest.mark.contract("C11")
def test_a_relay_retry_republishes_the_same_ids_in_the_same_order(emulator: Any) -> None:
    # GIVEN a chaotic run whose changes were published once
    from s3ingest_fn.adapters.eventbridge import EventBridgePublisher
    from s3ingest_fn.handlers.change_stream import relay
    from s3ingest_fn.services.changes import is_applied_change

    rt, _ = _chaotic_run(emulator, "Enabled", seed=4)
    first = [c["detail"]["id"] for c in rt.changes]
    # WHEN the relay is invoked again over the whole stream (a retried batch)
    streams = emulator.client("dynamodbstreams")
    arn = rt.resources.stream_arn
    records: list[dict[str, Any]] = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        it = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while it:
            page = streams.get_records(ShardIterator=it, Limit=100)
            if not page.get("Records"):
                break
            records.extend(page["Records"])
            it = page.get("NextShardIterator")

    class Capture:
        entries: list[dict[str, Any]] = []

        def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
            self.entries.extend(Entries)
            return {"Entries": [{"EventId": str(i)} for i, _ in enumerate(Entries)]}

    capture: Any = Capture()  # an EventBridge client's put_events, answered in memory
    relay(EventBridgePublisher(capture), "bus", {"Records": records})
    # THEN it republishes exactly the applied changes, with the same ids, in the same order
    again = [json.loads(e["Detail"])["id"] for e in capture.entries]
    assert again == first
    assert sum(is_applied_change(r) for r in records) == len(first)


@pytest.mark.contract("C11", "C14")
@pytest.mark.slow  # about 10 s: a chaotic run through SQS, then a replay of the archive
def test_replay_after_a_chaotic_run_runs_no_effect_and_publishes_no_change(emulator: Any) -> None:
    # GIVEN a chaotic run, quiescent and reconciled
    rt, recording = _chaotic_run(emulator, "Enabled", seed=7)
    effects, changes, applied = len(rt.effects), len(rt.changes), len(recording.applied)
    rows = {r.key: (r.rev, r.effect_status) for r in rt.ledger_rows()}
    rt.delivered.clear()
    # WHEN the whole archive is replayed
    rt.replay()
    rt.pump_changes()
    # THEN every replayed event is a duplicate or stale, or a delete the bucket contradicts
    # (superseded, nothing written: C4); no effect ran, no change was published
    outcomes = Counter(d.result.outcome for d in rt.delivered)
    assert set(outcomes) <= {Outcome.DUPLICATE, Outcome.STALE, Outcome.SUPERSEDED}, outcomes
    assert all(
        d.result.reason == "delete-contradicted-by-bucket"
        for d in rt.delivered
        if d.result.outcome is Outcome.SUPERSEDED
    )
    assert all(d.result.extra.get("source") == "replay" for d in rt.delivered)
    assert (len(rt.effects), len(rt.changes), len(recording.applied)) == (effects, changes, applied)
    assert {r.key: (r.rev, r.effect_status) for r in rt.ledger_rows()} == rows


@pytest.mark.contract("C11", "C12")
def test_reconciliation_resumes_an_effect_whose_message_was_lost(emulator: Any) -> None:
    # GIVEN a change applied whose processor failed (claim released, fx=pending) and whose
    # message then never came back (maxReceiveCount reached during a downstream outage: DLQ)
    rig = Rig(emulator, "Enabled")
    rig.rt.faithful.put("k", b"one")
    (event,) = rig.changes()
    rig.fail = ["raise"]
    with pytest.raises(TransientError, match="processor-failed"):
        rig.handle(event)
    assert rig.rows()["k"].effect_status == "pending"
    # WHEN delivery is quiescent and one reconciliation runs (the contract's safety net, C15)
    rig.rt.reconcile("listing")
    # THEN the pending effect has run and committed: nothing stays pending for ever
    assert [c.sequencer for c in rig.runs] == [event.raw_sequencer]
    _no_pending(rig)


@pytest.mark.contract("C7", "C11")
def test_the_published_change_and_the_processors_change_agree_for_an_observation(
    emulator: Any,
) -> None:
    # GIVEN a live create applied, then a newer write whose event was lost, repaired
    rt = LocalRuntime(emulator, local_settings(), versioning="Enabled")
    seen: list[AppliedChange] = []
    rt.service.effects = wiring.effect_runner(lambda change, content: seen.append(change), rt.s3)
    rt.faithful.put("k", "one")
    rt.flush()
    rt.drain()
    rt.faithful.put("k", "two")
    rt.faithful.take_pending()  # lost
    rt.reconcile("listing")
    rt.pump_changes()
    # THEN the change event of the repair describes the same change the processor was given:
    # same id, same sequencer (None: an observation has none; not the older event's)
    detail = rt.changes[-1]["detail"]
    assert detail["id"] == seen[-1].change_id
    assert (detail["versionId"], detail["sequencer"]) == (seen[-1].version_id, seen[-1].sequencer)
