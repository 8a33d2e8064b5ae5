"""The ingest decision: what one parsed S3 change does to the ledger (CONTRACT C2-C7, C9, C10).

Pure logic over two small ports, the ledger (:class:`~s3ingest_fn.ledger.DynamoLedger`) and the
bucket (:class:`~s3ingest_fn.bucket.S3Objects`); tests pass the real adapters bound to the
emulator, or fakes.

Paths, by what the event can tell on its own:

* **Sequenced create or hiding delete** (the common path): one conditional UpdateItem; applied
  when the incoming sequencer is newer and the row does not hold an observed state. A rejection
  returns the old row, which says duplicate (equal sequencer) or stale (older) with no read.
* **Sequenced event over an observed row** (C7): the row's state came from reading the bucket and
  may be newer than any sequencer; the event is verified with a HEAD. If the bucket still shows
  what the event says, the event is applied; otherwise the bucket has moved past it and the row
  records what the bucket holds (outcome ``superseded``).
* **Delete of one version** (C4): the event cannot tell whether the key stays visible (a
  non-current version or a delete marker may have been removed), so the bucket's current state is
  read and recorded at the event's sequencer as an observation. The ledger never tombstones a
  key the bucket still shows.
* **No usable sequencer** (repairs, backfill, ``ReducedRedundancyLostObject``, a garbage
  sequencer): an observation: read the row, HEAD, write only if the row's revision is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from s3ingest_fn.ledger import RowState, WriteMeta, WriteResult
from s3ingest_fn.model import (
    Change,
    Format,
    Kind,
    ObjectState,
    Outcome,
    Result,
    TransientError,
)

#: Optimistic-concurrency attempts (observations, verifications) before the message is retried
#: via SQS. Conflicts come from other records of the same key in flight at the same moment.
MAX_OBSERVATION_ATTEMPTS = 5


class LedgerPort(Protocol):
    """What the decision needs from the ledger (see :class:`s3ingest_fn.ledger.DynamoLedger`)."""

    def get(self, bucket: str, key: str) -> dict[str, object] | None: ...

    def write_sequenced(self, state: RowState, meta: WriteMeta, *, observed: bool,
                        require_exact: bool, expected_rev: int | None = None) -> WriteResult: ...

    def write_observation(self, state: RowState, meta: WriteMeta,
                          expected_rev: int | None) -> WriteResult: ...


class BucketPort(Protocol):
    """What the decision needs from S3 (see :class:`s3ingest_fn.bucket.S3Objects`)."""

    def current(self, bucket: str, key: str) -> ObjectState: ...


@dataclass
class IngestService:
    """Applies parsed changes to the ledger.

    Parameters
    ----------
    ledger : LedgerPort
    bucket : BucketPort
    scope_bucket : str or None
        Only this bucket's events are ingested; others end ``ignored`` (out of scope). None: all.
    """

    ledger: LedgerPort
    bucket: BucketPort
    scope_bucket: str | None = None

    def handle(self, change: Change) -> Result:
        """Decide and record one change.

        Returns
        -------
        Result
            One of applied, duplicate, stale, superseded, ignored.

        Raises
        ------
        TransientError
            When AWS failed or the row kept moving under an observation: the message is retried.
        """
        if change.kind is Kind.TEST:
            return self._result(change, Outcome.IGNORED, "test-event")
        if change.kind is Kind.METADATA:
            return self._result(change, Outcome.IGNORED, f"metadata-only: {change.event_name}")
        if self.scope_bucket is not None and change.bucket != self.scope_bucket:
            return self._result(change, Outcome.IGNORED, "out-of-scope-bucket")
        if change.kind is Kind.OBSERVE or change.sequencer is None:
            return self._observe(change)
        if change.kind is Kind.VERSION_REMOVED:
            return self._version_removed(change)
        return self._sequenced(change)

    # -- paths -----------------------------------------------------------------------------

    def _sequenced(self, change: Change) -> Result:
        state = _event_state(change)
        for _ in range(MAX_OBSERVATION_ATTEMPTS):
            first = self.ledger.write_sequenced(state, self._meta(change, "newer-sequencer"),
                                                observed=False, require_exact=True)
            if first.applied:
                return self._result(change, Outcome.APPLIED, "newer-sequencer")
            old = first.old or {}
            verdict = self._order_verdict(change, old)
            if verdict is not None:
                return verdict
            # The row holds an observed state, maybe newer than this event: verify (C7).
            now = self.bucket.current(change.bucket, change.key)
            if _matches(change, now):
                result = self.ledger.write_sequenced(
                    state, self._meta(change, "verified-against-bucket"), observed=False,
                    require_exact=False, expected_rev=_rev(old))
                outcome, reason = Outcome.APPLIED, "verified-against-bucket"
            else:
                result = self.ledger.write_sequenced(
                    _head_state(now), self._meta(change, "bucket-moved-past-event"),
                    observed=True, require_exact=False, expected_rev=_rev(old))
                outcome, reason = Outcome.SUPERSEDED, "bucket-moved-past-event"
            if result.applied:
                return self._result(change, outcome, reason)
            verdict = self._order_verdict(change, result.old or {})
            if verdict is not None:
                return verdict
            # Another writer changed the row between our read of it and our write: start over.
        raise TransientError("ledger row kept changing during verification")

    def _version_removed(self, change: Change) -> Result:
        now = self.bucket.current(change.bucket, change.key)
        reason = "version-removed-key-visible" if now.visible else "version-removed-key-hidden"
        result = self.ledger.write_sequenced(_head_state(now), self._meta(change, reason),
                                             observed=True, require_exact=False)
        if result.applied:
            return self._result(change, Outcome.APPLIED, reason)
        verdict = self._order_verdict(change, result.old or {})
        if verdict is not None:
            return verdict
        raise TransientError("ledger rejected a newer sequencer")  # pragma: no cover

    def _observe(self, change: Change) -> Result:
        for _ in range(MAX_OBSERVATION_ATTEMPTS):
            row = self.ledger.get(change.bucket, change.key)
            now = self.bucket.current(change.bucket, change.key)
            if row is not None and _row_equals(row, now):
                return self._result(change, Outcome.DUPLICATE, "observation-matches-ledger")
            if row is None and not now.visible:
                return self._result(change, Outcome.IGNORED, "observed-absent-not-in-ledger")
            result = self.ledger.write_observation(
                _head_state(now), self._meta(change, "observed-bucket-state"),
                expected_rev=_rev(row) if row is not None else None)
            if result.applied:
                return self._result(change, Outcome.APPLIED, "observed-bucket-state")
        raise TransientError("ledger row kept changing during observation")

    # -- helpers ---------------------------------------------------------------------------

    def _order_verdict(self, change: Change, old: dict[str, object]) -> Result | None:
        stored = old.get("seq")
        if not isinstance(stored, str) or change.sequencer is None:
            return None
        if stored == change.sequencer:
            return self._result(change, Outcome.DUPLICATE, "equal-sequencer")
        if stored > change.sequencer:
            return self._result(change, Outcome.STALE, "older-sequencer")
        return None

    def _meta(self, change: Change, reason: str) -> WriteMeta:
        return WriteMeta(bucket=change.bucket, key=change.key, raw_key=change.raw_key,
                         event_name=change.event_name, reason=reason, source=source_of(change),
                         sequencer=change.sequencer, raw_sequencer=change.raw_sequencer)

    @staticmethod
    def _result(change: Change, outcome: Outcome, reason: str) -> Result:
        return Result(outcome=outcome, reason=reason, bucket=change.bucket, key=change.key,
                      sequencer=change.raw_sequencer,
                      extra={"source": source_of(change), "event_name": change.event_name})


def source_of(change: Change) -> str:
    """``replay`` (EventBridge ``replay-name`` set), ``repair``, ``backfill`` or ``live``."""
    if change.replay_name:
        return "replay"
    if change.fmt is Format.REPAIR:
        return "repair"
    if change.fmt is Format.BACKFILL:
        return "backfill"
    return "live"


def _rev(row: dict[str, object]) -> int:
    rev = row.get("rev", 0)
    return rev if isinstance(rev, int) else 0


def _event_state(change: Change) -> RowState:
    if change.kind is Kind.CREATED:
        return RowState(present=True, version_id=change.version_id, etag=change.etag,
                        size=change.size)
    return RowState(present=False)


def _head_state(now: ObjectState) -> RowState:
    if not now.visible:
        return RowState(present=False)
    return RowState(present=True, version_id=now.version_id, etag=now.etag, size=now.size)


def _matches(change: Change, now: ObjectState) -> bool:
    """Whether the bucket still shows what the event says (same version, or same ETag)."""
    if change.kind is not Kind.CREATED:
        return not now.visible
    if not now.visible:
        return False
    if change.version_id or now.version_id:
        return change.version_id == now.version_id
    return change.etag is not None and change.etag == now.etag


def _row_equals(row: dict[str, object], now: ObjectState) -> bool:
    if not now.visible:
        return row.get("state") == "deleted"
    return (row.get("state") == "present" and row.get("version_id") == now.version_id
            and row.get("etag") == now.etag)
