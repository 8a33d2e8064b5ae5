"""Rows and items: a :class:`~s3ingest_fn.core.row.LedgerRow` read from a DynamoDB item of
either layout (:func:`row_from_item`), a row written as a compact item (:func:`item_of`), the
stream images the change relay publishes (:func:`is_applied_change`, :func:`is_review`), and
DynamoDB's item-size rule (:func:`item_size`, :func:`write_units`).

Items are in attribute-value form (``{"S": ...}``, ``{"N": ...}``, ...); the layout is
:mod:`s3ingest_fn.adapters.dynamo_ledger.layout`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from s3ingest_fn.adapters.dynamo_ledger.layout import (
    _CHG_ID,
    _CHG_SEQ,
    _ETAG,
    _EVENT_MAX,
    _EVENT_PREFIXES,
    _FX,
    _FX_CODES,
    _FX_COMMIT,
    _FX_HOLD,
    _FX_QUEUE,
    _FX_STATUS,
    _FX_TOKEN,
    _HISTORY,
    _LEGACY_MARK,
    _OBSERVED,
    _OP,
    _RAW_KEY,
    _RAW_SEQ,
    _REASONS,
    _REV,
    _REVIEW_ACTION,
    _REVIEW_CODES,
    _SEQ,
    _SIZE,
    _SOURCES,
    _STATE,
    _STATES,
    _TRAIL,
    _UPDATED,
    _VERSION,
    PARTITION_KEY,
    TTL_ATTRIBUTE,
    effect_attributes,
    event_key,
    hold_attribute,
    row_pk,
    version_attribute,
)
from s3ingest_fn.core.row import (
    DEFAULT_PROCESSOR,
    DELETED,
    OP_APPLY,
    OP_APPROVE,
    OP_DONE,
    OP_HOLD,
    OP_REJECT,
    PRESENT,
    Decision,
    Effect,
    Hold,
    LedgerRow,
    QueuedChange,
    Review,
    WriteResult,
)
from s3ingest_fn.core.sequencer import WIDTH

# -- attribute values -------------------------------------------------------------------------


def _opt(av: Mapping[str, Any]) -> Any:
    return None if "NULL" in av else next(iter(av.values()))


def _hold_of(av: Mapping[str, Any] | None) -> Hold | None:
    if av is None or "L" not in av:
        return None
    ci, reason, at, decision, actor, decided = (_opt(v) for v in av["L"])
    return Hold(
        change_id=str(ci),
        reason=str(reason),
        at=int(at),
        decision=_REVIEW_ACTION.get(str(decision), str(decision)),
        actor=str(actor or ""),
        decided_at=int(decided) if decided is not None else None,
    )


def _hold_av(hold: Hold) -> dict[str, Any]:
    return {
        "L": [
            {"S": hold.change_id},
            {"S": hold.reason[:200]},
            {"N": str(hold.at)},
            {"S": _REVIEW_CODES.get(hold.decision, hold.decision)},
            {"S": hold.actor} if hold.actor else {"NULL": True},
            {"N": str(hold.decided_at)} if hold.decided_at is not None else {"NULL": True},
        ]
    }


def _review_of(av: Mapping[str, Any] | None) -> Review | None:
    if av is None or "L" not in av:
        return None
    at, action, processor, ci, seq, reason, actor = (_opt(v) for v in av["L"])
    return Review(
        action=_REVIEW_ACTION.get(str(action), str(action)),
        processor=str(processor),
        change_id=str(ci),
        seq=str(seq),
        reason=str(reason),
        actor=str(actor),
        at=int(at),
    )


def _review_av(review: Review) -> dict[str, Any]:
    return {
        "L": [
            {"N": str(review.at)},
            {"S": _REVIEW_CODES.get(review.action, review.action)},
            {"S": review.processor},
            {"S": review.change_id},
            {"S": review.seq},
            {"S": review.reason[:200]},
            {"S": review.actor[:200]},
        ]
    }


def _queued_of(av: Mapping[str, Any] | None) -> tuple[QueuedChange, ...]:
    if av is None or "L" not in av:
        return ()
    out = []
    for entry in av["L"]:
        ci, st, seq, vi, et, sz, source, event = (
            None if "NULL" in v else next(iter(v.values())) for v in entry["L"]
        )
        out.append(
            QueuedChange(
                change_id=str(ci),
                present=st == "p",
                sequencer=seq,
                version_id=vi,
                etag=et,
                size=int(sz) if sz is not None else None,
                source=_uncode(str(source), _SOURCES),
                event_name=_uncode_event(str(event)),
            )
        )
    return tuple(out)


def _queued_av(queued: QueuedChange) -> dict[str, Any]:
    def text(value: str | None) -> dict[str, Any]:
        return {"NULL": True} if value is None else {"S": value}

    return {
        "L": [
            {"S": queued.change_id},
            {"S": "p" if queued.present else "d"},
            text(queued.sequencer),
            text(queued.version_id),
            text(queued.etag),
            {"NULL": True} if queued.size is None else {"N": str(queued.size)},
            {"S": _code(queued.source, _SOURCES)},
            {"S": _code_event(queued.event_name[:_EVENT_MAX])},
        ]
    }


def _effect_of(get: Callable[[str], Any], processor: str) -> Effect | None:
    status, token, lease, done, queue = effect_attributes(processor)
    fx = _s(get(status))
    if fx is None:
        return None
    return Effect(
        status=_FX_STATUS.get(fx, fx),
        token=_n(get(token)),
        lease_until_ms=_n(get(lease)),
        done_change_id=_s(get(done)),
        queue=_queued_of(get(queue)),
        hold=_hold_of(get(hold_attribute(processor))),
        version=_n(get(version_attribute(processor))) or 1,
    )


def _named_effects(item: Mapping[str, Any]) -> dict[str, Effect]:
    named: dict[str, Effect] = {}
    for attr in item:
        if attr.startswith(f"{_FX}:"):
            name = attr[len(_FX) + 1 :]
            effect = _effect_of(item.get, name)
            if effect is not None:
                named[name] = effect
    return named


def _raw_key_av(raw_key: str, key: str) -> dict[str, str] | None:
    """The ``rk`` attribute value of a raw key (``""``: unknown, read as ``key``), or None when
    none is stored (the raw key is :func:`event_key` of ``key``); :func:`_raw_key_of` reads it."""
    raw = raw_key or key
    if raw == event_key(key):
        return None
    return {"S": "" if raw == key else raw}


def _raw_key_of(av: Mapping[str, Any] | None, key: str) -> str:
    """The raw key a compact item's ``rk`` (``av``, None when absent) stands for."""
    if av is None:
        return event_key(key)
    return str(av.get("S") or key)


