"""``s3ingest repair``: ask the pipeline to repair one key through its normal path (a repair
event on the ingest queue, as reconciliation sends; CONTRACT C7, C12) and wait for the row to
settle.

What is due is judged first from the row and one HEAD: the row differs from the bucket, its
stored sequencer is one S3 cannot have sent (:func:`s3ingest_fn.core.sequencer.contradicted`:
a forged one written before events were checked, issue 24), or a processor's effect is pending
with an ended lease or behind the row. Nothing due: nothing is sent.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from s3ingest_fn.core import sequencer
from s3ingest_fn.core.model import ObjectState
from s3ingest_fn.core.ports import Bucket, Ledger, RepairQueue
from s3ingest_fn.core.row import PENDING, SUPERSEDED, LedgerRow
from s3ingest_fn.services.review import repair_body

#: Seconds between two reads of the row while waiting.
POLL_SECONDS = 1.0
#: The reason the repair event carries (the ingest log line and the metrics show it).
REPAIR_REASON = "operator-repair"


def wait_step(seconds: float) -> None:
    """One pause between two reads of the row (a seam: the CLI's tests drive the local
    runtime's queue here instead of sleeping)."""
    time.sleep(seconds)


def row_view(row: LedgerRow | None) -> dict[str, Any] | None:
    """The part of a row ``repair`` shows: ``state``, ``sequencer`` (as received; None for an
    observed row), ``version_id``, ``etag``, ``observed``, ``revision``, ``change_id``,
    ``reason`` (the last decision's) and ``effects`` (status by processor); None: no row."""
    if row is None:
        return None
    return {
        "state": row.state,
        "sequencer": row.raw_seq,
        "version_id": row.version_id,
        "etag": row.etag,
        "observed": row.observed,
        "revision": row.rev,
        "change_id": row.change_id,
        "reason": row.reason,
        "effects": {name: fx.status for name, fx in row.effects().items()},
    }


def due(row: LedgerRow | None, now: ObjectState, now_s: float, now_ms: int) -> list[str]:
    """Why a repair of the key is due (empty: nothing): ``absent-from-ledger``,
    ``state-differs``, ``sequencer-contradicted: <why>``, ``effect-pending: <processor>`` (its
    lease ended), ``effect-behind: <processor>``."""
    if row is None:
        return ["absent-from-ledger"] if now.visible else []
    reasons = []
    if now.visible != row.present or (
        now.visible and (now.version_id, now.etag) != (row.version_id, row.etag)
    ):
        reasons.append("state-differs")
    why = sequencer.contradicted(row.seq, now_s) if row.seq is not None else None
    if why is not None:
        reasons.append(f"sequencer-contradicted: {why}")
    for name, fx in row.effects().items():
        if fx.status == PENDING and (fx.lease_until_ms or 0) < now_ms:
            reasons.append(f"effect-pending: {name}")
        elif fx.status == SUPERSEDED:
            reasons.append(f"effect-behind: {name}")
    return reasons


def repair_key(
    ledger: Ledger,
    objects: Bucket,
    repairs: RepairQueue,
    bucket: str,
    key: str,
    *,
    wait_seconds: float = 60.0,
    poll_seconds: float = POLL_SECONDS,
    sleep: Callable[[float], None] = wait_step,
    clock: Callable[[], float] = time.time,
) -> dict[str, Any]:
    """Repair ``bucket``/``key``: judge what is due, queue one repair event when anything is,
    and read the row (and HEAD the key) every ``poll_seconds`` until it settles (written after
    the first read, or agreeing with the bucket, and no effect pending) or
    ``ceil(wait_seconds / poll_seconds)`` reads have not seen it settle (0: do not wait).

    Returns
    -------
    dict
        ``bucket``, ``key``, ``due`` (:func:`due`), ``queued`` (a repair event was sent),
        ``waited`` (whether it waited), ``settled`` (the row moved and no effect is pending;
        None when it did not wait or nothing was due), ``before`` and ``after``
        (:func:`row_view`), ``bucket_state`` (``visible``, ``version_id``, ``etag``: the HEAD
        after), ``decision`` (the row's newest decision: ``seq``, ``event``, ``reason``,
        ``source``, ``at``, ``state``; None without one) and ``agrees`` (after: the row holds
        what the bucket shows and its sequencer is one S3 can have sent).

    Raises
    ------
    TransientError
        DynamoDB, S3 or SQS failed.
    """
    before = ledger.get(bucket, key)
    head = objects.current(bucket, key)
    reasons = due(before, head, clock(), int(clock() * 1000))
    after, settled = before, None
    if reasons:
        repairs.send([repair_body(bucket, key, REPAIR_REASON)])
        if wait_seconds > 0:
            settled = False
            polls = max(1, math.ceil(wait_seconds / poll_seconds))
            while not settled and polls:
                polls -= 1
                sleep(poll_seconds)
                after = ledger.get(bucket, key)
                head = objects.current(bucket, key)
                settled = _settled(before, after, head, clock())
        head = objects.current(bucket, key)
    remaining = due(after, head, clock(), int(clock() * 1000))
    agrees = not [r for r in remaining if not r.startswith("effect-")]
    newest = after.history[0].as_dict() if after is not None and after.history else None
    return {
        "bucket": bucket,
        "key": key,
        "due": reasons,
        "queued": bool(reasons),
        "waited": bool(reasons) and wait_seconds > 0,
        "settled": settled,
        "before": row_view(before),
        "after": row_view(after),
        "bucket_state": {
            "visible": head.visible,
            "version_id": head.version_id,
            "etag": head.etag,
        },
        "decision": newest,
        "agrees": agrees,
    }


def _settled(
    before: LedgerRow | None, after: LedgerRow | None, head: ObjectState, now_s: float
) -> bool:
    """The repair has been handled: the row was written since ``before`` (or already agrees
    with ``head``) and no processor's effect is pending."""
    if after is None:
        return not head.visible
    if any(fx.status == PENDING for fx in after.effects().values()):
        return False
    moved = before is None or after.rev > before.rev
    return moved or not [r for r in due(after, head, now_s, 0) if not r.startswith("effect-")]
