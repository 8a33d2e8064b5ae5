"""Maintenance of the history table (:mod:`s3ingest_fn.services.history`): closed days
compacted, old snapshots expired, the files only they reached deleted.

Each writer commit adds a snapshot and one small data file per day it touches; without this the
table's metadata file (which lists every snapshot, and every commit rewrites) and the number of
files a query opens grow without bound. :func:`maintain` does, in order:

1. **Compaction.** A *closed* day (an ``event_date`` partition before today, UTC) with more than
   ``min_files`` data files is read and written back as one file, sorted by ``event_time``, in
   one ``overwrite`` commit filtered to that day. The commit asserts that the branch still
   points at the snapshot the day was read from (``AssertRefSnapshotId``), so a writer's append
   landing in between makes it fail (``CommitFailedException``): the day is left as it was,
   reported in ``days_refused`` and compacted by the next run. It is never retried on the same
   rows: a retry would overwrite the appended rows with the rows read before them. The table
   keeps ``commit.retry.num-retries`` at 0 (:data:`~s3ingest_fn.services.history.TABLE_PROPERTIES`);
   :func:`maintain` refuses a table where it is not. Today is never compacted: every batch
   appends to it.
2. **Expiry** (``table.maintenance.expire_snapshots()``). Walking back from the current snapshot,
   the newest ``keep`` snapshots are kept, then every one taken within ``retention``; the first
   older one and all its ancestors are removed from the metadata. Removing snapshots only
   (no requirement on the branch), it is applied to the catalog's newest metadata, so a
   concurrent append survives it; a refused expiry is recomputed on the reloaded table.
3. **Deletion of the files only expired snapshots reached.** pyiceberg's expiry removes snapshots
   from the metadata and deletes no file. This module deletes the expired snapshots' manifest
   lists, their manifests that the oldest kept snapshot does not list, and the data files an
   expired snapshot removed (a compaction's small files). It relies on the history being one
   line (``main`` only, every snapshot an ancestor of the current one), as the writer makes it;
   otherwise it deletes nothing and says why (``cleanup_skipped``).

Not deleted (no snapshot ever referenced them, so nothing here finds them): the data file of a
refused commit (pyiceberg deletes the refused commit's manifests, not its data files: a refused
compaction leaves its one file) and the files of a run cut off between its expiry commit and
the deletion. Removing those needs a listing of ``history/`` against the table's references,
which pyiceberg 0.12 does not have (Athena's ``VACUUM`` does it). Old metadata files: the table
property ``write.metadata.delete-after-commit.enabled`` (set here, :data:`MAINTENANCE_PROPERTIES`)
has each commit delete the metadata file that falls off the table's log of the last
``write.metadata.previous-versions-max`` (100).

https://py.iceberg.apache.org/api/#expire-snapshots ;
https://iceberg.apache.org/docs/latest/maintenance/
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from s3ingest_fn.services.history import TABLE_PROPERTIES

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile
    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot

__all__ = [
    "COMPACT_MIN_FILES",
    "KEEP_SNAPSHOTS",
    "MAINTENANCE_PROPERTIES",
    "RETENTION_HOURS",
    "Maintained",
    "compact",
    "day_files",
    "expire",
    "maintain",
    "run",
]

logger = logging.getLogger(__name__)

#: Snapshots kept however old (the table's last commits, for time travel on a quiet table).
KEEP_SNAPSHOTS = 10
#: Snapshots younger than this are kept (hours; the setting ``historySnapshotRetentionHours``).
RETENTION_HOURS = 6
#: A closed day with more data files than this is compacted into one.
COMPACT_MIN_FILES = 10
#: Seconds after which no further day is started (the function's timeout is 300 s); the days
#: left are counted in ``days_left`` and compacted by the next run.
BUDGET_SECONDS = 180.0
#: Set on the table: each commit deletes the metadata file that falls off its log of 100.
MAINTENANCE_PROPERTIES = {
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "100",
}
#: The summary property of a compaction's snapshot.
COMPACTION_PROPERTY = "s3ingest.maintenance"
_EPOCH = date(1970, 1, 1)


@dataclass
class Maintained:
    """What :func:`maintain` did. ``files_*``/``bytes_*``: the current snapshot's data files
    before and after; ``days_compacted``/``days_refused`` (a concurrent commit refused the
    rewrite)/``days_left`` (out of time): ISO days; ``snapshots_*``: in the metadata;
    ``deleted_files``/``deleted_bytes``: data files, manifests and manifest lists deleted
    (bytes of data files and manifests); ``cleanup_skipped``: why nothing was deleted."""

    files_before: int = 0
    files_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    rows: int = 0
    days_compacted: list[str] = field(default_factory=list)
    days_refused: list[str] = field(default_factory=list)
    days_left: list[str] = field(default_factory=list)
    snapshots_before: int = 0
    snapshots_expired: int = 0
    snapshots_after: int = 0
    deleted_files: int = 0
    deleted_bytes: int = 0
    delete_errors: int = 0
    cleanup_skipped: str | None = None
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The figures as JSON-ready values."""
        return asdict(self)