def _compact_seq(normalised: str) -> str:
    return normalised.rstrip("0") or "0"


def _code(value: str, table: tuple[str, ...]) -> str:
    if value in table:
        return chr(0x41 + table.index(value))  # "A", "B", ...
    if len(value) == 1 or value.startswith("\0"):
        return "\0" + value
    return value


def _uncode(value: str, table: tuple[str, ...]) -> str:
    if value.startswith("\0"):
        return value[1:]
    if len(value) == 1 and 0 <= ord(value) - 0x41 < len(table):
        return table[ord(value) - 0x41]
    return value


def _code_event(name: str) -> str:
    name = name[:_EVENT_MAX]
    for i, prefix in enumerate(_EVENT_PREFIXES):
        if name.startswith(prefix):
            return chr(1 + i) + name[len(prefix) :]
    if name and ord(name[0]) <= len(_EVENT_PREFIXES):
        return "\0" + name
    return name


def _uncode_event(value: str) -> str:
    if not value:
        return value
    first = ord(value[0])
    if first == 0:
        return value[1:]
    if first <= len(_EVENT_PREFIXES):
        return _EVENT_PREFIXES[first - 1] + value[1:]
    return value


# -- reading items ----------------------------------------------------------------------------


def _plain(av: Mapping[str, Any]) -> Any:
    ((typ, val),) = av.items()
    if typ == "N":
        return int(val) if val.lstrip("-").isdigit() else float(val)
    if typ == "NULL":
        return None
    if typ == "M":
        return {k: _plain(v) for k, v in val.items()}
    if typ == "L":
        return [_plain(v) for v in val]
    return val


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) else None


