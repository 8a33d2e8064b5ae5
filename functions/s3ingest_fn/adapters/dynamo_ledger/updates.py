"""The ledger's UpdateItem requests, built without I/O: the conditions of the sequenced and the
observed writes, the write applying a change (:func:`change_request`: the row's state, the
change, the processors' claims and the decision history in one request), and the effect
protocol's writes (reclaim, finish, close, release, hold, review; CONTRACT C11).

A request here holds ``UpdateExpression``, ``ConditionExpression``,
``ExpressionAttributeNames`` and ``ExpressionAttributeValues`` (and ``ReturnValues`` when its
fencing token is read back); :meth:`~s3ingest_fn.adapters.dynamo_ledger.DynamoLedger` adds the
table, the key and the legacy guard. Per "UpdateItem", Amazon DynamoDB API Reference
(https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateItem.html), the
operands of one request read the item as it was before it, which the slot shifts rely on.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from s3ingest_fn.adapters.dynamo_ledger.codec import (
    _compact_seq,
    _decision_av,
    _hold_av,
    _queued_av,
    _raw_key_av,
    _review_av,
)
from s3ingest_fn.adapters.dynamo_ledger.layout import (
    _CHG_ID,
    _CHG_SEQ,
    _ETAG,
    _FX,
    _FX_CODES,
    _FX_COMMIT,
    _FX_DONE,
    _FX_HOLD,
    _FX_LEASE,
    _FX_QUEUE,
    _FX_TOKEN,
    _FX_VERSION,
    _HISTORY,
    _OBSERVED,
    _OP,
    _RAW_KEY,
    _RAW_SEQ,
    _REV,
    _REVIEW_CODES,
    _SEQ,
    _SIZE,
    _STATE,
    _STATES,
    _TRAIL,
    _UPDATED,
    _VERSION,
    PARTITION_KEY,
    TTL_ATTRIBUTE,
    _ph,
    effect_attributes,
    hold_attribute,
    version_attribute,
)
from s3ingest_fn.core.effects import change_id
from s3ingest_fn.core.row import (
    APPROVED,
    DELETED,
    DONE,
    HELD,
    MAX_QUEUED,
    OP_APPLY,
    OP_APPROVE,
    OP_CLAIM,
    OP_COMMIT,
    OP_DONE,
    OP_FORGET,
    OP_HOLD,
    OP_REJECT,
    OP_RELEASE,
    OP_SEQ,
    PENDING,
    PRESENT,
    REJECTED,
    SUPERSEDED,
    Claim,
    Decision,
    Hold,
    QueuedChange,
    Review,
    RowState,
    WriteMeta,
    token_step,
)

# -- conditions -------------------------------------------------------------------------------


def sequenced_condition(
    state: RowState,
    meta: WriteMeta,
    *,
    require_exact: bool,
    expected_rev: int | None = None,
    state_is: bool | None = None,
) -> tuple[str, dict[str, Any]]:
    """The condition (and its values) of a write ordered by ``meta.sequencer``: applied when
    the row is absent, or its sequencer is absent or lower; ``require_exact``: and the row
    holds no observed state; ``expected_rev``: and the revision is unchanged; ``state_is``: and
    the row holds (True) or does not hold (False) ``state``.

    Raises
    ------
    ValueError
        When ``meta`` has no sequencer.
    """
    if meta.sequencer is None:
        raise ValueError("a sequenced write needs a sequencer")
    clauses = [f"(attribute_not_exists(#{_SEQ}) OR #{_SEQ} < :in_seq)"]
    values: dict[str, Any] = {":in_seq": {"S": _compact_seq(meta.sequencer)}}
    if require_exact:
        clauses.append(f"(attribute_not_exists(#{_OBSERVED}) OR #{_OBSERVED} = :false)")
        values[":false"] = {"BOOL": False}
    if expected_rev is not None:
        clauses.append(f"#{_REV} = :expected_rev")
        values[":expected_rev"] = {"N": str(expected_rev)}
    inner = clauses[0] if len(clauses) == 1 else "(" + " AND ".join(clauses) + ")"
    cond = f"attribute_not_exists(#{PARTITION_KEY}) OR " + inner
    if state_is is not None:
        held = _state_equals(state, values)
        cond = f"({cond}) AND " + (held if state_is else f"(NOT {held})")
    return cond, values


def observation_condition(expected_rev: int | None) -> tuple[str, dict[str, Any]]:
    """The condition (and its values) of an observation: the row is still at revision
    ``expected_rev`` (None: the row still does not exist)."""
    if expected_rev is None:
        return f"attribute_not_exists(#{PARTITION_KEY})", {}
    return f"#{_REV} = :expected_rev", {":expected_rev": {"N": str(expected_rev)}}


def _state_equals(state: RowState, values: dict[str, Any]) -> str:
    """A condition: the row holds ``state`` (same presence, version id and ETag)."""
    if not state.present:
        values[":st_deleted"] = {"S": _STATES[DELETED]}
        return f"#{_STATE} = :st_deleted"
    values[":st_present"] = {"S": _STATES[PRESENT]}
    clauses = [f"#{_STATE} = :st_present"]
    for attr, text in ((_VERSION, state.version_id), (_ETAG, state.etag)):
        if text is None:
            clauses.append(f"attribute_not_exists(#{attr})")
        else:
            values[f":st_{attr}"] = {"S": text}
            clauses.append(f"#{attr} = :st_{attr}")
    return "(" + " AND ".join(clauses) + ")"


# -- the write applying a change --------------------------------------------------------------


@dataclass(frozen=True)
class ChangeRequest:
    """:func:`change_request`'s answer: the request, the id of the change it applies (None for
    a same-change write) and the fencing token attribute it reads back (None: it claims
    nothing)."""

    request: dict[str, Any]
    change_id: str | None
    token_attribute: str | None


def change_request(
    state: RowState,
    meta: WriteMeta,
    *,
    now: float,
    ttl_seconds: int,
    observed: bool,
    condition: str,
    values: dict[str, Any],
    change_key: str | None,
    claim: Claim | None = None,
    same_change: bool = False,
    clear_sequencer: bool = False,
) -> ChangeRequest:
    """The UpdateItem writing ``state`` under ``condition`` (its ``values``, which the request
    extends): the row's bookkeeping, a new change named by ``change_key`` (C3) with its
    ``claim`` of the processors' effects, or only the sequencer and the bookkeeping
    (``same_change``, ``op=seq``), the object's state, and the decision pushed onto the
    history. ``now`` is epoch seconds; a tombstone expires ``ttl_seconds`` later (0: never).
    ``clear_sequencer`` removes the row's sequencer (a reset of one S3 cannot have sent,
    CONTRACT C5, C7; ``meta.sequencer`` must be None).

    Raises
    ------
    ValueError
        When a same-change write is given a claim.
    """
    if same_change and claim is not None:
        raise ValueError("a same-change write claims no effect")
    if clear_sequencer and meta.sequencer is not None:
        raise ValueError("a sequencer reset writes no sequencer")
    now_ms = int(now * 1000)
    write = _ChangeWrite(condition, values)
    write.bookkeeping(state, meta, observed, same_change, now_ms)
    chg = None if same_change else write.change(state, meta, change_key, claim)
    write.object_state(state, meta, now, ttl_seconds)
    if clear_sequencer:
        write.removes.extend((_SEQ, _RAW_SEQ))
    request = write.request(_history_entry(state, meta, now_ms), claim)
    return ChangeRequest(request, chg, write.tokens[0] if write.tokens else None)


class _ChangeWrite:
    """The parts of :func:`change_request`'s UpdateItem, gathered in the request's order: the
    attributes set (name -> attribute value) and removed, the fencing tokens set from the new
    revision, the every-change queues the change joins, and the condition with its values."""

    def __init__(self, condition: str, values: dict[str, Any]) -> None:
        self.condition = condition
        self.values = values
        self.sets: dict[str, Any] = {}
        self.removes: list[str] = []
        self.tokens: list[str] = []
        self.appends: list[str] = []

    def put(self, name: str, av: dict[str, Any] | None) -> None:
        """Set ``name`` to the attribute value ``av``, or remove it (None)."""
        if av is None:
            self.removes.append(name)
        else:
            self.sets[name] = av

    def bookkeeping(
        self, state: RowState, meta: WriteMeta, observed: bool, same_change: bool, now_ms: int
    ) -> None:
        """The row's state, what the write was (``op``), its time, the raw key, and whether the
        state was observed (C7)."""
        self.sets[_STATE] = {"S": _STATES[PRESENT if state.present else DELETED]}
        self.sets[_OP] = {"S": OP_SEQ if same_change else OP_APPLY}
        self.sets[_UPDATED] = {"N": str(now_ms)}
        self.removes.append(_FX_COMMIT)  # the last done commit's marker (layout: fc)
        self.put(_RAW_KEY, _raw_key_av(meta.raw_key, meta.key))
        self.put(_OBSERVED, {"BOOL": True} if observed else None)

    def change(
        self, state: RowState, meta: WriteMeta, change_key: str | None, claim: Claim | None
    ) -> str:
        """The applied change: its id and own sequencer, and either ``claim`` of the
        processors' effects or (no claim) the default processor's effect state removed.
        Returns the change id."""
        chg = change_id(
            meta.bucket, meta.key, change_key, state.present, state.version_id, state.etag
        )
        self.sets[_CHG_ID] = {"S": chg}
        # the applied change's own sequencer
        self.put(
            _CHG_SEQ,
            {"S": meta.raw_sequencer or meta.sequencer} if meta.sequencer is not None else None,
        )
        if claim is None:
            self.removes.extend(
                (_FX, _FX_LEASE, _FX_TOKEN, _FX_DONE, _FX_QUEUE, _FX_HOLD, _FX_VERSION)
            )
            return chg
        self.claim(claim)
        if claim.queued:
            self.values[":queued"] = {"L": [_queued_av(_queued_change(chg, state, meta))]}
            self.values[":noqueue"] = {"L": []}
        return chg

    def claim(self, claim: Claim) -> None:
        """The effect part of a write applying a change (CONTRACT C11): every configured
        processor's live lease refuses it; the processors the change concerns are claimed
        (pending, this write's token, the lease; an every-change one's queue gets the change,
        up to :data:`~s3ingest_fn.core.row.MAX_QUEUED`); the other ``latest`` ones lose their
        older, unfinished effect (its ``done`` change id stays)."""
        self.values[":now"] = {"N": str(claim.now_ms)}
        clauses = [f"({self.condition})"]
        for processor in claim.configured:
            fx, fx_token, fx_lease, _, fx_queue = effect_attributes(processor)
            lease = _ph(fx_lease)
            clauses.append(f"(attribute_not_exists({lease}) OR {lease} < :now)")
            if processor not in claim.processors:
                if processor in claim.latest:  # its older change's effect (held too) is dropped
                    self.removes.extend((fx, fx_token, fx_lease, hold_attribute(processor)))
                continue
            self.sets[fx] = {"S": _FX_CODES[PENDING]}
            self.sets[fx_lease] = {"N": str(claim.lease_until_ms)}
            self.tokens.append(fx_token)
            if processor in claim.queued:
                self.appends.append(fx_queue)
                self.values[":maxq"] = {"N": str(MAX_QUEUED)}
                queue = _ph(fx_queue)
                clauses.append(f"(attribute_not_exists({queue}) OR size({queue}) < :maxq)")
            else:
                self.removes.append(hold_attribute(processor))  # latest: the newer change wins
        self.condition = " AND ".join(clauses)

    def object_state(self, state: RowState, meta: WriteMeta, now: float, ttl: int) -> None:
        """The sequencer (compact, and as received when it differs), the object's version,
        ETag and size, and a tombstone's expiry (CONTRACT C6)."""
        if meta.sequencer is not None:
            compact = _compact_seq(meta.sequencer)
            self.sets[_SEQ] = {"S": compact}
            raw = meta.raw_sequencer or meta.sequencer
            self.put(_RAW_SEQ, {"S": raw} if raw != compact else None)
        for attr, text in ((_VERSION, state.version_id), (_ETAG, state.etag)):
            self.put(attr, {"S": text} if state.present and text is not None else None)
        self.put(
            _SIZE,
            {"N": str(state.size)} if state.present and state.size is not None else None,
        )
        self.put(
            TTL_ATTRIBUTE,
            {"N": str(int(now) + ttl)} if not state.present and ttl > 0 else None,
        )

    def request(self, decision: Decision, claim: Claim | None) -> dict[str, Any]:
        """The request: the SET clauses (the attributes, the revision moved by one, the tokens
        set to :func:`~s3ingest_fn.core.row.fencing_token` of it and the claim's time, the
        queues appended to, ``decision`` pushed onto the history), the REMOVE clause, and the
        names the expressions use."""
        values = self.values
        for name, value in self.sets.items():
            values[":" + _ph(name)[1:]] = value
        values[":one"], values[":zero"] = {"N": "1"}, {"N": "0"}
        expr = "SET " + ", ".join(f"{_ph(name)} = :{_ph(name)[1:]}" for name in self.sets)
        expr += f", #{_REV} = if_not_exists(#{_REV}, :zero) + :one"
        if self.tokens and claim is not None:
            # the token: the new revision plus the claim's second (fencing_token)
            values[":fence"] = {"N": str(token_step(claim.now_ms))}
        for token in self.tokens:
            expr += f", {_ph(token)} = if_not_exists(#{_REV}, :zero) + :fence"
        for queue in self.appends:
            expr += f", {_ph(queue)} = list_append(if_not_exists({_ph(queue)}, :noqueue), :queued)"
        # Decision history: the last HISTORY_SLOTS applied decisions, newest in h0, shifted in
        # the same request (operands read the item as it was before this update).
        values[":decision"] = _decision_av(decision)
        values[":nodecision"] = {"NULL": True}
        expr += ", " + _push_slot(_HISTORY, ":decision", ":nodecision")
        if self.removes:
            expr += " REMOVE " + ", ".join(_ph(name) for name in self.removes)
        request: dict[str, Any] = {
            "UpdateExpression": expr,
            "ConditionExpression": self.condition,
            "ExpressionAttributeNames": self._names(expr + " " + self.condition, claim),
            "ExpressionAttributeValues": values,
        }
        if self.tokens:
            # the whole row: the queues and any held change of the claimed processors (reads
            # cost no write capacity)
            request["ReturnValues"] = "ALL_NEW"
        return request

    def _names(self, used: str, claim: Claim | None) -> dict[str, str]:
        """The name placeholders ``used`` (the expressions) holds, each once."""
        return {
            _ph(n): n
            for n in (
                *self.sets,
                *self.removes,
                *self.tokens,
                *self.appends,
                *(effect_attributes(p)[2] for p in (claim.configured if claim else ())),
                _REV,
                PARTITION_KEY,
                _SEQ,
                _OBSERVED,
                *_HISTORY,
                _FX_TOKEN,
                _FX_LEASE,
                _STATE,
                _VERSION,
                _ETAG,
            )
            if re.search(rf"{_ph(n)}\b", used)
        }


