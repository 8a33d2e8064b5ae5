"""``s3ingest explain``: why the ledger says what it says of one key.

:func:`explain_key` reads the row and the bucket with the clients it is given (a deployed
stack's or the local runtime's); :func:`explain` judges them (pure: no AWS call).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from s3ingest.deployed import StackNotFoundError
from s3ingest_fn.core.effects import EffectTarget
from s3ingest_fn.core.row import LedgerRow
from s3ingest_fn.core.scope import BucketScope, Scope


def explain_key(
    ledger: Any,
    objects: Any,
    bucket: str,
    key: str,
    targets: Sequence[EffectTarget] = (),
    scope: Scope | None = None,
) -> dict[str, Any]:
    """The ledger row of ``bucket``/``key`` beside the bucket's current state, with a verdict,
    the last applied decisions and the processor effect's state, as
    :func:`explain` returns it.

    Parameters
    ----------
    ledger : s3ingest_fn.adapters.dynamo_ledger.DynamoLedger
        Anything with ``get(bucket, key) -> row dict | None``.
    objects : s3ingest_fn.adapters.s3_objects.S3Objects
        Anything with ``current(bucket, key) -> ObjectState``.
    key : str
        The object key, decoded (as in the bucket).
    targets : sequence of EffectTarget
        The stack's processors (:meth:`s3ingest.deployed.DeployedStack.processor_targets`).
    scope : Scope, optional
        The stack's buckets and key filters (:meth:`s3ingest.deployed.DeployedStack.scope`):
        a key outside its bucket's filters is explained as untracked.

    Raises
    ------
    StackNotFoundError
        ``bucket`` is not one of ``scope``'s (no such bucket, or not one the pipeline
        watches), before any read.
    """
    watched = scope.bucket(bucket) if scope is not None and scope.buckets else None
    if scope is not None and scope.buckets and watched is None:
        raise StackNotFoundError(
            f"bucket {bucket!r} is not one the pipeline watches (no such bucket, or another "
            f"stack's); its buckets: {', '.join(scope.names)}"
        )
    row = ledger.get(bucket, key)
    now = objects.current(bucket, key)
    return explain(row, now, targets, untracked=_outside(watched, key))


def _outside(watched: BucketScope | None, key: str) -> BucketScope | None:
    """``watched`` when ``key`` is outside its key filters, else None."""
    return watched if watched is not None and not watched.contains(key) else None


def explain(
    ledger_row: LedgerRow | None,
    bucket_state: Any,
    targets: Sequence[EffectTarget] = (),
    now_ms: int | None = None,
    untracked: BucketScope | None = None,
) -> dict[str, Any]:
    """The ledger row and the bucket's current state side by side, with a verdict, the row's
    last applied decisions (``history``, newest first), the decision trail (``trail``: applied
    decisions and the hold policy's reviews, newest first, each with its actor; ``docs/hold.md``)
    and the state of the processor's effect
    for the row's change (``effect``: ``status`` pending/done/superseded, ``fencing_token``,
    ``lease_until``, ``completed_for_change`` (the change id its last completed run was for),
    ``completed_version`` and ``behind`` (CONTRACT C11); None without a processor).

    Parameters
    ----------
    ledger_row : LedgerRow or None
        From :meth:`s3ingest_fn.adapters.dynamo_ledger.DynamoLedger.get`.
    bucket_state : ObjectState
        From :meth:`s3ingest_fn.adapters.s3_objects.S3Objects.current`.
    targets : sequence of EffectTarget
        The configured processors (the stack's ``ProcessorTargets`` output): ``behind`` is
        :meth:`~s3ingest_fn.core.effects.EffectTarget.behind` at ``now_ms`` (a processor with
        no state on the row is listed too, ``status`` None). Without them, only a superseded
        effect is behind.
    untracked : BucketScope, optional
        The key's bucket when the key is outside its key filters: the verdict says the
        pipeline does not track the key, and ``tracked`` is False.
    """
    row = ledger_row
    ledger: dict[str, Any] = {
        "state": row.state if row else "absent",
        "sequencer": row.raw_seq if row else None,
        "version_id": row.version_id if row else None,
        "etag": row.etag if row else None,
        "size": row.size if row else None,
        "observed": row.observed if row else None,
        "last_event": row.event_name if row else None,
        "last_reason": row.reason if row else None,
        "source": row.source if row else None,
        "updated_at": _iso_ms(row.updated_at) if row else None,
        "tombstone_expires_at": _iso_s(row.expires_at) if row else None,
        "revision": row.rev if row else None,
        "change_id": row.change_id if row else None,
    }
    # Each processor's effect (CONTRACT C11): ``effect`` the single processor's (the
    # ``processor`` setting), ``effects`` every processor's by name.
    effects: dict[str, dict[str, Any]] = {}
    by_name = {target.name: target for target in targets}
    clock_ms = int(time.time() * 1000) if now_ms is None else now_ms
    for name, fx in (row.effects() if row is not None else {}).items():
        effects[name] = {
            "status": fx.status,
            "fencing_token": fx.token,
            "lease_until": _iso_ms(fx.lease_until_ms),
            "completed_for_change": fx.done_change_id,
            # the processor's version that completed it (behind a higher one: reprocess)
            "completed_version": fx.version if fx.done_change_id is not None else None,
            "behind": (
                by_name[name].behind(row, clock_ms)  # type: ignore[arg-type]
                if name in by_name
                else fx.status == "superseded"
            ),
            "waiting_changes": [q.change_id for q in fx.queue],
            "held": (
                {
                    "change_id": fx.hold.change_id,
                    "reason": fx.hold.reason,
                    "held_at": _iso_ms(fx.hold.at),
                    "decision": fx.hold.decision,
                    "actor": fx.hold.actor or None,
                    "decided_at": _iso_ms(fx.hold.decided_at),
                }
                if fx.hold is not None
                else None
            ),
        }
    for target in targets:  # configured, no state on the row: never run for its change
        if target.name not in effects and row is not None:
            effects[target.name] = {
                **dict.fromkeys(("status", "fencing_token", "lease_until")),
                **dict.fromkeys(("completed_for_change", "completed_version", "held")),
                "behind": target.behind(row, clock_ms),
                "waiting_changes": [],
            }
    effect = effects.get("default")
    history = [
        {**decision.as_dict(), "at": _iso_ms(decision.at)}
        for decision in (row.history if row else ())
    ]
    # the whole trail, newest first: applied decisions and review decisions (hold, approve,
    # reject) by time; each review names its processor and actor
    timed: list[tuple[int, dict[str, Any]]] = [
        (d.at, {"kind": "applied", **h, "actor": None, "processor": None})
        for h, d in zip(history, row.history if row else (), strict=True)
    ]
    timed += [
        (
            r.at,
            {
                "kind": r.action,
                "seq": r.seq,
                "event": None,
                "reason": r.reason,
                "source": "policy" if r.action == "held" else "operator",
                "at": _iso_ms(r.at),
                "state": None,
                "actor": r.actor,
                "processor": r.processor,
                "change_id": r.change_id,
            },
        )
        for r in (row.trail if row else ())
    ]
    trail = [entry for _, entry in sorted(timed, key=lambda t: -t[0])]
    bucket = {
        "visible": bucket_state.visible,
        "version_id": bucket_state.version_id,
        "etag": bucket_state.etag,
        "size": bucket_state.size,
    }
    if row is not None and row.present:
        agrees = bucket_state.visible and (row.version_id, row.etag) == (
            bucket_state.version_id,
            bucket_state.etag,
        )
    else:
        agrees = not bucket_state.visible
    verdict = (
        _untracked_verdict(untracked, row is not None)
        if untracked is not None
        else "ledger agrees with the bucket"
        if agrees
        else (
            "ledger differs from the bucket: an event may be in flight, lost (run reconcile), "
            "or in the DLQ"
        )
    )
    return {
        "tracked": untracked is None,
        "ledger": ledger,
        "bucket": bucket,
        "agrees": agrees,
        "verdict": verdict,
        "history": history,
        "trail": trail,
        "effect": effect,
        "effects": effects,
        "skipped_rule": "an event whose sequencer is lower than the row's is stale, an equal "
        "one a duplicate; both leave the row as it is (see the log line of "
        "each record for its outcome)",
    }


def _untracked_verdict(bucket: BucketScope, has_row: bool) -> str:
    """The verdict on a key outside ``bucket``'s key filters."""
    filters = " and ".join(
        f"{name} {', '.join(repr(v) for v in values)}"
        for name, values in (("prefixes", bucket.prefixes), ("suffixes", bucket.suffixes))
        if values
    )
    return (
        f"the key is outside the bucket's key filters ({filters}): the pipeline does not track "
        "it, so the ledger is not expected to follow the bucket"
        + ("; its row is from before the filters changed" if has_row else "")
    )


def _iso_ms(value: Any) -> str | None:
    return datetime.fromtimestamp(value / 1000, UTC).isoformat() if isinstance(value, int) else None


def _iso_s(value: Any) -> str | None:
    return datetime.fromtimestamp(value, UTC).isoformat() if isinstance(value, int) else None
