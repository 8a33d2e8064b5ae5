"""The ``inventory`` reconciliation in columns (pyarrow): the report's keys and the ledger's rows
compared in bulk, per-row Python only for the rows that differ (CONTRACT C12).

The report's data files are read by pyarrow's CSV reader (ORC and Parquet by pyarrow, any file
it cannot carry exactly by :func:`~s3ingest_fn.services.inventory.read_rows`) into one table of
each key's latest state (:func:`truth_table`, the columns of
:class:`~s3ingest_fn.core.diff.Truth`). The ledger's Scan pages arrive as
:class:`~s3ingest_fn.core.ledger_columns.LedgerColumns` (record batches read from the raw
Scan bodies by pyarrow's JSON reader in the scan threads); :func:`diff_columns` takes them
:data:`CHUNK_ROWS` at a time, joins each chunk to the report on the key (the report in key
order, each row's key found by binary search: :func:`pyarrow.compute.search_sorted`), and
keeps a row when its state, version, ETag, times, sequencer and effect match trivially.
Every other row goes through :func:`~s3ingest_fn.core.diff.classify` (and the held effects'
count) as in the per-key pass, so what is found and repaired is the same
(``tests/unit/test_reconcile_columnar.py`` checks the two on random histories).

Memory, measured (``bench/reconcile_diff.py``, docs/reconciliation.md#scale: 269 MiB at
10^6 keys, about 130 bytes a key above 140 MiB): the report's table (88 bytes per key) and,
while it is put in key order, its sort order and one reordered column (the peak); one chunk of
the ledger (about 150 bytes per row) and the pages in flight; pyarrow imported with the
system allocator, the freed memory handed back as the pass goes (:func:`_allocator`,
:func:`_release`).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from s3ingest_fn import arrow_memory
from s3ingest_fn.core import sequencer
from s3ingest_fn.core.bounds import MAX_ETAG_CHARS, MAX_VERSION_ID_BYTES
from s3ingest_fn.core.diff import DiffStats, Drift, Truth, classify, classify_unrecorded
from s3ingest_fn.core.effects import EffectTarget
from s3ingest_fn.core.events import MAX_KEY_BYTES
from s3ingest_fn.core.ledger_columns import LedgerColumns
from s3ingest_fn.core.model import InventoryRow, TransientError
from s3ingest_fn.core.row import DEFAULT_PROCESSOR, LedgerRow
from s3ingest_fn.core.scope import BucketScope
from s3ingest_fn.services.inventory import InventoryError, Manifest, read_rows
from s3ingest_fn.services.reconcile_run import (
    Progress,
    ReconcileError,
    ReconcileReport,
    ReconcileRequest,
    RepairBatch,
)

if TYPE_CHECKING:
    from concurrent.futures import Executor

    import pyarrow as pa

    from s3ingest_fn.services.reconcile import Reconciler

#: Ledger rows joined to the report at once: a binary search per row, so the cost is per row,
#: not per chunk; a chunk holds about 150 bytes per row (1.2 MB) and its intermediate columns
#: (a padded sequencer, the report's values taken to it) a few times that.
CHUNK_ROWS = 8_192
#: The columns of :func:`truth_table`'s table.
TRUTH_FIELDS = ("key", "visible", "version_id", "etag", "last_modified_ms")
#: A stored sequencer of the layout S3 sends, at most :data:`~sequencer.MAX_EVENT_WIDTH`
#: significant digits: only its time can contradict it (compared with the ceiling in bulk).
_PLAIN_SEQ = rf"^00[0-9A-F]{{0,{sequencer.MAX_EVENT_WIDTH - 2}}}0*$"


class _Unusual(Exception):
    """A data file's value the bulk path does not carry exactly: the file is read row by row."""


# -- the report ---------------------------------------------------------------------------