def _queued_change(chg: str, state: RowState, meta: WriteMeta) -> QueuedChange:
    """The change ``chg`` as an every-change processor's queue holds it."""
    return QueuedChange(
        change_id=chg,
        present=state.present,
        sequencer=meta.raw_sequencer or meta.sequencer,
        version_id=state.version_id if state.present else None,
        etag=state.etag if state.present else None,
        size=state.size if state.present else None,
        source=meta.source,
        event_name=meta.event_name,
    )


def _history_entry(state: RowState, meta: WriteMeta, now_ms: int) -> Decision:
    """The decision a write applying ``state`` pushes onto the row's history."""
    return Decision(
        seq=meta.raw_sequencer or meta.sequencer or "-",
        event=meta.event_name,
        reason=meta.reason,
        source=meta.source,
        at=now_ms,
        state=PRESENT if state.present else DELETED,
    )


def _push_slot(slots: Sequence[str], value: str, empty: str) -> str:
    """The SET clauses that push ``value`` (a value placeholder) onto a row's ``slots``
    (``h0``.. or ``t0``.., newest first; the last one's entry falls off), shifted in the same
    request (operands read the item as it was before the update; ``empty`` is NULL's
    placeholder, for slots not filled yet). Name placeholders are :func:`_ph` of each slot."""
    clauses = [
        f"{_ph(slots[i])} = if_not_exists({_ph(slots[i - 1])}, {empty})"
        for i in range(len(slots) - 1, 0, -1)
    ]
    clauses.append(f"{_ph(slots[0])} = {value}")
    return ", ".join(clauses)


