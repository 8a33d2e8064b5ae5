"""The DynamoDB ledger adapter: one item per (bucket, decoded key), and the only code that knows
how a row is stored.

Item layout (a *compact* item: what the rules need, stored once; an item stays within 1 KB, one
write unit, for keys up to 512 bytes with the decision history kept, unless the key arrived in a
form other than S3's own encoding of it and ``rk`` holds that form too; ``python -m bench --only
rowsize`` prints the figures):

====  ====  ==============================================================================
pk    S     ``<bucket>/<key>`` (bucket names cannot contain ``/``): the table's partition key,
            and the only copy of the bucket and the decoded key (CONTRACT C1)
rk    S     the key as last received on the wire, only when it is not :func:`event_key` of the
            decoded key (the form S3 itself sends, absent ``rk`` reads as it); empty when it was
            the decoded key itself (a repair, a backfill's observation)
st    S     ``p`` (present) or ``d`` (a tombstone, CONTRACT C6)
sq    S     highest applied sequencer, normalised (:mod:`s3ingest_fn.core.sequencer`) without
            its right-padding zeros: right-padding both sides to one width orders them as
            stripping the zeros does, so DynamoDB still compares with ``<``; absent when only
            observations touched the row
rq    S     that sequencer as received, only when it differs from ``sq``
ob    BOOL  true when the state came from reading the bucket (C7); absent otherwise
vi    S     current version (absent: unversioned or null version)
et    S     current ETag (no quotes)
sz    N     current size
rv    N     revision, +1 on every write (optimistic concurrency; fencing tokens)
ut    N     epoch ms of the last decision written (also in ``h0``; kept apart so that a
            reconciliation's Scan reads it without the history)
op    S     what the last write was: ``apply`` (a change was applied: the change stream
            publishes exactly these, :data:`STREAM_FILTER`), ``seq`` (only the sequencer moved),
            ``claim``, ``release``, ``commit`` (effects), ``migrate`` (a legacy item rewritten).
            The legacy layout's name, kept: the deployed stream filter names it
ci    S     id of the applied change (:func:`s3ingest_fn.core.effects.change_id`)
cq    S     that change's own sequencer as received; absent for an observation
fe    S     effect of the applied change (only with a processor): ``p`` pending, ``d`` done,
            ``s`` superseded (CONTRACT C11); with a hold policy also ``h`` held, ``x``
            rejected, ``k`` skipped
ft    N     fencing token of the effect's claim (the row's ``rv`` when claimed)
fl    N     epoch ms until which the claiming worker may run; removed on commit
fd    S     the change id whose effect last completed
fq    L     ``every-change`` processors: the applied changes whose effects wait, oldest first,
            each ``[change id, "p"|"d", sequencer as received or NULL, version or NULL, ETag or
            NULL, size or NULL, source, event name]``; removed when the last one is done
fh    L     the held change of the effect and its review (:mod:`s3ingest_fn.core.hold`): ``[change
            id, reason, held at (epoch ms), "h"|"a" (held, approved), actor or NULL, decided
            at or NULL]``; removed by the next commit
fe:N  ...   the same six (``fe:N``, ``ft:N``, ``fl:N``, ``fd:N``, ``fq:N``, ``fh:N``) for the
            processor named ``N`` of several; the unsuffixed ones belong to the ``default``
            processor (the single ``processor`` setting), as before there were several
t0..  L     the last review decisions (``trailLength``, default
            :data:`~s3ingest_fn.core.row.TRAIL_SLOTS`), newest first, each ``[at, action
            ("h", "a", "r"), processor, change id, sequencer as received or "-", reason,
            actor]``; NULL until filled
h0..  L     the last :data:`~s3ingest_fn.core.row.HISTORY_SLOTS` applied decisions, newest
            first, each ``[at (epoch ms), state, source, sequencer as received or "-", reason,
            event name]`` with the well-known values coded (:data:`_SOURCES`, :data:`_REASONS`,
            :data:`_EVENT_PREFIXES`); NULL until filled. ``h0`` is also where the row's last
            event, reason and source are read from.
expires_at  N  epoch seconds; only on tombstones (the table's TTL attribute)
====  ====  ==============================================================================

**Legacy items.** Tables are retained across upgrades, so items written by earlier versions
(``bucket``, ``key``, ``raw_key``, ``state``, ``seq`` padded to 64 characters, ``fx*``,
``chg_*``, history maps, ...) are read as they are (:func:`row_from_item`). Every write is
conditional on the item not being legacy; a write refused by a legacy item rewrites it in the
compact layout first (:meth:`DynamoLedger._migrate`: same revision, fencing token, effect and
history; ``op=migrate``, so the change stream does not publish it again) and then retries.

Writes use ``ReturnValuesOnConditionCheckFailure=ALL_OLD`` so a rejected conditional write tells
duplicate from stale without a second request (CONTRACT C5;
https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateItem.html).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import quote_plus

from botocore.exceptions import BotoCoreError, ClientError

from s3ingest_fn.core.effects import change_id
from s3ingest_fn.core.model import TransientError
from s3ingest_fn.core.row import (
    APPROVED,
    DEFAULT_PROCESSOR,
    DELETED,
    DONE,
    HELD,
    HISTORY_SLOTS,
    MAX_QUEUED,
    MAX_TRAIL,
    OP_APPLY,
    OP_APPROVE,
    OP_CLAIM,
    OP_COMMIT,
    OP_HOLD,
    OP_REJECT,
    OP_RELEASE,
    OP_SEQ,
    PENDING,
    PRESENT,
    REJECTED,
    SKIPPED,
    SUPERSEDED,
    TRAIL_SLOTS,
    Claim,
    Decision,
    Effect,
    Hold,
    LedgerRow,
    QueuedChange,
    Review,
    RowState,
    WriteMeta,
    WriteResult,
    summary_effect,
)
from s3ingest_fn.core.sequencer import WIDTH

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient  # pragma: no cover
else:
    DynamoDBClient = Any

#: The table's partition key and TTL attribute: the deployed table's key schema
#: (``infra/s3ingest_cdk/constructs/ledger_table.py``); never renamed (a new key is a new table).
PARTITION_KEY = "pk"
TTL_ATTRIBUTE = "expires_at"

# The compact layout's attribute names (see the module docstring).
_RAW_KEY, _STATE, _SEQ, _RAW_SEQ, _OBSERVED = "rk", "st", "sq", "rq", "ob"
_VERSION, _ETAG, _SIZE, _REV, _OP = "vi", "et", "sz", "rv", "op"
_CHG_ID, _CHG_SEQ, _UPDATED = "ci", "cq", "ut"
_FX, _FX_TOKEN, _FX_LEASE, _FX_DONE, _FX_QUEUE = "fe", "ft", "fl", "fd", "fq"
_FX_HOLD = "fh"
_HISTORY = tuple(f"h{i}" for i in range(HISTORY_SLOTS))
_TRAIL = tuple(f"t{i}" for i in range(MAX_TRAIL))
#: Items that are not ledger rows (the mass-delete breaker's counters) have partition keys
#: starting with this; a bucket name never does.
COUNTER_PREFIX = "#s3ingest/"

#: Every attribute name of the compact layout.
ATTRIBUTES: tuple[str, ...] = (
    PARTITION_KEY,
    _RAW_KEY,
    _STATE,
    _SEQ,
    _RAW_SEQ,
    _OBSERVED,
    _VERSION,
    _ETAG,
    _SIZE,
    _REV,
    _OP,
    _UPDATED,
    _CHG_ID,
    _CHG_SEQ,
    _FX,
    _FX_TOKEN,
    _FX_LEASE,
    _FX_DONE,
    _FX_QUEUE,
    _FX_HOLD,
    *_HISTORY,
    *_TRAIL,
    TTL_ATTRIBUTE,
)
#: The legacy layout's attribute names that only a ledger row uses (the others, ``bucket``,
#: ``key``, ``state``, ``etag``, ``event_name``, ``updated_at``, ... are also field names of the
#: change events, the results and the reports).
LEGACY_ATTRIBUTES: tuple[str, ...] = (
    "raw_key",
    "raw_seq",
    "chg_id",
    "chg_seq",
    "fx",
    "fx_token",
    "fx_lease",
    "fx_done",
)
#: Attribute names that are also ordinary words of another vocabulary of the product (``op``:
#: a step of the local scenario format), so they are not searched for outside this module.
SHARED_WORDS: tuple[str, ...] = (_OP,)
#: Present on every legacy item, never on a compact one.
_LEGACY_MARK = "bucket"
_OP_MIGRATE = "migrate"
#: What a legacy writer (the previous release, still finishing a batch during a deploy) changes
#: without moving ``rev``: its effect commit and release. A migration is conditional on all of
#: them still being as read, so it never puts back an effect state a commit replaced.
_LEGACY_GUARDED = ("rev", _OP, "fx", "fx_token", "fx_lease", "fx_done")

#: The change stream's event source mapping filter: applied changes only
#: (https://docs.aws.amazon.com/lambda/latest/dg/with-ddb-filtering.html).
STREAM_FILTER: dict[str, Any] = {
    "eventName": ["INSERT", "MODIFY"],
    "dynamodb": {"NewImage": {_OP: {"S": [OP_APPLY, OP_HOLD, OP_APPROVE, OP_REJECT]}}},
}

_STATES = {PRESENT: "p", DELETED: "d"}
_FX_CODES = {
    PENDING: "p",
    DONE: "d",
    SUPERSEDED: "s",
    HELD: "h",
    REJECTED: "x",
    SKIPPED: "k",
}
_REVIEW_CODES = {HELD: "h", APPROVED: "a", REJECTED: "r"}
_REVIEW_ACTION = {code: action for action, code in _REVIEW_CODES.items()}
_FX_STATUS = {code: status for status, code in _FX_CODES.items()}
#: Well-known history values, stored as one character; anything else is stored verbatim
#: (prefixed with NUL when it could be mistaken for a code).
_SOURCES = ("live", "replay", "repair", "backfill")
_REASONS = (
    "newer-sequencer",
    "verified-against-bucket",
    "bucket-moved-past-event",
    "version-removed-key-visible",
    "version-removed-key-hidden",
    "observed-bucket-state",
    # appended only: a code is the position in this tuple
    "listed-state",
)
#: Event-name prefixes stored as one control character (S3 notifications and EventBridge).
_EVENT_PREFIXES = (
    "ObjectCreated:",
    "ObjectRemoved:",
    "Object Created/",
    "Object Deleted/",
    "LifecycleExpiration:",
)
#: History entries keep at most this many characters of the event name.
_EVENT_MAX = 200


def effect_attributes(processor: str) -> tuple[str, str, str, str, str]:
    """The attribute names of one processor's effect: status, fencing token, lease, done change
    id, queue (the module docstring's ``fe``..``fq``, suffixed ``:<name>`` but for
    :data:`~s3ingest_fn.core.row.DEFAULT_PROCESSOR`)."""
    if processor == DEFAULT_PROCESSOR:
        return _FX, _FX_TOKEN, _FX_LEASE, _FX_DONE, _FX_QUEUE
    return (
        f"{_FX}:{processor}",
        f"{_FX_TOKEN}:{processor}",
        f"{_FX_LEASE}:{processor}",
        f"{_FX_DONE}:{processor}",
        f"{_FX_QUEUE}:{processor}",
    )


def hold_attribute(processor: str) -> str:
    """The attribute of ``processor``'s held change and review (the module docstring's
    ``fh``)."""
    return _FX_HOLD if processor == DEFAULT_PROCESSOR else f"{_FX_HOLD}:{processor}"


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


def _ph(name: str) -> str:
    """An expression placeholder for an attribute name (``:`` and ``-`` are not allowed in one;
    processor names hold no ``_``, so the mapping is one to one)."""
    return "#" + name.replace(":", "_").replace("-", "_")


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


def row_pk(bucket: str, key: str) -> str:
    """Partition key of a ledger row (CONTRACT C1: two buckets never share a row)."""
    return f"{bucket}/{key}"


def event_key(key: str) -> str:
    """The form S3 sends a decoded key in its event notifications: form-encoded
    (``application/x-www-form-urlencoded``: a space becomes ``+``, other reserved and non-ASCII
    bytes UTF-8 ``%XX`` in upper-case hex), ``/`` kept. Per "Event message structure", Amazon S3
    User Guide (https://docs.aws.amazon.com/AmazonS3/latest/userguide/notification-content-structure.html):
    "red flower.jpg" becomes "red+flower.jpg". A row whose raw key is this form stores no ``rk``.
    """
    return quote_plus(key, safe="/")


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


def _scanned_row(item: Mapping[str, Any], bucket: str, named: bool = False) -> LedgerRow:
    """:func:`row_from_item` for an item of ``bucket`` projected to :data:`_DIFF_ATTRIBUTES`
    (the fast path of a reconciliation's Scan: a million rows go through it, so the row is
    built by one positional call, the fields in :class:`LedgerRow`'s order, and no bound
    method is allocated per row; ``test_ledger_layout`` checks it against
    :func:`row_from_item`). With several processors the row's ``effect`` is the
    :func:`~s3ingest_fn.core.row.summary_effect` of those not held, and its ``named_effects``
    are the held ones (with their :class:`~s3ingest_fn.core.row.Hold`), by processor name, so
    :meth:`~s3ingest_fn.core.row.LedgerRow.effects` holds each held effect once (a held effect
    is no drift: the summary of the others decides the diff as before)."""
    if _LEGACY_MARK in item:
        return _legacy_row({name: _plain(av) for name, av in item.items()})
    version, etag, updated = item.get(_VERSION), item.get(_ETAG), item.get(_UPDATED)
    fx = item.get(_FX)
    effect = (
        None
        if fx is None
        else Effect(
            _FX_STATUS.get(fx["S"], fx["S"]),
            lease_until_ms=_n(item.get(_FX_LEASE)),
            hold=_hold_of(item.get(_FX_HOLD)) if fx["S"] == _FX_CODES[HELD] else None,
        )
    )
    held: dict[str, Effect] = {}
    if named and any(a.startswith(f"{_FX}:") for a in item):
        effects = {
            a[len(_FX) + 1 :]: Effect(
                _FX_STATUS.get(av["S"], av["S"]),
                lease_until_ms=_n(item.get(f"{_FX_LEASE}:{a[len(_FX) + 1 :]}")),
                hold=_hold_of(item.get(f"{_FX_HOLD}:{a[len(_FX) + 1 :]}"))
                if av["S"] == _FX_CODES[HELD]
                else None,
            )
            for a, av in item.items()
            if a.startswith(f"{_FX}:")
        }
        if effect is not None:
            effects[DEFAULT_PROCESSOR] = effect
        held = {name: e for name, e in effects.items() if e.status == HELD}
        effect = summary_effect({n: e for n, e in effects.items() if n not in held})
    return LedgerRow(
        bucket,
        item[PARTITION_KEY]["S"][len(bucket) + 1 :],
        item[_STATE]["S"] == "p",
        "",  # raw_key
        None,  # seq
        None,  # raw_seq
        False,  # observed
        None if version is None else version["S"],
        None if etag is None else etag["S"],
        None,  # size
        0,  # rev
        "",  # event_name
        "",  # reason
        "",  # source
        0 if updated is None else int(updated["N"]),
        None,  # expires_at
        (),  # history
        None,  # op
        None,  # change_id
        None,  # change_seq
        effect,
        held,  # named_effects: the held ones (several processors)
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
    item: dict[str, Any] = {
        PARTITION_KEY: {"S": row_pk(row.bucket, row.key)},
        _STATE: {"S": _STATES[row.state]},
        _REV: {"N": str(row.rev)},
    }
    if row.updated_at:
        item[_UPDATED] = {"N": str(row.updated_at)}
    raw_key = _raw_key_av(row.raw_key, row.key)
    if raw_key is not None:
        item[_RAW_KEY] = raw_key
    if row.seq is not None:
        compact = _compact_seq(row.seq)
        item[_SEQ] = {"S": compact}
        if row.raw_seq and row.raw_seq != compact:
            item[_RAW_SEQ] = {"S": row.raw_seq}
    if row.observed:
        item[_OBSERVED] = {"BOOL": True}
    if row.present:
        if row.version_id is not None:
            item[_VERSION] = {"S": row.version_id}
        if row.etag is not None:
            item[_ETAG] = {"S": row.etag}
        if row.size is not None:
            item[_SIZE] = {"N": str(row.size)}
    if row.op is not None:
        item[_OP] = {"S": row.op}
    if row.change_id is not None:
        item[_CHG_ID] = {"S": row.change_id}
    if row.change_seq is not None:
        item[_CHG_SEQ] = {"S": row.change_seq}
    for processor, effect in row.effects().items():
        fx, fx_token, fx_lease, fx_done, fx_queue = effect_attributes(processor)
        item[fx] = {"S": _FX_CODES.get(effect.status, effect.status)}
        for name, number in ((fx_token, effect.token), (fx_lease, effect.lease_until_ms)):
            if number is not None:
                item[name] = {"N": str(number)}
        if effect.done_change_id is not None:
            item[fx_done] = {"S": effect.done_change_id}
        if effect.queue:
            item[fx_queue] = {"L": [_queued_av(q) for q in effect.queue]}
        if effect.hold is not None:
            item[hold_attribute(processor)] = _hold_av(effect.hold)
    for name, review in zip(_TRAIL, row.trail, strict=False):
        item[name] = _review_av(review)
    history = row.history
    if not history and row.updated_at:  # a legacy row written before the history existed
        history = (
            Decision(
                seq=row.raw_seq or "-",
                event=row.event_name,
                reason=row.reason,
                source=row.source,
                at=row.updated_at,
                state=row.state,
            ),
        )
    for name, decision in zip(_HISTORY, history, strict=False):
        item[name] = _decision_av(decision)
    if row.expires_at is not None:
        item[TTL_ATTRIBUTE] = {"N": str(row.expires_at)}
    return item


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


class DynamoLedger:
    """Ledger rows in one DynamoDB table (the :class:`~s3ingest_fn.core.ports.Ledger` port).

    Parameters
    ----------
    client : DynamoDBClient
        A boto3 DynamoDB client (injected: tests pass one bound to the emulator).
    table_name : str
    tombstone_ttl_seconds : int
        Lifetime of a tombstone; ``0`` keeps tombstones for ever (CONTRACT C6).
    clock : callable, optional
        Returns epoch seconds (float); injectable for tests.
    trail : int
        Review decisions kept on a row (``trailLength``; 1 to
        :data:`~s3ingest_fn.core.row.MAX_TRAIL`).
    """

    def __init__(
        self,
        client: DynamoDBClient,
        table_name: str,
        tombstone_ttl_seconds: int,
        clock: Callable[[], float] = time.time,
        trail: int = TRAIL_SLOTS,
    ) -> None:
        if not 1 <= trail <= MAX_TRAIL:
            raise ValueError(f"trail must be 1..{MAX_TRAIL} review decisions, got {trail}")
        self._ddb = client
        self._table = table_name
        self._ttl = tombstone_ttl_seconds
        self._clock = clock
        self._trail = trail

    def get(self, bucket: str, key: str) -> LedgerRow | None:
        """Strongly consistent read of a row, or None.

        Raises
        ------
        TransientError
            On throttling or a service error.
        """
        try:
            resp = self._ddb.get_item(
                TableName=self._table,
                Key={PARTITION_KEY: {"S": row_pk(bucket, key)}},
                ConsistentRead=True,
            )
        except (ClientError, BotoCoreError) as exc:
            raise _transient(exc) from exc
        item = resp.get("Item")
        return row_from_item(item) if item else None

    # -- the named operations (see s3ingest_fn.core.ports.Ledger) -------------------------

    def apply_if_newer(
        self, state: RowState, meta: WriteMeta, claim: Claim | None = None
    ) -> WriteResult:
        """Apply an event's own state when its sequencer is newer and the row holds no
        observed state (C5, C7). One UpdateItem.

        Raises
        ------
        TransientError
            On throttling or a service error.
        """
        return self._sequenced(state, meta, observed=False, require_exact=True, claim=claim)

    def apply_verified(
        self,
        state: RowState,
        meta: WriteMeta,
        *,
        observed: bool,
        expected_rev: int,
        claim: Claim | None = None,
    ) -> WriteResult:
        """Apply a state verified against the bucket when the sequencer is newer and the
        revision is still ``expected_rev`` (C7). One UpdateItem.

        Raises
        ------
        TransientError
            On throttling or a service error.
        """
        return self._sequenced(
            state,
            meta,
            observed=observed,
            require_exact=False,
            expected_rev=expected_rev,
            claim=claim,
        )

    def apply_observed_at(
        self, state: RowState, meta: WriteMeta, claim: Claim | None = None
    ) -> WriteResult:
        """Record a state read from the bucket at an event's sequencer, as a new change, when
        the sequencer is newer and the row does not hold ``state`` (C4). One UpdateItem.

        Raises
        ------
        TransientError
            On throttling or a service error.
        """
        return self._sequenced(
            state, meta, observed=True, require_exact=False, claim=claim, state_is=False
        )

    def advance_sequencer(
        self,
        state: RowState,
        meta: WriteMeta,
        *,
        observed: bool,
        expected_rev: int | None = None,
    ) -> WriteResult:
        """Move only the sequencer and the bookkeeping of a row that holds ``state``
        (``op=seq``: no new change, not published, no effect), when the sequencer is newer and
        the revision is still ``expected_rev`` (or, None, the row holds ``state``).

        Raises
        ------
        TransientError
            On throttling or a service error.
        """
        return self._sequenced(
            state,
            meta,
            observed=observed,
            require_exact=False,
            expected_rev=expected_rev,
            same_change=True,
            state_is=True if expected_rev is None else None,
        )

    def record_observation(
        self,
        state: RowState,
        meta: WriteMeta,
        expected_rev: int | None,
        claim: Claim | None = None,
    ) -> WriteResult:
        """Record an observed state (C7) if the row has not moved since it was read.

        ``expected_rev=None`` means the row did not exist when read. The row's sequencer is
        kept.

        Raises
        ------
        TransientError
            On throttling or a service error.
        """
        if expected_rev is None:
            cond, values = f"attribute_not_exists(#{PARTITION_KEY})", {}
        else:
            cond, values = f"#{_REV} = :expected_rev", {":expected_rev": {"N": str(expected_rev)}}
        # An observation has no sequencer: its change is named by the revision it creates, so
        # the same state observed again after another change is a new change. A row created by
        # an observation is named by the time too: a tombstone row expires (TTL) and a later
        # row of the key starts again from revision 1.
        return self._update(
            state,
            meta,
            observed=True,
            condition=cond,
            values=values,
            claim=claim,
            change_key=(
                f"obs@{expected_rev + 1}"
                if expected_rev is not None
                else f"obs@new@{int(self._clock() * 1000)}"
            ),
        )

    def reclaim(
        self,
        bucket: str,
        key: str,
        old_token: int,
        claim: Claim,
        processor: str = DEFAULT_PROCESSOR,
    ) -> WriteResult:
        """Take over ``processor``'s effect on the row: a pending one whose lease has expired
        (its worker crashed or timed out), or one that ended ``superseded`` while the row still
        holds its change (the caller has verified the bucket shows the row's state).

        One UpdateItem, conditional on the effect still holding that claim (fencing token
        ``old_token``), pending with an expired lease or superseded (other processors' leases
        do not matter: a newer change would have replaced this token). The effect becomes
        ``pending`` again; the new token is the row's new revision; ``queues`` gives an
        ``every-change`` processor's waiting changes.

        Raises
        ------
        TransientError
            On throttling or a service error.
        """
        fx, fx_token, fx_lease, _, _ = effect_attributes(processor)
        names = {_ph(n): n for n in (_REV, _OP, fx, fx_token, fx_lease)}
        return self._call(
            bucket,
            key,
            {
                "UpdateExpression": f"SET #{_REV} = if_not_exists(#{_REV}, :zero) + :one, "
                f"{_ph(fx_token)} = if_not_exists(#{_REV}, :zero) + :one, "
                f"{_ph(fx_lease)} = :lease, #{_OP} = :claim, {_ph(fx)} = :pending",
                "ConditionExpression": f"{_ph(fx_token)} = :old AND (({_ph(fx)} = :pending AND "
                f"{_ph(fx_lease)} < :now) OR {_ph(fx)} = :superseded)",
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": {
                    ":zero": {"N": "0"},
                    ":one": {"N": "1"},
                    ":claim": {"S": OP_CLAIM},
                    ":lease": {"N": str(claim.lease_until_ms)},
                    ":pending": {"S": _FX_CODES[PENDING]},
                    ":superseded": {"S": _FX_CODES[SUPERSEDED]},
                    ":old": {"N": str(old_token)},
                    ":now": {"N": str(claim.now_ms)},
                },
                "ReturnValues": "ALL_NEW",
            },
            token_attribute=fx_token,
        )

    def finish(
        self,
        bucket: str,
        key: str,
        token: int,
        status: str = DONE,
        *,
        processor: str = DEFAULT_PROCESSOR,
        change_id: str | None = None,
        more: bool = False,
    ) -> bool:
        """Commit ``processor``'s effect (``status``: ``done``, ``superseded`` or ``skipped``,
        the hold policy's answer) if ``token``
        still holds the claim; removes the lease; ``done`` also records the change it completed
        for (``change_id``, default the row's change). One UpdateItem.

        ``more``: an ``every-change`` processor's queue holds more changes after this one: only
        this one leaves the queue and the claim goes on.

        Returns
        -------
        bool
            False when another worker claimed the row since (this worker's lease expired).

        Raises
        ------
        TransientError
            On throttling or a service error.
        """
        fx, fx_token, fx_lease, fx_done, fx_queue = effect_attributes(processor)
        fh = hold_attribute(processor)
        names = {_ph(n): n for n in (_OP, fx_token, fh)}
        values: dict[str, Any] = {":commit": {"S": OP_COMMIT}, ":token": {"N": str(token)}}
        if more:
            names[_ph(fx_queue)] = fx_queue
            expr = f"SET #{_OP} = :commit REMOVE {_ph(fx_queue)}[0], {_ph(fh)}"
        else:
            names.update({_ph(n): n for n in (fx, fx_lease, fx_queue)})
            values[":status"] = {"S": _FX_CODES.get(status, status)}
            expr = f"SET {_ph(fx)} = :status, #{_OP} = :commit"
            if status == DONE:
                names[_ph(fx_done)] = fx_done
                if change_id is None:
                    expr += f", {_ph(fx_done)} = #{_CHG_ID}"
                    names[f"#{_CHG_ID}"] = _CHG_ID
                else:
                    expr += f", {_ph(fx_done)} = :done"
                    values[":done"] = {"S": change_id}
            expr += f" REMOVE {_ph(fx_lease)}, {_ph(fx_queue)}, {_ph(fh)}"
        return self._call(
            bucket,
            key,
            {
                "UpdateExpression": expr,
                "ConditionExpression": f"{_ph(fx_token)} = :token",
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
            },
        ).applied

    def close(self, bucket: str, key: str, token: int, processor: str) -> bool:
        """Remove ``processor``'s effect state but the change it last completed (``fd``), if
        ``token`` still holds it: an every-change processor whose last run (an older change)
        ended superseded while the row's change does not concern it. One UpdateItem.

        Returns
        -------
        bool
            False when the state changed since (another claim).

        Raises
        ------
        TransientError
            On throttling or a service error.
        """
        fx, fx_token, fx_lease, _, fx_queue = effect_attributes(processor)
        return self._call(
            bucket,
            key,
            {
                "UpdateExpression": f"SET #{_OP} = :commit "
                f"REMOVE {_ph(fx)}, {_ph(fx_token)}, {_ph(fx_lease)}, {_ph(fx_queue)}",
                "ConditionExpression": f"{_ph(fx_token)} = :token",
                "ExpressionAttributeNames": {
                    _ph(n): n for n in (_OP, fx, fx_token, fx_lease, fx_queue)
                },
                "ExpressionAttributeValues": {
                    ":commit": {"S": OP_COMMIT},
                    ":token": {"N": str(token)},
                },
            },
        ).applied

    def release(
        self, bucket: str, key: str, token: int, processor: str = DEFAULT_PROCESSOR
    ) -> bool:
        """End ``processor``'s claim's lease now (the processor failed): the retry may
        re-claim at once.

        Returns
        -------
        bool
            False when the claim was no longer this token's.

        Raises
        ------
        TransientError
            On throttling or a service error.
        """
        fx, fx_token, fx_lease, _, _ = effect_attributes(processor)
        return self._call(
            bucket,
            key,
            {
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
            },
        ).applied

    def hold(
        self,
        bucket: str,
        key: str,
        token: int,
        processor: str,
        hold: Hold,
        review: Review | None,
    ) -> bool:
        """Record ``processor``'s claimed effect as ``held`` (instead of its commit), if
        ``token`` still holds the claim: the held change and why (``hold``), the lease
        removed, ``review`` pushed onto the trail (None: the change was held already and a
        newer change's claim passed it again). One UpdateItem; the change stream publishes
        ``Object Held`` for it.

        Returns
        -------
        bool
            False when another worker claimed the row since.

        Raises
        ------
        TransientError
            On throttling or a service error.
        """
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
            expr += f", #{_REV} = #{_REV} + :one, " + self._push_review(review, names, values)
        return self._call(
            bucket,
            key,
            {
                "UpdateExpression": expr + f" REMOVE {_ph(fx_lease)}",
                "ConditionExpression": f"{_ph(fx_token)} = :token",
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
            },
        ).applied

    def review(self, bucket: str, key: str, review: Review, *, queued: int = 0) -> WriteResult:
        """Decide ``review.processor``'s held change ``review.change_id``: ``approved`` makes
        the effect pending with an expired lease (the next delivery of the key, or the repair
        the caller queues, re-claims and runs it without asking the policy again);
        ``rejected`` ends it (``rejected``), or, when newer changes wait behind it (an
        ``every-change`` processor's queue held ``queued`` > 1 changes when the row was read),
        drops only the held change and leaves the rest pending the same way. Conditional on
        the effect still holding that change and, for a rejection, its queue still holding
        ``queued`` changes (a newer change queued since refuses it: read and decide again); the
        decision goes onto the trail and the row's revision moves. One UpdateItem; the change
        stream publishes ``Change Approved`` or ``Change Rejected``.

        Raises
        ------
        TransientError
            On throttling or a service error.
        """
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
        expr += f", #{_REV} = #{_REV} + :one, " + self._push_review(review, names, values)
        if removes:
            expr += " REMOVE " + ", ".join(removes)
        return self._call(
            bucket,
            key,
            {
                "UpdateExpression": expr,
                "ConditionExpression": condition,
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
            },
        )

    def rank(self, name: str, window: int, member: str, above: int, ttl_seconds: int) -> int:
        """The mass-delete breaker's counter (:class:`~s3ingest_fn.core.hold.HoldCounter`) in
        the ledger table, on small items that expire by the table's TTL ``ttl_seconds`` later:
        ``#s3ingest/<name>/<window>`` counts the ranks given in the window (``n``), and
        ``#s3ingest/<name>/member/<member>`` keeps a member's rank. A member asked again (a
        retried or crash-resumed effect, in this window or a later one) gets its kept rank: one
        GetItem. A new one: one conditional UpdateItem of the count (while ``n < above``) and
        one conditional PutItem of its rank; past ``above``, the refused update alone.

        Returns
        -------
        int
            ``member``'s rank (1 to ``above``), or ``above + 1`` once ``above`` ranks were given
            in the window.

        Raises
        ------
        TransientError
            On throttling or a service error.
        """
        kept = {PARTITION_KEY: {"S": f"{COUNTER_PREFIX}{name}/member/{member}"}}
        expires = {"N": str(int(self._clock()) + ttl_seconds)}
        try:
            found = self._ddb.get_item(TableName=self._table, Key=kept, ConsistentRead=True)
            if "Item" in found:
                return int(found["Item"]["r"]["N"])
            try:
                counted = self._ddb.update_item(
                    TableName=self._table,
                    Key={PARTITION_KEY: {"S": f"{COUNTER_PREFIX}{name}/{window}"}},
                    UpdateExpression="SET #n = if_not_exists(#n, :zero) + :one, "
                    "#ttl = if_not_exists(#ttl, :ttl)",
                    ConditionExpression="attribute_not_exists(#n) OR #n < :above",
                    ExpressionAttributeNames={"#n": "n", "#ttl": TTL_ATTRIBUTE},
                    ExpressionAttributeValues={
                        ":zero": {"N": "0"},
                        ":one": {"N": "1"},
                        ":above": {"N": str(above)},
                        ":ttl": expires,
                    },
                    ReturnValues="UPDATED_NEW",
                )
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                    return above + 1
                raise
            rank = int(counted["Attributes"]["n"]["N"])
            try:
                self._ddb.put_item(
                    TableName=self._table,
                    Item={**kept, "r": {"N": str(rank)}, TTL_ATTRIBUTE: expires},
                    ConditionExpression=f"attribute_not_exists({PARTITION_KEY})",
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
            except ClientError as exc:  # the same change asked twice at once: the first wins
                if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                    raise
                return int(cast("dict[str, Any]", exc.response.get("Item") or {})["r"]["N"])
            return rank
        except (ClientError, BotoCoreError) as exc:
            raise _transient(exc) from exc

    def _push_review(self, review: Review, names: dict[str, str], values: dict[str, Any]) -> str:
        """The SET clauses that push ``review`` onto the trail (``t0`` newest; the oldest of
        :attr:`_trail` falls off), reading the item as it was before the update."""
        values[":review"] = _review_av(review)
        values[":noreview"] = {"NULL": True}
        slots = _TRAIL[: self._trail]
        names.update({_ph(slot): slot for slot in slots})
        return _push_slot(slots, ":review", ":noreview")

    # -- the requests ----------------------------------------------------------------------

    def _sequenced(
        self,
        state: RowState,
        meta: WriteMeta,
        *,
        observed: bool,
        require_exact: bool,
        expected_rev: int | None = None,
        claim: Claim | None = None,
        same_change: bool = False,
        state_is: bool | None = None,
    ) -> WriteResult:
        """A write ordered by ``meta.sequencer``: applied when the row is absent, or its
        sequencer is absent or lower; ``require_exact``: and the row holds no observed state;
        ``expected_rev``: and the revision is unchanged; ``state_is``: and the row holds
        (True) or does not hold (False) ``state``."""
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
        return self._update(
            state,
            meta,
            observed=observed,
            condition=cond,
            values=values,
            claim=claim,
            same_change=same_change,
            change_key=meta.sequencer,
        )

    def _call(
        self,
        bucket: str,
        key: str,
        request: dict[str, Any],
        *,
        token_attribute: str | None = None,
    ) -> WriteResult:
        """One UpdateItem, conditional on the item not being legacy; a legacy item refusing it
        is migrated and the request made again. An applied write's returned attributes give
        the fencing token (``token_attribute``, default any processor's) and the queues."""
        request = dict(request)
        request["ConditionExpression"] = (
            f"({request['ConditionExpression']}) AND attribute_not_exists(#{_LEGACY_MARK})"
        )
        request["ExpressionAttributeNames"] = {
            **request["ExpressionAttributeNames"],
            f"#{_LEGACY_MARK}": _LEGACY_MARK,
        }
        for _ in range(3):
            try:
                resp = self._ddb.update_item(
                    TableName=self._table,
                    Key={PARTITION_KEY: {"S": row_pk(bucket, key)}},
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                    **request,
                )
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                    item = cast("dict[str, Any] | None", exc.response.get("Item"))
                    if item and _LEGACY_MARK in item:
                        self._refuse_live_legacy_lease(item)
                        self._migrate(item)
                        continue
                    return WriteResult(applied=False, old=row_from_item(item) if item else None)
                raise _transient(exc) from exc
            except BotoCoreError as exc:
                raise _transient(exc) from exc
            return _written(resp.get("Attributes", {}), token_attribute)
        raise TransientError("dynamodb: a legacy ledger item kept changing during its migration")

    def _refuse_live_legacy_lease(self, item: Mapping[str, Any]) -> None:
        """A legacy item whose effect a worker of the previous release still holds (pending,
        lease not over) is left to that worker: its commit is conditional on the legacy fencing
        token, which a migration would rename, and the effect would run again.

        Raises
        ------
        TransientError
            Always when the lease is live: the message is retried after it.
        """
        effect = row_from_item(item).effect
        lease = effect.lease_until_ms if effect else None
        if effect and effect.status == PENDING and lease and lease > self._clock() * 1000:
            raise TransientError(
                "dynamodb: a legacy ledger item's effect is still leased by an earlier version"
            )

    def _migrate(self, item: Mapping[str, Any]) -> None:
        """Rewrite a legacy item in the compact layout, unchanged in meaning (same revision,
        effect, history; ``op=migrate``), if it is still the item read."""
        row = row_from_item(item)
        new = item_of(row)
        new[_OP] = {"S": _OP_MIGRATE}
        conditions = ["attribute_exists(#bucket)"]
        names = {"#bucket": _LEGACY_MARK}
        values: dict[str, Any] = {}
        for i, name in enumerate(_LEGACY_GUARDED):
            names[f"#g{i}"] = name
            if name in item:
                conditions.append(f"#g{i} = :g{i}")
                values[f":g{i}"] = item[name]
            else:
                conditions.append(f"attribute_not_exists(#g{i})")
        request: dict[str, Any] = {
            "ConditionExpression": " AND ".join(conditions),
            "ExpressionAttributeNames": names,
        }
        if values:
            request["ExpressionAttributeValues"] = values
        try:
            self._ddb.put_item(TableName=self._table, Item=new, **request)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise _transient(exc) from exc
            # another writer migrated or changed it first: the caller's request runs again
        except BotoCoreError as exc:
            raise _transient(exc) from exc

    def _update(
        self,
        state: RowState,
        meta: WriteMeta,
        *,
        observed: bool,
        condition: str,
        values: dict[str, Any],
        change_key: str | None,
        claim: Claim | None = None,
        same_change: bool = False,
    ) -> WriteResult:
        now = self._clock()
        now_ms = int(now * 1000)
        sets: dict[str, Any] = {
            _STATE: {"S": _STATES[PRESENT if state.present else DELETED]},
            _OP: {"S": OP_SEQ if same_change else OP_APPLY},
            _UPDATED: {"N": str(now_ms)},
        }
        removes: list[str] = []
        tokens: list[str] = []  # fencing tokens set to the new revision
        appends: list[str] = []  # every-change queues the change joins
        raw_key = _raw_key_av(meta.raw_key, meta.key)
        if raw_key is not None:
            sets[_RAW_KEY] = raw_key
        else:
            removes.append(_RAW_KEY)
        if observed:
            sets[_OBSERVED] = {"BOOL": True}
        else:
            removes.append(_OBSERVED)
        chg: str | None = None
        if same_change:
            if claim is not None:
                raise ValueError("a same-change write claims no effect")
        else:
            chg = change_id(
                meta.bucket, meta.key, change_key, state.present, state.version_id, state.etag
            )
            sets[_CHG_ID] = {"S": chg}
            if meta.sequencer is not None:  # the applied change's own sequencer
                sets[_CHG_SEQ] = {"S": meta.raw_sequencer or meta.sequencer}
            else:
                removes.append(_CHG_SEQ)
            if claim is not None:
                condition = self._claiming(claim, condition, values, sets, removes, tokens, appends)
                if claim.queued:
                    queued = QueuedChange(
                        change_id=chg,
                        present=state.present,
                        sequencer=meta.raw_sequencer or meta.sequencer,
                        version_id=state.version_id if state.present else None,
                        etag=state.etag if state.present else None,
                        size=state.size if state.present else None,
                        source=meta.source,
                        event_name=meta.event_name,
                    )
                    values[":queued"] = {"L": [_queued_av(queued)]}
                    values[":noqueue"] = {"L": []}
            else:
                removes.extend((_FX, _FX_LEASE, _FX_TOKEN, _FX_DONE, _FX_QUEUE, _FX_HOLD))
        if meta.sequencer is not None:
            compact = _compact_seq(meta.sequencer)
            sets[_SEQ] = {"S": compact}
            raw = meta.raw_sequencer or meta.sequencer
            if raw != compact:
                sets[_RAW_SEQ] = {"S": raw}
            else:
                removes.append(_RAW_SEQ)
        for attr, text in ((_VERSION, state.version_id), (_ETAG, state.etag)):
            if state.present and text is not None:
                sets[attr] = {"S": text}
            else:
                removes.append(attr)
        if state.present and state.size is not None:
            sets[_SIZE] = {"N": str(state.size)}
        else:
            removes.append(_SIZE)
        if not state.present and self._ttl > 0:
            sets[TTL_ATTRIBUTE] = {"N": str(int(now) + self._ttl)}
        else:
            removes.append(TTL_ATTRIBUTE)
        for name, value in sets.items():
            values[":" + _ph(name)[1:]] = value
        values[":one"], values[":zero"] = {"N": "1"}, {"N": "0"}
        expr = "SET " + ", ".join(f"{_ph(name)} = :{_ph(name)[1:]}" for name in sets)
        expr += f", #{_REV} = if_not_exists(#{_REV}, :zero) + :one"
        for token in tokens:
            expr += f", {_ph(token)} = if_not_exists(#{_REV}, :zero) + :one"
        for queue in appends:
            expr += f", {_ph(queue)} = list_append(if_not_exists({_ph(queue)}, :noqueue), :queued)"
        # Decision history: the last HISTORY_SLOTS applied decisions, newest in h0, shifted in
        # the same request (operands read the item as it was before this update).
        values[":decision"] = _decision_av(
            Decision(
                seq=meta.raw_sequencer or meta.sequencer or "-",
                event=meta.event_name,
                reason=meta.reason,
                source=meta.source,
                at=now_ms,
                state=PRESENT if state.present else DELETED,
            )
        )
        values[":nodecision"] = {"NULL": True}
        expr += ", " + _push_slot(_HISTORY, ":decision", ":nodecision")
        if removes:
            expr += " REMOVE " + ", ".join(_ph(name) for name in removes)
        used = expr + " " + condition
        names = {
            _ph(n): n
            for n in (
                *sets,
                *removes,
                *tokens,
                *appends,
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
        request: dict[str, Any] = {
            "UpdateExpression": expr,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
        if tokens:
            # the whole row: the queues and any held change of the claimed processors (reads
            # cost no write capacity)
            request["ReturnValues"] = "ALL_NEW"
        result = self._call(
            meta.bucket, meta.key, request, token_attribute=tokens[0] if tokens else None
        )
        if result.applied:
            return WriteResult(
                applied=True,
                token=result.token,
                change_id=chg,
                queues=result.queues,
                holds=result.holds,
            )
        return result

    @staticmethod
    def _claiming(
        claim: Claim,
        condition: str,
        values: dict[str, Any],
        sets: dict[str, Any],
        removes: list[str],
        tokens: list[str],
        appends: list[str],
    ) -> str:
        """The effect part of a write applying a change (CONTRACT C11): every configured
        processor's live lease refuses it; the processors the change concerns are claimed
        (pending, this write's token, the lease; an every-change one's queue gets the change,
        up to :data:`~s3ingest_fn.core.row.MAX_QUEUED`); the other ``latest`` ones lose their
        older, unfinished effect (its ``done`` change id stays). Returns the condition."""
        values[":now"] = {"N": str(claim.now_ms)}
        clauses = [f"({condition})"]
        for processor in claim.configured:
            fx, fx_token, fx_lease, _, fx_queue = effect_attributes(processor)
            lease = _ph(fx_lease)
            clauses.append(f"(attribute_not_exists({lease}) OR {lease} < :now)")
            if processor in claim.processors:
                sets[fx] = {"S": _FX_CODES[PENDING]}
                sets[fx_lease] = {"N": str(claim.lease_until_ms)}
                tokens.append(fx_token)
                if processor in claim.queued:
                    appends.append(fx_queue)
                    values[":maxq"] = {"N": str(MAX_QUEUED)}
                    queue = _ph(fx_queue)
                    clauses.append(f"(attribute_not_exists({queue}) OR size({queue}) < :maxq)")
            else:
                if processor in claim.latest:  # its older change's effect (held too) is dropped
                    removes.extend((fx, fx_token, fx_lease, hold_attribute(processor)))
                continue
            if processor not in claim.queued:
                removes.append(hold_attribute(processor))  # latest: the newer change wins
        return " AND ".join(clauses)


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


def _transient(exc: Exception) -> TransientError:
    """Every DynamoDB failure but a failed condition is retried; SQS redrive bounds the retries."""
    if isinstance(exc, ClientError):
        return TransientError(f"dynamodb: {exc.response.get('Error', {}).get('Code', 'unknown')}")
    return TransientError(f"dynamodb: {exc.__class__.__name__}")


#: What a reconciliation reads of a row (both layouts): key, state, version, ETag, update time,
#: effect status and lease.
_DIFF_ATTRIBUTES = (
    PARTITION_KEY,
    _STATE,
    _VERSION,
    _ETAG,
    _UPDATED,
    _FX,
    _FX_LEASE,
    _FX_HOLD,
    _LEGACY_MARK,
    "key",
    "state",
    "version_id",
    "etag",
    "updated_at",
    "fx",
    "fx_lease",
)


#: Items a Scan page evaluates at most. A compact item is about 120-200 bytes, so the 1 MB page
#: limit alone would return 5,000-8,000 rows per page; the reconciliation holds a few pages per
#: segment in memory, and this keeps them as small as the rows of the legacy layout filled.
SCAN_PAGE_ROWS = 3_500


def held_rows(
    client: DynamoDBClient,
    table: str,
    processors: Sequence[str],
    *,
    prefix: str = "",
    limit: int = 100,
    after: Mapping[str, Any] | None = None,
) -> tuple[list[LedgerRow], dict[str, Any] | None]:
    """Rows with a held effect of any of ``processors`` whose partition key starts with
    ``prefix`` (``"<bucket>/<key prefix>"``; empty: every bucket): one Scan page after another
    until ``limit`` rows are found or the table ends (a Scan filters after reading, so it reads
    the whole table to find none).

    Returns
    -------
    (rows, after)
        The rows, and the key to pass as ``after`` for the next page (None: no more).

    Raises
    ------
    TransientError
        On throttling or a service error.
    """
    names = {_ph(effect_attributes(p)[0]): effect_attributes(p)[0] for p in processors}
    if not names:
        return [], None
    held = " OR ".join(f"{n} = :held" for n in names)
    kwargs: dict[str, Any] = {
        "TableName": table,
        "FilterExpression": held,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": {":held": {"S": _FX_CODES[HELD]}},
    }
    if prefix:
        kwargs["FilterExpression"] = f"begins_with(#pk, :prefix) AND ({held})"
        kwargs["ExpressionAttributeNames"]["#pk"] = PARTITION_KEY
        kwargs["ExpressionAttributeValues"][":prefix"] = {"S": prefix}
    if after:
        kwargs["ExclusiveStartKey"] = dict(after)
    rows: list[LedgerRow] = []
    while True:
        try:
            page = client.scan(**kwargs)
        except (ClientError, BotoCoreError) as exc:
            raise _transient(exc) from exc
        rows.extend(row_from_item(item) for item in page.get("Items", []))
        last = page.get("LastEvaluatedKey")
        if last is None:
            return rows, None
        if len(rows) >= limit:
            return rows, dict(last)
        kwargs["ExclusiveStartKey"] = last


class DynamoLedgerScanner:
    """One bucket's ledger rows by parallel Scan (the
    :class:`~s3ingest_fn.core.ports.LedgerScanner` port): pages of typed rows, one Scan
    request each, filtered to the bucket by the partition key's prefix.

    Parameters
    ----------
    client : DynamoDBClient
    table_name : str
    processors : sequence of str
        The stack's processors besides the default one: their effect status and lease are
        read too, and each row's ``effect`` sums them up
        (:func:`~s3ingest_fn.core.row.summary_effect`).
    """

    def __init__(
        self, client: DynamoDBClient, table_name: str, processors: Sequence[str] = ()
    ) -> None:
        self._ddb = client
        self._table = table_name
        named = [p for p in processors if p != DEFAULT_PROCESSOR]
        self._named = bool(named)
        # the default processor's state is read unless only named processors are configured
        # (state a processor no longer configured left behind is nobody's to re-run)
        base = (
            _DIFF_ATTRIBUTES
            if not named or DEFAULT_PROCESSOR in processors
            else tuple(
                a for a in _DIFF_ATTRIBUTES if a not in (_FX, _FX_LEASE, _FX_HOLD, "fx", "fx_lease")
            )
        )
        # each processor's status, lease and (when held) held change: held effects are counted
        # (reconciliation's held_effects and held_oldest_seconds), never repaired
        self._attributes = base + tuple(
            a for p in named for a in (*effect_attributes(p)[0:3:2], hold_attribute(p))
        )

    def pages(self, bucket: str, segment: int, total: int) -> Iterator[list[LedgerRow]]:
        """The pages of one segment of ``total``.

        Raises
        ------
        TransientError
            When a Scan request fails (the caller reports the run failed).
        """
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "TotalSegments": total,
            "Segment": segment,
            "Limit": SCAN_PAGE_ROWS,
            "ProjectionExpression": ", ".join(_ph(a) for a in self._attributes),
            "FilterExpression": f"begins_with(#{PARTITION_KEY}, :prefix)",
            "ExpressionAttributeNames": {_ph(a): a for a in self._attributes},
            "ExpressionAttributeValues": {":prefix": {"S": f"{bucket}/"}},
        }
        while True:
            try:
                page = self._ddb.scan(**kwargs)
            except (ClientError, BotoCoreError) as exc:
                raise TransientError(f"dynamodb scan: {exc}") from exc
            last = page.get("LastEvaluatedKey")
            named = self._named
            rows = [_scanned_row(item, bucket, named) for item in page.get("Items", [])]
            # the parsed response (a few dicts per item) is garbage once converted: drop it
            # before the consumer takes the rows, not while this generator waits for it
            del page
            yield rows
            if last is None:
                return
            kwargs["ExclusiveStartKey"] = last

    def all_rows(self) -> Iterator[LedgerRow]:
        """Every row of the table, every bucket, read strongly consistent (the local runtime's
        oracles)."""
        kwargs: dict[str, Any] = {"TableName": self._table, "ConsistentRead": True}
        while True:
            page = self._ddb.scan(**kwargs)
            for item in page.get("Items", []):
                if not item[PARTITION_KEY]["S"].startswith(COUNTER_PREFIX):
                    yield row_from_item(item)
            if "LastEvaluatedKey" not in page:
                return
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