def row_from_item(item: Mapping[str, Any]) -> LedgerRow:
    """The typed row of a DynamoDB item (attribute-value form), compact or legacy layout; a
    projected item (a reconciliation's Scan) gives the row's defaults for what it leaves out."""
    if _LEGACY_MARK in item:
        return _legacy_row({name: _plain(av) for name, av in item.items()})
    get = item.get
    bucket, _, key = item[PARTITION_KEY]["S"].partition("/")
    history: tuple[Decision, ...] = ()
    h0 = get(_HISTORY[0])
    if h0 is not None and "L" in h0:
        history = tuple(
            d
            for d in (_decision_of(get(h)) for h in _HISTORY)
            if d is not None  # h1, h2: NULL until filled
        )
    last = history[0] if history else None
    seq = _s(get(_SEQ))
    effect = _effect_of(get, DEFAULT_PROCESSOR)
    observed = get(_OBSERVED)
    return LedgerRow(
        bucket=bucket,
        key=key,
        raw_key=_raw_key_of(get(_RAW_KEY), key),
        present=_s(get(_STATE)) == "p",
        seq=seq.ljust(WIDTH, "0") if seq is not None else None,
        raw_seq=_s(get(_RAW_SEQ)) or seq,
        observed=observed is not None and observed.get("BOOL") is True,
        version_id=_s(get(_VERSION)),
        etag=_s(get(_ETAG)),
        size=_n(get(_SIZE)),
        rev=_n(get(_REV)) or 0,
        event_name=last.event if last else "",
        reason=last.reason if last else "",
        source=last.source if last else "",
        updated_at=_n(get(_UPDATED)) or (last.at if last else 0),
        expires_at=_n(get(TTL_ATTRIBUTE)),
        history=history,
        op=_s(get(_OP)),
        change_id=_s(get(_CHG_ID)),
        change_seq=_s(get(_CHG_SEQ)),
        effect=effect,
        named_effects=_named_effects(item),
        trail=tuple(r for r in (_review_of(get(t)) for t in _TRAIL) if r is not None),
    )


def _s(av: Mapping[str, Any] | None) -> str | None:
    return av.get("S") if av is not None else None


def _n(av: Mapping[str, Any] | None) -> int | None:
    if av is None or "N" not in av:
        return None
    return int(av["N"])


def _decision_of(av: Mapping[str, Any] | None) -> Decision | None:
    if av is None or "L" not in av:
        return None
    at, state, source, seq, reason, event = (next(iter(v.values())) for v in av["L"])
    return Decision(
        seq=seq,
        event=_uncode_event(event),
        reason=_uncode(reason, _REASONS),
        source=_uncode(source, _SOURCES),
        at=int(at),
        state=PRESENT if state == "p" else DELETED,
    )


def _decision(value: Any) -> Decision | None:
    if isinstance(value, list) and len(value) == 6:
        at, state, source, seq, reason, event = value
        return Decision(
            seq=str(seq),
            event=_uncode_event(str(event)),
            reason=_uncode(str(reason), _REASONS),
            source=_uncode(str(source), _SOURCES),
            at=int(at),
            state=PRESENT if state == _STATES[PRESENT] else DELETED,
        )
    if isinstance(value, dict):  # a legacy history map
        return Decision(
            seq=str(value.get("seq", "-")),
            event=str(value.get("event", "")),
            reason=str(value.get("reason", "")),
            source=str(value.get("source", "")),
            at=int(value.get("at", 0)),
            state=str(value.get("state", "")),
        )
    return None


def _legacy_row(plain: Mapping[str, Any]) -> LedgerRow:
    fx = _str(plain.get("fx"))
    effect = None
    if fx is not None:
        effect = Effect(
            status=fx,
            token=_int(plain.get("fx_token")),
            lease_until_ms=_int(plain.get("fx_lease")),
            done_change_id=_str(plain.get("fx_done")),
        )
    key = str(plain.get("key", ""))
    return LedgerRow(
        bucket=str(plain.get("bucket", "")),
        key=key,
        raw_key=_str(plain.get("raw_key")) or key,
        present=plain.get("state") == PRESENT,
        seq=_str(plain.get("seq")),
        raw_seq=_str(plain.get("raw_seq")),
        observed=plain.get("observed") is True,
        version_id=_str(plain.get("version_id")),
        etag=_str(plain.get("etag")),
        size=_int(plain.get("size")),
        rev=_int(plain.get("rev")) or 0,
        event_name=str(plain.get("event_name", "")),
        reason=str(plain.get("reason", "")),
        source=str(plain.get("source", "")),
        updated_at=_int(plain.get("updated_at")) or 0,
        expires_at=_int(plain.get(TTL_ATTRIBUTE)),
        history=tuple(d for d in (_decision(plain.get(h)) for h in _HISTORY) if d is not None),
        op=_str(plain.get("op")),
        change_id=_str(plain.get("chg_id")),
        change_seq=_str(plain.get("chg_seq")),
        effect=effect,
    )


# -- stream images ----------------------------------------------------------------------------