def truth_table(
    manifest: Manifest,
    files: Iterable[bytes],
    *,
    prefix: str = "",
    scope: BucketScope | None = None,
    counted: Callable[[int], None] = lambda n: None,
) -> pa.Table:
    """Each key's current state (:data:`TRUTH_FIELDS`) of the report's data files, as
    :func:`~s3ingest_fn.core.diff.bucket_truth` reduces them: the latest version of each key
    under ``prefix`` in ``scope``, the newest when a report repeats a key (the later row on a
    tie). ``counted(n)``: ``n`` more rows read.

    Raises
    ------
    InventoryError, InvalidMessageError
        As :func:`~s3ingest_fn.services.inventory.read_rows`, for a file that is not valid.
    """
    _allocator()  # before pyarrow's first import
    import pyarrow.compute as pc

    parts = []
    for data in files:
        part, read = _file_table(manifest, data)
        counted(read)
        if prefix:
            part = part.filter(pc.starts_with(part["key"], prefix))
        parts.append(part)
        del part
    table = _by_key(parts)
    if scope is not None and (scope.prefixes or scope.suffixes):
        table = table.filter(_in_scope(table["key"], scope))
    return table


def _by_key(parts: list[pa.Table]) -> pa.Table:
    """The parts (emptied) as one table in key order (what :func:`diff_columns` searches), each
    key once (the newest when it repeats): the keys' sort order (8 bytes per key) and the keys
    in it compared with their neighbours, then the other columns reordered one at a time (never
    two copies of the report)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    table = pa.concat_tables(parts) if parts else _empty_versions()
    parts.clear()
    names = table.column_names
    columns = {name: table[name] for name in names}
    del table
    for name in names:  # one array each (a take of many chunks would concatenate them first)
        columns[name] = _one_array(columns[name])
        _release()
    order = pc.sort_indices(columns["key"])
    keys = columns["key"].take(order)
    if len(keys) and pc.any(pc.equal(keys.slice(0, len(keys) - 1), keys.slice(1))).as_py():
        del keys, order
        return _newest_per_key(pa.table(columns))
    columns["key"] = keys
    del keys
    for name in names[1:]:
        columns[name] = columns[name].take(order)
        _release()
    return pa.table(columns)


def _one_array(column: pa.ChunkedArray) -> pa.Array:
    """The column as one array: its chunk when it has one (``combine_chunks`` copies even
    that), else the chunks concatenated."""
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def _allocator() -> None:
    """pyarrow imported with the system allocator (:func:`s3ingest_fn.arrow_memory.prepare`)."""
    arrow_memory.prepare()


#: CSV blocks (1 MiB each) read between two :func:`_release` calls.
_RELEASE_BLOCKS = 8
_release = arrow_memory.release


def _empty_versions() -> pa.Table:
    return _python_table([])[0]


def _newest_per_key(table: pa.Table) -> pa.Table:
    import pyarrow as pa
    import pyarrow.compute as pc

    order = pa.table(
        {
            "key": table["key"],
            "ms": pc.fill_null(table["last_modified_ms"], 0),
            "at": pa.array(range(table.num_rows), pa.int64()),
        }
    )
    idx = pc.sort_indices(order, [("key", "ascending"), ("ms", "ascending"), ("at", "ascending")])
    ranked = table.take(idx)
    keys = ranked["key"].combine_chunks()
    last = pc.not_equal(keys.slice(0, len(keys) - 1), keys.slice(1))
    keep = pa.concat_arrays([last, pa.array([True])]) if len(keys) else pa.array([], pa.bool_())
    return ranked.filter(keep)


def _in_scope(keys: pa.ChunkedArray | pa.Array, scope: BucketScope) -> Any:
    """:meth:`BucketScope.contains` in bulk."""
    import pyarrow.compute as pc

    length = pc.utf8_length(keys)
    found = None
    for p in scope.prefixes or ("",):
        for s in scope.suffixes or ("",):
            one = pc.and_(
                pc.and_(pc.starts_with(keys, p), pc.ends_with(keys, s)),
                pc.greater_equal(length, len(p) + len(s)),
            )
            found = one if found is None else pc.or_(found, one)
    return found


def _file_table(manifest: Manifest, data: bytes) -> tuple[pa.Table, int]:
    """One data file's latest versions (key, delete_marker, version_id, etag,
    last_modified_ms) and the number of rows read."""
    import pyarrow as pa

    if manifest.file_format.upper() == "CSV":
        try:
            return _csv_table(manifest.columns, data)
        except (_Unusual, pa.ArrowException, OSError):
            pass  # read row by row below: the same rows, or the reader's exact error
    return _python_table(read_rows(manifest, data))


def _latest(table: pa.Table) -> pa.Table:
    """The rows of the keys' latest versions as :data:`TRUTH_FIELDS` (a delete marker's
    version and ETag are None), block by block: no copy of the whole report at the end."""
    import pyarrow as pa
    import pyarrow.compute as pc

    table = table.filter(table["latest"])
    dead = table["delete_marker"]
    none = pa.scalar(None, pa.string())
    return pa.table(
        {
            "key": table["key"],
            "visible": pc.invert(dead),
            "version_id": pc.if_else(dead, none, table["version_id"]),
            "etag": pc.if_else(dead, none, table["etag"]),
            "last_modified_ms": table["last_modified_ms"],
        }
    )


def _python_table(rows: Iterable[InventoryRow]) -> tuple[pa.Table, int]:
    import pyarrow as pa

    cols: dict[str, list[Any]] = {
        n: [] for n in ("key", "latest", "delete_marker", "version_id", "etag", "ms")
    }
    for r in rows:
        cols["key"].append(r.key)
        cols["latest"].append(r.is_latest)
        cols["delete_marker"].append(r.is_delete_marker)
        cols["version_id"].append(r.version_id)
        cols["etag"].append(r.etag)
        cols["ms"].append(r.last_modified_ms)
    table = _versions(
        pa.array(cols["key"], pa.string()),
        pa.array(cols["latest"], pa.bool_()),
        pa.array(cols["delete_marker"], pa.bool_()),
        pa.array(cols["version_id"], pa.string()),
        pa.array(cols["etag"], pa.string()),
        pa.array(cols["ms"], pa.int64()),
    )
    return _latest(table), len(cols["key"])


def _versions(*columns: Any) -> pa.Table:
    import pyarrow as pa

    names = ("key", "latest", "delete_marker", "version_id", "etag", "last_modified_ms")
    return pa.table(dict(zip(names, columns, strict=True)))


def _csv_table(columns: tuple[str, ...], data: bytes) -> tuple[pa.Table, int]:
    """A gzip CSV data file in bulk, block by block (each block's latest versions kept, so the
    file is never held as text or as all its columns), each value as the row reader would read
    it (:func:`~s3ingest_fn.services.inventory.read_rows`); :class:`_Unusual` for a value it
    would refuse or that this path cannot carry exactly."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    if "Bucket" not in columns or "Key" not in columns:
        raise _Unusual("schema")
    wanted = [
        c
        for c in ("Key", "VersionId", "IsLatest", "IsDeleteMarker", "ETag", "LastModifiedDate")
        if c in columns
    ]
    reader = pacsv.open_csv(
        pa.input_stream(pa.py_buffer(data), compression="gzip"),
        read_options=pacsv.ReadOptions(
            column_names=list(columns), block_size=1 << 20, use_threads=False
        ),
        convert_options=pacsv.ConvertOptions(
            column_types={c: pa.string() for c in columns},
            include_columns=wanted,
            strings_can_be_null=False,
        ),
    )
    blocks, read = [], 0
    for batch in reader:
        read += batch.num_rows
        blocks.append(_latest(_csv_block(columns, pa.Table.from_batches([batch]))))
        if len(blocks) % _RELEASE_BLOCKS == 0:
            _release()
    return (pa.concat_tables(blocks) if blocks else _empty_versions()), read