# -- the effect protocol's writes (CONTRACT C11) ----------------------------------------------


def reclaim_request(processor: str, old_token: int, claim: Claim) -> dict[str, Any]:
    """Take over ``processor``'s effect held by ``old_token``, pending with an expired lease or
    superseded: pending again under the token of the row's new revision and ``claim.now_ms``
    (:func:`~s3ingest_fn.core.row.fencing_token`, read back), lease ``claim.lease_until_ms``."""
    fx, fx_token, fx_lease, _, _ = effect_attributes(processor)
    names = {_ph(n): n for n in (_REV, _OP, fx, fx_token, fx_lease)}
    return {
        "UpdateExpression": f"SET #{_REV} = if_not_exists(#{_REV}, :zero) + :one, "
        f"{_ph(fx_token)} = if_not_exists(#{_REV}, :zero) + :fence, "
        f"{_ph(fx_lease)} = :lease, #{_OP} = :claim, {_ph(fx)} = :pending",
        "ConditionExpression": f"{_ph(fx_token)} = :old AND (({_ph(fx)} = :pending AND "
        f"{_ph(fx_lease)} < :now) OR {_ph(fx)} = :superseded)",
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": {
            ":zero": {"N": "0"},
            ":one": {"N": "1"},
            ":fence": {"N": str(token_step(claim.now_ms))},
            ":claim": {"S": OP_CLAIM},
            ":lease": {"N": str(claim.lease_until_ms)},
            ":pending": {"S": _FX_CODES[PENDING]},
            ":superseded": {"S": _FX_CODES[SUPERSEDED]},
            ":old": {"N": str(old_token)},
            ":now": {"N": str(claim.now_ms)},
        },
        "ReturnValues": "ALL_NEW",
    }