def is_applied_change(record: Mapping[str, Any]) -> bool:
    """Whether a DynamoDB stream record is an applied change (the relay's own check of
    :data:`STREAM_FILTER`, so it is right even where the filter is not applied). Images of
    both layouts: records written before an upgrade are still in the stream after it."""
    image = record.get("dynamodb", {}).get("NewImage") or {}
    return (
        record.get("eventName") in ("INSERT", "MODIFY")
        and image.get(_OP) == {"S": OP_APPLY}
        and (_CHG_ID in image or "chg_id" in image)
    )


def is_review(record: Mapping[str, Any]) -> bool:
    """Whether a DynamoDB stream record is a hold, an approval or a rejection (the change
    stream publishes it: ``Object Held``, ``Change Approved``, ``Change Rejected``)."""
    image = record.get("dynamodb", {}).get("NewImage") or {}
    return (
        record.get("eventName") in ("INSERT", "MODIFY")
        and image.get(_OP) in ({"S": OP_HOLD}, {"S": OP_APPROVE}, {"S": OP_REJECT})
        and _TRAIL[0] in image
    )


def is_effect_done(record: Mapping[str, Any]) -> bool:
    """Whether a DynamoDB stream record is an effect committed ``done`` (``op`` ``done`` with
    its ``fc``: the change stream publishes it as ``Effect Done`` with ``historyTable``; the
    relay's own check of
    :data:`~s3ingest_fn.adapters.dynamo_ledger.layout.EFFECT_STREAM_FILTER`)."""
    image = record.get("dynamodb", {}).get("NewImage") or {}
    return (
        record.get("eventName") in ("INSERT", "MODIFY")
        and image.get(_OP) == {"S": OP_DONE}
        and "L" in (image.get(_FX_COMMIT) or {})
    )


class DoneEffect(NamedTuple):
    """The effect a ``done`` commit's stream record completed (:func:`done_effect`):
    ``processor`` and its ``version``, the ``change_id`` it completed, the row's ``bucket``,
    ``key`` and ``rev``, and ``at`` (epoch ms; None when the commit did not record it)."""

    bucket: str
    key: str
    change_id: str | None
    processor: str
    version: int
    rev: int
    at: int | None


def done_effect(record: Mapping[str, Any]) -> DoneEffect:
    """The :class:`DoneEffect` of a record :func:`is_effect_done` accepts (``fc``; a change id
    it leaves NULL is the row's ``ci``)."""
    image = record["dynamodb"]["NewImage"]
    processor, version, chg, at = (_opt(v) for v in image[_FX_COMMIT]["L"])
    row = row_from_item(image)
    return DoneEffect(
        bucket=row.bucket,
        key=row.key,
        change_id=str(chg) if chg is not None else row.change_id,
        processor=str(processor),
        version=int(version),
        rev=row.rev,
        at=int(at) if at is not None else None,
    )


# -- writing items ----------------------------------------------------------------------------


def _decision_av(decision: Decision) -> dict[str, Any]:
    return {
        "L": [
            {"N": str(decision.at)},
            {"S": _STATES.get(decision.state, decision.state)},
            {"S": _code(decision.source, _SOURCES)},
            {"S": decision.seq},
            {"S": _code(decision.reason, _REASONS)},
            {"S": _code_event(decision.event)},
        ]
    }


def item_of(row: LedgerRow) -> dict[str, Any]:
    """The compact item (attribute-value form) of a row: what :func:`row_from_item` reads
    back as ``row`` (the legacy migration, the benchmarks)."""
    compact = _compact_seq(row.seq) if row.seq is not None else None
    item: dict[str, Any] = {
        PARTITION_KEY: {"S": row_pk(row.bucket, row.key)},
        _STATE: {"S": _STATES[row.state]},
        _REV: {"N": str(row.rev)},
    }
    optional: tuple[tuple[str, str, object], ...] = (
        (_UPDATED, "N", row.updated_at or None),
        (_SEQ, "S", compact),
        (
            _RAW_SEQ,
            "S",
            row.raw_seq if compact is not None and row.raw_seq not in ("", compact) else None,
        ),
        (_OBSERVED, "BOOL", row.observed or None),
        (_VERSION, "S", row.version_id if row.present else None),
        (_ETAG, "S", row.etag if row.present else None),
        (_SIZE, "N", row.size if row.present else None),
        (_OP, "S", row.op),
        (_CHG_ID, "S", row.change_id),
        (_CHG_SEQ, "S", row.change_seq),
        (TTL_ATTRIBUTE, "N", row.expires_at),
    )
    item.update(_present(optional))
    raw_key = _raw_key_av(row.raw_key, row.key)
    if raw_key is not None:
        item[_RAW_KEY] = raw_key
    for processor, effect in row.effects().items():
        item.update(_effect_avs(processor, effect))
    item.update(zip(_TRAIL, map(_review_av, row.trail), strict=False))
    item.update(zip(_HISTORY, map(_decision_av, _history_of(row)), strict=False))
    return item