def _csv_block(columns: tuple[str, ...], table: pa.Table) -> pa.Table:
    """One block of :func:`_csv_table`, its values read as the row reader reads them."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = table.num_rows
    none = pa.nulls(n, pa.string())
    keys = _decode_keys(table["Key"])
    versions = none
    if "VersionId" in columns:
        v = table["VersionId"]
        if n and pc.max(pc.binary_length(v)).as_py() > MAX_VERSION_ID_BYTES:
            raise _Unusual("version")
        versions = pc.if_else(pc.is_in(v, pa.array(["", "null"])), none, v)
    etags = none
    if "ETag" in columns:
        bare = pc.utf8_trim(table["ETag"], '"')
        long = pc.greater(pc.utf8_length(table["ETag"]), MAX_ETAG_CHARS + 2)
        shape = pc.match_substring_regex(bare, r"^[0-9A-Fa-f-]*$")
        if n and (pc.any(long).as_py() or not pc.all(shape).as_py()):
            raise _Unusual("etag")
        if n and pc.max(pc.utf8_length(bare)).as_py() > MAX_ETAG_CHARS:
            raise _Unusual("etag")
        etags = pc.if_else(pc.equal(bare, ""), none, bare)
    latest = pc.equal(table["IsLatest"], "true") if "IsLatest" in columns else pa.repeat(True, n)
    dead = (
        pc.equal(table["IsDeleteMarker"], "true")
        if "IsDeleteMarker" in columns
        else pa.repeat(False, n)
    )
    ms: Any = pa.nulls(n, pa.int64())
    if "LastModifiedDate" in columns:
        text = table["LastModifiedDate"]
        stamped = pc.ends_with(text, "Z")
        if n and not pc.all(pc.or_(stamped, pc.equal(text, ""))).as_py():
            raise _Unusual("time")  # a time without its zone: the row reader's rules
        when = pc.if_else(stamped, text, none)
        ms = pc.cast(pc.cast(when, pa.timestamp("ms", "UTC")), pa.int64())
    return _versions(keys, latest, dead, versions, etags, ms)


def _decode_keys(raw: pa.ChunkedArray) -> Any:
    """:func:`~s3ingest_fn.core.events.decode_form_key` in bulk: ``+`` is a space, each
    ``%XY`` the byte ``XY`` (``%25`` last, so a decoded ``%`` starts nothing)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    raw = raw.combine_chunks()
    if len(raw) and pc.min(pc.utf8_length(raw)).as_py() == 0:
        raise _Unusual("empty key")
    spaced = pc.replace_substring(raw, "+", " ")
    pct = pc.match_substring(raw, "%")
    if pc.any(pct).as_py():
        quoted = raw.filter(pct)
        if not pc.all(
            pc.equal(
                pc.count_substring(quoted, "%"),
                pc.count_substring_regex(quoted, "%[0-9A-Fa-f]{2}"),
            )
        ).as_py():
            raise _Unusual("percent")
        after = pc.list_flatten(pc.list_slice(pc.split_pattern(quoted, "%"), 1))
        codes = sorted(
            pc.unique(pc.utf8_slice_codeunits(after, 0, 2)).to_pylist(),
            key=lambda c: c == "25",
        )
        decoded = spaced.cast(pa.binary())
        for code in codes:
            decoded = pc.replace_substring(decoded, f"%{code}", bytes([int(code, 16)]))
        try:
            spaced = decoded.cast(pa.string())
        except pa.ArrowInvalid as exc:
            raise _Unusual("utf-8") from exc
    if len(raw) and pc.max(pc.binary_length(spaced)).as_py() > MAX_KEY_BYTES:
        raise _Unusual("long key")
    return spaced