def finish_request(
    processor: str,
    token: int,
    status: str,
    change_id: str | None,
    more: bool,
    version: int = 1,
    at: int | None = None,
) -> dict[str, Any]:
    """Commit ``processor``'s effect held by ``token``: ``status`` (``done`` also records
    ``change_id``, None: the row's change, and the processor's ``version``: ``fv``, removed for
    1), the lease, queue and hold removed; ``more``: only the queue's first change leaves it (on
    condition that it is ``change_id``: a retry of the request removes no other) and the claim
    goes on. A ``done`` commit (``more`` too) writes ``op`` ``done`` and ``fc``, the
    effect it completed (``at``: epoch ms, None: not known), which the change stream publishes
    with ``historyTable``; any other status writes ``op`` ``commit``."""
    fx, fx_token, fx_lease, fx_done, fx_queue = effect_attributes(processor)
    fh = hold_attribute(processor)
    names = {_ph(n): n for n in (_OP, fx_token, fh)}
    values: dict[str, Any] = {":token": {"N": str(token)}}
    if status == DONE:
        values[":commit"] = {"S": OP_DONE}
        values[":fc"] = {
            "L": [
                {"S": processor},
                {"N": str(version)},
                {"S": change_id} if change_id is not None else {"NULL": True},
                {"N": str(at)} if at is not None else {"NULL": True},
            ]
        }
        names[_ph(_FX_COMMIT)] = _FX_COMMIT
        commit = f"#{_OP} = :commit, {_ph(_FX_COMMIT)} = :fc"
    else:
        values[":commit"] = {"S": OP_COMMIT}
        commit = f"#{_OP} = :commit"
    condition = f"{_ph(fx_token)} = :token"
    if more:
        names[_ph(fx_queue)] = fx_queue
        expr = f"SET {commit} REMOVE {_ph(fx_queue)}[0], {_ph(fh)}"
        if change_id is not None:  # the head is this change: a retried request removes no other
            condition += f" AND {_ph(fx_queue)}[0][0] = :head"
            values[":head"] = {"S": change_id}
    else:
        names.update({_ph(n): n for n in (fx, fx_lease, fx_queue)})
        values[":status"] = {"S": _FX_CODES.get(status, status)}
        expr = f"SET {_ph(fx)} = :status, {commit}"
        removes = [fx_lease, fx_queue, fh]
        if status == DONE:
            names[_ph(fx_done)] = fx_done
            if change_id is None:
                expr += f", {_ph(fx_done)} = #{_CHG_ID}"
                names[f"#{_CHG_ID}"] = _CHG_ID
            else:
                expr += f", {_ph(fx_done)} = :done"
                values[":done"] = {"S": change_id}
            fv = version_attribute(processor)
            names[_ph(fv)] = fv
            if version > 1:
                expr += f", {_ph(fv)} = :version"
                values[":version"] = {"N": str(version)}
            else:
                removes.append(fv)
        expr += " REMOVE " + ", ".join(_ph(n) for n in removes)
    return {
        "UpdateExpression": expr,
        "ConditionExpression": condition,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }


