"""The attestation's trees from the reconciliation's own pass (issue 38 item 4): no second read
of the ledger or the bucket.

The ``inventory`` reconciliation reads the report once (each key's state in memory, in key
order in the columnar pass) and streams the ledger's Scan once, in the Scan's order, not in
key order. A :class:`TreeTap` given to :meth:`~s3ingest_fn.services.reconcile.Reconciler.run`
sees every ledger row of the pass with its key's state and keeps, per key, what the trees
need beyond what the diff already holds: a mark that the ledger's leaf equals the bucket's
(the common case: one byte a key in the columnar pass, the key's state moved out of the
diff's map in the per-key pass), or the row itself where they differ (the drift: rare). Once
the pass is over it feeds :class:`~s3ingest_fn.services.attestation.TreeWriter` in key order:
the same leaves, roots and leaves file as :func:`~s3ingest_fn.services.attestation.attest`
over the same snapshot (``tests/unit/test_attestation_pass.py``).

After the run's repairs (the scheduled attestation), :meth:`TreeTap.recheck` takes the rows
of the keys the run queued a repair for, read again one by one (GetItem: what the repairs
wrote, never the whole ledger), in place of those the pass saw; such a row changed after the
snapshot's cutoff is skipped, as any row changed after it.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from s3ingest_fn.core.attestation import iso_ms
from s3ingest_fn.core.diff import Drift, Truth
from s3ingest_fn.core.effects import EffectTarget
from s3ingest_fn.core.row import DEFAULT_PROCESSOR, LedgerRow
from s3ingest_fn.services.attestation import (
    Attestation,
    TreeWriter,
    bucket_leaf,
    ledger_leaf,
)

if TYPE_CHECKING:
    import pyarrow as pa

#: The columnar pass's marks per report position.
_NONE, _AGREED, _OTHER = 0, 1, 2
#: Report rows turned into Python values at once when the trees are fed.
_SLICE = 8_192


class TreeTap:
    """What one ``inventory`` reconciliation pass keeps for both trees.

    Parameters
    ----------
    bucket : str
    targets : sequence of EffectTarget
        The processors attested, sorted by name.
    clock : callable
        Epoch seconds (the ledger's read time in the document).

    The run fills :attr:`fields`, :attr:`cutoff_ms`, :attr:`taken_ms`, :attr:`margin_ms` and
    :attr:`inputs` (the report's identity; the Scan's requests and rows at the end).
    """

    def __init__(
        self,
        bucket: str,
        targets: Sequence[EffectTarget],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.bucket, self.targets, self._clock = bucket, tuple(targets), clock
        self.fields = {"version_id", "etag"}
        self.cutoff_ms = self.taken_ms = self.margin_ms = 0
        self.inputs: dict[str, Any] = {}
        self.rows = 0
        #: Keys the run queued a repair for.
        self.repaired: list[str] = []
        # the per-key pass: states moved out of the diff's map, and its rest
        self._agreed: dict[str, Truth] = {}
        self._other: dict[str, tuple[Truth | None, LedgerRow | None]] = {}
        self._rest: Mapping[str, Truth] = {}
        # the columnar pass: the report's table, a mark per position, the rows that differ
        self._table: pa.Table | None = None
        self._marks = bytearray()
        self._at: dict[int, LedgerRow | None] = {}

    # -- fed by the pass ------------------------------------------------------------------

    def snapshot(self, *, taken_ms: int, margin_ms: int, versions: bool, etags: bool) -> None:
        """The snapshot's time, the run's margin (ms), and which fields the report carries."""
        self.taken_ms, self.margin_ms, self.cutoff_ms = taken_ms, margin_ms, taken_ms - margin_ms
        self.fields = {n for n, has in (("version_id", versions), ("etag", etags)) if has}

    def agree(self, row: LedgerRow, seen: Truth | None) -> bool:
        """Whether the row's leaf is its key's bucket leaf, both not skipped (then the key's
        state alone gives both leaves)."""
        if max(row.updated_at, (seen.last_modified_ms or 0) if seen else 0) > self.cutoff_ms:
            return False
        b, t, f = self.bucket, self.targets, self.fields
        return bucket_leaf(b, row.key, seen, t, f) == ledger_leaf(b, row.key, row, t, f)

    def row(self, row: LedgerRow, seen: Truth | None) -> None:
        """One ledger row of the per-key pass and its key's state (None: the report has no
        such key), taken out of the diff's map."""
        self.rows += 1
        if self.agree(row, seen):
            if seen is not None and seen.visible:
                self._agreed[row.key] = seen
        elif row.present or (seen is not None and seen.visible):
            self._other[row.key] = (seen, row)

    def rest(self, truth: Mapping[str, Truth]) -> None:
        """The per-key pass's map once every row took its key out: keys without a row."""
        self._rest = truth

    def table(self, truth: pa.Table) -> None:
        """The columnar pass's report (:func:`~s3ingest_fn.services.reconcile_columnar.
        truth_table`: in key order)."""
        self._table = truth
        self._marks = bytearray(truth.num_rows)

    def agreed_at(self, positions: Iterable[int], rows: int) -> None:
        """Report positions whose ledger row the columnar pass kept in bulk with a leaf equal
        to the bucket's (:func:`bulk_agrees`), out of ``rows`` rows of the chunk."""
        marks = self._marks
        for p in positions:
            marks[p] = _AGREED
        self.rows += rows

    def row_at(self, position: int | None, row: LedgerRow, seen: Truth | None) -> None:
        """One ledger row of the columnar pass compared row by row, at its key's report
        position (None: not in the report); not counted (:meth:`agreed_at` counts)."""
        if position is not None:
            agrees = self.agree(row, seen)
            self._marks[position] = _AGREED if agrees else _OTHER
            if not agrees:
                self._at[position] = row
            else:
                self._at.pop(position, None)
        elif row.present:
            self._other[row.key] = (None, row)

    def queued(self, drifts: Sequence[Drift]) -> None:
        """The differences the run queued a repair for."""
        self.repaired.extend(d.key for d in drifts)

    def ledger_read(self, table: str, requests: int) -> None:
        """The Scan of ``table`` is over: its requests and the rows under the prefix in
        scope."""
        self.inputs["ledger"] = {
            "kind": "ledger-scan",
            "table": table,
            "read_at": iso_ms(int(self._clock() * 1000)),
            "requests": requests,
            "rows": self.rows,
        }

    # -- after the repairs ----------------------------------------------------------------

    def recheck(self, rows: Mapping[str, LedgerRow | None]) -> None:
        """The rows of ``rows``' keys as read after the repairs (None: no row), in place of
        the pass's."""
        if self._table is None:
            for key, row in rows.items():
                seen: Truth | None = self._agreed.pop(key, None)
                if seen is None:
                    seen = self._other.pop(key, (self._rest.get(key), None))[0]
                self._other[key] = (seen, row)
            return
        keys = self._keys()
        for key, row in rows.items():
            i = _find(keys, key)
            if i is None:
                self._other[key] = (None, row)
            else:
                self._marks[i] = _OTHER
                self._at[i] = row

    # -- the trees ------------------------------------------------------------------------

    def attestation(self, *, stack: str, scope: dict[str, Any], prefix: str) -> Attestation:
        """The attestation of the pass (the document without its location:
        :func:`~s3ingest_fn.services.attestation_store.store`)."""
        tree = TreeWriter(self.bucket, self.targets, self.fields, self.cutoff_ms)
        if self._table is None:
            self._per_key(tree)
        else:
            self._columnar(tree)
        return tree.attestation(
            stack=stack,
            scope=scope,
            prefix=prefix,
            source="inventory",
            taken_ms=self.taken_ms,
            margin_ms=self.margin_ms,
            inputs=self.inputs,
        )

    def states(self) -> Iterator[tuple[str, Truth | None, LedgerRow | None, bool]]:
        """The per-key pass's keys in key order, each with its state, its row (None: none, or
        not kept: the leaves agree) and whether both leaves are the bucket's; a key neither
        visible nor present may come (:func:`named` tells)."""
        agreed, other, rest = self._agreed, self._other, self._rest
        names = [*agreed, *other, *(k for k, t in rest.items() if t.visible and k not in other)]
        # str order is code point order, which is UTF-8 bytes' (key_order); the builder checks
        for key in sorted(names):
            seen = agreed.get(key)
            if seen is not None:
                yield key, seen, None, True
            elif key in other:
                yield key, *other[key], False
            else:
                yield key, rest[key], None, False

    def _per_key(self, tree: TreeWriter) -> None:
        for key, seen, row, agreed in self.states():
            if agreed:
                leaf = bucket_leaf(self.bucket, key, seen, self.targets, self.fields)
                tree.leaves(key, leaf, leaf)
            elif named(seen, row):
                tree.key(key, seen, row)

    def _columnar(self, tree: TreeWriter) -> None:
        table = self._table
        assert table is not None
        alone = sorted(self._other)  # ledger rows whose key the report has not
        next_alone = 0
        marks, at = self._marks, self._at
        b, t, f = self.bucket, self.targets, self.fields
        for start in range(0, table.num_rows, _SLICE):
            part = table.slice(start, _SLICE)
            columns = [part[n].to_pylist() for n in _FIELDS]
            for j, (key, visible, version, etag, ms) in enumerate(zip(*columns, strict=True)):
                while next_alone < len(alone) and alone[next_alone] < key:
                    self._alone(tree, alone[next_alone])
                    next_alone += 1
                seen = Truth(visible, version, etag, ms)
                mark = marks[start + j]
                if mark == _AGREED:
                    if visible:
                        leaf = bucket_leaf(b, key, seen, t, f)
                        tree.leaves(key, leaf, leaf)
                elif mark == _OTHER:
                    row = at[start + j]
                    if visible or (row is not None and row.present):
                        tree.key(key, seen, row)
                elif visible:
                    tree.key(key, seen, None)
        for key in alone[next_alone:]:
            self._alone(tree, key)

    def _alone(self, tree: TreeWriter, key: str) -> None:
        seen, row = self._other[key]
        if named(seen, row):
            tree.key(key, seen, row)

    def bulk_agrees(self, table: pa.Table) -> Any:
        """:func:`bulk_agrees` for this tap's processors."""
        return bulk_agrees(table, self.targets)

    def _keys(self) -> Any:
        assert self._table is not None
        return self._table["key"]


