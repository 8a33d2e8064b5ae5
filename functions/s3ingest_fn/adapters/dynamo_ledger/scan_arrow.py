"""A reconciliation's Scan page read straight into columns by pyarrow's JSON reader: the raw
response body (``{"Items": [{"pk": {"S": ...}, ...}], "LastEvaluatedKey": ...}``) parsed
against the projection's schema, no Python object per item
(:class:`~s3ingest_fn.core.ledger_columns.LedgerColumns`). Imported only where pyarrow is (the
CLI's ``arrow`` extra); :meth:`DynamoLedgerScanner.column_pages` is its caller.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from s3ingest_fn.adapters.dynamo_ledger.layout import (
    _CHG_ID,
    _ETAG,
    _FX,
    _FX_CODES,
    _FX_DONE,
    _FX_HOLD,
    _FX_LEASE,
    _FX_VERSION,
    _LEGACY_MARK,
    _SEQ,
    _STATE,
    _UPDATED,
    _VERSION,
    PARTITION_KEY,
)
from s3ingest_fn.core.ledger_columns import FIELDS, LedgerColumns
from s3ingest_fn.core.row import DONE, HELD, LedgerRow


@functools.cache
def _options() -> Any:
    """The JSON reader's options: the items' attributes read (:data:`_READ`), typed; every
    other attribute ignored."""
    import pyarrow as pa
    import pyarrow.json as pajson

    s = pa.struct([("S", pa.string())])
    n = pa.struct([("N", pa.string())])
    read = [(name, n if name in (_UPDATED, _FX_LEASE, _FX_VERSION) else s) for name in _READ]
    schema = pa.schema(
        [
            ("Items", pa.list_(pa.struct(read))),
            ("LastEvaluatedKey", pa.struct([(PARTITION_KEY, s)])),
        ]
    )
    return pajson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")


#: The attributes read of an item; every other one is ignored by the reader.
_READ = (
    PARTITION_KEY,
    _STATE,
    _SEQ,
    _VERSION,
    _ETAG,
    _UPDATED,
    _CHG_ID,
    _FX,
    _FX_LEASE,
    _FX_DONE,
    _FX_VERSION,
    _LEGACY_MARK,
)
#: Items a column cannot carry, found in the raw bytes (a false match only costs a slow page):
#: a held effect's hold, another processor's effect.
_HOLD = re.compile(rb'"%s"\s*:' % _FX_HOLD.encode())
_NAMED = re.compile(rb'"%s:' % _FX.encode())


def decode(
    body: bytes, bucket: str, named: bool, row_of: Any, scanned_row: Any
) -> tuple[LedgerColumns, dict[str, Any] | None]:
    """One Scan answer's body as columns, and its ``LastEvaluatedKey``.

    Parameters
    ----------
    body : bytes
        The response body as DynamoDB sent it.
    bucket : str
    named : bool
        Whether other processors' effects are read.
    row_of, scanned_row : callable
        The adapter's row builders (of :data:`FIELDS` values; of a whole item).
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pajson

    read = pajson.ReadOptions(block_size=max(len(body) + 1, 1 << 16), use_threads=False)
    table = pajson.read_json(pa.BufferReader(body), read_options=read, parse_options=_options())
    last_col = table["LastEvaluatedKey"][0]
    last = (
        None
        if not last_col.is_valid
        else {PARTITION_KEY: {"S": last_col.as_py()[PARTITION_KEY]["S"]}}
    )
    items = pc.list_flatten(table["Items"]).combine_chunks()  # one JSON document: one row

    def value(attr: str) -> Any:
        return items.field(attr).field(0)

    cut = len(bucket) + 1
    status = value(_FX)
    batch = pa.RecordBatch.from_arrays(
        [
            pc.utf8_slice_codeunits(value(PARTITION_KEY), cut),
            pc.equal(value(_STATE), "p"),
            value(_SEQ),
            value(_VERSION),
            value(_ETAG),
            pc.fill_null(pc.cast(value(_UPDATED), pa.int64()), 0),
            value(_CHG_ID),
            status,
            pc.cast(value(_FX_LEASE), pa.int64()),
            value(_FX_DONE),
            pc.cast(value(_FX_VERSION), pa.int64()),
        ],
        names=list(FIELDS),
    )
    odd = pc.or_(
        pc.is_valid(items.field(_LEGACY_MARK)),
        pc.fill_null(pc.equal(status, _FX_CODES[HELD]), False),
    )
    special: dict[int, LedgerRow] = {}
    if _HOLD.search(body) or (named and _NAMED.search(body)) or pc.any(odd).as_py():
        whole = json.loads(body).get("Items", [])
        special = {
            i: scanned_row(item, bucket, named)
            for i, item in enumerate(whole)
            if _LEGACY_MARK in item
            or _FX_HOLD in item
            or (named and any(a.startswith(f"{_FX}:") for a in item))
            or (item.get(_FX) or {}).get("S") == _FX_CODES[HELD]
        }
    return LedgerColumns(bucket, batch, row_of, _FX_CODES[DONE], special), last
