"""The local runtime's crash chaos (:class:`s3ingest.local.emulator.chaos.CrashInjector`) is a
function of its seed and of the processors and keys it draws for, never of the order in which the
records' threads reach it nor of a run's version ids, change ids or bucket names: one seed
replays one set of crashes."""

from __future__ import annotations

import random

import pytest

from s3ingest.local.emulator.chaos import Chaos, CrashInjector, InjectedCrash
from s3ingest_fn.core.effects import AppliedChange


def _change(processor: str, n: int, token: int = 1, bucket: str = "b") -> AppliedChange:
    return AppliedChange(
        bucket=bucket,
        key=f"k{n}",
        kind="created",
        sequencer=None,
        version_id=None,
        etag="e",
        size=1,
        source="live",
        event_name="ObjectCreated:Put",
        change_id=f"{n:016x}{token:08x}{len(bucket):08x}",
        token=token,
        processor=processor,
    )


def _crashed(order: list[AppliedChange], seed: int) -> set[tuple[str, str]]:
    released: list[AppliedChange] = []
    injector = CrashInjector(release=released.append)
    crashed = set()
    with injector.crashing(Chaos(seed=seed, crash=0.5)):
        for change in order:
            try:
                injector.after_effect(change)
            except InjectedCrash:
                crashed.add((change.processor, change.key))
    assert {(c.processor, c.key) for c in released} == crashed
    return crashed


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_the_same_seed_crashes_the_same_claims_in_any_order(seed: int) -> None:
    changes = [_change(p, n) for p in ("thumbs", "notify") for n in range(40)]
    shuffled = changes[:]
    random.Random(seed).shuffle(shuffled)
    first = _crashed(changes, seed)
    assert 0 < len(first) < len(changes)
    assert _crashed(shuffled, seed) == first
    # another run: other change ids, tokens and bucket name, the same keys
    again = [
        _change(p, n, token=5, bucket="b-0f3a") for p in ("thumbs", "notify") for n in range(40)
    ]
    assert _crashed(again, seed) == first


def test_a_retried_claim_draws_anew_and_another_seed_crashes_others() -> None:
    change = _change("thumbs", 3)
    # the same claim drawn again (a redelivery after a crash) is a new draw, not a repeat: it
    # neither crashes for ever nor never
    injector = CrashInjector(release=lambda change: None)
    crashes = 0
    with injector.crashing(Chaos(seed=1, crash=0.5)):
        for _ in range(30):
            try:
                injector.after_effect(change)
            except InjectedCrash:
                crashes += 1
    assert 0 < crashes < 30
    changes = [_change("thumbs", n) for n in range(60)]
    assert _crashed(changes, 1) != _crashed(changes, 2)


def test_outside_a_crashing_block_nothing_crashes() -> None:
    injector = CrashInjector(release=lambda change: None)
    injector.after_effect(_change("thumbs", 1))
