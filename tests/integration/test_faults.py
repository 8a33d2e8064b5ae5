"""The local fault layer (:mod:`s3ingest.local.faults`): Lambda's concurrency limits and the
chaos options that switch throttling on. Convergence under injected throttling is not yet tested
here: its runs were not deterministic (which draws a message meets depends on delivery timing).
"""

from __future__ import annotations

import pytest

from s3ingest.local.chaos import Chaos
from s3ingest.local.faults import Concurrency, LambdaThrottled


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