def named(seen: Truth | None, row: LedgerRow | None) -> bool:
    """Whether a key is one of the snapshot's (visible in the bucket or present in the
    ledger)."""
    return (seen is not None and seen.visible) or (row is not None and row.present)


_FIELDS = ("key", "visible", "version_id", "etag", "last_modified_ms")


def _find(keys: Any, key: str) -> int | None:
    """``key``'s position in the report's keys (in order), or None."""
    i = bisect.bisect_left(_Keys(keys), key)
    return i if i < len(keys) and keys[i].as_py() == key else None


class _Keys:
    """The report's key column as a sequence :mod:`bisect` searches (one value at a time)."""

    def __init__(self, keys: Any) -> None:
        self.keys = keys

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, i: int) -> str:
        return str(self.keys[i].as_py())


def bulk_agrees(table: pa.Table, targets: Sequence[EffectTarget]) -> Any:
    """Of the ledger rows the columnar pass keeps in bulk (their state, version, ETag, times
    and effect match the report's), those whose leaf is the bucket's for ``targets`` (the
    processors attested): every one without a processor; with the default processor alone,
    a present row's effect done at exactly its version (the bulk path keeps one done at a
    higher version too); none else (a named processor's rows are never kept in bulk)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = table.num_rows
    if not targets:
        return pa.repeat(True, n) if n else pa.array([], pa.bool_())
    absent = pc.invert(table["present"])
    if len(targets) == 1 and targets[0].name == DEFAULT_PROCESSOR:
        version = pc.equal(pc.fill_null(table["fx_version"], 1), targets[0].version)
        return pc.or_(absent, version)
    return absent
