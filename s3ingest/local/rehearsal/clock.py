"""A clock a scenario can move forward (its ``advance`` step), read by the pipeline's in-process
code on the local runtime.

:meth:`ScenarioClock.install` points these at it (each read the real time before):

* the S3 event sequencers' time digits
(:class:`~s3ingest.local.emulator.s3faithful.SequencerClock`);
* the ingest path the queue's drain runs: the message processor's and the ingest decision's
  judgement of a sequencer's time, the ledger's clock (tombstone expiry, effect leases,
  observed ids) and the effect runner's (hold windows, leases, versions behind);
* the in-process reconciliations (their ``taken_at`` and safety margin), and the ``repair``
  step's judgement of ended leases.

Not covered (real time still): the emulator itself (S3 ``LastModified``, SQS visibility
timeouts, DynamoDB TTL, the EventBridge archive), the functions the state machines run
(backfills, onboarding, reprocess, the fan-out reconciliation) and every wait or timeout of
the runtime. Moving the clock only forward keeps the sequencers increasing.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from s3ingest.local.stack.runtime import LocalRuntime


class ScenarioClock:
    """The real time plus :attr:`offset` seconds."""

    def __init__(self) -> None:
        #: Seconds added to the real time so far.
        self.offset = 0.0

    def time(self) -> float:
        """Epoch seconds."""
        return time.time() + self.offset

    def time_ms(self) -> int:
        """Epoch milliseconds."""
        return int(self.time() * 1000)

    def advance(self, seconds: float) -> None:
        """Move the clock ``seconds`` forward.

        Raises
        ------
        ValueError
            For a negative ``seconds`` (time goes forward only).
        """
        if seconds < 0:
            raise ValueError("the clock moves forward only")
        self.offset += seconds

    def install(self, rt: LocalRuntime) -> None:
        """Make ``rt``'s in-process readers of the time read this clock (the module's list);
        again after the processors were configured anew (a new effect runner)."""
        rt.sequencer_clock.clock = self.time
        rt.processor.clock = self.time
        rt.service.clock = self.time
        rt.ledger._clock = self.time  # the ledger adapter takes its clock only when built
        effects = rt.service.effects
        runner = getattr(effects, "_runner", effects)  # inside the crash wrapper
        if runner is not None:
            runner.clock_ms = self.time_ms
        rt.reconcile_clock = self.time
