"""The local fault layer (:mod:`s3ingest.local.faults`): Lambda's concurrency limits and the
chaos options that switch throttling on. Convergence under injected throttling is not yet tested
here: its runs were not deterministic (which draws a message meets depends on delivery timing).
"""

from __future__ import annotations

import threading

import pytest

from s3ingest.local.chaos import Chaos
from s3ingest.local.faults import Concurrency, LambdaThrottled, backfill_workers


def test_concurrency_limits_reserved_and_unreserved_as_lambda_does() -> None:
    pool = Concurrency(6, {"backfill": 4})
    assert pool.unreserved == 2
    assert [pool.acquire("backfill") for _ in range(5)] == [True] * 4 + [False]
    assert [pool.acquire("ingest") for _ in range(3)] == [True, True, False]
    assert pool.acquire("other") is False  # the unreserved pool is shared
    pool.release("ingest")
    assert pool.acquire("other") is True
    assert pool.throttled == {"backfill": 1, "ingest": 1, "other": 1}
    assert pool.peak["backfill"] == 4
    with pytest.raises(ValueError, match="exceeds"):
        Concurrency(3, {"a": 2, "b": 2})


def test_chaos_takes_the_throttle_rates_and_refuses_bad_ones() -> None:
    chaos = Chaos.from_json({"seed": 2, "ddb_throttle": 0.25, "lambda_throttle": 0.5})
    assert (chaos.ddb_throttle, chaos.lambda_throttle) == (0.25, 0.5)
    with pytest.raises(ValueError, match=r"within 0\.\.1"):
        Chaos.from_json({"ddb_throttle": 1.5})
    with pytest.raises(ValueError, match="number"):
        Chaos.from_json({"lambda_throttle": "often"})
    assert issubclass(LambdaThrottled, Exception)


class _CountingCondition(threading.Condition):
    """A condition counting its ``notify_all`` calls (the wake-ups of :meth:`wait_for`)."""

    def __init__(self) -> None:
        super().__init__()
        self.wakes = 0

    def notify_all(self) -> None:
        self.wakes += 1
        super().notify_all()


def test_wait_for_wakes_on_a_refused_slot() -> None:
    pool = Concurrency(1)
    pool._changed = changed = _CountingCondition()
    assert pool.acquire("a") and changed.wakes == 1
    assert not pool.acquire("b")
    assert changed.wakes == 2  # a waiter on pool.throttled sees the refusal at once
    assert pool.wait_for(lambda p: p.throttled["b"] == 1)


def test_backfill_workers_are_the_engines_reserved_functions() -> None:
    # as the stack reserves them (tests/infra/test_infra_reserved_concurrency.py)
    assert backfill_workers("batch-operations") == ("BackfillFunction", "ListingShard")
    assert backfill_workers("distributed-map") == ("BackfillControlFunction", "ListingShard")