def behind_claim_request(
    processor: str, change_id: str | None, old_token: int | None, claim: Claim, version: int = 1
) -> dict[str, Any]:
    """Claim ``processor``'s effect of the row's change for a reprocess run: the row is present
    and still holds the change ``change_id``, and the processor's effect is what was read:
    absent (``old_token`` None) or held by ``old_token`` and ``done`` under a version below
    ``version`` or for another change, ``superseded`` or pending with an expired lease and no
    waiting changes (an
    ``every-change`` queue is the live path's). Pending under the token of the row's new
    revision and ``claim.now_ms`` (read back), lease ``claim.lease_until_ms``."""
    fx, fx_token, fx_lease, fx_done, fx_queue = effect_attributes(processor)
    fv = version_attribute(processor)
    names = {_ph(n): n for n in (_REV, _OP, _STATE, fx, fx_token, fx_lease)}
    values: dict[str, Any] = {
        ":zero": {"N": "0"},
        ":one": {"N": "1"},
        ":fence": {"N": str(token_step(claim.now_ms))},
        ":claim": {"S": OP_CLAIM},
        ":lease": {"N": str(claim.lease_until_ms)},
        ":pending": {"S": _FX_CODES[PENDING]},
        ":present": {"S": _STATES[PRESENT]},
    }
    if change_id is None:
        changed = f"attribute_not_exists(#{_CHG_ID})"
    else:
        changed = f"#{_CHG_ID} = :chg"
        values[":chg"] = {"S": change_id}
    names[f"#{_CHG_ID}"] = _CHG_ID
    if old_token is None:
        effect = f"attribute_not_exists({_ph(fx)})"
    else:
        # a done effect is behind under a lower version (absent: 1), or done for another
        # change than the row's
        stale = []
        if version > 1:
            names[_ph(fv)] = fv
            stale.append(f"attribute_not_exists({_ph(fv)}) OR {_ph(fv)} < :version")
            values[":version"] = {"N": str(version)}
        if change_id is not None:
            names[_ph(fx_done)] = fx_done
            stale.append(f"{_ph(fx_done)} <> :chg")
        done = ""
        if stale:
            done = f"({_ph(fx)} = :done AND ({' OR '.join(stale)})) OR "
            values[":done"] = {"S": _FX_CODES[DONE]}
        names[_ph(fx_queue)] = fx_queue
        effect = (
            f"{_ph(fx_token)} = :old AND ({done}{_ph(fx)} = :superseded OR "
            f"({_ph(fx)} = :pending AND {_ph(fx_lease)} < :now AND "
            f"(attribute_not_exists({_ph(fx_queue)}) OR size({_ph(fx_queue)}) = :zero)))"
        )
        values.update(
            {
                ":old": {"N": str(old_token)},
                ":superseded": {"S": _FX_CODES[SUPERSEDED]},
                ":now": {"N": str(claim.now_ms)},
            }
        )
    return {
        "UpdateExpression": f"SET #{_REV} = if_not_exists(#{_REV}, :zero) + :one, "
        f"{_ph(fx_token)} = if_not_exists(#{_REV}, :zero) + :fence, "
        f"{_ph(fx_lease)} = :lease, #{_OP} = :claim, {_ph(fx)} = :pending",
        "ConditionExpression": f"#{_STATE} = :present AND {changed} AND {effect}",
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
        "ReturnValues": "ALL_NEW",
    }


