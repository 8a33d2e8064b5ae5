"""The DynamoDB ledger adapter: one item per (bucket, decoded key), and the only code that knows
how a row is stored.

* :mod:`~s3ingest_fn.adapters.dynamo_ledger.layout`: the item layout (documented there), its
  attribute names and one-character codes, the change stream's filter.
* :mod:`~s3ingest_fn.adapters.dynamo_ledger.codec`: rows from items of either layout, items
  from rows, the stream images, DynamoDB's item-size rule.
* :mod:`~s3ingest_fn.adapters.dynamo_ledger.updates`: the UpdateItem requests, built without
  I/O.
* :mod:`~s3ingest_fn.adapters.dynamo_ledger.operations`: :class:`DynamoLedger`, the
  :class:`~s3ingest_fn.core.ports.Ledger` port over one table (and the legacy migration).
* :mod:`~s3ingest_fn.adapters.dynamo_ledger.scan`: :class:`DynamoLedgerScanner` (the
  reconciliation's parallel Scan) and :func:`held_rows`.

The names below are the adapter's face: import them from here. The scan's are imported on
first use (the ingest function's cold start never scans: ``bench/bundle_cold_start.py``).
"""

from typing import TYPE_CHECKING, Any

from s3ingest_fn.adapters.dynamo_ledger.codec import (
    DoneEffect,
    done_effect,
    is_applied_change,
    is_effect_done,
    is_review,
    item_of,
    item_size,
    row_from_item,
    write_units,
)
from s3ingest_fn.adapters.dynamo_ledger.layout import (
    ATTRIBUTES,
    COUNTER_PREFIX,
    EFFECT_STREAM_FILTER,
    LEGACY_ATTRIBUTES,
    PARTITION_KEY,
    SHARED_WORDS,
    STREAM_FILTER,
    TTL_ATTRIBUTE,
    effect_attributes,
    event_key,
    hold_attribute,
    row_pk,
    version_attribute,
)
from s3ingest_fn.adapters.dynamo_ledger.operations import DynamoLedger

if TYPE_CHECKING:  # read through __getattr__ below
    from s3ingest_fn.adapters.dynamo_ledger.scan import (
        SCAN_PAGE_ROWS,
        DynamoLedgerScanner,
        DynamoLedgerSegments,
        held_rows,
    )

__all__ = [
    "ATTRIBUTES",
    "COUNTER_PREFIX",
    "EFFECT_STREAM_FILTER",
    "LEGACY_ATTRIBUTES",
    "PARTITION_KEY",
    "SCAN_PAGE_ROWS",
    "SHARED_WORDS",
    "STREAM_FILTER",
    "TTL_ATTRIBUTE",
    "DoneEffect",
    "DynamoLedger",
    "DynamoLedgerScanner",
    "DynamoLedgerSegments",
    "done_effect",
    "effect_attributes",
    "event_key",
    "held_rows",
    "hold_attribute",
    "is_applied_change",
    "is_effect_done",
    "is_review",
    "item_of",
    "item_size",
    "row_from_item",
    "row_pk",
    "version_attribute",
    "write_units",
]

#: The names of :mod:`~s3ingest_fn.adapters.dynamo_ledger.scan` read through this package.
_SCAN_NAMES = frozenset(
    {"SCAN_PAGE_ROWS", "DynamoLedgerScanner", "DynamoLedgerSegments", "held_rows"}
)


def __getattr__(name: str) -> Any:
    """The scan's names, imported on first use (PEP 562)."""
    if name in _SCAN_NAMES:
        from s3ingest_fn.adapters.dynamo_ledger import scan

        return getattr(scan, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
