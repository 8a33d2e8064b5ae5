"""The ledger row as the core sees it, and what a ledger write asks and returns.

Typed values only: how a row is stored (attribute names, encodings, the legacy format) is the
ledger adapter's business (:mod:`s3ingest_fn.adapters.dynamo_ledger`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: A row's ``state``: the key is visible, or a tombstone (CONTRACT C6).
PRESENT, DELETED = "present", "deleted"
#: A row's effect status (CONTRACT C11, :mod:`s3ingest_fn.core.effects`).
PENDING, DONE, SUPERSEDED = "pending", "done", "superseded"
#: What the last write to a row was: a change was applied (the change stream publishes exactly
#: these), only the sequencer moved, an effect was re-claimed, released or committed.
OP_APPLY, OP_SEQ, OP_CLAIM, OP_RELEASE, OP_COMMIT = "apply", "seq", "claim", "release", "commit"
#: Applied decisions kept on a row, newest first.
HISTORY_SLOTS = 3


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


@dataclass(frozen=True)
class Claim:
    """The lease a claiming write asks for: epoch ms now and when the lease expires."""

    now_ms: int
    lease_until_ms: int


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
class Effect:
    """The processor effect of the row's change (CONTRACT C11).

    Attributes
    ----------
    status : str
        ``pending``, ``done`` or ``superseded``.
    token : int or None
        Fencing token of the claim (the row's revision when claimed).
    lease_until_ms : int or None
        Epoch ms until which the claiming worker may run; None once committed.
    done_change_id : str or None
        The change id whose effect last completed (``done``).
    """

    status: str
    token: int | None = None
    lease_until_ms: int | None = None
    done_change_id: str | None = None


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
        None when no processor ran for the row's change.
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
        """Whether a pending effect's lease is still running at ``now_ms``."""
        effect = self.effect
        return (
            effect is not None
            and effect.status == PENDING
            and effect.lease_until_ms is not None
            and effect.lease_until_ms >= now_ms
        )


@dataclass(frozen=True)
class WriteResult:
    """Result of a conditional write: ``applied``, or the row that made the condition fail."""

    applied: bool
    old: LedgerRow | None = None
    #: The claim's fencing token, when the write claimed an effect.
    token: int | None = None
    #: The applied change's id, when applied.
    change_id: str | None = None
