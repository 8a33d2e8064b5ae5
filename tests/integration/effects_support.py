"""Test doubles shared by the effect tests (``test_effects.py``, ``test_effects_breakit.py``):
an injected worker death, a lease clock the test moves, and the real ledger adapter recording
which changes won."""

from __future__ import annotations

import threading
from typing import Any

from s3ingest_fn.adapters.dynamo_ledger import DynamoLedger
from s3ingest_fn.core.effects import DEFAULT_REMAINING_MS, LEASE_SKEW_MS
from s3ingest_fn.core.row import RowState, WriteMeta, WriteResult


class Killed(Exception):
    """The worker died after the effect, before the commit."""


class Clock:
    """Epoch ms for leases; only the test moves it."""

    def __init__(self) -> None:
        self.now = 1_900_000_000_000

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms

    def expire_leases(self) -> None:
        """Play the time a dead worker's invocation had left: every lease taken so far ends."""
        self.advance(DEFAULT_REMAINING_MS + LEASE_SKEW_MS + 1)


class RecordingLedger(DynamoLedger):
    """The real adapter, noting every write that applied a new change, ``(key, chg_id,
    state)`` in order: the ground truth of which changes won. A write that only moved the
    sequencer (the row already held the state) makes no change and has no change id. A delete
    that is the first change of its key (the ledger never held the key) wins no effect (C11:
    nothing downstream saw the key): its change id goes to ``never_held`` instead."""

    def __init__(self, inner: DynamoLedger) -> None:
        super().__init__(inner._ddb, inner._table, inner._ttl)
        self.applied: list[tuple[str, str, RowState]] = []
        self.never_held: set[str] = set()
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    @property
    def wins(self) -> dict[str, list[str]]:
        """Key -> the ids of its applied changes, in the order they were applied."""
        out: dict[str, list[str]] = {}
        for key, cid, _ in self.applied:
            out.setdefault(key, []).append(cid)
        return out

    def _update(self, state: RowState, meta: WriteMeta, **kw: Any) -> WriteResult:
        # every write that may apply a change (each named operation) ends here
        return self._note(meta, state, super()._update(state, meta, **kw))

    def _note(self, meta: WriteMeta, state: RowState, result: WriteResult) -> WriteResult:
        if result.applied and result.change_id is not None:
            with self._lock:
                if meta.key not in self._seen and not state.present:
                    self.never_held.add(result.change_id)
                else:
                    self.applied.append((meta.key, result.change_id, state))
                self._seen.add(meta.key)
        return result
