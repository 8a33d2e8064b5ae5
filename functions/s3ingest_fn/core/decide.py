"""The ingest decision: what one parsed S3 change does to the ledger (CONTRACT C2-C7, C9, C10).

Pure logic over two ports (:mod:`s3ingest_fn.core.ports`), the ledger and the bucket; the
adapters (:mod:`s3ingest_fn.adapters`) implement them over DynamoDB and S3, ``tests/fakes`` in
memory.

Paths, by what the event can tell on its own:

* **Sequenced create** (the common path): one conditional UpdateItem; applied when the
  incoming sequencer is newer and the row does not hold an observed state. A rejection returns
  the old row, which says duplicate (equal sequencer) or stale (older) with no read. A stale
  event reads the bucket once: when the bucket shows the event's state and the row another, the
  stored sequencer is false (forged within the skew, issue 34) and the row records the bucket's
  state with it removed (``sequencer-reset: stale-but-current``, outcome ``applied``).
* **Hiding delete** (Delete, DeleteMarkerCreated, a lifecycle expiration; C4): one HEAD first.
  The bucket no longer shows the key: the conditional tombstone of the common path. It still
  shows it: the delete is contradicted (forged, or older than a re-PUT): no tombstone, no
  delete effect; the row records what the bucket shows if it does not hold it already (an
  observation: the sequencer stays), outcome ``superseded`` (reason
  :data:`DELETE_CONTRADICTED`); a row with a newer or equal sequencer still says stale or
  duplicate.
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
  A row whose stored sequencer S3 cannot have sent
  (:func:`~s3ingest_fn.core.sequencer.contradicted`: a forged one written before events were
  checked) is reset: the bucket's state is recorded with the sequencer removed (reason
  ``sequencer-reset: <why>``), so the next sequenced event is verified against the bucket (C7).
  A repair (reconciliation's, C12) over a row whose state the bucket contradicts resets it too
  (``sequencer-reset: state-contradicted-by-bucket``).
* **A listing's entry** (:attr:`Kind.LISTED`, the listing backfill): the state the listing gives
  is an older HEAD. A key the ledger has never seen is recorded from it with one conditional
  write (the row is absent), no read, no HEAD; when that write is refused, the row it returns
  says duplicate (same state) or, otherwise, the observation path runs (HEAD, optimistic
  concurrency). Why this is safe: ``docs/backfill-listing.md``.

Every path first checks the pipeline's :class:`~s3ingest_fn.core.scope.Scope`: a key outside it
ends ``ignored`` (reason ``out-of-scope``) without a request.

With processors configured (:class:`~s3ingest_fn.core.effects.EffectRunner`), every write that
applies a change also claims the effect of each processor the change concerns; they run after
it, concurrently, and each commits with one more write (CONTRACT C11; the protocol is in
:mod:`s3ingest_fn.core.effects`, several processors and the modes in ``docs/effects.md``).
Without one, nothing changes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from s3ingest_fn.contract import CANARY_PREFIX
from s3ingest_fn.core import claimed, sequencer
from s3ingest_fn.core.context import in_caller_context
from s3ingest_fn.core.effects import (
    CREATED,
    REMOVED,
    SUPERSEDED,
    AppliedChange,
    EffectRunner,
    WorkerLost,
    queued_changes,
    row_change,
)
from s3ingest_fn.core.hold import HOLD, RUN, SKIP
from s3ingest_fn.core.model import (
    Change,
    EffectNotStarted,
    Format,
    Kind,
    ObjectState,
    Outcome,
    Result,
    TransientError,
)
from s3ingest_fn.core.ports import Bucket, Ledger
from s3ingest_fn.core.row import (
    APPROVED,
    DEFAULT_PROCESSOR,
    DONE,
    HELD,
    MAX_QUEUED,
    PENDING,
    SKIPPED,
    Claim,
    Hold,
    LedgerRow,
    Review,
    RowState,
    WriteMeta,
    WriteResult,
)
from s3ingest_fn.core.scope import BucketScope, Scope

#: While another change's effect holds a live lease on the row, a newer change waits this long
#: (seconds, doubling: 0.05 + 0.1 + ... + 0.8 = 1.55 s) before its message is retried via SQS:
#: most effects end well within it, and a retry costs one of the message's receives.
LEASE_WAITS = (0.05, 0.1, 0.2, 0.4, 0.8)

#: Optimistic-concurrency attempts (observations, verifications) before the message is retried
#: via SQS. Conflicts come from other records of the same key in flight at the same moment.
MAX_OBSERVATION_ATTEMPTS = 5

#: The reason of every change outside the pipeline's scope (CONTRACT C9).
OUT_OF_SCOPE = "out-of-scope"
#: The reason of a key recorded from a listing's state, without a HEAD.
LISTED_STATE = "listed-state"
#: The reason of a hiding delete the bucket contradicts: it still shows the key (C4).
DELETE_CONTRADICTED = "delete-contradicted-by-bucket"
#: The reason prefix of a sequencer reset (``sequencer-reset: sequencer-length``, C5, C7).
SEQUENCER_RESET = "sequencer-reset"
#: Why a repair resets a row the bucket contradicts (``sequencer-reset: <this>``, C7, C12).
STATE_CONTRADICTED = "state-contradicted-by-bucket"
#: Why a stale event resets the row: the bucket shows the event's state, the row another (C5).
STALE_BUT_CURRENT = "stale-but-current"


@dataclass
class IngestService:
    """Applies parsed changes to the ledger.

    Parameters
    ----------
    ledger : Ledger
    bucket : Bucket
    scope_bucket : str or None
        One bucket, no key filters: the single-bucket form of ``scope`` (kept for callers that
        pass one bucket); ignored when ``scope`` is given.
    effects : EffectRunner or None
        The team's processors; None keeps the one-write path (CONTRACT C5).
    scope : Scope or None
        The buckets and key filters the pipeline tracks; a change outside them ends ``ignored``
        (reason ``out-of-scope``, ``extra["scope"]`` ``other-bucket`` or ``key-filter``) and
        never reaches the ledger. None: ``scope_bucket``, or every key when that is None too.
    """

    ledger: Ledger
    bucket: Bucket
    scope_bucket: str | None = None
    effects: EffectRunner | None = None
    #: Injectable for tests (waits for a live effect lease, :data:`LEASE_WAITS`).
    sleep: Callable[[float], None] = time.sleep
    scope: Scope | None = None
    #: Epoch seconds: judges a stored sequencer (:func:`~s3ingest_fn.core.sequencer.contradicted`).
    clock: Callable[[], float] = time.time

    def __post_init__(self) -> None:
        if self.scope is None:
            buckets = (BucketScope(self.scope_bucket),) if self.scope_bucket else ()
            self.scope = Scope(buckets)

    @property
    def tracked(self) -> Scope:
        """The scope checked (never None after construction)."""
        assert self.scope is not None
        return self.scope

    def out_of_scope(self, change: Change) -> Result | None:
        """The ``ignored`` result of a change outside the scope, or None when it is in scope."""
        why = self.tracked.reason(change.bucket, change.key)
        if why is None:
            return None
        result = result_of(change, Outcome.IGNORED, OUT_OF_SCOPE)
        result.extra["scope"] = why
        return result

    def bind_context(self, context: Any) -> None:
        """Give the effect leases the Lambda invocation's remaining time (no-op without one)."""
        if self.effects is not None:
            self.effects.bind_context(context)

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
            return result_of(change, Outcome.IGNORED, "test-event")
        if change.kind is Kind.METADATA:
            return result_of(change, Outcome.IGNORED, f"metadata-only: {change.event_name}")
        skipped = self.out_of_scope(change)
        if skipped is not None:
            return skipped
        if change.kind is Kind.LISTED:
            path = self._listed
        elif change.kind is Kind.OBSERVE or change.sequencer is None:
            path = self._observe
        elif change.kind is Kind.VERSION_REMOVED:
            path = self._version_removed
        elif change.kind is Kind.REMOVED:
            path = self._removed
        else:
            path = self._sequenced
        for wait in (*LEASE_WAITS, None):
            try:
                return path(change)
            except _LeaseBusy:
                if wait is None:
                    raise TransientError(
                        "effect-in-progress: another change of the key is running its effect"
                    ) from None
                self.sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    # -- reprocess (CONTRACT C11: a processor added or changed later) ----------------------

    def behind(self, row: LedgerRow, processor: str) -> bool:
        """:meth:`~s3ingest_fn.core.effects.EffectRunner.behind` (False without processors)."""
        return self.effects is not None and self.effects.behind(row, processor)

    def reprocess(self, row: LedgerRow, processor: str) -> str:
        """Run ``processor``'s effect of ``row``'s change (a row :meth:`behind` for it): one
        conditional claim on the row's change and the effect as read
        (:meth:`~s3ingest_fn.core.ports.Ledger.claim_behind`), the run pinned to the change
        and gated by the hold policy as a live change's (the row's own held or approved change
        kept), the commit under the fencing token with the processor's version. Returns
        ``run``, ``superseded``, ``held``, ``skipped`` (the change or effect moved on since it
        was read, or the hold policy skips it) or ``busy`` (another worker's live lease).

        Raises
        ------
        EffectNotStarted
            Nothing was claimed: too little time left, or the claim's write failed.
        TransientError
            The processor failed (its claim released) or the worker was killed.
        """
        effects = self.effects
        if effects is None:
            return "skipped"
        effect = row.effect_of(processor)
        claim = effects.claim(row.key, CREATED, only=(processor,))
        try:
            taken = self.ledger.claim_behind(
                row.bucket,
                row.key,
                processor,
                row.change_id,
                effect.token if effect is not None else None,
                claim,
                effects.version_of(processor),
            )
        except EffectNotStarted:
            raise
        except TransientError as exc:
            raise EffectNotStarted(f"{processor}: claim not written: {exc}") from exc
        if not taken.applied or taken.token is None:
            old = taken.old
            now = old.effect_of(processor) if old is not None else None
            return "busy" if now is not None and now.lease_live(claim.now_ms) else "skipped"
        applied = row_change(row, CREATED, taken.token, processor, claim.lease_until_ms)
        hold = effect.hold if effect is not None else None
        status, error = self._run_one([applied], hold)
        if error is not None:
            raise error
        if status == DONE:
            return "run"
        if status in (SUPERSEDED, HELD):
            return str(status)
        return "skipped"

    # -- paths -----------------------------------------------------------------------------

    def _sequenced(self, change: Change, head: ObjectState | None = None) -> Result:
        """``head``: the bucket's state, just read (a hiding delete's), for the first
        verification."""
        state = _event_state(change)
        for _ in range(MAX_OBSERVATION_ATTEMPTS):
            claim = self._claim(change, state)
            meta = self._meta(change, "newer-sequencer")
            first = self.ledger.apply_if_newer(state, meta, claim)
            if first.applied:
                return self._applied(change, Outcome.APPLIED, first, state, meta, claim)
            old = first.old
            if old is not None and _older(change, old) and self._ahead(old):
                # stale against a sequencer whose time has not come (forged within the skew, or
                # above the clock): unless the bucket shows this event's state and the row
                # another, the row records the bucket's state, its sequencer removed (C5, C7)
                now = head if head is not None else self.bucket.current(change.bucket, change.key)
                head = now
                if _matches(change, now) and not old.holds(_head_state(now)):
                    fixed = self._reset(change, old, _head_state(now), STALE_BUT_CURRENT)
                    if fixed is not None:
                        return fixed
                    continue
            if old is not None:
                verdict = self._rejected(change, old, claim)
                if verdict is not None:
                    return verdict
            # The row holds an observed state, maybe newer than this event: verify (C7).
            now = head if head is not None else self.bucket.current(change.bucket, change.key)
            head = None
            if _matches(change, now):
                meta = self._meta(change, "verified-against-bucket")
                outcome, written, observed = Outcome.APPLIED, state, False
            else:
                meta = self._meta(change, "bucket-moved-past-event")
                outcome, written, observed = Outcome.SUPERSEDED, _head_state(now), True
            if old is not None and old.holds(written):
                # The row already holds this state (an observation recorded it, and ran its
                # effect): only the sequencer moves; no new change, no second effect (unless
                # that effect is behind the row: the bucket was just read, so it runs now).
                claim = None
                result = self.ledger.advance_sequencer(
                    written, meta, observed=observed, expected_rev=old.rev
                )
                if result.applied:
                    done = result_of(change, outcome, meta.reason)
                    done.extra["effect"] = "already-recorded"
                    return self._resume(done, old, verified=True)
            else:
                claim = self._claim(change, written)
                result = self.ledger.apply_verified(
                    written,
                    meta,
                    observed=observed,
                    expected_rev=old.rev if old is not None else 0,
                    claim=claim,
                )
                if result.applied:
                    return self._applied(change, outcome, result, written, meta, claim)
            if result.old is not None:
                verdict = self._rejected(change, result.old, claim)
                if verdict is not None:
                    return verdict
            # Another writer changed the row between our read of it and our write: start over.
        raise TransientError("ledger row kept changing during verification")

    def _removed(self, change: Change) -> Result:
        """A hiding delete (C4): the tombstone only when the bucket no longer shows the key."""
        now = self.bucket.current(change.bucket, change.key)
        for attempt in range(MAX_OBSERVATION_ATTEMPTS):
            if attempt:
                now = self.bucket.current(change.bucket, change.key)
            if not now.visible:
                return self._sequenced(change, now)
            # The bucket shows the key: a forged delete, or one older than a re-PUT (whose own
            # event applies or has applied the new state). Never a tombstone, never a delete
            # effect; what the bucket shows is recorded as an observation, at no sequencer.
            row = self.ledger.get(change.bucket, change.key)
            verdict = self._order_verdict(change, row) if row is not None else None
            if verdict is not None:
                assert row is not None
                return self._resume(verdict, row)
            written = _head_state(now)
            if row is not None and row.holds(written):
                done = result_of(change, Outcome.SUPERSEDED, DELETE_CONTRADICTED)
                done.extra["ledger"] = "holds-bucket-state"
                return self._resume(done, row, verified=True)
            meta = replace(
                self._meta(change, DELETE_CONTRADICTED), sequencer=None, raw_sequencer=None
            )
            claim = self._claim(change, written)
            result = self.ledger.record_observation(
                written, meta, row.rev if row is not None else None, claim
            )
            if result.applied:
                done = self._applied(change, Outcome.SUPERSEDED, result, written, meta, claim)
                done.extra["ledger"] = "recorded-bucket-state"
                return done
            if _lease_live(result.old, claim):
                raise _LeaseBusy
        raise TransientError("ledger row kept changing while a delete was checked")

    def _version_removed(self, change: Change) -> Result:
        now = self.bucket.current(change.bucket, change.key)
        reason = "version-removed-key-visible" if now.visible else "version-removed-key-hidden"
        meta, written = self._meta(change, reason), _head_state(now)
        # Removing a version other than the one now visible usually leaves the state the row
        # already holds: then only the sequencer moves (no new change, no second effect). The
        # guess costs no read: each write is conditional on it, and a rejection returns the
        # row, which settles it for the next attempt.
        same = now.visible and change.version_id is not None and change.version_id != now.version_id
        for _ in range(MAX_OBSERVATION_ATTEMPTS):
            claim = None if same else self._claim(change, written)
            if same:
                result = self.ledger.advance_sequencer(written, meta, observed=True)
            else:
                result = self.ledger.apply_observed_at(written, meta, claim)
            if result.applied:
                if same:
                    done = result_of(change, Outcome.APPLIED, reason)
                    done.extra["effect"] = "already-recorded"
                    return done
                return self._applied(change, Outcome.APPLIED, result, written, meta, claim)
            old = result.old
            if old is None:
                same = False
                continue
            verdict = self._rejected(change, old, claim)
            if verdict is not None:
                return verdict
            same = old.holds(written)
        raise TransientError("ledger row kept changing during a version removal")

    def _listed(self, change: Change) -> Result:
        """A listing's entry: one conditional write when the ledger has never seen the key (no
        read, no HEAD); the refused write's row settles duplicate, else the observation path
        runs from that row (``docs/backfill-listing.md``)."""
        state = RowState(
            present=True, version_id=change.version_id, etag=change.etag, size=change.size
        )
        claim = self._claim(change, state)
        meta = self._meta(change, LISTED_STATE)
        first = self.ledger.record_observation(state, meta, None, claim)
        if first.applied:
            done = self._applied(change, Outcome.APPLIED, first, state, meta, claim)
            done.extra["listing"] = "recorded-without-head"
            return done
        old = first.old
        if old is not None and old.holds(state) and self._poisoned(old) is None:
            # the row holds what the listing shows: resume an abandoned effect, as an
            # observation matching the ledger does (the bucket was not read now: only a pending
            # effect whose lease expired is re-run)
            done = self._resume(result_of(change, Outcome.DUPLICATE, "listing-matches-ledger"), old)
            done.extra["listing"] = "duplicate"
            return done
        observed = self._observe(change, known=old)
        observed.extra["listing"] = (
            "duplicate" if observed.outcome is Outcome.DUPLICATE else "observed-with-head"
        )
        return observed

    def _observe(self, change: Change, known: LedgerRow | None = None) -> Result:
        """Read the row (or start from ``known``, a row a refused write just returned), HEAD,
        and record the bucket's state if the row has not moved."""
        for attempt in range(MAX_OBSERVATION_ATTEMPTS):
            if attempt == 0 and known is not None:
                row: LedgerRow | None = known
            else:
                row = self.ledger.get(change.bucket, change.key)
            now = self.bucket.current(change.bucket, change.key)
            poisoned = self._poisoned(row)
            if row is not None and poisoned is not None:
                reset = self._reset(change, row, _head_state(now), poisoned)
                if reset is not None:
                    return reset
                continue
            if row is not None and row.holds(_head_state(now)):
                return self._resume(
                    result_of(change, Outcome.DUPLICATE, "observation-matches-ledger"),
                    row,
                    verified=True,
                )
            if row is None and not now.visible:
                return result_of(change, Outcome.IGNORED, "observed-absent-not-in-ledger")
            meta, written = self._meta(change, "observed-bucket-state"), _head_state(now)
            if row is not None and row.seq is not None and change.fmt is Format.REPAIR:
                # reconciliation found the row contradicted by the bucket: its ordering goes too,
                # so the key's next real event applies (C7, C12)
                reset = self._reset(change, row, written, STATE_CONTRADICTED)
                if reset is not None:
                    return reset
                continue
            claim = self._claim(change, written)
            result = self.ledger.record_observation(
                written, meta, row.rev if row is not None else None, claim
            )
            if result.applied:
                return self._applied(change, Outcome.APPLIED, result, written, meta, claim)
            if _lease_live(result.old, claim):
                raise _LeaseBusy
        raise TransientError("ledger row kept changing during observation")

    def _poisoned(self, row: LedgerRow | None) -> str | None:
        """Why the row's stored sequencer cannot have come from S3, or None."""
        if row is None or row.seq is None:
            return None
        return sequencer.contradicted(row.seq, self.clock())

    def _ahead(self, row: LedgerRow) -> bool:
        """Whether the row's sequencer names a time after the handler's clock (or S3 cannot have
        sent it): only a forged value can, so only then does a stale event cost a HEAD."""
        if row.seq is None:
            return False
        now_s = self.clock()
        return (sequencer.seconds_of(row.seq) or 0) > now_s or self._poisoned(row) is not None

    def _reset(self, change: Change, row: LedgerRow, written: RowState, why: str) -> Result | None:
        """Record the bucket's state (``written``, just read) over a row whose sequencer S3
        cannot have sent (``why``), the sequencer removed, while the row is still at its
        revision: a new change (its effects claimed) or, when the row holds the state, only the
        bookkeeping (an effect behind the row is resumed: the bucket was just read). None: the
        row moved; read it again."""
        reason = f"{SEQUENCER_RESET}: {why}"
        meta = replace(self._meta(change, reason), sequencer=None, raw_sequencer=None)
        same = row.holds(written)
        claim = None if same else self._claim(change, written)
        result = self.ledger.reset_sequencer(written, meta, row.rev, claim, same_change=same)
        if not result.applied:
            if _lease_live(result.old, claim):
                raise _LeaseBusy
            return None
        if same:
            done = result_of(change, Outcome.APPLIED, reason)
            done.extra.update(effect="already-recorded", sequencer_reset=why)
            return self._resume(done, row, verified=True)
        done = self._applied(change, Outcome.APPLIED, result, written, meta, claim)
        done.extra["sequencer_reset"] = why
        return done

    # -- effects (CONTRACT C11, module s3ingest_fn.core.effects) ---------------------------------

    def _claim(self, change: Change, state: RowState) -> Claim | None:
        """The effect claim of a write applying ``state`` for ``change``; None without
        processors, and for ``s3ingest verify``'s canary keys, which never reach one."""
        if self.effects is None or change.key.startswith(CANARY_PREFIX):
            return None
        return self.effects.claim(change.key, CREATED if state.present else REMOVED)

    def _rejected(self, change: Change, old: LedgerRow, claim: Claim | None) -> Result | None:
        """After a rejected write: duplicate/stale (resuming an abandoned effect),
        :class:`_LeaseBusy` when another change's effect holds a live lease, or None (the caller
        goes on).

        Raises
        ------
        TransientError
            When an ``every-change`` processor's queue on the row is full
            (:data:`~s3ingest_fn.core.row.MAX_QUEUED`): its effects keep failing.
        """
        verdict = self._order_verdict(change, old)
        if verdict is not None:
            return self._resume(verdict, old)
        if _lease_live(old, claim):
            raise _LeaseBusy
        if claim is not None:
            for name in claim.queued:
                effect = old.effect_of(name)
                if effect is not None and len(effect.queue) >= MAX_QUEUED:
                    raise TransientError(
                        f"effect-backlog-full: processor {name!r} has {len(effect.queue)} "
                        "changes of the key waiting (every-change); the change is retried"
                    )
        return None

    def _applied(
        self,
        change: Change,
        outcome: Outcome,
        write: WriteResult,
        state: RowState,
        meta: WriteMeta,
        claim: Claim | None,
    ) -> Result:
        result = result_of(change, outcome, meta.reason)
        if write.change_id:
            result.extra["change_id"] = write.change_id
        if self.effects is None or write.token is None or claim is None:
            return result
        applied = AppliedChange(
            bucket=change.bucket,
            key=change.key,
            kind=CREATED if state.present else REMOVED,
            sequencer=meta.raw_sequencer or meta.sequencer,
            version_id=state.version_id,
            etag=state.etag,
            size=state.size,
            source=meta.source,
            event_name=meta.event_name,
            change_id=write.change_id or "",
            token=write.token,
            lease_until_ms=claim.lease_until_ms,
        )
        claimed.check_queues(claim, write)
        if not state.present and claimed.never_held(write, claim):  # nothing downstream saw it
            return claimed.close(self.ledger, result, write, claim, self.effects.names)
        jobs = {
            name: queued_changes(applied, name, write.queues[name])
            if name in claim.queued
            else [replace(applied, processor=name)]
            for name in claim.processors
        }
        result.extra.update({"change_id": applied.change_id, "token": applied.token})
        return self._run(result, jobs, write.holds)

    def _resume(self, verdict: Result, row: LedgerRow, *, verified: bool = False) -> Result:
        """Re-run, per processor, the effect of the row's change: a pending one whose worker's
        lease has expired, or, when ``verified`` (the bucket was just read and shows the row's
        state), one that is behind the row (it ended superseded and no newer change came;
        CONTRACT C11). Each processor is re-claimed by a write of its own; an
        ``every-change`` one runs its waiting changes in order."""
        if self.effects is None:
            return verdict
        kind = CREATED if row.present else REMOVED
        now = self.effects.clock_ms()
        due: list[str] = []
        for name in self.effects.names:
            effect = row.effect_of(name)
            if effect is None or effect.token is None:
                continue
            if effect.status == PENDING:
                if effect.lease_until_ms is None or effect.lease_until_ms >= now:
                    continue  # its worker is still running and will commit
            elif not (verified and effect.status == SUPERSEDED):
                continue
            spec = self.effects.spec(name)
            if spec is not None and (effect.queue or spec.concerns(row.key, kind)):
                due.append(name)
            elif effect.status == SUPERSEDED:
                # an every-change processor's last run was an older change, superseded; the
                # row's change does not concern it: nothing is behind, close the effect
                self.ledger.close(str(verdict.bucket), str(verdict.key), effect.token, name)
        if not due:
            return verdict
        jobs: dict[str, list[AppliedChange]] = {}
        holds: dict[str, Hold] = {}
        # every claim first: one that raises (too little time left) re-claims nothing
        claims = {name: self.effects.claim(row.key, kind, only=(name,)) for name in due}
        for name in due:
            effect = row.effect_of(name)
            assert effect is not None and effect.token is not None
            claim = claims[name]
            taken = self.ledger.reclaim(
                str(verdict.bucket), str(verdict.key), effect.token, claim, processor=name
            )
            if not taken.applied or taken.token is None:
                continue
            applied = row_change(row, kind, taken.token, name, claim.lease_until_ms)
            queue = taken.queues.get(name) or effect.queue
            jobs[name] = queued_changes(applied, name, queue) if queue else [applied]
            if effect.hold is not None:
                holds[name] = effect.hold
        if not jobs:
            return verdict
        first = next(iter(jobs.values()))[-1]
        resumed = Result(
            outcome=verdict.outcome,
            reason=verdict.reason,
            bucket=verdict.bucket,
            key=verdict.key,
            sequencer=verdict.sequencer,
            extra=dict(verdict.extra),
        )
        resumed.extra.update({"resumed_change_id": first.change_id, "token": first.token})
        return self._run(resumed, jobs, holds, resumed=True)

    def _run(
        self,
        result: Result,
        jobs: dict[str, list[AppliedChange]],
        holds: dict[str, Hold],
        *,
        resumed: bool = False,
    ) -> Result:
        """Run each processor's changes under its claim and commit each (CONTRACT C11):
        processors concurrently, one processor's changes in order. A processor that fails has
        its claim released and leaves its effect pending; the others still commit. ``extra``
        gets ``effect``: the single default processor's status (``done``, ``superseded``,
        ``lease-lost``; prefixed ``resumed-`` when ``resumed``), or, with named processors, a
        map of them by name (``failed`` for one that failed), and ``effect_errors`` (each failed
        processor's message: the raised error names the first). A processor whose hold policy
        holds a change reports ``held`` (and runs none of its later ones); skips, ``skipped``.

        Raises
        ------
        TransientError
            The first processor failure (its own error, ``effects_pending`` set), with
            ``extra``: the row is written, the effect pending (the message is retried). A worker
            the effect runner lost (:class:`~s3ingest_fn.core.effects.WorkerLost`): its own
            error.
        """
        assert self.effects is not None
        names = list(jobs)
        if len(names) == 1:
            outcomes = [self._run_one(jobs[names[0]], holds.get(names[0]))]
        else:
            with ThreadPoolExecutor(max_workers=len(names)) as pool:
                run = in_caller_context(lambda n: self._run_one(jobs[n], holds.get(n)))
                outcomes = list(pool.map(run, names))
        prefix = "resumed-" if resumed else ""
        statuses = {
            name: prefix + ("failed" if error is not None and status != "killed" else str(status))
            for name, (status, error) in zip(names, outcomes, strict=True)
        }
        errors = {
            name: str(error)
            for name, (status, error) in zip(names, outcomes, strict=True)
            if error is not None and status != "killed"
        }
        if self.effects.names != (DEFAULT_PROCESSOR,):  # named processors: always by name
            result.extra["effect"] = statuses
            if errors:
                result.extra["effect_errors"] = errors
        elif not statuses[names[0]].endswith("failed"):
            result.extra["effect"] = statuses[names[0]]
        if (
            all(status == SUPERSEDED for status, _ in outcomes)
            and result.outcome is Outcome.APPLIED
        ):
            result.outcome, result.reason = Outcome.SUPERSEDED, "content-superseded"
        for status, error in outcomes:
            if error is not None:
                error.extra.update(result.extra)
                error.effects_pending = status != "killed"
                raise error
        return result

    def _run_one(
        self, changes: list[AppliedChange], hold: Hold | None = None
    ) -> tuple[str | None, TransientError | None]:
        """One processor's changes, in order, each committed; stops at a failure or a held
        change (``hold``: the one the row holds, with its review).
        Returns the last status (``done``, ``superseded``, ``held``, ``skipped``,
        ``lease-lost``, ``killed``, or None when the first change failed) and the failure."""
        assert self.effects is not None
        status: str | None = None
        for i, change in enumerate(changes):
            try:
                if i:  # a queued change: only with time for it before the invocation ends
                    self.effects.ensure_time(change.processor)
                gate = self._gate(change, hold)
                if gate == HELD:
                    return HELD, None
                if gate == SKIP:
                    status = SKIPPED
                elif gate is None:
                    return "lease-lost", None
                else:
                    status = self.effects.run(change)
            except WorkerLost as lost:  # nothing commits; the claim is left to its lease
                if not isinstance(lost.error, TransientError):
                    raise lost.error from None
                lost.error.extra.update(effect="killed")
                return "killed", lost.error
            except TransientError as exc:
                self.ledger.release(change.bucket, change.key, change.token, change.processor)
                return status, exc
            except Exception as exc:  # the team's code: any failure is retried, never lost
                self.ledger.release(change.bucket, change.key, change.token, change.processor)
                named = "" if change.processor == DEFAULT_PROCESSOR else f"{change.processor}: "
                error = TransientError(
                    f"processor-failed: {named}{exc.__class__.__name__}: {exc}"[:300]
                )
                error.__cause__ = exc
                return status, error
            more = i < len(changes) - 1
            if not self.ledger.finish(
                change.bucket,
                change.key,
                change.token,
                status,
                processor=change.processor,
                change_id=change.change_id,
                more=more,
                version=self.effects.version_of(change.processor),
                at=self.effects.clock_ms(),
            ):
                return "lease-lost", None
        return status, None

    def _gate(self, change: AppliedChange, hold: Hold | None) -> str | None:
        """The hold policy's gate before ``change``'s effect (:mod:`s3ingest_fn.core.hold`):
        ``run``; ``skip``; or ``held``, after recording it on the row (one write instead of the
        commit; a change the row already holds is held again without asking the policy, an
        approved one runs). None: the claim was lost meanwhile.

        Raises
        ------
        TransientError
            The team's policy failed (the claim is released by the caller).
        """
        assert self.effects is not None
        if hold is not None and hold.change_id == change.change_id:
            if hold.decision == APPROVED:
                return RUN
            if hold.decision == HELD:
                kept = self.ledger.hold(
                    change.bucket, change.key, change.token, change.processor, hold, None
                )
                return HELD if kept else None
        verdict = self.effects.verdict(change, self.ledger)
        if verdict.action == SKIP:
            return SKIP
        if verdict.action != HOLD:
            return RUN
        now = self.effects.clock_ms()
        held = Hold(change_id=change.change_id, reason=verdict.reason, at=now)
        review = Review(
            action=HELD,
            processor=change.processor,
            change_id=change.change_id,
            seq=change.sequencer or "-",
            reason=verdict.reason,
            actor="policy",
            at=now,
        )
        kept = self.ledger.hold(
            change.bucket, change.key, change.token, change.processor, held, review
        )
        return HELD if kept else None

    # -- helpers ---------------------------------------------------------------------------

    def _order_verdict(self, change: Change, old: LedgerRow) -> Result | None:
        stored = old.seq
        if stored is None or change.sequencer is None:
            return None
        if stored == change.sequencer:
            return result_of(change, Outcome.DUPLICATE, "equal-sequencer")
        if stored > change.sequencer:
            return result_of(change, Outcome.STALE, "older-sequencer")
        return None

    def _meta(self, change: Change, reason: str) -> WriteMeta:
        return WriteMeta(
            bucket=change.bucket,
            key=change.key,
            raw_key=change.raw_key,
            event_name=change.event_name,
            reason=reason,
            source=source_of(change),
            sequencer=change.sequencer,
            raw_sequencer=change.raw_sequencer,
        )


