"""The chaos layer: at-least-once, unordered, lossy delivery and dying workers, reproducible
from a seed.

S3 and EventBridge deliver at least once, in no order, after any delay; a misconfiguration can
lose events. :class:`Chaos` turns a list of emitted events into the sequence actually delivered.
:class:`CrashInjector` kills workers between a processor's effect and its commit
(``Chaos.crash``, CONTRACT C11).
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

from s3ingest_fn.core.model import TransientError

if TYPE_CHECKING:
    from s3ingest_fn.core.effects import AppliedChange, EffectRunner

T = TypeVar("T")
#: The fault rates of :class:`Chaos` applied while the worker runs (not to delivery).
RATES = ("crash", "ddb_throttle", "lambda_throttle")


@dataclass(frozen=True)
class Chaos:
    """Delivery faults.

    Attributes
    ----------
    seed : int
        Makes the schedule reproducible.
    duplicate : float
        Probability (0-1) that an event is delivered one extra time (repeatedly: a duplicate can
        itself be duplicated, up to 3 copies).
    reorder : bool
        Shuffle the delivery order.
    drop : float
        Probability (0-1) that an event is never delivered (never reaches the bus: lost for good).
    undelivered : float
        Probability (0-1) that an event reaches the bus, and so the archive, but never the
        ingest queue (a disabled rule, a broken target): a replay brings it back
        (:func:`s3ingest.local.stack.delivery.publish_flush`). Drawn before ``drop``, from its own
        stream.
    crash : float
        Probability (0-1) that the worker dies after a processor's effect and before its commit
        (CONTRACT C11): the message comes back and the effect must run again, never be skipped.
    ddb_throttle : float
        Probability (0-1) that a DynamoDB request of the ingest path (each attempt, botocore's
        retries included) is answered ``ProvisionedThroughputExceededException`` or
        ``ThrottlingException`` (:mod:`s3ingest.local.emulator.faults`).
    lambda_throttle : float
        Probability (0-1) that the SQS event source's invocation of the ingest function is
        refused with ``TooManyRequestsException``: the batch is not run and its messages come
        back after the visibility timeout, one receive counted.
    """

    seed: int = 0
    duplicate: float = 0.0
    reorder: bool = False
    drop: float = 0.0
    undelivered: float = 0.0
    crash: float = 0.0
    ddb_throttle: float = 0.0
    lambda_throttle: float = 0.0

    @classmethod
    def from_json(cls, spec: Mapping[str, Any] | None) -> Chaos:
        """Build from a scenario's ``chaos`` object; unknown keys raise ValueError."""
        if spec is None:
            spec = {}
        if not isinstance(spec, Mapping):
            raise ValueError(
                "chaos must be a JSON object like "
                '{"seed": 1, "duplicate": 0.3, "reorder": true, "drop": 0.0, '
                '"undelivered": 0.0, "crash": 0.0, "ddb_throttle": 0.0, "lambda_throttle": 0.0}'
            )
        unknown = set(spec) - {"seed", "duplicate", "reorder", "drop", "undelivered", *RATES}
        if unknown:
            raise ValueError(f"unknown chaos settings: {sorted(unknown)}")
        seed, reorder = spec.get("seed", 0), spec.get("reorder", False)
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise ValueError(f"chaos seed must be a whole number, not {seed!r}")
        if not isinstance(reorder, bool):
            raise ValueError(f"chaos reorder must be true or false, not {reorder!r}")
        rates = {name: spec.get(name, 0.0) for name in ("duplicate", "drop", "undelivered", *RATES)}
        for name, value in rates.items():
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise ValueError(f"chaos {name} must be a number within 0..1, not {value!r}")
        chaos = cls(
            seed=seed, reorder=reorder, **{name: float(value) for name, value in rates.items()}
        )
        for name in rates:
            if not 0.0 <= getattr(chaos, name) <= 1.0:
                raise ValueError(f"chaos {name} must be within 0..1")
        return chaos

    def split_undelivered(self, items: list[T]) -> tuple[list[T], list[T]]:
        """Return (the rest, undelivered) for ``items`` at :attr:`undelivered`'s rate; its draws
        come from a stream of their own, so the other faults of a seed stay as they were."""
        if not self.undelivered:
            return list(items), []
        rng = random.Random(f"{self.seed}|undelivered")
        rest: list[T] = []
        undelivered: list[T] = []
        for item in items:
            (undelivered if rng.random() < self.undelivered else rest).append(item)
        return rest, undelivered

    def schedule(self, items: list[T]) -> tuple[list[T], list[T]]:
        """Return (delivered, dropped) for ``items``."""
        rng = random.Random(self.seed)
        delivered: list[T] = []
        dropped: list[T] = []
        for item in items:
            if self.drop and rng.random() < self.drop:
                dropped.append(item)
                continue
            copies = 1
            while copies < 3 and self.duplicate and rng.random() < self.duplicate:
                copies += 1
            delivered.extend([item] * copies)
        if self.reorder:
            rng.shuffle(delivered)
        return delivered, dropped


