"""Hold for review (``docs/hold.md``): with a hold policy and random approve/reject steps, the
effects that run per processor and key are exactly the approved (or never held) winning changes,
in sequencer order; none runs before its approval; a rejected one never runs; nothing held is
lost. The mass-delete breaker trips above its threshold and not at it.

The ledger, the effect protocol, the review writes and S3 are the real code on the emulator (as
``test_processors.py``); the delivery loop is a plain at-least-once queue that also carries the
repair message each approval queues.
"""

from __future__ import annotations

import itertools
import json
from collections import deque
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from s3ingest.local.emulator.chaos import kill_after_effect
from s3ingest_fn import wiring
from s3ingest_fn.core.effects import EVERY_CHANGE, LATEST, AppliedChange
from s3ingest_fn.core.events import parse_body
from s3ingest_fn.core.hold import HoldPolicy
from s3ingest_fn.core.model import Change, TransientError
from s3ingest_fn.core.row import APPROVED, REJECTED, Review
from s3ingest_fn.services.review import Reviewer, held_changes
from tests.integration.effects_support import Killed
from tests.integration.test_processors import Rig, _changes, _collapsed

#: An every-change processor and a latest one holding deletes; an every-change one holding
#: anything under ``in/``.
SPECS: list[tuple[str, str, dict[str, Any]]] = [
    ("audit", EVERY_CHANGE, {}),
    ("mirror", LATEST, {}),
    ("notify", EVERY_CHANGE, {"prefixes": ("in/",)}),
]
HOLDS: dict[str, dict[str, Any]] = {
    "audit": {"deletes": True},
    "mirror": {"deletes": True},
    "notify": {"prefixes": ["in/"]},
}


class Repairs:
    """The ingest queue of the test: the repair messages the reviews queue."""

    def __init__(self) -> None:
        self.bodies: list[str] = []

    def send(self, bodies: Sequence[str]) -> int:
        self.bodies.extend(bodies)
        return len(bodies)


class HoldRig(Rig):
    """:class:`Rig` with hold policies, a reviewer, and a record of every review."""

    def __init__(self, emulator: Any, versioning: str | None, **kw: Any) -> None:
        super().__init__(emulator, versioning, SPECS, **kw)
        self.rt.service.effects = kill_after_effect(
            wiring.effect_runner(
                self.specs,
                self.rt.s3,
                clock_ms=self.clock,
                holds={name: HoldPolicy.of(doc) for name, doc in HOLDS.items()},
            ),
            self.maybe_crash,
        )
        self.repairs = Repairs()
        self.reviewer = Reviewer(self.ledger, self.repairs, clock_ms=self.clock)
        #: (processor, change id) -> the decision, once made
        self.decided: dict[tuple[str, str], str] = {}
        #: (processor, change id) of every change ever held
        self.held: set[tuple[str, str]] = set()
        self.early: list[tuple[str, str]] = []  # effects that ran while held, undecided

    def _processor(self, name: str) -> Any:
        inner = super()._processor(name)

        def process(change: AppliedChange, content: Any) -> None:
            mark = (name, change.change_id)
            if mark in self.held and self.decided.get(mark) != APPROVED:
                self.early.append(mark)
            inner(change, content)

        return process

    def note_held(self) -> list[Any]:
        out = []
        for row in self.rt.ledger_rows():
            for held in held_changes(row):
                self.held.add((held.processor, held.change_id))
                out.append(held)
        return out

    def review(self, pick: int, approve: bool) -> None:
        held = self.note_held()
        if not held:
            return
        h = held[pick % len(held)]
        decision = APPROVED if approve else REJECTED
        done = self.reviewer.decide(
            h.bucket, h.key, decision, "tester", processor=h.processor, change_id=h.change_id
        )
        assert [d["applied"] for d in done] == [True]
        self.decided[(h.processor, h.change_id)] = decision

    def deliver_with_reviews(self, changes: list[Change], steps: list[tuple[int, bool]]) -> None:
        queue = deque(changes)
        reviews = deque(steps)
        for n in range(200 * len(changes) + 400):
            if self.repairs.bodies:
                queue.extend(parse_body(b).changes[0] for b in self.repairs.bodies)
                self.repairs.bodies.clear()
            if n % 3 == 2 and reviews:
                self.review(*reviews.popleft())
                continue
            if not queue:
                held = self.note_held()
                if not held:
                    return
                # quiescent with changes held: decide them (the reviews the test drew, then
                # approvals), as an operator would
                self.review(*(reviews.popleft() if reviews else (0, True)))
                continue
            change = queue.popleft()
            try:
                self.rt.service.handle(change)
            except (Killed, TransientError):
                queue.append(change)
        raise AssertionError("delivery did not become quiescent")