def result_of(change: Change, outcome: Outcome, reason: str) -> Result:
    """The :class:`Result` of ``change``: bucket, key, sequencer as received, and ``source``,
    ``event_name`` and ``event_time`` (when the event has one) for the logs, the replay
    metrics and the end-to-end lag."""
    extra: dict[str, object] = {"source": source_of(change), "event_name": change.event_name}
    if change.event_time:
        extra["event_time"] = change.event_time
    return Result(
        outcome=outcome,
        reason=reason,
        bucket=change.bucket,
        key=change.key,
        sequencer=change.raw_sequencer,
        extra=extra,
    )


def source_of(change: Change) -> str:
    """``replay`` (EventBridge ``replay-name`` set), ``repair``, ``backfill`` (a Batch
    Operations task, an inventory file, a listing) or ``live``."""
    if change.replay_name:
        return "replay"
    if change.fmt is Format.REPAIR:
        return "repair"
    if change.fmt in (Format.BACKFILL, Format.LISTING):
        return "backfill"
    return "live"


class _LeaseBusy(Exception):
    """Another change's effect holds a live lease on the row: wait, then start over."""


def _lease_live(old: LedgerRow | None, claim: Claim | None) -> bool:
    return claim is not None and old is not None and old.lease_live(claim.now_ms)


def _older(change: Change, row: LedgerRow) -> bool:
    """Whether the row's stored sequencer is above the event's (the event is ``stale``)."""
    return row.seq is not None and change.sequencer is not None and row.seq > change.sequencer


def _event_state(change: Change) -> RowState:
    if change.kind is Kind.CREATED:
        return RowState(
            present=True, version_id=change.version_id, etag=change.etag, size=change.size
        )
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