def forget_request(processor: str) -> dict[str, Any]:
    """Remove every attribute of ``processor``'s effect state (a processor no longer
    configured), when the row has one."""
    fx, fx_token, fx_lease, fx_done, fx_queue = effect_attributes(processor)
    gone: tuple[str, ...] = (fx, fx_token, fx_lease, fx_done, fx_queue)
    gone += (hold_attribute(processor), version_attribute(processor))
    return {
        # op changes too, so the change stream (op = apply) does not publish the row again
        "UpdateExpression": f"SET #{_OP} = :forget REMOVE " + ", ".join(_ph(n) for n in gone),
        "ConditionExpression": f"attribute_exists({_ph(fx)})",
        "ExpressionAttributeNames": {_ph(n): n for n in (_OP, *gone)},
        "ExpressionAttributeValues": {":forget": {"S": OP_FORGET}},
    }


def close_request(processor: str, token: int) -> dict[str, Any]:
    """Remove ``processor``'s effect state held by ``token`` but its ``fd``."""
    fx, fx_token, fx_lease, _, fx_queue = effect_attributes(processor)
    return {
        "UpdateExpression": f"SET #{_OP} = :commit "
        f"REMOVE {_ph(fx)}, {_ph(fx_token)}, {_ph(fx_lease)}, {_ph(fx_queue)}",
        "ConditionExpression": f"{_ph(fx_token)} = :token",
        "ExpressionAttributeNames": {_ph(n): n for n in (_OP, fx, fx_token, fx_lease, fx_queue)},
        "ExpressionAttributeValues": {
            ":commit": {"S": OP_COMMIT},
            ":token": {"N": str(token)},
        },
    }


