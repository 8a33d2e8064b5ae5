"""Reading the ledger by Scan: a bucket's rows for a reconciliation (:class:`DynamoLedgerScanner`:
parallel segments, the items projected to what the diff reads and turned into rows on a fast
path), every row of the table (the local runtime's oracles), and the rows with a held effect
(:func:`held_rows`, ``s3ingest held``).

Per "Scan", Amazon DynamoDB Developer Guide
(https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Scan.html): a page holds at
most 1 MB, and a filter applies after the read.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from s3ingest_fn.adapters.dynamo_ledger.client import DynamoDBClient, _transient
from s3ingest_fn.adapters.dynamo_ledger.codec import (
    _hold_of,
    _legacy_row,
    _n,
    _plain,
    row_from_item,
)
from s3ingest_fn.adapters.dynamo_ledger.layout import (
    _CHG_ID,
    _ETAG,
    _FX,
    _FX_CODES,
    _FX_DONE,
    _FX_HOLD,
    _FX_LEASE,
    _FX_STATUS,
    _FX_VERSION,
    _LEGACY_MARK,
    _SEQ,
    _STATE,
    _UPDATED,
    _VERSION,
    COUNTER_PREFIX,
    PARTITION_KEY,
    _ph,
    effect_attributes,
    hold_attribute,
    version_attribute,
)
from s3ingest_fn.core.ledger_columns import LedgerColumns
from s3ingest_fn.core.model import TransientError
from s3ingest_fn.core.ports import SegmentPage
from s3ingest_fn.core.row import DEFAULT_PROCESSOR, HELD, Effect, LedgerRow, summary_effect
from s3ingest_fn.core.sequencer import WIDTH

#: What a reconciliation reads of a row (both layouts): key, state, version, ETag, sequencer
#: (a contradicted one is drift), update time, effect status and lease.
_DIFF_ATTRIBUTES = (
    PARTITION_KEY,
    _STATE,
    _VERSION,
    _ETAG,
    _SEQ,
    _UPDATED,
    _FX,
    _FX_LEASE,
    _FX_HOLD,
    _LEGACY_MARK,
    "key",
    "state",
    "version_id",
    "etag",
    "seq",
    "updated_at",
    "fx",
    "fx_lease",
)


def _s(av: Mapping[str, Any] | None) -> str | None:
    return None if av is None else str(av["S"])


def _scanned_row(item: Mapping[str, Any], bucket: str, named: bool = False) -> LedgerRow:
    """:func:`row_from_item` for an item of ``bucket`` projected to :data:`_DIFF_ATTRIBUTES`
    (the fast path of a reconciliation's Scan: a million rows go through it, so the row is
    built by one positional call, the fields in :class:`LedgerRow`'s order, and no bound
    method is allocated per row; ``test_ledger_layout`` checks it against
    :func:`row_from_item`). With several processors the row's ``effect`` is the
    :func:`~s3ingest_fn.core.row.summary_effect` of those not held (a held effect is no drift:
    the summary of the others decides the diff as before), and its ``named_effects`` are every
    processor's own effect (the default one's too, with its held change and version), by name,
    so :meth:`~s3ingest_fn.core.row.LedgerRow.effects` gives each processor's effect once (held
    ones counted, versions judged: :meth:`~s3ingest_fn.core.effects.EffectTarget.behind`)."""
    if _LEGACY_MARK in item:
        return _legacy_row({name: _plain(av) for name, av in item.items()})
    version, etag, updated = item.get(_VERSION), item.get(_ETAG), item.get(_UPDATED)
    seq = item.get(_SEQ)
    fx = item.get(_FX)
    effect = (
        None
        if fx is None
        else Effect(
            _FX_STATUS.get(fx["S"], fx["S"]),
            lease_until_ms=_n(item.get(_FX_LEASE)),
            hold=_hold_of(item.get(_FX_HOLD)) if fx["S"] == _FX_CODES[HELD] else None,
            done_change_id=_s(item.get(_FX_DONE)),
            version=_n(item.get(_FX_VERSION)) or 1,
        )
    )
    effects: dict[str, Effect] = {}
    if named and any(a.startswith(f"{_FX}:") for a in item):
        effects = {
            a[len(_FX) + 1 :]: Effect(
                _FX_STATUS.get(av["S"], av["S"]),
                lease_until_ms=_n(item.get(f"{_FX_LEASE}:{a[len(_FX) + 1 :]}")),
                hold=_hold_of(item.get(f"{_FX_HOLD}:{a[len(_FX) + 1 :]}"))
                if av["S"] == _FX_CODES[HELD]
                else None,
                done_change_id=_s(item.get(f"{_FX_DONE}:{a[len(_FX) + 1 :]}")),
                version=_n(item.get(f"{_FX_VERSION}:{a[len(_FX) + 1 :]}")) or 1,
            )
            for a, av in item.items()
            if a.startswith(f"{_FX}:")
        }
        if effect is not None:
            effects[DEFAULT_PROCESSOR] = effect
        held = {name for name, e in effects.items() if e.status == HELD}
        effect = summary_effect({n: e for n, e in effects.items() if n not in held})
    return _row(
        bucket,
        item[PARTITION_KEY]["S"][len(bucket) + 1 :],
        item[_STATE]["S"] == "p",
        None if seq is None else seq["S"],
        None if version is None else version["S"],
        None if etag is None else etag["S"],
        0 if updated is None else int(updated["N"]),
        _s(item.get(_CHG_ID)),
        effect,
        effects,
    )


def _row(
    bucket: str,
    key: str,
    present: bool,
    seq: str | None,
    version: str | None,
    etag: str | None,
    updated: int,
    change: str | None,
    effect: Effect | None,
    effects: dict[str, Effect],
) -> LedgerRow:
    """The row :func:`_scanned_row` and :func:`_columns_row` build (one positional call)."""
    return LedgerRow(
        bucket,
        key,
        present,
        "",  # raw_key
        None if seq is None else seq.ljust(WIDTH, "0"),  # seq, normalised
        None,  # raw_seq
        False,  # observed
        version,
        etag,
        None,  # size
        0,  # rev
        "",  # event_name
        "",  # reason
        "",  # source
        updated,
        None,  # expires_at
        (),  # history
        None,  # op
        change,  # change_id
        None,  # change_seq
        effect,
        effects,  # named_effects: every processor's own (several processors)
    )


def _columns_row(
    bucket: str,
    key: str,
    present: bool,
    seq: str | None,
    version: str | None,
    etag: str | None,
    updated: int,
    change: str | None,
    status: str | None,
    lease: int | None,
    done: str | None,
    fx_version: int | None,
) -> LedgerRow:
    """:func:`_scanned_row` of a plain item (no legacy layout, no named or held effect) from
    its :class:`~s3ingest_fn.core.ledger_columns.LedgerColumns` fields."""
    effect = (
        None
        if status is None
        else Effect(
            _FX_STATUS.get(status, status),
            lease_until_ms=lease,
            hold=None,
            done_change_id=done,
            version=fx_version or 1,
        )
    )
    return _row(bucket, key, present, seq, version, etag, updated, change, effect, {})


#: ``decode(body, bucket, named, row_of, scanned_row) -> (columns, LastEvaluatedKey)``.
Decode = Callable[..., tuple[LedgerColumns, Any]]

#: Set by :meth:`DynamoLedgerScanner.column_pages` around its Scan calls, in its thread: the
#: ``before-parse`` handler then keeps the raw body (:func:`_keep_raw_body`).
_RAW = threading.local()
_RAW_BODY = "s3ingestRawBody"


def _keep_raw_body(
    response_dict: dict[str, Any], customized_response_dict: dict[str, Any], **_: Any
) -> None:
    """botocore's ``before-parse`` event (emitted by its endpoint with the HTTP response's
    ``body``; ``customized_response_dict`` is merged into the parsed response): a successful
    Scan answer asked for raw keeps its body bytes and leaves the shape parser an empty
    document, so the page is read in bulk instead of by botocore's walk of every attribute
    value (errors are parsed as ever)."""
    if getattr(_RAW, "wanted", False) and response_dict.get("status_code") == 200:
        customized_response_dict[_RAW_BODY] = response_dict["body"]
        response_dict["body"] = b"{}"


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
    decode : callable, optional
        :func:`~s3ingest_fn.adapters.dynamo_ledger.scan_arrow.decode` where pyarrow is
        (:func:`s3ingest_fn.wiring.ledger_scanner` passes it): :meth:`column_pages` reads with it.
    """

    def __init__(
        self,
        client: DynamoDBClient,
        table_name: str,
        processors: Sequence[str] = (),
        decode: Decode | None = None,
    ) -> None:
        self._ddb = client
        self._table = table_name
        #: Reads a Scan body into columns (:meth:`column_pages`); None: rows only.
        self.decode = decode
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
        # each processor's status, lease, (when held) held change, version and done change,
        # and the row's change: held effects are counted (reconciliation's held_effects and
        # held_oldest_seconds), never repaired; rows behind a processor are counted
        # (effects_behind_by_processor)
        self._attributes = (
            base
            + (_CHG_ID,)
            + ((_FX_VERSION, _FX_DONE) if _FX in base else ())
            + tuple(
                a
                for p in named
                for a in (
                    *effect_attributes(p)[0:3:2],
                    effect_attributes(p)[3],
                    hold_attribute(p),
                    version_attribute(p),
                )
            )
        )

    def pages(self, bucket: str, segment: int, total: int) -> Iterator[list[LedgerRow]]:
        """The pages of one segment of ``total``.

        Raises
        ------
        TransientError
            When a Scan request fails (the caller reports the run failed).
        """
        kwargs = self._scan_kwargs(bucket, segment, total)
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

    def column_pages(self, bucket: str, segment: int, total: int) -> Iterator[LedgerColumns]:
        """:meth:`pages` as :class:`~s3ingest_fn.core.ledger_columns.LedgerColumns`, each
        page's raw body read by the scanner's ``decode``
        (:func:`~s3ingest_fn.adapters.dynamo_ledger.scan_arrow.decode`: the wire format is the
        parsed one, ``{"S": ...}``, numbers as strings; the projection holds no binary
        attribute).

        Raises
        ------
        TransientError
            When a Scan request fails.
        """
        decode = self.decode
        if decode is None:
            raise TypeError("this scanner reads no columns (it was given no decode)")
        events = getattr(getattr(self._ddb, "meta", None), "events", None)
        if events is not None:
            events.register(
                "before-parse.dynamodb.Scan", _keep_raw_body, unique_id="s3ingest-raw-scan"
            )
        kwargs = self._scan_kwargs(bucket, segment, total)
        while True:
            _RAW.wanted = True
            try:
                page: Mapping[str, Any] = self._ddb.scan(**kwargs)
            except (ClientError, BotoCoreError) as exc:
                raise TransientError(f"dynamodb scan: {exc}") from exc
            finally:
                _RAW.wanted = False
            raw = page.get(_RAW_BODY)
            if raw is None:  # not botocore's client (a test's fake): its parsed answer
                raw = json.dumps(page).encode()
            columns, last = decode(raw, bucket, self._named, _columns_row, _scanned_row)
            del page, raw
            yield columns
            if last is None:
                return
            kwargs["ExclusiveStartKey"] = last

    def _scan_kwargs(self, bucket: str, segment: int, total: int) -> dict[str, Any]:
        return {
            "TableName": self._table,
            "TotalSegments": total,
            "Segment": segment,
            "Limit": SCAN_PAGE_ROWS,
            "ProjectionExpression": ", ".join(_ph(a) for a in self._attributes),
            "FilterExpression": f"begins_with(#{PARTITION_KEY}, :prefix)",
            "ExpressionAttributeNames": {_ph(a): a for a in self._attributes},
            "ExpressionAttributeValues": {":prefix": {"S": f"{bucket}/"}},
        }

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