def _day(value: Any) -> date:
    """A partition's ``event_date`` (days since 1970-01-01 as Iceberg stores it, or a date)."""
    return value if isinstance(value, date) else _EPOCH + timedelta(days=int(value))


def day_files(table: Table) -> dict[date, list[DataFile]]:
    """The current snapshot's data files by ``event_date`` partition; a table another writer
    made without that partition first has all its files under ``date.max``, a day never
    closed, so never compacted."""
    days: dict[date, list[DataFile]] = defaultdict(list)
    if table.current_snapshot() is None:
        return days
    fields = table.spec().fields
    by_day = bool(fields) and table.schema().find_column_name(fields[0].source_id) == "event_date"
    for task in table.scan().plan_files():
        days[_day(task.file.partition[0]) if by_day else date.max].append(task.file)
    return days


def compact(table: Table, day: date) -> bool:
    """Rewrite ``day``'s rows into one file (sorted by ``event_time``), in one commit that a
    concurrent commit refuses. Returns False when refused (the day is as it was).

    Raises whatever else the catalog or the storage raises (nothing is committed then)."""
    from pyiceberg.exceptions import CommitFailedException
    from pyiceberg.expressions import EqualTo, Reference
    from pyiceberg.expressions.literals import literal

    only_day = EqualTo(term=Reference("event_date"), value=literal(day.isoformat()))
    rows = table.scan(row_filter=only_day).to_arrow().sort_by("event_time")
    try:
        table.overwrite(
            rows, overwrite_filter=only_day, snapshot_properties={COMPACTION_PROPERTY: "compact"}
        )
    except CommitFailedException:
        return False
    return True


def _chain(table: Table) -> list[Snapshot]:
    """The current snapshot and its ancestors, newest first."""
    from pyiceberg.table.snapshots import ancestors_of

    return list(ancestors_of(table.current_snapshot(), table.metadata))


def _to_expire(table: Table, now: datetime, retention: timedelta, keep: int) -> list[Snapshot]:
    """The ancestors past the newest ``keep`` and past the first one older than ``retention``."""
    cutoff = (now - retention).timestamp() * 1000
    chain = _chain(table)
    for n, snapshot in enumerate(chain):
        if n >= keep and snapshot.timestamp_ms < cutoff:
            return chain[n:]
    return []


def expire(
    table: Table, now: datetime, retention: timedelta, keep: int, *, attempts: int = 3
) -> tuple[list[Snapshot], Snapshot | None]:
    """Remove the snapshots :func:`_to_expire` picks (recomputed on the reloaded table when a
    concurrent commit refused the removal, ``attempts`` in all). Returns the removed snapshots
    and the oldest kept one of the line (None when nothing was removed)."""
    from pyiceberg.exceptions import CommitFailedException

    for attempt in range(attempts):
        doomed = _to_expire(table, now, retention, keep)
        if not doomed:
            return [], None
        chain = _chain(table)
        oldest_kept = chain[len(chain) - len(doomed) - 1]
        try:
            table.maintenance.expire_snapshots().by_ids([s.snapshot_id for s in doomed]).commit()
        except CommitFailedException:
            if attempt == attempts - 1:
                raise
            table.refresh()
            continue
        return doomed, oldest_kept
    raise AssertionError("unreachable")  # pragma: no cover


def _line_only(table: Table) -> str | None:
    """Why the files of expired snapshots cannot be told apart here (None: they can)."""
    if set(table.metadata.refs) - {"main"}:
        return f"refs other than main: {sorted(set(table.metadata.refs) - {'main'})}"
    off_line = {s.snapshot_id for s in table.metadata.snapshots} - {
        s.snapshot_id for s in _chain(table)
    }
    if off_line:
        return f"{len(off_line)} snapshot(s) not ancestors of the current one"
    return None


