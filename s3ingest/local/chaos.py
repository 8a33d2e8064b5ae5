"""The chaos layer: at-least-once, unordered, lossy delivery, reproducible from a seed.

S3 and EventBridge deliver at least once, in no order, after any delay; a misconfiguration can
lose events. :class:`Chaos` turns a list of emitted events into the sequence actually delivered.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")


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
        Probability (0-1) that an event is never delivered.
    crash : float
        Probability (0-1) that the worker dies after a processor's effect and before its commit
        (CONTRACT C11): the message comes back and the effect must run again, never be skipped.
    """

    seed: int = 0
    duplicate: float = 0.0
    reorder: bool = False
    drop: float = 0.0
    crash: float = 0.0

    @classmethod
    def from_json(cls, spec: Mapping[str, Any] | None) -> Chaos:
        """Build from a scenario's ``chaos`` object; unknown keys raise ValueError."""
        if spec is None:
            spec = {}
        if not isinstance(spec, Mapping):
            raise ValueError(
                "chaos must be a JSON object like "
                '{"seed": 1, "duplicate": 0.3, "reorder": true, "drop": 0.0, '
                '"crash": 0.0}'
            )
        unknown = set(spec) - {"seed", "duplicate", "reorder", "drop", "crash"}
        if unknown:
            raise ValueError(f"unknown chaos settings: {sorted(unknown)}")
        seed, reorder = spec.get("seed", 0), spec.get("reorder", False)
        duplicate, drop = spec.get("duplicate", 0.0), spec.get("drop", 0.0)
        crash = spec.get("crash", 0.0)
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise ValueError(f"chaos seed must be a whole number, not {seed!r}")
        if not isinstance(reorder, bool):
            raise ValueError(f"chaos reorder must be true or false, not {reorder!r}")
        for name, value in (("duplicate", duplicate), ("drop", drop), ("crash", crash)):
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise ValueError(f"chaos {name} must be a number within 0..1, not {value!r}")
        chaos = cls(
            seed=seed,
            duplicate=float(duplicate),
            reorder=reorder,
            drop=float(drop),
            crash=float(crash),
        )
        for name in ("duplicate", "drop", "crash"):
            if not 0.0 <= getattr(chaos, name) <= 1.0:
                raise ValueError(f"chaos {name} must be within 0..1")
        return chaos

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