# -- the ledger ---------------------------------------------------------------------------


class ColumnTap(Protocol):
    """What :func:`diff_columns` shows of its pass to whoever builds on it (the attestation's
    trees, :class:`~s3ingest_fn.services.attestation_pass.TreeTap`)."""

    def table(self, truth: pa.Table) -> None:
        """The report's table, before any row."""

    def bulk_agrees(self, table: pa.Table) -> Any:
        """Of a chunk's rows, those whose record the tap can take from the report's row alone
        when they are kept in bulk (a boolean array)."""

    def agreed_at(self, positions: Iterable[int], rows: int) -> None:
        """The report positions of such rows, and the chunk's rows under the prefix in
        scope."""

    def row_at(self, position: int | None, row: LedgerRow, seen: Truth | None) -> None:
        """Every other row of the chunk under the prefix in scope, at its key's report
        position (None: none)."""


def _equal(a: Any, b: Any) -> Any:
    """``a == b`` as Python compares optional strings (None equals None)."""
    import pyarrow.compute as pc

    return pc.fill_null(pc.or_kleene(pc.equal(a, b), pc.and_(pc.is_null(a), pc.is_null(b))), False)


def diff_columns(
    truth: pa.Table,
    pages: Iterable[LedgerColumns],
    *,
    taken_at_ms: int,
    compare_versions: bool,
    compare_etags: bool,
    stats: DiffStats,
    prefix: str = "",
    scope: BucketScope | None = None,
    out_of_scope: Callable[[str], None] = lambda key: None,
    each_row: Callable[[LedgerRow], None] = lambda row: None,
    target_version: int | None = None,
    chunk_rows: int = CHUNK_ROWS,
    tap: ColumnTap | None = None,
) -> Iterator[Drift]:
    """:func:`~s3ingest_fn.core.diff.diff` of the report's table against the ledger's pages,
    in bulk: the same drift, the same counts.

    Parameters
    ----------
    truth : pyarrow.Table
        From :func:`truth_table`.
    pages : iterable of LedgerColumns
    taken_at_ms, compare_versions, compare_etags, stats, prefix
        As :func:`~s3ingest_fn.core.diff.diff`.
    scope : BucketScope, optional
        Rows out of it are passed to ``out_of_scope(key)`` and left out.
    each_row : callable
        Called with each row compared row by row (the reconciler counts its held effects and
        the processors it is behind): a row kept in bulk has none (no effect, or one ``done``
        at ``target_version`` or above for its change).
    target_version : int or None
        The highest configured processor's version; None: no processor is configured (an
        absent effect is then nobody's to run).
    tap : ColumnTap, optional
        Shown the report, then each row (:class:`ColumnTap`).
    """
    _allocator()
    if tap is not None:
        tap.table(truth)
    state = _Seen(_one_array(truth["key"]), [])
    chunk: list[LedgerColumns] = []
    rows = 0
    args = (taken_at_ms, compare_versions, compare_etags, stats, prefix, scope)
    for page in pages:
        chunk.append(page)
        rows += len(page)
        if rows >= chunk_rows:
            yield from _chunk(
                truth, chunk, state, *args, out_of_scope, each_row, target_version, tap
            )
            chunk, rows = [], 0
            _release()
    if chunk:
        yield from _chunk(truth, chunk, state, *args, out_of_scope, each_row, target_version, tap)
    del chunk
    yield from _unrecorded(truth, state.seen, taken_at_ms, stats)