ops = st.lists(
    st.tuples(
        st.sampled_from(["put", "put", "delete"]),
        st.sampled_from(["a.csv", "in/b c.csv"]),
    ),
    min_size=1,
    max_size=7,
)


@pytest.mark.contract("C11")
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    history=ops,
    versioning=st.sampled_from(["Enabled", None]),
    crash=st.sampled_from([0.0, 0.0, 0.3]),
    steps=st.lists(st.tuples(st.integers(0, 9), st.booleans()), max_size=8),
    data=st.data(),
)
def test_effects_are_the_approved_winning_changes_in_order_and_nothing_held_is_lost(
    emulator: Any,
    history: list[tuple[str, str]],
    versioning: str | None,
    crash: float,
    steps: list[tuple[int, bool]],
    data: st.DataObject,
) -> None:
    # GIVEN processors holding deletes (two) and changes under in/ (one), and a history
    # delivered with duplicates, in any order, with workers killed before commits
    rig = HoldRig(emulator, versioning, crash=crash, seed=data.draw(st.integers(0, 999)))
    for i, (op, key) in enumerate(history):
        if op == "put":
            rig.put(key, f"{key} body {i}".encode())
        else:
            rig.rt.faithful.delete(key)
    events = _changes(rig.rt)
    copies = data.draw(st.lists(st.integers(1, 2), min_size=len(events), max_size=len(events)))
    deliveries = data.draw(
        st.permutations([e for e, n in zip(events, copies, strict=True) for _ in range(n)])
    )

    # WHEN they are delivered, with approvals and rejections in between, until nothing is
    # delivered or held
    rig.deliver_with_reviews(list(deliveries), steps)

    # THEN no effect ran while its change was held and undecided ...
    assert rig.early == []
    for spec in rig.specs:
        name = spec.name
        ran: dict[str, list[AppliedChange]] = {}
        for change in rig.runs[name]:
            ran.setdefault(change.key, []).append(change)
        rejected = {c for (p, c), d in rig.decided.items() if p == name and d == REJECTED}
        completed = {c.change_id for c in rig.runs[name]}
        for key, all_wins in rig.concerned_wins(name).items():
            wins = [
                w
                for w in all_wins
                if w not in rejected and (w in completed or w not in rig.superseded[name])
            ]
            runs = ran.get(key, [])
            ids = [c.change_id for c in runs]
            # ... a rejected change never runs ...
            assert not set(ids) & rejected, (name, key)
            if spec.mode == EVERY_CHANGE:
                # ... every-change: every approved or never-held winning change, in order ...
                assert _collapsed(ids) == wins, (name, key)
            else:
                # ... latest: winning changes in order, ending with the newest unless it was
                # rejected (or its bytes were gone) ...
                collapsed = _collapsed(ids)
                assert collapsed == [w for w in all_wins if w in set(collapsed)], (name, key)
                last = all_wins[-1]
                if last not in rejected and last not in rig.superseded[name]:
                    assert collapsed and collapsed[-1] == last, (name, key)
            for before, after in itertools.pairwise(runs):
                if before.change_id == after.change_id:
                    assert (name, before.change_id, before.token) in rig.crashed, (name, key)
            tokens = [c.token for c in runs]
            assert tokens == sorted(tokens), (name, key)
    # ... and at quiescence nothing is held, pending or waiting, and every decision is on the
    # row's trail with its actor
    for row in rig.rt.ledger_rows():
        for name, effect in row.effects().items():
            assert effect.status in ("done", "superseded", "rejected"), (row.key, name, effect)
            assert effect.queue == (), (row.key, name)
        for review in row.trail:
            assert review.actor == ("policy" if review.action == "held" else "tester")
    assert rig.rt.compare().converged