def _unreferenced(
    table: Table, doomed: list[Snapshot], oldest_kept: Snapshot
) -> list[tuple[str, int]]:
    """``(path, bytes)`` of the files only the ``doomed`` snapshots reached: their manifest
    lists (bytes 0: unknown), the manifests they list and ``oldest_kept`` does not, and the
    data files each of them removed. Every kept snapshot descends from all of them."""
    from pyiceberg.manifest import ManifestEntryStatus

    io = table.io
    kept = {m.manifest_path for m in oldest_kept.manifests(io)}
    files: dict[str, int] = {}
    for snapshot in doomed:
        files[snapshot.manifest_list] = 0
        for manifest in snapshot.manifests(io):
            if manifest.manifest_path in kept:
                continue
            files[manifest.manifest_path] = manifest.manifest_length
            if manifest.added_snapshot_id != snapshot.snapshot_id or not (
                manifest.deleted_files_count
            ):
                continue
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=False):
                if (
                    entry.status == ManifestEntryStatus.DELETED
                    and entry.snapshot_id == snapshot.snapshot_id
                ):
                    files[entry.data_file.file_path] = entry.data_file.file_size_in_bytes
    return list(files.items())


def _properties_set(table: Table) -> None:
    """Refuse a table whose commits pyiceberg retries; set :data:`MAINTENANCE_PROPERTIES`."""
    retries = "commit.retry.num-retries"
    if table.properties.get(retries) != TABLE_PROPERTIES[retries]:
        raise ValueError(
            f"history table: {retries} is {table.properties.get(retries)!r}, not "
            f"{TABLE_PROPERTIES[retries]!r}: a retried compaction could drop a concurrent append"
        )
    if any(table.properties.get(k) != v for k, v in MAINTENANCE_PROPERTIES.items()):
        with table.transaction() as tx:
            tx.set_properties(MAINTENANCE_PROPERTIES)


def maintain(
    table: Table,
    *,
    now: datetime | None = None,
    retention: timedelta = timedelta(hours=RETENTION_HOURS),
    keep: int = KEEP_SNAPSHOTS,
    min_files: int = COMPACT_MIN_FILES,
    budget_seconds: float = BUDGET_SECONDS,
    clock: Callable[[], float] = time.monotonic,
) -> Maintained:
    """Compact the closed days, expire snapshots, delete what only they reached (module
    docstring) on ``table`` (refreshed here); ``now`` decides which days are closed and which
    snapshots are old (default: the clock).

    Raises
    ------
    ValueError
        The table retries refused commits (``commit.retry.num-retries`` is not 0).
    pyiceberg.exceptions.CommitFailedException
        The expiry refused 3 times (the compactions done stay).
    """
    started = clock()
    now = now or datetime.now(UTC)
    result = Maintained()
    table.refresh()
    _properties_set(table)
    before = day_files(table)
    result.files_before = sum(len(f) for f in before.values())
    result.bytes_before = sum(f.file_size_in_bytes for fs in before.values() for f in fs)
    result.rows = sum(f.record_count for fs in before.values() for f in fs)
    for day in sorted(d for d, fs in before.items() if d < now.date() and len(fs) > min_files):
        if clock() - started > budget_seconds:
            result.days_left.append(day.isoformat())
            continue
        done = compact(table, day)
        (result.days_compacted if done else result.days_refused).append(day.isoformat())
        if not done:
            table.refresh()
    result.snapshots_before = len(table.metadata.snapshots)
    result.cleanup_skipped = _line_only(table)
    doomed, oldest_kept = expire(table, now, retention, keep)
    result.snapshots_expired = len(doomed)
    result.snapshots_after = len(table.metadata.snapshots)
    if doomed and oldest_kept is not None and result.cleanup_skipped is None:
        for path, size in _unreferenced(table, doomed, oldest_kept):
            try:
                table.io.delete(path)
            except Exception as exc:  # a file left is storage, not harm: counted, logged
                result.delete_errors += 1
                logger.warning(
                    "history maintenance: not deleted", extra={"path": path, "error": str(exc)}
                )
                continue
            result.deleted_files += 1
            result.deleted_bytes += size
    after = day_files(table)
    result.files_after = sum(len(f) for f in after.values())
    result.bytes_after = sum(f.file_size_in_bytes for fs in after.values() for f in fs)
    result.seconds = round(clock() - started, 3)
    return result


def run(table: Table, event: Mapping[str, Any], *, now: datetime | None = None) -> dict[str, Any]:
    """:func:`maintain` as a maintenance event asks (``{"maintenance": {"retentionHours": H}}``,
    H default :data:`RETENTION_HOURS`); returns :meth:`Maintained.to_dict`.

    Raises
    ------
    ValueError
        ``retentionHours`` not a positive integer, or a table that retries refused commits.
    """
    spec = event.get("maintenance") or {}
    hours = spec.get("retentionHours", RETENTION_HOURS)
    if isinstance(hours, bool) or not isinstance(hours, int) or hours < 1:
        raise ValueError(f"maintenance: retentionHours must be a positive integer, not {hours!r}")
    return maintain(table, now=now, retention=timedelta(hours=hours)).to_dict()