@dataclass
class _Seen:
    """The report's keys, in order (one array), and the positions of those a ledger row
    matched so far (an integer array per chunk)."""

    keys: Any
    seen: list[Any]


def _truth_at(truth: pa.Table, i: int) -> Truth:

    return Truth(*(truth.column(name)[i].as_py() for name in TRUTH_FIELDS[1:]))


def _chunk(
    truth: pa.Table,
    pages: list[LedgerColumns],
    state: _Seen,
    taken_at_ms: int,
    compare_versions: bool,
    compare_etags: bool,
    stats: DiffStats,
    prefix: str,
    scope: BucketScope | None,
    out_of_scope: Callable[[str], None],
    each_row: Callable[[LedgerRow], None],
    target_version: int | None,
    tap: ColumnTap | None = None,
) -> Iterator[Drift]:
    import pyarrow as pa
    import pyarrow.compute as pc

    table = pa.Table.from_batches([p.batch for p in pages])  # the pages' buffers, not copied
    starts = [0]
    for p in pages[:-1]:
        starts.append(starts[-1] + len(p))
    n = table.num_rows
    keys = table["keys"].combine_chunks()
    wanted = pc.starts_with(keys, prefix) if prefix else pa.repeat(True, n)
    if scope is not None and (scope.prefixes or scope.suffixes):
        inside = _in_scope(keys, scope)
        for i in pc.indices_nonzero(pc.and_not(wanted, inside)).to_pylist():
            out_of_scope(keys[i].as_py())
        wanted = pc.and_(wanted, inside)
    stats.ledger_rows += pc.sum(pc.cast(wanted, pa.int64())).as_py() or 0
    # the join: each row's key searched in the report's (in key order: a binary search per
    # row, no hash, nothing the size of the report)
    match = _positions(state.keys, keys)
    state.seen.append(pc.drop_null(match).cast(pa.uint32()))
    visible = pc.fill_null(pc.take(truth["visible"], match), False)
    lm = pc.fill_null(pc.take(truth["last_modified_ms"], match), 0)
    present = table["present"]
    same = pc.and_(visible, present)
    if compare_versions:
        same = pc.and_(same, _equal(table["version"], pc.take(truth["version_id"], match)))
    if compare_etags:
        same = pc.and_(same, _equal(table["etag"], pc.take(truth["etag"], match)))
    same = pc.or_(same, pc.and_(pc.invert(visible), pc.invert(present)))
    settled = pc.less_equal(pc.max_element_wise(table["updated"], lm), taken_at_ms)
    seq = table["seq"]
    padded = pc.utf8_rpad(seq, sequencer.WIDTH, "0")  # as the row holds it (stored trimmed)
    ceiling = sequencer.ceiling(taken_at_ms / 1000)
    seq_ok = pc.fill_null(
        pc.or_kleene(
            pc.is_null(seq),
            pc.and_kleene(
                pc.match_substring_regex(padded, _PLAIN_SEQ),
                pc.less_equal(padded, ceiling),
            ),
        ),
        False,
    )
    status = table["status"]
    done = pc.fill_null(pc.equal(status, pages[0].done_code), False)
    if target_version is None:
        effect_ok = pc.or_(pc.is_null(status), done)
    else:
        current = pc.fill_null(
            pc.or_kleene(
                pc.or_kleene(pc.is_null(table["done"]), pc.is_null(table["change"])),
                pc.equal(table["done"], table["change"]),
            ),
            False,
        )
        versioned = pc.greater_equal(pc.fill_null(table["fx_version"], 1), target_version)
        effect_ok = pc.or_(
            pc.and_(pc.is_null(status), pc.invert(present)),
            pc.and_(done, pc.and_(versioned, current)),
        )
    plain = pc.and_(pc.and_(same, settled), pc.and_(seq_ok, effect_ok))
    look = set(pc.indices_nonzero(pc.and_not(wanted, plain)).to_pylist())
    look.update(
        start + i
        for p, start in zip(pages, starts, strict=True)
        for i in p.special
        if wanted[start + i].as_py()
    )
    taps: set[int] = set()
    if tap is not None:
        kept = pc.and_(wanted, plain)
        agrees = pc.and_(kept, tap.bulk_agrees(table))
        tap.agreed_at(
            pc.drop_null(match.filter(agrees)).to_pylist(),
            pc.sum(pc.cast(wanted, pa.int64())).as_py() or 0,
        )
        taps = set(pc.indices_nonzero(pc.and_not(kept, agrees)).to_pylist()) - look
    for i in sorted(taps):  # kept in bulk, but the tap needs the row
        j = bisect.bisect_right(starts, i) - 1
        t = match[i].as_py()
        assert tap is not None
        tap.row_at(t, pages[j].row(i - starts[j]), _truth_at(truth, t) if t is not None else None)
    for i in sorted(look):
        j = bisect.bisect_right(starts, i) - 1
        row = pages[j].row(i - starts[j])
        each_row(row)
        t = match[i].as_py()
        seen = _truth_at(truth, t) if t is not None else None
        if tap is not None:
            tap.row_at(t, row, seen)
        found = classify(
            row,
            seen,
            taken_at_ms=taken_at_ms,
            compare_versions=compare_versions,
            compare_etags=compare_etags,
            stats=stats,
        )
        if found is not None:
            yield found