@pytest.mark.contract("C11")
def test_the_mass_delete_breaker_trips_above_its_threshold_and_not_at_it(emulator: Any) -> None:
    # GIVEN a processor whose breaker allows 3 deletes per window, and 5 keys
    rig = Rig(emulator, "Enabled", [("mirror", LATEST, {})])
    rig.rt.service.effects = wiring.effect_runner(
        rig.specs,
        rig.rt.s3,
        clock_ms=rig.clock,
        holds={"mirror": HoldPolicy.of({"deletes": {"above": 3, "windowSeconds": 300}})},
    )
    keys = [f"k{i}" for i in range(5)]
    for key in keys:
        rig.put(key, key.encode())
    rig.deliver(_changes(rig.rt))
    # WHEN the first 3 are deleted: all run
    for key in keys[:3]:
        rig.rt.faithful.delete(key)
    rig.deliver(_changes(rig.rt))
    removed = [c.key for c in rig.runs["mirror"] if c.kind == "removed"]
    assert sorted(removed) == keys[:3]
    # WHEN 2 more are deleted within the window: both are held (the 4th and 5th)
    for key in keys[3:]:
        rig.rt.faithful.delete(key)
    rig.deliver(_changes(rig.rt))
    removed = [c.key for c in rig.runs["mirror"] if c.kind == "removed"]
    assert sorted(removed) == keys[:3]
    held = [h for row in rig.rt.ledger_rows() for h in held_changes(row)]
    assert sorted(h.key for h in held) == keys[3:]
    assert all(h.reason.startswith("mass-delete: ") for h in held)
    # ... and the ledger tombstoned all five regardless (the bucket stays the truth)
    assert all(not row.present for row in rig.rt.ledger_rows())
    # WHEN the window has passed: a delete runs again
    rig.clock.advance(300_000)
    rig.put("k9", b"x")
    rig.deliver(_changes(rig.rt))
    rig.rt.faithful.delete("k9")
    rig.deliver(_changes(rig.rt))
    assert "k9" in [c.key for c in rig.runs["mirror"] if c.kind == "removed"]


def test_an_approval_runs_the_held_effect_and_the_change_stream_carries_the_decisions(
    emulator: Any,
) -> None:
    # GIVEN a processor holding deletes, and a deleted key
    rig = HoldRig(emulator, "Enabled")
    rig.put("a.csv", b"one")
    rig.deliver(_changes(rig.rt))
    rig.rt.faithful.delete("a.csv")
    rig.deliver(_changes(rig.rt))
    assert [c.kind for c in rig.runs["mirror"]] == ["created"]
    (held,) = [
        h
        for h in held_changes(rig.ledger.get(rig.rt.resources.bucket, "a.csv") or _no())
        if h.processor == "mirror"
    ]
    # WHEN it is approved and the repair delivered
    done = rig.reviewer.decide(held.bucket, held.key, APPROVED, "arn:aws:iam::1:user/curator")
    assert {d["processor"] for d in done} == {"audit", "mirror"}
    assert len(rig.repairs.bodies) == 1  # one repair for the key, whatever the processors
    rig.deliver([parse_body(b).changes[0] for b in rig.repairs.bodies])
    # THEN the delete's effects run once each, and the row's trail names the approver
    assert [c.kind for c in rig.runs["mirror"]] == ["created", "removed"]
    assert [c.kind for c in rig.runs["audit"]] == ["created", "removed"]
    row = rig.ledger.get(rig.rt.resources.bucket, "a.csv")
    assert row is not None
    assert [(r.action, r.actor) for r in row.trail if r.processor == "mirror"] == [
        ("approved", "arn:aws:iam::1:user/curator"),
        ("held", "policy"),
    ]
    # ... and deciding again matches nothing (nothing is held)
    assert rig.reviewer.decide(held.bucket, held.key, REJECTED, "someone") == []