def release_request(processor: str, token: int) -> dict[str, Any]:
    """End the lease of ``processor``'s pending effect held by ``token`` now."""
    fx, fx_token, fx_lease, _, _ = effect_attributes(processor)
    return {
        # op changes too, so the change stream (op = apply) does not publish it again
        "UpdateExpression": f"SET {_ph(fx_lease)} = :zero, #{_OP} = :release",
        "ConditionExpression": f"{_ph(fx_token)} = :token AND {_ph(fx)} = :pending",
        "ExpressionAttributeNames": {_ph(n): n for n in (fx_lease, fx_token, fx, _OP)},
        "ExpressionAttributeValues": {
            ":zero": {"N": "0"},
            ":token": {"N": str(token)},
            ":pending": {"S": _FX_CODES[PENDING]},
            ":release": {"S": OP_RELEASE},
        },
    }


def hold_request(
    processor: str, token: int, hold: Hold, review: Review | None, trail: int
) -> dict[str, Any]:
    """Record ``processor``'s effect held by ``token`` as ``held`` (``hold``), the lease
    removed; ``review`` (None: none) pushed onto the ``trail`` slots and the revision moved."""
    fx, fx_token, fx_lease, _, _ = effect_attributes(processor)
    fh = hold_attribute(processor)
    names = {_ph(n): n for n in (fx, fx_token, fx_lease, fh, _OP)}
    values: dict[str, Any] = {
        ":token": {"N": str(token)},
        ":held": {"S": _FX_CODES[HELD]},
        ":hold": _hold_av(hold),
        ":op": {"S": OP_HOLD if review is not None else OP_COMMIT},
    }
    expr = f"SET {_ph(fx)} = :held, {_ph(fh)} = :hold, #{_OP} = :op"
    if review is not None:  # a decision the change stream publishes: the revision moves
        names[f"#{_REV}"] = _REV
        values[":one"] = {"N": "1"}
        expr += f", #{_REV} = #{_REV} + :one, " + _push_review(review, names, values, trail)
    return {
        "UpdateExpression": expr + f" REMOVE {_ph(fx_lease)}",
        "ConditionExpression": f"{_ph(fx_token)} = :token",
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }


