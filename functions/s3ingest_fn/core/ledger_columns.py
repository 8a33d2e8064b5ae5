"""One Scan page of a bucket's ledger as columns: what the columnar reconciliation
(:mod:`s3ingest_fn.services.reconcile_columnar`) compares in bulk, and the way back to a
:class:`~s3ingest_fn.core.row.LedgerRow` for the few rows that differ.

Plain Python lists (one per field, position ``i`` is the page's ``i``-th item), so that neither
the adapter that fills them nor this module needs pyarrow.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from s3ingest_fn.core.row import LedgerRow

#: Builds the row of a plain item from its fields, in :attr:`LedgerColumns.FIELDS`' order.
RowOf = Callable[..., LedgerRow]


@dataclass
class LedgerColumns:
    """A page's fields, column by column.

    Attributes
    ----------
    keys : list of str
        Object keys (the bucket's prefix removed from the partition key).
    present : list of bool
    seq : list of str or None
        The stored sequencers as stored (not padded).
    version, etag : list of str or None
    updated : list of int
        Epoch ms of the row's last write (0 when absent).
    change : list of str or None
        The row's change id.
    status : list of str or None
        The default processor's effect status code as stored (``done_code`` is ``done``'s).
    lease : list of int or None
        The effect's lease, epoch ms.
    done : list of str or None
        The change id whose effect last completed.
    fx_version : list of int or None
        The processor version that completed the last ``done`` effect.
    special : dict
        Position -> row, built in full, of the items a column cannot carry (the legacy layout,
        several processors' effects, a held effect): always compared row by row.
    row_of : callable
        ``row_of(bucket, *fields)`` of a plain item (:attr:`FIELDS`).
    done_code : str
    """

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

    bucket: str
    keys: list[str]
    present: list[bool]
    seq: list[str | None]
    version: list[str | None]
    etag: list[str | None]
    updated: list[int]
    change: list[str | None]
    status: list[str | None]
    lease: list[int | None]
    done: list[str | None]
    fx_version: list[int | None]
    row_of: RowOf
    done_code: str
    special: dict[int, LedgerRow] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.keys)

    def row(self, i: int) -> LedgerRow:
        """The ``i``-th item's row, as the per-key scan builds it."""
        found = self.special.get(i)
        if found is not None:
            return found
        return self.row_of(self.bucket, *(getattr(self, name)[i] for name in self.FIELDS))