def _no() -> Any:
    raise AssertionError("no row")


def test_a_policy_function_answers_run_hold_or_skip(emulator: Any) -> None:
    rig = Rig(emulator, "Enabled", [("mirror", LATEST, {})])
    rig.rt.service.effects = wiring.effect_runner(
        rig.specs,
        rig.rt.s3,
        clock_ms=rig.clock,
        holds={"mirror": HoldPolicy.of({"policy": "tests.integration.test_hold:sample_policy"})},
    )
    for key in ("run/a", "hold/b", "skip/c"):
        rig.put(key, b"x")
    rig.deliver(_changes(rig.rt))
    assert [c.key for c in rig.runs["mirror"]] == ["run/a"]
    rows = {row.key: row for row in rig.rt.ledger_rows()}
    assert rows["skip/c"].effect_of("mirror").status == "skipped"  # type: ignore[union-attr]
    (held,) = held_changes(rows["hold/b"])
    assert held.reason == "curator must look"


def sample_policy(change: AppliedChange) -> Any:
    """A team's policy: the first path segment is the answer."""
    first = change.key.split("/")[0]
    return {"action": first, "reason": "curator must look"} if first == "hold" else first


def test_a_rejected_change_never_runs_and_releases_the_changes_behind_it(emulator: Any) -> None:
    # GIVEN a deleted key held by every processor, then re-created (the every-change audit
    # keeps the re-creation waiting behind the held delete; the latest mirror runs it at once)
    rig = HoldRig(emulator, "Enabled")
    rig.put("a.csv", b"one")
    rig.deliver(_changes(rig.rt))
    rig.rt.faithful.delete("a.csv")
    rig.deliver(_changes(rig.rt))
    rig.put("a.csv", b"two")
    rig.deliver(_changes(rig.rt))
    assert [c.kind for c in rig.runs["audit"]] == ["created"]
    assert [c.kind for c in rig.runs["mirror"]] == ["created", "created"]
    bucket = rig.rt.resources.bucket
    held = held_changes(rig.ledger.get(bucket, "a.csv") or _no())
    assert [(h.processor, h.kind) for h in held] == [("audit", "removed")]
    # WHEN the delete is rejected
    done = rig.reviewer.decide(bucket, "a.csv", REJECTED, "curator")
    assert [d["applied"] for d in done] == [True]
    rig.deliver([parse_body(b).changes[0] for b in rig.repairs.bodies])
    # THEN the delete never ran, and the re-creation behind it did
    assert [c.kind for c in rig.runs["audit"]] == ["created", "created"]
    row = rig.ledger.get(bucket, "a.csv")
    assert row is not None and row.effect_of("audit").status == "done"  # type: ignore[union-attr]
    assert [(r.action, r.actor) for r in row.trail if r.processor == "audit"] == [
        ("rejected", "curator"),
        ("held", "policy"),
    ]
    # WHEN the newest change of a key is a held delete, and it is rejected: it never runs
    rig.rt.faithful.delete("a.csv")
    rig.deliver(_changes(rig.rt))
    assert rig.reviewer.decide(bucket, "a.csv", REJECTED, "curator", processor="mirror")
    assert rig.repairs.bodies[1:] == []  # nothing behind it to release
    assert [c.kind for c in rig.runs["mirror"]] == ["created", "created"]
    row = rig.ledger.get(bucket, "a.csv")
    assert row is not None and row.effect_of("mirror").status == "rejected"  # type: ignore[union-attr]