class InjectedCrash(TransientError):
    """The local runtime's worker 'died' between an effect and its commit (``Chaos.crash``).

    A :class:`TransientError`: the record ends ``retried`` (its message comes back, as after a
    Lambda timeout) and a backfill task ends ``TemporaryFailure`` (Batch Operations retries it).
    """


class _KillAfterEffect:
    """An effect runner whose ``run`` calls ``after_effect(change)`` once the effect returned,
    before the caller commits; what that raises ends the worker (:class:`WorkerLost`). Every
    other attribute is the wrapped runner's."""

    def __init__(self, runner: EffectRunner, after_effect: Callable[[AppliedChange], None]):
        self._runner = runner
        self._after_effect = after_effect

    def run(self, change: AppliedChange) -> str:
        from s3ingest_fn.core.effects import WorkerLost

        status = self._runner.run(change)
        try:
            self._after_effect(change)
        except Exception as exc:
            raise WorkerLost(exc) from exc
        return status

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runner, name)


def kill_after_effect(
    runner: EffectRunner, after_effect: Callable[[AppliedChange], None] | None
) -> EffectRunner:
    """``runner`` with a worker killer between each effect and its commit: ``after_effect``
    (e.g. :meth:`CrashInjector.after_effect`) is called with the change once its processor
    returned; a :class:`TransientError` it raises kills the worker (the change is ``killed``:
    nothing commits, the claim is left to its lease, the message comes back), anything else
    propagates from the invocation as it is. ``after_effect`` None: ``runner`` itself."""
    if after_effect is None:
        return runner
    return cast("EffectRunner", _KillAfterEffect(runner, after_effect))


class CrashInjector:
    """Kills workers after a processor's effect and before its commit, at ``Chaos.crash``'s
    rate, inside :meth:`crashing` blocks only; thread-safe (the handler runs records
    concurrently). Each draw is a function of the seed, the processor, the object key and how
    many times that processor has drawn for that key before, never of which thread draws first
    (one processor's effects on one key run one at a time, under its claim) nor of what differs
    between runs (version ids, change ids, unique bucket names): a seed replays the same crashes
    however the records' threads interleave.

    Parameters
    ----------
    release : callable
        Ends the dead worker's lease on the change (``Ledger.release(bucket, key, token)``).
    on_crash : callable, optional
        Told of every killed change (the effect recorder marks its run).
    seed : int
        Seeds the crash draws until a :meth:`crashing` block sets its own.
    """

    def __init__(
        self,
        release: Callable[[AppliedChange], object],
        on_crash: Callable[[AppliedChange], None] | None = None,
        seed: int = 0,
    ) -> None:
        self._release = release
        self._on_crash = on_crash
        self._rate = 0.0
        self._seed = seed
        self._draws: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()

    @contextmanager
    def crashing(self, chaos: Chaos | None) -> Iterator[None]:
        """Inject ``chaos.crash`` into the effects run inside the block, and only there
        (``None``: the enclosing block's rate goes on)."""
        with self._lock:
            saved = (self._rate, self._seed)
            if chaos is not None:
                self._rate, self._seed = chaos.crash, chaos.seed
        try:
            yield
        finally:
            with self._lock:
                self._rate, self._seed = saved

    def after_effect(self, change: AppliedChange) -> None:
        """The effect runner's hook between an effect and its commit: maybe kill the worker.

        Raises
        ------
        InjectedCrash
            When the draw says the worker dies.
        """
        with self._lock:
            if not (self._rate > 0 and self._draw(change) < self._rate):
                return
            if self._on_crash is not None:
                self._on_crash(change)
        # The dead worker's invocation would have timed out by the time SQS shows the message
        # again, so its lease has run out: end that one lease now. (Moving a shared clock would
        # also expire the leases of workers still running on other threads, which in AWS are
        # separate invocations that never outlive their own leases.)
        self._release(change)
        # The dead worker logs nothing; the report still shows the delivery, as retried with its
        # own event's fields (the processing layer builds that record).
        raise InjectedCrash("worker-killed-before-commit")

    def _draw(self, change: AppliedChange) -> float:
        """The next draw of ``change``'s processor on its key, in [0, 1) (under the lock)."""
        claim = (change.processor, change.key)
        n = self._draws[claim]
        self._draws[claim] = n + 1
        # a str seed is hashed with SHA-512 (random.seed, version 2): the same in every process
        return random.Random(f"{self._seed}|{claim[0]}|{n}|{claim[1]}").random()
