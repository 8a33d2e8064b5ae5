"""Throttling injected locally (:mod:`s3ingest.local.faults`) ends with nothing lost.

DynamoDB throttling reaches the ingest path through botocore's error shape and retries; what is
still refused ends ``retried``. Lambda throttling refuses the SQS event source's invocation: the
batch comes back after the visibility timeout with a receive counted. After quiescence and one
reconciliation the ledger equals the bucket (CONTRACT C15) and, at the rates stated, nothing
reached the dead-letter queue (``maxReceiveCount`` 5).
"""

from __future__ import annotations

from typing import Any

import pytest

from s3ingest.local.chaos import Chaos
from s3ingest.local.faults import Concurrency, LambdaThrottled, leases_within_receives
from s3ingest.local.runtime import LocalRuntime, local_settings


def _history(rt: LocalRuntime, n: int = 30) -> None:
    """Creates, overwrites and deletes of ``n`` keys (pending events, not yet flushed)."""
    for i in range(n):
        rt.faithful.put(f"in/{i:03d}.txt", f"v1 {i}")
    for i in range(0, n, 3):
        rt.faithful.put(f"in/{i:03d}.txt", f"v2 {i}")
    for i in range(1, n, 5):
        rt.faithful.delete(f"in/{i:03d}.txt")


def _settled(rt: LocalRuntime) -> None:
    """One listing reconciliation after the queue drained; the ledger equals the bucket and
    the dead-letter queue is empty."""
    rt.reconcile("listing")
    comparison = rt.compare()
    assert comparison.converged, comparison.differences
    assert rt.dlq_messages() == []


@pytest.mark.contract("C15")
def test_dynamodb_throttling_over_a_live_history_loses_nothing(emulator: Any) -> None:
    # GIVEN a live history, and 30% of the ingest path's DynamoDB requests throttled (each
    # attempt: botocore's retry meets them too; 9% of the calls fail after its one retry)
    rt = LocalRuntime(emulator, local_settings(), seed=3)
    # a throttled commit or release leaves its effect's lease running (ingest timeout + 2 s):
    # the deployed queue's visibility timeout (6x the function's) lets it end long before a
    # message's receives are used up; the local poller's 1 s would not (it dead-lettered 2 keys
    # retried effect-in-progress), so its visibility is lengthened to keep that relation
    assert leases_within_receives(rt, 6) == 3
    _history(rt)
    # WHEN it is delivered with duplicates and drained
    rt.flush(Chaos(seed=3, duplicate=0.3, reorder=True, ddb_throttle=0.3))
    rt.drain()
    # THEN throttles of both codes were answered, some records ended retried (the handler's
    # TransientError), and still nothing is lost after one reconciliation
    assert rt.crashes.injected["ddb:ProvisionedThroughputExceededException"] > 0
    assert rt.crashes.injected["ddb:ThrottlingException"] > 0
    assert rt.outcome_counts()["retried"] > 0
    _settled(rt)
    # AND outside the flush's drain nothing is throttled any more
    before = sum(rt.crashes.injected.values())
    rt.reconcile("listing")
    assert sum(rt.crashes.injected.values()) == before


@pytest.mark.contract("C15")
def test_lambda_throttling_of_the_event_source_loses_nothing(emulator: Any) -> None:
    # GIVEN a live history, and 30% of the event source's invocations refused: a message is
    # dead-lettered only when refused (or failed) at 5 receives in a row, here 0.3**5 < 0.3%.
    # One message per batch: each draw is then a function of the seed, the record and its
    # receive count alone, not of which messages a poll happened to group (timing)
    rt = LocalRuntime(emulator, local_settings(batch_size=1), seed=5)
    _history(rt)
    # WHEN it is delivered and drained
    rt.flush(Chaos(seed=5, reorder=True, lambda_throttle=0.3))
    rt.drain()
    # THEN invocations were refused (their batches came back), and nothing is lost
    assert rt.crashes.injected["lambda:ingest"] == rt.ingest_source.throttled > 0
    _settled(rt)


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