def test_an_effect_resumed_after_a_crash_keeps_the_breakers_verdict(emulator: Any) -> None:
    # GIVEN a breaker allowing one delete per window, and a worker killed after the first
    # delete's effect ran, before its commit
    rig = Rig(emulator, "Enabled", [("mirror", LATEST, {})])
    killed: list[str] = []

    def kill_once(change: AppliedChange) -> None:
        if change.kind == "removed" and not killed:
            killed.append(change.key)
            rig.clock.expire_leases()
            raise Killed(change.key)

    rig.rt.service.effects = kill_after_effect(
        wiring.effect_runner(
            rig.specs,
            rig.rt.s3,
            clock_ms=rig.clock,
            holds={"mirror": HoldPolicy.of({"deletes": {"above": 1, "windowSeconds": 3600}})},
        ),
        kill_once,
    )
    for key in ("a", "b"):
        rig.put(key, b"x")
    rig.deliver(_changes(rig.rt))
    rig.rt.faithful.delete("a")
    # WHEN the retried message resumes the effect, then a second delete comes
    rig.deliver(_changes(rig.rt))
    rig.rt.faithful.delete("b")
    rig.deliver(_changes(rig.rt))
    # THEN the resumed delete ran again and committed (the breaker answered it as before), and
    # only the second delete is held
    assert killed == ["a"]
    assert [c.key for c in rig.runs["mirror"] if c.kind == "removed"] == ["a", "a"]
    rows = {row.key: row for row in rig.rt.ledger_rows()}
    assert rows["a"].effect_of("mirror").status == "done"  # type: ignore[union-attr]
    assert [h.key for h in held_changes(rows["b"])] == ["b"]
    assert rows["a"].trail == ()


def test_a_rejection_refuses_when_a_newer_change_queued_since_the_row_was_read(
    emulator: Any,
) -> None:
    # GIVEN an every-change processor's held delete, as an operator read it (queue of one)
    rig = HoldRig(emulator, "Enabled")
    rig.put("a.csv", b"one")
    rig.deliver(_changes(rig.rt))
    rig.rt.faithful.delete("a.csv")
    rig.deliver(_changes(rig.rt))
    bucket = rig.rt.resources.bucket
    read = rig.ledger.get(bucket, "a.csv")
    assert read is not None
    (held,) = [h for h in held_changes(read) if h.processor == "audit"]
    # WHEN a newer change queues behind it before the rejection is written
    rig.put("a.csv", b"two")
    rig.deliver(_changes(rig.rt))
    review = Review(REJECTED, "audit", held.change_id, "-", held.reason, "curator", rig.clock())
    stale = rig.ledger.review(bucket, "a.csv", review, queued=1)
    # THEN the write is refused (it would have dropped the newer change with the queue), and
    # deciding from a fresh read rejects the delete and runs the newer change
    assert not stale.applied
    done = rig.reviewer.decide(bucket, "a.csv", REJECTED, "curator", processor="audit")
    assert [d["applied"] for d in done] == [True]
    rig.deliver([parse_body(b).changes[0] for b in rig.repairs.bodies])
    assert [c.kind for c in rig.runs["audit"]] == ["created", "created"]


def test_deciding_a_listed_batch_reads_each_key_once_and_queues_one_repair_per_key(
    emulator: Any,
) -> None:
    # GIVEN two deleted keys, each held by two processors (four held changes listed)
    rig = HoldRig(emulator, "Enabled")
    for key in ("a.csv", "b.csv"):
        rig.put(key, b"one")
    rig.deliver(_changes(rig.rt))
    for key in ("a.csv", "b.csv"):
        rig.rt.faithful.delete(key)
    rig.deliver(_changes(rig.rt))
    listed = [h for row in rig.rt.ledger_rows() for h in held_changes(row)]
    assert len(listed) == 4
    reads: list[str] = []
    get = rig.ledger.get

    def counted_get(bucket: str, key: str) -> Any:
        reads.append(key)
        return get(bucket, key)

    rig.ledger.get = counted_get  # type: ignore[method-assign]
    progress: list[int] = []
    # WHEN they are approved as a batch
    done = rig.reviewer.decide_each(listed, APPROVED, "curator", on_done=progress.append)
    # THEN each change is decided once, each key read once, one repair queued per key
    assert sorted((d["key"], d["processor"], d["applied"]) for d in done) == [
        ("a.csv", "audit", True),
        ("a.csv", "mirror", True),
        ("b.csv", "audit", True),
        ("b.csv", "mirror", True),
    ]
    assert sorted(reads) == ["a.csv", "b.csv"] and progress == [2, 4]
    assert sorted(json.loads(b)["s3ingestRepair"]["key"] for b in rig.repairs.bodies) == [
        "a.csv",
        "b.csv",
    ]
