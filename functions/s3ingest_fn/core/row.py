"""The ledger row as the core sees it, and what a ledger write asks and returns.

Typed values only: how a row is stored (attribute names, encodings, the legacy format) is the
ledger adapter's business (:mod:`s3ingest_fn.adapters.dynamo_ledger`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: A row's ``state``: the key is visible, or a tombstone (CONTRACT C6).
PRESENT, DELETED = "present", "deleted"
#: A row's effect status (CONTRACT C11, :mod:`s3ingest_fn.core.effects`); ``held`` waits for an
#: operator's decision, ``rejected`` will not run (:mod:`s3ingest_fn.core.hold`).
PENDING, DONE, SUPERSEDED = "pending", "done", "superseded"
HELD, REJECTED, SKIPPED = "held", "rejected", "skipped"
#: A held change's review decision (:attr:`Hold.decision`, :attr:`Review.action`).
APPROVED = "approved"
#: What the last write to a row was: a change was applied (the change stream publishes exactly
#: these), only the sequencer moved, an effect was re-claimed, released or committed.
OP_APPLY, OP_SEQ, OP_CLAIM, OP_RELEASE, OP_COMMIT = "apply", "seq", "claim", "release", "commit"
#: A processor's effect was committed ``done`` (a commit of any other status is
#: :data:`OP_COMMIT`); with ``historyTable`` the change stream publishes these as ``Effect Done``.
OP_DONE = "done"
#: A removed processor's effect state was cleaned from the row (``s3ingest reprocess --remove``).
OP_FORGET = "forget"
#: A processor's effect was held, approved or rejected (the change stream publishes these too).
OP_HOLD, OP_APPROVE, OP_REJECT = "hold", "approve", "reject"
#: Review decisions (held, approved, rejected) kept on a row by default, newest first (the
#: ``trailLength`` setting: 1 to :data:`MAX_TRAIL`).
TRAIL_SLOTS, MAX_TRAIL = 5, 20
#: Applied decisions kept on a row, newest first.
HISTORY_SLOTS = 3
#: The processor the single ``processor`` setting configures: its effect state is stored where a
#: one-processor ledger always stored it (:attr:`LedgerRow.effect`).
DEFAULT_PROCESSOR = "default"
#: An ``every-change`` processor's changes waiting on a row at most; a write that would queue
#: one more is refused (the message is retried, then dead-lettered: nothing is lost).
MAX_QUEUED = 20


@dataclass(frozen=True)
class RowState:
    """The object state a write records.

    ``present=False`` makes the row a tombstone; ``version_id``/``etag``/``size`` describe the
    current version when present.
    """

    present: bool
    version_id: str | None = None
    etag: str | None = None
    size: int | None = None


@dataclass(frozen=True)
class WriteMeta:
    """Bookkeeping written with a state: who changed the row and why.

    ``sequencer`` is normalised (:func:`s3ingest_fn.core.sequencer.normalize`);
    ``raw_sequencer`` as received.
    """

    bucket: str
    key: str
    raw_key: str
    event_name: str
    reason: str
    source: str
    sequencer: str | None = None
    raw_sequencer: str | None = None


#: Bits of a fencing token below the claim's second (:func:`fencing_token`): 2^20 claims of
#: one row in one second before two seconds' tokens could meet.
TOKEN_SECOND_SHIFT = 20


def fencing_token(rev: int, now_ms: int) -> int:
    """The fencing token of a claim that moves a row to revision ``rev`` at epoch ms ``now_ms``:
    ``rev + ((now_ms // 1000) << TOKEN_SECOND_SHIFT)``, below 2^53 (safe as a JSON number) until
    the year 2242.

    Per row, tokens strictly increase while a claim's clock reads no earlier whole second than
    the row's previous claim (Lambda clocks are NTP-synced; a clock behind by a second or more
    could repeat a token). When a row goes back ``lost`` revisions (a point-in-time restore; a
    recreated table or an expired tombstone's row created again: all of them), a claim ``k``
    whole seconds after the row's last one gets a greater token than every earlier one when
    ``lost <= k << TOKEN_SECOND_SHIFT``: one second after it for up to 2^20 lost revisions.
    """
    return rev + ((now_ms // 1000) << TOKEN_SECOND_SHIFT)


def token_step(now_ms: int) -> int:
    """What a claim at epoch ms ``now_ms`` adds to the row's revision before the write (0 for a
    new row) to set its fencing token: ``fencing_token(rev + 1, now_ms) - rev``."""
    return fencing_token(1, now_ms)


@dataclass(frozen=True)
class Claim:
    """What a write applying a change asks of the processors' effect state.

    Attributes
    ----------
    now_ms, lease_until_ms : int
        Epoch ms now and when the lease of the claimed effects expires.
    processors : tuple of str
        The processors the change concerns: each one's effect becomes ``pending`` under the
        write's fencing token (:func:`fencing_token` of the row's new revision and
        ``now_ms``). Empty: the write claims nothing.
    queued : tuple of str
        Those of ``processors`` in ``every-change`` mode: the change is appended to their
        queue of changes whose effects wait (:attr:`Effect.queue`).
    configured : tuple of str
        Every processor of the stack: a live lease of any of them refuses the write, and the
        ``latest`` ones not in ``processors`` have their older, unfinished effect dropped.
    latest : tuple of str
        The ``latest`` processors among ``configured``.
    """

    now_ms: int
    lease_until_ms: int
    processors: tuple[str, ...] = (DEFAULT_PROCESSOR,)
    queued: tuple[str, ...] = ()
    configured: tuple[str, ...] = (DEFAULT_PROCESSOR,)
    latest: tuple[str, ...] = (DEFAULT_PROCESSOR,)


@dataclass(frozen=True)
class QueuedChange:
    """An applied change whose ``every-change`` effect has not completed yet (a row's
    :attr:`Effect.queue`): enough to run its effect after newer changes were applied.

    ``sequencer`` is as received (None: an observation); ``present`` False for a removal.
    """

    change_id: str
    present: bool
    sequencer: str | None
    version_id: str | None
    etag: str | None
    size: int | None
    source: str
    event_name: str


@dataclass(slots=True)
class Decision:
    """One applied decision in a row's history (CONTRACT C5: skipped events write nothing).

    ``seq`` is the sequencer as received, ``-`` for an observation; ``at`` epoch ms;
    ``state`` ``present`` or ``deleted``.
    """

    seq: str
    event: str
    reason: str
    source: str
    at: int
    state: str

    def as_dict(self) -> dict[str, object]:
        """The decision as JSON-ready values (the CLI's ``explain``)."""
        return {
            "seq": self.seq,
            "event": self.event,
            "reason": self.reason,
            "source": self.source,
            "at": self.at,
            "state": self.state,
        }


@dataclass(frozen=True)
class Hold:
    """Why a processor's effect waits, and the operator's decision (:mod:`s3ingest_fn.core.hold`).

    ``change_id`` is the held change (an ``every-change`` processor's: the head of its queue);
    ``at`` and ``decided_at`` epoch ms; ``decision`` :data:`HELD` until :data:`APPROVED` or
    :data:`REJECTED`; ``actor`` who decided (the caller's identity)."""

    change_id: str
    reason: str
    at: int
    decision: str = HELD
    actor: str = ""
    decided_at: int | None = None


@dataclass(frozen=True)
class Review:
    """One review decision in a row's trail: ``action`` :data:`HELD`, :data:`APPROVED` or
    :data:`REJECTED`, for ``processor`` and the change ``change_id`` (``seq`` its sequencer as
    received, ``-`` for an observation), by ``actor`` (``policy`` for a hold), at ``at``
    epoch ms."""

    action: str
    processor: str
    change_id: str
    seq: str
    reason: str
    actor: str
    at: int

    def as_dict(self) -> dict[str, object]:
        """JSON-ready values (``explain``)."""
        return {
            "action": self.action,
            "processor": self.processor,
            "change_id": self.change_id,
            "seq": self.seq,
            "reason": self.reason,
            "actor": self.actor,
            "at": self.at,
        }


@dataclass(frozen=True)
class Effect:
    """The processor effect of the row's change (CONTRACT C11).

    Attributes
    ----------
    status : str
        ``pending``, ``done``, ``superseded``, ``held`` or ``rejected``.
    token : int or None
        Fencing token of the claim (:func:`fencing_token` of the row's revision and the
        claim's time).
    lease_until_ms : int or None
        Epoch ms until which the claiming worker may run; None once committed.
    done_change_id : str or None
        The change id whose effect last completed (``done``).
    queue : tuple of QueuedChange
        ``every-change`` processors only: the applied changes whose effects have not completed,
        oldest first (the claim runs them in this order). Empty otherwise.
    hold : Hold or None
        The held change and its review (``held``, or ``pending`` once approved); None when
        nothing was held since the last commit.
    version : int
        The processor's version (:attr:`~s3ingest_fn.core.effects.ProcessorSpec.version`) that
        completed the last ``done`` effect; 1 for one done before processors had versions.
    """

    status: str
    token: int | None = None
    lease_until_ms: int | None = None
    done_change_id: str | None = None
    queue: tuple[QueuedChange, ...] = ()
    hold: Hold | None = None
    version: int = 1

    def approved(self, change_id: str) -> str | None:
        """Who approved ``change_id``'s held effect, or None when it was not approved."""
        hold = self.hold
        if hold is not None and hold.change_id == change_id and hold.decision == APPROVED:
            return hold.actor or "unknown"
        return None

    def lease_live(self, now_ms: int) -> bool:
        """Whether this effect is pending under a lease still running at ``now_ms``."""
        return (
            self.status == PENDING
            and self.lease_until_ms is not None
            and self.lease_until_ms >= now_ms
        )


@dataclass(slots=True)
class LedgerRow:
    """One ledger row: what the ledger holds for one (bucket, key).

    Attributes
    ----------
    bucket, key : str
        Bucket and decoded key (CONTRACT C1).
    raw_key : str
        The key as last received on the wire.
    present : bool
        False: a tombstone (CONTRACT C6).
    seq : str or None
        Highest applied sequencer, normalised (comparable with ``Change.sequencer``); None when
        only observations touched the row.
    raw_seq : str or None
        That sequencer as received.
    observed : bool
        The state came from reading the bucket (C7), so it may be newer than ``seq``.
    version_id, etag, size
        The current version (present rows only).
    rev : int
        Revision, +1 on every write.
    event_name, reason, source : str
        What last changed the row, why, and from where (``live``, ``replay``, ``repair``,
        ``backfill``).
    updated_at : int
        Epoch ms of the last decision written.
    expires_at : int or None
        Epoch seconds (DynamoDB TTL); tombstones only.
    history : tuple of Decision
        The last :data:`HISTORY_SLOTS` applied decisions, newest first.
    op : str or None
        What the last write was (:data:`OP_APPLY`, ...).
    change_id : str or None
        Id of the applied change (:func:`s3ingest_fn.core.effects.change_id`).
    change_seq : str or None
        That change's own sequencer as received; None for an observation.
    effect : Effect or None
        The effect of the :data:`DEFAULT_PROCESSOR` (the single ``processor`` setting); None
        when it did not run for the row's change. A row read by a reconciliation's Scan holds
        here the summary of every processor's effect (:func:`summary_effect`).
    named_effects : dict of str to Effect
        The effects of the other processors, by name (CONTRACT C11, several processors).
    trail : tuple of Review
        The last review decisions (held, approved, rejected), newest first.
    """

    bucket: str
    key: str
    present: bool
    raw_key: str = ""
    seq: str | None = None
    raw_seq: str | None = None
    observed: bool = False
    version_id: str | None = None
    etag: str | None = None
    size: int | None = None
    rev: int = 0
    event_name: str = ""
    reason: str = ""
    source: str = ""
    updated_at: int = 0
    expires_at: int | None = None
    history: tuple[Decision, ...] = field(default=())
    op: str | None = None
    change_id: str | None = None
    change_seq: str | None = None
    effect: Effect | None = None
    named_effects: dict[str, Effect] = field(default_factory=dict)
    trail: tuple[Review, ...] = field(default=())

    def effects(self) -> dict[str, Effect]:
        """Every processor's effect on the row, by name (the default processor's included)."""
        if self.effect is None:
            return dict(self.named_effects)
        return {DEFAULT_PROCESSOR: self.effect, **self.named_effects}

    def effect_of(self, processor: str) -> Effect | None:
        """The effect of ``processor`` on the row, or None."""
        if processor == DEFAULT_PROCESSOR:
            return self.effect
        return self.named_effects.get(processor)

    @property
    def state(self) -> str:
        """``present`` or ``deleted``."""
        return PRESENT if self.present else DELETED

    def holds(self, state: RowState) -> bool:
        """Whether the row already holds ``state`` (present with the same version and ETag, or
        a tombstone)."""
        if not state.present:
            return not self.present
        return self.present and (self.version_id, self.etag) == (state.version_id, state.etag)

    @property
    def effect_status(self) -> str | None:
        """The effect's status, or None without one."""
        return self.effect.status if self.effect is not None else None

    @property
    def change_decision(self) -> Decision | None:
        """The history entry of the row's change: the newest decision with the change's own
        sequencer as received (``-`` for an observation). Later writes that only moved the
        sequencer (``op=seq``) carry newer sequencers, so they are passed over. None when the
        row holds no change, or when the change's entry has left the history (more than
        ``HISTORY_SLOTS - 1`` such writes since)."""
        if self.change_id is None:
            return None
        seq = self.change_seq or "-"
        return next((d for d in self.history if d.seq == seq), None)

    @property
    def effect_behind(self) -> bool:
        """Whether the row's effect has not completed for the row's current change (CONTRACT
        C11): it ended ``superseded`` and the row still holds that change. A superseded effect
        is final only once a newer change of the key has been applied (that write claims the
        effect anew). Rows without an effect are never behind; a ``pending`` effect is counted
        apart (reconciliation's ``pending_effects``)."""
        return self.effect_status == SUPERSEDED

    def lease_live(self, now_ms: int) -> bool:
        """Whether any processor's pending effect holds a lease still running at ``now_ms``."""
        return any(e.lease_live(now_ms) for e in self.effects().values())


def summary_effect(effects: dict[str, Effect]) -> Effect | None:
    """One effect standing for several processors' in a reconciliation (CONTRACT C11): a
    superseded one (behind), else the pending one with the earliest lease, else any; None for
    none. Either kind of drift queues one repair, and the repair re-claims every processor's
    effect that needs it, so the summary only has to show that one is due: a superseded
    effect is due whatever the leases, a pending one once its lease has ended."""
    if not effects:
        return None
    behind = [e for e in effects.values() if e.status == SUPERSEDED]
    if behind:
        return behind[0]
    pending = [e for e in effects.values() if e.status == PENDING]
    if pending:
        return min(pending, key=lambda e: e.lease_until_ms or 0)
    return next(iter(effects.values()))


@dataclass(frozen=True)
class WriteResult:
    """Result of a conditional write: ``applied``, or the row that made the condition fail."""

    applied: bool
    old: LedgerRow | None = None
    #: The claim's fencing token, when the write claimed an effect.
    token: int | None = None
    #: The applied change's id, when applied.
    change_id: str | None = None
    #: ``every-change`` processors claimed by the write: their queue after it, oldest first.
    queues: dict[str, tuple[QueuedChange, ...]] = field(default_factory=dict)
    #: Those processors' held change (the head of their queue), when one is held.
    holds: dict[str, Hold] = field(default_factory=dict)