class DynamoLedgerSegments:
    """The ledger by parallel Scan segments, full rows, resumable from a cursor (the
    :class:`~s3ingest_fn.core.ports.LedgerSegments` port, the reprocess run's). A cursor is the
    last partition key read: the Scan's ``LastEvaluatedKey`` of a table keyed by ``pk`` alone.

    A Scan is billed by the size of the items read, whatever the projection ("Scan", Amazon
    DynamoDB Developer Guide), so full items cost no more than the effect attributes alone.
    """

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._ddb = client
        self._table = table_name

    def page(
        self, segment: int, total: int, cursor: str | None, *, prefix: str = "", limit: int = 500
    ) -> SegmentPage:
        """One Scan request of ``segment`` of ``total`` (``Limit`` ``limit`` items read before
        the filter), rows whose partition key starts with ``prefix``; the mass-delete breaker's
        counters are left out.

        Raises
        ------
        TransientError
            When the Scan request fails.
        """
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "TotalSegments": total,
            "Segment": segment,
            "Limit": limit,
        }
        if prefix:
            kwargs["FilterExpression"] = f"begins_with(#{PARTITION_KEY}, :prefix)"
            kwargs["ExpressionAttributeNames"] = {f"#{PARTITION_KEY}": PARTITION_KEY}
            kwargs["ExpressionAttributeValues"] = {":prefix": {"S": prefix}}
        if cursor is not None:
            kwargs["ExclusiveStartKey"] = {PARTITION_KEY: {"S": cursor}}
        try:
            page = self._ddb.scan(**kwargs)
        except (ClientError, BotoCoreError) as exc:
            raise _transient(exc) from exc
        items = [
            item
            for item in page.get("Items", [])
            if not item[PARTITION_KEY]["S"].startswith(COUNTER_PREFIX)
        ]
        last = page.get("LastEvaluatedKey")
        return SegmentPage(
            [row_from_item(item) for item in items],
            None if last is None else str(last[PARTITION_KEY]["S"]),
            tuple(str(item[PARTITION_KEY]["S"]) for item in items),
            int(page.get("ScannedCount", len(page.get("Items", [])))),
        )