def _positions(ordered: pa.Array, keys: Any) -> Any:
    """Each of ``keys``' position in ``ordered`` (sorted, distinct), null where it is not."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not len(ordered):
        return pa.nulls(len(keys), pa.uint64())
    at = pc.search_sorted(ordered, keys)
    inside = pc.less(at, len(ordered))
    at = pc.if_else(inside, at, pa.scalar(0, pa.uint64()))
    hit = pc.and_(inside, pc.equal(ordered.take(at), keys))
    return pc.if_else(hit, at, pa.scalar(None, pa.uint64()))


def _unrecorded(
    truth: pa.Table, seen: list[Any], taken_at_ms: int, stats: DiffStats
) -> Iterator[Drift]:
    """The report's visible keys no ledger row matched, row by row
    (:func:`~s3ingest_fn.core.diff.classify_unrecorded`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not truth.num_rows:
        return
    matched = pa.chunked_array(seen, pa.uint32()).combine_chunks()
    del seen[:]
    matched = matched.take(pc.sort_indices(matched)).cast(pa.uint64())
    visible = _one_array(truth["visible"])
    for start in range(0, len(visible), CHUNK_ROWS):  # a chunk's positions at a time
        shown = pc.indices_nonzero(visible.slice(start, CHUNK_ROWS))
        at = pc.add(shown, pa.scalar(start, pa.uint64()))
        left = at.filter(pc.is_null(_positions(matched, at))).to_pylist()
        yield from _unrecorded_rows(truth, left, taken_at_ms, stats)


def _unrecorded_rows(
    truth: pa.Table, left: list[int], taken_at_ms: int, stats: DiffStats
) -> Iterator[Drift]:
    """:func:`_unrecorded` of the report's rows at positions ``left``."""
    for i in left:
        found = classify_unrecorded(
            truth["key"][i].as_py(),
            _truth_at(truth, i),
            taken_at_ms=taken_at_ms,
            stats=stats,
        )
        if found is not None:
            yield found


# -- the run ------------------------------------------------------------------------------


def run_columnar(
    reconciler: Reconciler,
    request: ReconcileRequest,
    report: ReconcileReport,
    tick: Progress,
    pool: Executor,
    manifest: Manifest,
    compare_versions: bool,
    compare_etags: bool,
    tap: Any = None,
) -> None:
    """:meth:`Reconciler._run_inventory` in columns: the same report, repairs and errors
    (``tap``: :class:`ColumnTap`, also told the repairs queued).

    Raises
    ------
    ReconcileError
        When a data file or the ledger cannot be read, a HEAD or the queue fails.
    """
    reading = [""]

    def files() -> Iterator[bytes]:
        for data_key in manifest.files:
            reading[0] = data_key
            yield reconciler.get_inventory_object(data_key)

    def counted(n: int) -> None:
        report.bucket_rows += n
        tick("bucket", n)

    try:
        truth = truth_table(
            manifest, files(), prefix=request.prefix, scope=reconciler.scope, counted=counted
        )
    except TransientError as exc:
        raise ReconcileError(f"reading the bucket's state failed: {exc}") from exc
    except InventoryError as exc:
        raise ReconcileError(f"s3://{reconciler.inventory_bucket}/{reading[0]}: {exc}") from exc
    report.bucket_keys = truth.num_rows
    stats = DiffStats(snapshot_ms=report.taken_at_ms)
    margin = reconciler.margin(request)
    report.margin_s = margin / 1000
    batch = RepairBatch(reconciler, report, tick, request.dry_run, pool)
    if tap is not None:
        batch.queued = tap.queued
    now_ms = int(reconciler.now() * 1000)
    scanner: Any = reconciler.scanner
    targets = reconciler.targets

    def pages_of(segment: int, total: int) -> Iterator[LedgerColumns]:
        return scanner.column_pages(reconciler.bucket, segment, total)

    def each_row(row: LedgerRow) -> None:
        report.count_held(row, now_ms, targets)

    for d in diff_columns(
        truth,
        reconciler.pump_pages(pages_of, report, tick),
        taken_at_ms=report.taken_at_ms - margin,
        compare_versions=compare_versions,
        compare_etags=compare_etags,
        stats=stats,
        prefix=request.prefix,
        scope=reconciler.scope,
        out_of_scope=report.out_of_scope_row,
        each_row=each_row,
        target_version=_target_version(targets),
        tap=tap,
    ):
        report.count(d)
        batch.add(d)
        if batch.full:
            batch.flush()
    batch.flush()
    report.ledger_rows, report.skipped_recent = stats.ledger_rows, stats.skipped_recent
    report.skipped_after_snapshot = stats.skipped_after_snapshot


def _target_version(targets: tuple[EffectTarget, ...]) -> int | None:
    """What :func:`diff_columns` keeps in bulk of the rows' effects: None without processors,
    the highest version of the default processor's, and with a named one no present row (a row
    without the named processor's effect is behind it: row by row)."""
    if not targets:
        return None
    if any(t.name != DEFAULT_PROCESSOR for t in targets):
        return 2**62
    return max(t.version for t in targets)
