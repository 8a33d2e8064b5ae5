"""One Scan page of a bucket's ledger as columns: what the columnar reconciliation
(:mod:`s3ingest_fn.services.reconcile_columnar`) compares in bulk, and the way back to a
:class:`~s3ingest_fn.core.row.LedgerRow` for the few rows that differ.

The batch is a pyarrow ``RecordBatch`` of :data:`FIELDS` (built by the adapter,
:mod:`s3ingest_fn.adapters.dynamo_ledger.scan_arrow`); this module does not import pyarrow.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from s3ingest_fn.core.row import LedgerRow

#: The batch's columns, in order: the object key (the bucket's prefix removed), present (bool),
#: the stored sequencer as stored (trimmed, not padded), version id, ETag, update time (epoch
#: ms, 0 when absent), change id, the default processor's effect status code as stored, its
#: lease (epoch ms), the change its effect last completed, the version that completed it.
FIELDS = (
    "keys",
    "present",
    "seq",
    "version",
    "etag",
    "updated",
    "change",
    "status",
    "lease",
    "done",
    "fx_version",
)


@dataclass
class LedgerColumns:
    """A page's fields, column by column.

    Attributes
    ----------
    bucket : str
    batch : pyarrow.RecordBatch
        :data:`FIELDS`, one row per item of the page.
    row_of : callable
        ``row_of(bucket, *fields)``: the row of a plain item from its :data:`FIELDS` values.
    done_code : str
        The stored code of the ``done`` status.
    special : dict
        Position -> row, built in full, of the items the columns cannot carry (the legacy
        layout, several processors' effects, a held effect): always compared row by row.
    """

    bucket: str
    batch: Any
    row_of: Callable[..., LedgerRow]
    done_code: str
    special: dict[int, LedgerRow] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.batch.num_rows)

    def row(self, i: int) -> LedgerRow:
        """The ``i``-th item's row, as the per-key scan builds it."""
        found = self.special.get(i)
        if found is not None:
            return found
        return self.row_of(self.bucket, *(c[i].as_py() for c in self.batch.columns))
