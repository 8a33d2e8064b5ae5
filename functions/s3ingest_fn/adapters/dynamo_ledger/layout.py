"""The ledger item's layout: its attribute names, their one-character codes and the stream filter.

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
            ``claim``, ``release``, ``commit`` (effects), ``done`` (an effect committed done:
            with ``historyTable`` the change stream publishes it, :data:`EFFECT_STREAM_FILTER`),
            ``migrate`` (a legacy item rewritten). The legacy layout's name, kept: the deployed
            stream filter names it
ci    S     id of the applied change (:func:`s3ingest_fn.core.effects.change_id`)
cq    S     that change's own sequencer as received; absent for an observation
fe    S     effect of the applied change (only with a processor): ``p`` pending, ``d`` done,
            ``s`` superseded (CONTRACT C11); with a hold policy also ``h`` held, ``x``
            rejected, ``k`` skipped
ft    N     fencing token of the effect's claim: the row's ``rv`` when claimed plus the claim's
            epoch second << 20 (:func:`s3ingest_fn.core.row.fencing_token`; an older
            release wrote ``rv`` alone, always smaller)
fl    N     epoch ms until which the claiming worker may run; removed on commit
fd    S     the change id whose effect last completed
fq    L     ``every-change`` processors: the applied changes whose effects wait, oldest first,
            each ``[change id, "p"|"d", sequencer as received or NULL, version or NULL, ETag or
            NULL, size or NULL, source, event name]``; removed when the last one is done
fh    L     the held change of the effect and its review (:mod:`s3ingest_fn.core.hold`): ``[change
            id, reason, held at (epoch ms), "h"|"a" (held, approved), actor or NULL, decided
            at or NULL]``; removed by the next commit
fv    N     the processor's version that completed the last ``done`` effect; absent: 1 (the
            default, and every effect done before processors had versions)
fc    L     the effect the write set ``op`` to ``done`` for: ``[processor, version, change id or
            NULL (the row's ``ci``), done at (epoch ms) or NULL]``; set by that commit, removed
            by the next write of a change or a sequencer (the row's largest item stays as it was)
fe:N  ...   the same seven (``fe:N``, ``ft:N``, ``fl:N``, ``fd:N``, ``fq:N``, ``fh:N``,
            ``fv:N``) for the processor named ``N`` of several; the unsuffixed ones belong to
            the ``default`` processor (the single ``processor`` setting), as before there were
            several
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
``chg_*``, history maps, ...) are read as they are
(:func:`~s3ingest_fn.adapters.dynamo_ledger.codec.row_from_item`) and rewritten in the
compact layout by the first write they refuse
(:mod:`~s3ingest_fn.adapters.dynamo_ledger.operations`).

Names with a leading underscore are the package's own: its modules share them, nothing
outside the package uses them.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote_plus

from s3ingest_fn.core.row import (
    APPROVED,
    DEFAULT_PROCESSOR,
    DELETED,
    DONE,
    HELD,
    HISTORY_SLOTS,
    MAX_TRAIL,
    OP_APPLY,
    OP_APPROVE,
    OP_DONE,
    OP_HOLD,
    OP_REJECT,
    PENDING,
    PRESENT,
    REJECTED,
    SKIPPED,
    SUPERSEDED,
)

#: The table's partition key and TTL attribute: the deployed table's key schema
#: (``infra/s3ingest_cdk/constructs/ledger_table.py``); never renamed (a new key is a new table).
PARTITION_KEY = "pk"
TTL_ATTRIBUTE = "expires_at"

# The compact layout's attribute names (see the module docstring).
_RAW_KEY, _STATE, _SEQ, _RAW_SEQ, _OBSERVED = "rk", "st", "sq", "rq", "ob"
_VERSION, _ETAG, _SIZE, _REV, _OP = "vi", "et", "sz", "rv", "op"
_CHG_ID, _CHG_SEQ, _UPDATED = "ci", "cq", "ut"
_FX, _FX_TOKEN, _FX_LEASE, _FX_DONE, _FX_QUEUE = "fe", "ft", "fl", "fd", "fq"
_FX_HOLD, _FX_VERSION, _FX_COMMIT = "fh", "fv", "fc"
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
    _FX_VERSION,
    _FX_COMMIT,
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

#: The relay's second filter with ``historyTable``: effects committed ``done`` (``op`` ``done``,
#: written only by an effect's commit, an UpdateItem of an existing row). The stack adds it only
#: then, so a stack without the history table invokes the relay for applied changes and
#: reviews alone, as before.
EFFECT_STREAM_FILTER: dict[str, Any] = {
    "eventName": ["MODIFY"],
    "dynamodb": {"NewImage": {_OP: {"S": [OP_DONE]}}},
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


def version_attribute(processor: str) -> str:
    """The attribute of the version that completed ``processor``'s last ``done`` effect (the
    module docstring's ``fv``)."""
    return _FX_VERSION if processor == DEFAULT_PROCESSOR else f"{_FX_VERSION}:{processor}"


def _ph(name: str) -> str:
    """An expression placeholder for an attribute name (``:`` and ``-`` are not allowed in one;
    processor names hold no ``_``, so the mapping is one to one)."""
    return "#" + name.replace(":", "_").replace("-", "_")


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
