"""Throttling injected locally (:mod:`s3ingest.local.emulator.faults`) ends with nothing lost, and
Lambda's concurrency limits.

DynamoDB throttling reaches the ingest path through botocore's error shape and retries; what is
still refused ends ``retried``. Lambda throttling refuses the SQS event source's invocation: the
message comes back after the visibility timeout with a receive counted. Nothing is lost: a
message reaches the dead-letter queue only when each of its ``maxReceiveCount`` receives was
throttled (as in AWS, https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-errorhandling.html),
never for another reason, and redriving the dead-letter queue (``s3ingest redrive``'s code path)
makes the ledger equal the bucket with every effect run (CONTRACT C9, C15), with no
reconciliation. These properties hold whatever the delivery timing; which draws a message
meets depends on it, so no assertion counts them.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from s3ingest.commands.redrive import redrive_valid
from s3ingest.local.emulator.chaos import Chaos
from s3ingest.local.emulator.faults import (
    DONE,
    REFUSED,
    THROTTLED,
    Concurrency,
    LambdaThrottled,
    backfill_workers,
    leases_within_receives,
)
from s3ingest.local.stack.runtime import LocalRuntime, local_settings

#: How a record retried because of an injected DynamoDB throttle is told (its result's reason).
FAULT_CAUSED = (
    "dynamodb: ProvisionedThroughputExceededException",
    "dynamodb: ThrottlingException",
    "only ",  # "only <n> ms left in the invocation, <m> ms needed: effect ..."
    "effect-in-progress:",
)


def _history(rt: LocalRuntime, n: int = 24) -> None:
    """Creates, overwrites and deletes of ``n`` keys (pending events, not yet flushed)."""
    for i in range(n):
        rt.faithful.put(f"in/{i:03d}.txt", f"v1 {i}")
    for i in range(0, n, 3):
        rt.faithful.put(f"in/{i:03d}.txt", f"v2 {i}")
    for i in range(1, n, 5):
        rt.faithful.delete(f"in/{i:03d}.txt")


def _nothing_lost(rt: LocalRuntime) -> set[str]:
    """The dead-letter queue holds exactly the messages no receive of which succeeded; after
    they are redriven and drained (no faults any more) the ledger equals the bucket and every
    effect ran. Returns the dead-lettered message ids."""
    dead = {m["MessageId"] for m in rt.dlq_messages()}
    assert dead == rt.crashes.failed_every_receive(rt.settings.max_receive_count)
    moved = redrive_valid(
        rt.sqs, rt.resources.dlq_url, rt.resources.queue_url, max_messages=len(dead) + 10
    )
    assert moved == {"moved": len(dead), "kept_invalid": 0}
    rt.drain()
    comparison = rt.compare()
    assert comparison.converged, comparison.differences
    assert rt.check_effects() == []
    assert rt.dlq_messages() == []
    return dead


@pytest.mark.contract("C9", "C15")
def test_dynamodb_throttling_over_a_live_history_loses_nothing(emulator: Any) -> None:
    # GIVEN a live history (the example processor on), one message per batch, and 30% of the ingest
    # path's DynamoDB requests throttled (each attempt: botocore's retry meets them too)
    rt = LocalRuntime(emulator, local_settings(batch_size=1), seed=3)
    # a throttled commit or release leaves its effect's lease running (ingest timeout + 2 s):
    # the deployed queue's visibility timeout (6x the function's) lets it end long before a
    # message's receives are used up; the local poller's 1 s would not, so its visibility is
    # lengthened to keep that relation
    assert leases_within_receives(rt, 6) == 3
    _history(rt)
    # WHEN it is delivered with duplicates and drained
    rt.flush(Chaos(seed=3, duplicate=0.3, reorder=True, ddb_throttle=0.3))
    rt.drain()
    # THEN throttles of both codes were answered and records failed under them (retried)
    assert rt.crashes.injected["ddb:ProvisionedThroughputExceededException"] > 0
    assert rt.crashes.injected["ddb:ThrottlingException"] > 0
    assert rt.outcome_counts()["retried"] > 0
    assert any(THROTTLED in seen for seen in rt.crashes.receipts.values())
    # AND every record failed for a throttle only: refused after botocore's retries, out of
    # time after their backoff, or behind an effect's lease a throttled invocation left running
    # (it ends with the lease, within the message's receives)
    reasons = {d.result.reason or "" for d in rt.delivered if d.result.outcome.value == "retried"}
    assert all(r.startswith(FAULT_CAUSED) for r in reasons), reasons
    _nothing_lost(rt)
    # AND outside the flush's drain nothing is throttled any more
    before = sum(rt.crashes.injected.values())
    rt.reconcile("listing")
    assert sum(rt.crashes.injected.values()) == before


@pytest.mark.contract("C9", "C15")
def test_lambda_throttling_of_the_event_source_loses_nothing(emulator: Any) -> None:
    # GIVEN a live history (the example processor on), and 40% of the event source's invocations
    # refused. One message per batch: each draw is then a function of the seed, the record and
    # its receive count alone, not of which messages a poll happened to group (timing)
    rt = LocalRuntime(emulator, local_settings(batch_size=1), seed=5)
    _history(rt)
    # WHEN it is delivered and drained
    rt.flush(Chaos(seed=5, reorder=True, duplicate=0.2, lambda_throttle=0.4))
    rt.drain()
    # THEN invocations were refused (their messages came back) and nothing else failed
    assert rt.crashes.injected["lambda:ingest"] == rt.ingest_source.throttled > 0
    assert all(set(seen) <= {REFUSED, DONE} for seen in rt.crashes.receipts.values())
    # AND nothing is lost: what was refused at every receive waited in the DLQ for a redrive
    _nothing_lost(rt)


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