def _present(values: Iterable[tuple[str, str, object]]) -> dict[str, Any]:
    """``{name: {type: value}}`` of the ``(name, type, value)`` whose value is not ``None``
    (numbers as strings, as DynamoDB's attribute values carry them)."""
    return {
        name: {kind: str(value) if kind == "N" else value}
        for name, kind, value in values
        if value is not None
    }


def _effect_avs(processor: str, effect: Effect) -> dict[str, Any]:
    """One processor's effect attributes (the status always; the rest when set)."""
    fx, fx_token, fx_lease, fx_done, fx_queue = effect_attributes(processor)
    item: dict[str, Any] = {fx: {"S": _FX_CODES.get(effect.status, effect.status)}}
    item.update(
        _present(
            (
                (fx_token, "N", effect.token),
                (fx_lease, "N", effect.lease_until_ms),
                (fx_done, "S", effect.done_change_id),
                (
                    version_attribute(processor),
                    "N",
                    None if effect.version == 1 else effect.version,
                ),
            )
        )
    )
    if effect.queue:
        item[fx_queue] = {"L": [_queued_av(q) for q in effect.queue]}
    if effect.hold is not None:
        item[hold_attribute(processor)] = _hold_av(effect.hold)
    return item


def _history_of(row: LedgerRow) -> tuple[Decision, ...]:
    """The row's decisions; a legacy row written before the history existed gets one made of
    its own fields."""
    if row.history or not row.updated_at:
        return row.history
    return (
        Decision(
            seq=row.raw_seq or "-",
            event=row.event_name,
            reason=row.reason,
            source=row.source,
            at=row.updated_at,
            state=row.state,
        ),
    )


# -- item sizes -------------------------------------------------------------------------------


def item_size(item: Mapping[str, Any]) -> int:
    """Bytes DynamoDB counts for an item (attribute-value form): the sum of its attribute names'
    UTF-8 lengths and its values' sizes (strings: UTF-8 length; numbers: about one byte per two
    significant digits plus one; booleans and null: 1; lists and maps: 3 plus 1 per element
    plus the elements, and the names in a map). Per "Item sizes and formats", Amazon DynamoDB
    Developer Guide (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html).
    """
    return sum(len(name.encode()) + _value_size(av) for name, av in item.items())


def write_units(size: int) -> int:
    """Write request units of one standard write of an item of ``size`` bytes (1 KB each)."""
    return max(1, -(-size // 1024))


def _value_size(av: Mapping[str, Any]) -> int:
    ((typ, val),) = av.items()
    if typ == "S":
        return len(val.encode())
    if typ == "N":
        digits = val.lstrip("-").replace(".", "").strip("0") or "0"
        return -(-len(digits) // 2) + 1
    if typ == "B":
        return len(val)
    if typ in ("BOOL", "NULL"):
        return 1
    if typ == "L":
        return 3 + sum(1 + _value_size(v) for v in val)
    if typ == "M":
        return 3 + sum(1 + len(k.encode()) + _value_size(v) for k, v in val.items())
    return len(str(val))


# -- what an applied write returns ------------------------------------------------------------


def _written(attributes: Mapping[str, Any], token_attribute: str | None) -> WriteResult:
    """The applied :class:`WriteResult` of an UpdateItem's returned attributes."""
    token: int | None = None
    queues: dict[str, tuple[QueuedChange, ...]] = {}
    holds: dict[str, Hold] = {}
    for name, av in attributes.items():
        base, _, processor = name.partition(":")
        if base == _FX_TOKEN and (token_attribute is None or name == token_attribute):
            token = int(av["N"])
        elif base == _FX_QUEUE:
            queues[processor or DEFAULT_PROCESSOR] = _queued_of(av)
        elif base == _FX_HOLD:
            hold = _hold_of(av)
            if hold is not None:
                holds[processor or DEFAULT_PROCESSOR] = hold
    return WriteResult(applied=True, token=token, queues=queues, holds=holds)
