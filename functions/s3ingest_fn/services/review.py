"""Review of held changes (hold for review, ``docs/hold.md``): what is held, approve, reject.

A decision is one conditional write on the row (:meth:`~s3ingest_fn.core.ports.Ledger.review`)
that records who decided and when on the row's trail; the change stream publishes it
(``Change Approved``, ``Change Rejected``). An approved effect then runs through the normal claim
and commit: the decision leaves it pending with an expired lease, and one repair message for
the key (the ingest queue, as reconciliation's repairs) makes the ingest function re-claim and
run it without asking the policy again. A rejected effect never runs; an ``every-change``
processor's newer changes behind it are released the same way.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from s3ingest_fn.core.ports import Ledger, RepairQueue
from s3ingest_fn.core.row import APPROVED, HELD, REJECTED, LedgerRow, Review

#: The decisions an operator can make.
DECISIONS = (APPROVED, REJECTED)


@dataclass(frozen=True)
class HeldChange:
    """One processor's held change of one key.

    ``held_at`` epoch ms; ``sequencer`` as received (None: an observation); ``kind``
    ``created`` or ``removed``."""

    bucket: str
    key: str
    processor: str
    change_id: str
    reason: str
    held_at: int
    sequencer: str | None
    kind: str

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready values (``s3ingest held --json``, the scenario's ``held``)."""
        return {
            "bucket": self.bucket,
            "key": self.key,
            "processor": self.processor,
            "change_id": self.change_id,
            "reason": self.reason,
            "held_at": self.held_at,
            "sequencer": self.sequencer,
            "kind": self.kind,
        }


def held_changes(row: LedgerRow) -> list[HeldChange]:
    """The held changes of a row, one per processor whose effect is held."""
    out = []
    for name, effect in sorted(row.effects().items()):
        if effect.status != HELD or effect.hold is None:
            continue
        head = effect.queue[0] if effect.queue else None
        if head is not None and head.change_id == effect.hold.change_id:
            seq, present = head.sequencer, head.present
        else:
            seq, present = row.change_seq, row.present
        out.append(
            HeldChange(
                bucket=row.bucket,
                key=row.key,
                processor=name,
                change_id=effect.hold.change_id,
                reason=effect.hold.reason,
                held_at=effect.hold.at,
                sequencer=seq,
                kind="created" if present else "removed",
            )
        )
    return out


class Reviewer:
    """Approves and rejects held changes.

    Parameters
    ----------
    ledger : Ledger
    repairs : RepairQueue
        The ingest queue: an approval (or a rejection that releases newer changes) queues one
        repair message for the key.
    clock_ms : callable, optional
        Epoch ms of the decisions.
    """

    def __init__(
        self,
        ledger: Ledger,
        repairs: RepairQueue,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self.ledger = ledger
        self.repairs = repairs
        self.clock_ms = clock_ms or (lambda: int(time.time() * 1000))

    def decide(
        self,
        bucket: str,
        key: str,
        decision: str,
        actor: str,
        *,
        processor: str | None = None,
        change_id: str | None = None,
    ) -> list[dict[str, Any]]:
        """Approve or reject the held changes of one key (every processor's, or
        ``processor``'s; any change, or ``change_id``): one read of the row, one write per
        change, at most one repair message.

        Returns
        -------
        list of dict
            One per held change matched: :meth:`HeldChange.as_dict` plus ``decision`` and
            ``applied`` (False: the row moved on since it was read: the change was superseded
            or decided by someone else).

        Raises
        ------
        ValueError
            ``decision`` is not ``approved`` or ``rejected``, or no actor is given.
        TransientError
            DynamoDB or SQS failed (a decision already written stays, and its repair is still
            queued; deciding again is safe: it matches nothing held).
        """
        return self._decide_key(
            bucket,
            key,
            decision,
            actor,
            lambda h: (
                (processor is None or h.processor == processor)
                and (change_id is None or h.change_id == change_id)
            ),
        )

    def decide_each(
        self,
        held: Sequence[HeldChange],
        decision: str,
        actor: str,
        on_done: Callable[[int], None] | None = None,
    ) -> list[dict[str, Any]]:
        """Decide each of ``held`` (as listed by ``s3ingest held``), key by key: one read and at
        most one repair message per key. ``on_done(n)`` after each key, ``n`` the changes of
        ``held`` done so far.

        Returns
        -------
        list of dict
            As :meth:`decide`, key by key in the order keys first appear in ``held``.

        Raises
        ------
        ValueError, TransientError
            As :meth:`decide`.
        """
        by_key: dict[tuple[str, str], set[tuple[str, str]]] = {}
        for h in held:
            by_key.setdefault((h.bucket, h.key), set()).add((h.processor, h.change_id))
        out: list[dict[str, Any]] = []
        done = 0
        for (bucket, key), wanted in by_key.items():
            out.extend(self._decide_key(bucket, key, decision, actor, _among(wanted)))
            done += len(wanted)
            if on_done is not None:
                on_done(done)
        return out

    def _decide_key(
        self,
        bucket: str,
        key: str,
        decision: str,
        actor: str,
        selected: Callable[[HeldChange], bool],
    ) -> list[dict[str, Any]]:
        if decision not in DECISIONS:
            raise ValueError(f"decision must be one of {DECISIONS}, got {decision!r}")
        if not actor:
            raise ValueError("a decision needs the actor who made it")
        row = self.ledger.get(bucket, key)
        if row is None:
            return []
        out: list[dict[str, Any]] = []
        requeue = False
        try:
            for held in filter(selected, held_changes(row)):
                effect = row.effect_of(held.processor)
                queued = len(effect.queue) if effect is not None else 0
                review = Review(
                    action=decision,
                    processor=held.processor,
                    change_id=held.change_id,
                    seq=held.sequencer or "-",
                    reason=held.reason,
                    actor=actor,
                    at=self.clock_ms(),
                )
                applied = self.ledger.review(bucket, key, review, queued=queued).applied
                requeue = requeue or (applied and (decision == APPROVED or queued > 1))
                out.append({**held.as_dict(), "decision": decision, "applied": applied})
        finally:
            # every decision written so far is released, even when a later one failed
            if requeue:
                self.repairs.send([repair_body(bucket, key, "review")])
        return out


def _among(wanted: set[tuple[str, str]]) -> Callable[[HeldChange], bool]:
    """Selects the held changes whose (processor, change id) is in ``wanted``."""
    return lambda h: (h.processor, h.change_id) in wanted


def repair_body(bucket: str, key: str, reason: str) -> str:
    """One repair message for the ingest queue (the reconciliation's format): the ingest
    function reads the bucket and the row for ``key`` and runs what is due."""
    return json.dumps(
        {
            "s3ingestRepair": {
                "bucket": bucket,
                "key": key,
                "reason": reason,
                "run": uuid.uuid4().hex,
            }
        }
    )