def review_request(review: Review, queued: int, trail: int) -> dict[str, Any]:
    """Decide ``review.processor``'s held change ``review.change_id`` (see
    :meth:`~s3ingest_fn.adapters.dynamo_ledger.DynamoLedger.review`); ``queued`` is the size of
    the queue as read, ``trail`` the review slots kept."""
    processor = review.processor
    fx, _, fx_lease, _, fx_queue = effect_attributes(processor)
    fh = hold_attribute(processor)
    names = {_ph(n): n for n in (fx, fx_lease, fh, _OP)}
    values: dict[str, Any] = {
        ":held": {"S": _FX_CODES[HELD]},
        ":ci": {"S": review.change_id},
        ":zero": {"N": "0"},
        ":pending": {"S": _FX_CODES[PENDING]},
        ":one": {"N": "1"},
    }
    names[f"#{_REV}"] = _REV
    condition = f"{_ph(fx)} = :held AND {_ph(fh)}[0] = :ci"
    if review.action != APPROVED:  # the queue as read: a newer change queued refuses it
        names[_ph(fx_queue)] = fx_queue
        if queued:
            values[":queued"] = {"N": str(queued)}
            condition += f" AND size({_ph(fx_queue)}) = :queued"
        else:
            condition += f" AND attribute_not_exists({_ph(fx_queue)})"
    more = queued > 1
    if review.action == APPROVED:
        values[":op"] = {"S": OP_APPROVE}
        expr = (
            f"SET {_ph(fx)} = :pending, {_ph(fx_lease)} = :zero, #{_OP} = :op, "
            f"{_ph(fh)}[3] = :approved, {_ph(fh)}[4] = :actor, {_ph(fh)}[5] = :at"
        )
        values.update(
            {
                ":approved": {"S": _REVIEW_CODES[APPROVED]},
                ":actor": {"S": review.actor or "unknown"},
                ":at": {"N": str(review.at)},
            }
        )
        removes: list[str] = []
    elif more:
        values[":op"] = {"S": OP_REJECT}
        expr = f"SET {_ph(fx)} = :pending, {_ph(fx_lease)} = :zero, #{_OP} = :op"
        removes = [f"{_ph(fx_queue)}[0]", _ph(fh)]
    else:
        values[":op"] = {"S": OP_REJECT}
        values[":rejected"] = {"S": _FX_CODES[REJECTED]}
        del values[":zero"], values[":pending"]
        expr = f"SET {_ph(fx)} = :rejected, #{_OP} = :op"
        removes = [_ph(fx_lease), _ph(fx_queue), _ph(fh)]
    expr += f", #{_REV} = #{_REV} + :one, " + _push_review(review, names, values, trail)
    if removes:
        expr += " REMOVE " + ", ".join(removes)
    return {
        "UpdateExpression": expr,
        "ConditionExpression": condition,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }


def _push_review(review: Review, names: dict[str, str], values: dict[str, Any], trail: int) -> str:
    """The SET clauses that push ``review`` onto the trail (``t0`` newest; the oldest of the
    ``trail`` slots kept falls off), reading the item as it was before the update."""
    values[":review"] = _review_av(review)
    values[":noreview"] = {"NULL": True}
    slots = _TRAIL[:trail]
    names.update({_ph(slot): slot for slot in slots})
    return _push_slot(slots, ":review", ":noreview")
