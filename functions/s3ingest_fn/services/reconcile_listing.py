"""The ``listing`` reconciliation, streamed and resumable (CONTRACT C12).

Memory stays bounded whatever the bucket's size: a few Scan pages, a few listing pages and one
batch of differences (:class:`~s3ingest_fn.services.reconcile_run.RowsHeld` counts them).

1. **ledger**: one parallel Scan of the bucket's ledger rows (the only read of the ledger in the
   run), the rows under the prefix and in the bucket's scope spilled to an SQLite file
   (:class:`LedgerSpill`), then ordered by key on disk.
2. **bucket**: the listing of each of the scope's prefixes, page by page (S3 lists keys in UTF-8
   binary order, a key's latest entry first, so each key's state is on one page): each key is
   looked up in the spill and marked seen, and compared (:func:`~s3ingest_fn.core.diff.classify`;
   a key without a row: :func:`~s3ingest_fn.core.diff.classify_unrecorded`).
3. **live**: the spilled rows the listing never showed, in key order (deleted-but-live keys,
   pending and behind effects).

Differences are confirmed with HEADs and repaired batch by batch
(:class:`~s3ingest_fn.services.reconcile_run.RepairBatch`). After each batch the run commits a
checkpoint in the same SQLite transaction as the seen marks (the phase, the listing's marker,
the counts): a run interrupted is continued by a run given the same ``run_id`` and ``work_dir``
from its last checkpoint, and its report equals the one an uninterrupted run would have made.
Work since the last checkpoint is done again, so a repair may be queued twice (repairs are
observations, C7: a second one changes nothing).

The margin rules are the single run's: ``taken_at_ms`` is when the run first started (kept in
the checkpoint), and rows or objects changed after it minus the margin are skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import Executor
from pathlib import Path
from queue import Full, Queue
from typing import Any, Protocol

from s3ingest_fn.core.diff import (
    DiffStats,
    Drift,
    Truth,
    bucket_truth,
    classify,
    classify_unrecorded,
    suspect_sequencer,
)
from s3ingest_fn.core.effects import EffectTarget
from s3ingest_fn.core.model import TransientError
from s3ingest_fn.core.ports import BucketListing, ListingPage
from s3ingest_fn.core.row import Effect, LedgerRow
from s3ingest_fn.core.scope import BucketScope
from s3ingest_fn.services.reconcile_run import (
    Progress,
    ReconcileError,
    ReconcileReport,
    ReconcileRequest,
    RepairBatch,
    Repairs,
)

#: Listing pages compared between two checkpoints at most.
COMMIT_PAGES = 16
#: Keys looked up in the spill per query (SQLite's default limit is 32,766 parameters).
LOOKUP_CHUNK = 500
#: Spilled rows read per query in the ``live`` phase.
LIVE_CHUNK = 1000
#: SQLite's page cache, KiB (its memory bound; sorting on disk uses temporary files).
CACHE_KIB = 16 * 1024
#: The report's fields the checkpoint keeps.
_COUNTS = (
    "taken_at_ms",
    "bucket_rows",
    "bucket_keys",
    "bucket_requests",
    "ledger_rows",
    "ledger_requests",
    "skipped_recent",
    "skipped_after_snapshot",
    "drift",
    "resolved_on_head",
    "repairs_queued",
    "pending_effects",
    "effects_behind",
    "held_effects",
    "held_oldest_seconds",
    "samples",
    "out_of_scope",
    "out_of_scope_samples",
)
LEDGER, BUCKET, LIVE, DONE = "ledger", "bucket", "live", "done"


def _blob(key: str) -> bytes:
    """A key as SQLite compares it: UTF-8 bytes (binary order, S3's listing order)."""
    return key.encode("utf-8", "surrogatepass")


def _key(blob: bytes) -> str:
    return bytes(blob).decode("utf-8", "surrogatepass")


_COLUMNS = "k, present, version_id, etag, updated_at, fx, fx_lease, fx_done, change_id, suspect_seq"


def _record(row: LedgerRow, now_s: float) -> tuple[Any, ...]:
    """A row as the spill keeps it (the sequencer only when S3 cannot have sent it,
    :func:`~s3ingest_fn.core.diff.suspect_sequencer`)."""
    effect = row.effect
    return (
        _blob(row.key),
        1 if row.present else 0,
        row.version_id,
        row.etag,
        row.updated_at,
        effect.status if effect else None,
        effect.lease_until_ms if effect else None,
        effect.done_change_id if effect else None,
        row.change_id,
        suspect_sequencer(row, now_s),
    )


def _row(bucket: str, rec: tuple[Any, ...]) -> LedgerRow:
    k, present, version_id, etag, updated_at, fx, lease, done, change, seq = rec
    return LedgerRow(
        bucket=bucket,
        key=_key(k),
        present=bool(present),
        version_id=version_id,
        etag=etag,
        updated_at=int(updated_at or 0),
        effect=Effect(status=fx, lease_until_ms=lease, done_change_id=done) if fx else None,
        change_id=change,
        seq=seq,
    )


class LedgerSpill:
    """One run's ledger rows and checkpoint in an SQLite file.

    The rows are appended to a staging table while the Scan runs, then copied in key order to
    ``ledger`` (clustered on the key: ``WITHOUT ROWID``), so lookups and the final walk in key
    order read the file sequentially. Memory: SQLite's page cache (:data:`CACHE_KIB`).

    Parameters
    ----------
    path : Path
        The database file (created when absent).
    bucket : str
        The rows' bucket (one file per bucket and run).
    """

    def __init__(self, path: Path, bucket: str, *, fresh: bool = False) -> None:
        self.path, self.bucket = path, bucket
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=True)
        if fresh:
            # written once, then ordered: no journal (a spill interrupted is started over)
            self.db.execute("PRAGMA journal_mode=OFF")
            self.db.execute("PRAGMA synchronous=OFF")
        else:
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
        self.db.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT)")
        self.db.execute("BEGIN")

    @classmethod
    def open(cls, path: Path, bucket: str) -> LedgerSpill:
        """The spill at ``path`` when it holds a checkpoint; else (absent, a spill that never
        finished, an unreadable file, one an earlier release wrote without the
        ``suspect_seq`` column) a new one in its place."""
        if path.exists():
            try:
                spill = cls(path, bucket)
                columns = {c[1] for c in spill.db.execute("PRAGMA table_info(ledger)")}
                if spill.state() is not None and (not columns or "suspect_seq" in columns):
                    return spill
                spill.close()
            except sqlite3.DatabaseError:
                pass
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        return cls(path, bucket, fresh=True)

    def close(self) -> None:
        """Roll back what was not committed and close the file."""
        if self.db.in_transaction:
            self.db.execute("ROLLBACK")
        self.db.close()

    def commit(self, state: dict[str, Any]) -> None:
        """Commit everything since the last commit together with the checkpoint ``state``."""
        self.db.execute(
            "INSERT OR REPLACE INTO meta (name, value) VALUES ('state', ?)", (json.dumps(state),)
        )
        self.db.execute("COMMIT")
        self.db.execute("BEGIN")

    def state(self) -> dict[str, Any] | None:
        """The last committed checkpoint, or None."""
        found = self.db.execute("SELECT value FROM meta WHERE name = 'state'").fetchone()
        return json.loads(found[0]) if found else None

    def restart(self) -> None:
        """Drop any rows and start the staging table."""
        self.db.execute("DROP TABLE IF EXISTS staged")
        self.db.execute("DROP TABLE IF EXISTS ledger")
        self.db.execute(
            "CREATE TABLE staged (k BLOB, present INTEGER, version_id TEXT, etag TEXT, "
            "updated_at INTEGER, fx TEXT, fx_lease INTEGER, fx_done TEXT, change_id TEXT, "
            "suspect_seq TEXT)"
        )

    def add(self, rows: list[LedgerRow], now_s: float) -> None:
        """Append Scan rows read at ``now_s`` (epoch seconds)."""
        self.db.executemany(
            f"INSERT INTO staged ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            ((*_record(row, now_s),) for row in rows),
        )

    def build(self) -> None:
        """Order the staged rows by key into ``ledger`` (a key scanned twice keeps one row),
        then journal the file (WAL) for the checkpoints that follow."""
        self.db.execute(
            "CREATE TABLE ledger (k BLOB PRIMARY KEY, present INTEGER, version_id TEXT, "
            "etag TEXT, updated_at INTEGER, fx TEXT, fx_lease INTEGER, fx_done TEXT, "
            "change_id TEXT, suspect_seq TEXT, seen INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID"
        )
        self.db.execute(
            f"INSERT OR REPLACE INTO ledger ({_COLUMNS}) SELECT {_COLUMNS} FROM staged ORDER BY k"
        )
        self.db.execute("DROP TABLE staged")
        self.db.execute("COMMIT")
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("BEGIN")

    def take(self, keys: list[str]) -> dict[str, LedgerRow]:
        """The rows of ``keys`` (those that have one), marked seen."""
        found: dict[str, LedgerRow] = {}
        for i in range(0, len(keys), LOOKUP_CHUNK):
            blobs = [_blob(k) for k in keys[i : i + LOOKUP_CHUNK]]
            marks = ", ".join("?" * len(blobs))
            for rec in self.db.execute(
                f"SELECT {_COLUMNS} FROM ledger WHERE k IN ({marks})", blobs
            ):
                row = _row(self.bucket, rec)
                found[row.key] = row
            self.db.execute(f"UPDATE ledger SET seen = 1 WHERE k IN ({marks})", blobs)
        return found

    def unseen(self, after: str | None, limit: int) -> list[LedgerRow]:
        """Up to ``limit`` rows never marked seen, with keys after ``after``, in key order."""
        if after is None:
            cursor = self.db.execute(
                f"SELECT {_COLUMNS} FROM ledger WHERE seen = 0 ORDER BY k LIMIT ?", (limit,)
            )
        else:
            cursor = self.db.execute(
                f"SELECT {_COLUMNS} FROM ledger WHERE k > ? AND seen = 0 ORDER BY k LIMIT ?",
                (_blob(after), limit),
            )
        return [_row(self.bucket, rec) for rec in cursor]


class ListingReconciler(Repairs, Protocol):
    """What a listing run asks of its reconciler
    (:class:`~s3ingest_fn.services.reconcile.Reconciler`): the bucket, its scope and its
    listing, the clock, the request's margin, and the ledger's Scan pages (besides what its
    :class:`~s3ingest_fn.services.reconcile_run.RepairBatch` asks)."""

    bucket: str
    scope: BucketScope
    listing: BucketListing
    targets: tuple[EffectTarget, ...]

    def now(self) -> float:
        """Epoch seconds."""
        ...

    def margin(self, request: ReconcileRequest) -> int:
        """The request's safety margin, milliseconds."""
        ...

    def scan_ledger_pages(
        self, report: ReconcileReport, tick: Progress
    ) -> Iterator[list[LedgerRow]]:
        """The bucket's ledger rows, a Scan page at a time, in the order they arrive."""
        ...


def listing_prefixes(prefix: str, scope_prefixes: tuple[str, ...]) -> list[str]:
    """The prefixes to list: the request's ``prefix`` intersected with the scope's prefixes
    (none: the whole of ``prefix``), none inside another (no key is listed twice), sorted."""
    if not scope_prefixes:
        return [prefix]
    wanted = set()
    for p in scope_prefixes:
        if p.startswith(prefix):
            wanted.add(p)
        elif prefix.startswith(p):
            wanted.add(prefix)
    kept: list[str] = []
    for p in sorted(wanted):
        if not any(p.startswith(k) for k in kept):
            kept.append(p)
    return kept


def _prefetched(pages: Iterator[ListingPage], r: ListingReconciler) -> Iterator[ListingPage]:
    """``pages`` fetched one ahead by a thread while the caller compares the current one (at
    most two pages waiting); a page counts in ``r.held`` from its arrival until the caller asks
    for the next one."""
    q: Queue[ListingPage | BaseException | None] = Queue(maxsize=2)
    stop = threading.Event()

    def put(item: ListingPage | BaseException | None) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.5)
                return True
            except Full:
                continue
        return False

    def fetch() -> None:
        try:
            for page in pages:
                r.held.add(len(page.rows))
                if not put(page):
                    return
            put(None)
        except BaseException as exc:  # handed to the caller
            put(exc)

    thread = threading.Thread(target=fetch, daemon=True)
    thread.start()
    try:
        while True:
            item = q.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
            r.held.drop(len(item.rows))
    finally:
        stop.set()


class _Workspace:
    """The run's directory: ``<work_dir>/<run_id>/<bucket>/`` (kept), or a temporary one
    (removed at the end)."""

    def __init__(self, request: ReconcileRequest, bucket: str) -> None:
        self.run_id = request.run_id or uuid.uuid4().hex
        self.temporary = request.work_dir is None and request.run_id is None
        if self.temporary:
            self.path = Path(tempfile.mkdtemp(prefix="s3ingest-reconcile-"))
        else:
            root = Path(
                request.work_dir or os.path.join(tempfile.gettempdir(), "s3ingest-reconcile")
            )
            self.path = root / self.run_id / bucket
            self.path.mkdir(parents=True, exist_ok=True)
        self.spill = self.path / "ledger.sqlite"
        self.final = self.path / "report.json"

    def finish(self, report: dict[str, Any]) -> None:
        """Keep the final report (a re-run returns it), drop the spill."""
        if self.temporary:
            return
        tmp = self.final.with_suffix(".tmp")
        tmp.write_text(json.dumps(report))
        os.replace(tmp, self.final)
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.spill}{suffix}").unlink(missing_ok=True)

    def cleanup(self) -> None:
        """Remove a temporary directory."""
        if self.temporary:
            shutil.rmtree(self.path, ignore_errors=True)


def run_listing(
    r: ListingReconciler,
    request: ReconcileRequest,
    report: ReconcileReport,
    tick: Progress,
    pool: Executor,
    started: float,
) -> bool:
    """Reconcile ``r``'s bucket from its listing into ``report`` (see the module's docstring);
    ``started`` is when this invocation started (epoch seconds, for ``duration_s``).

    Returns
    -------
    bool
        True when the run had finished before: ``report`` is its final report as it was.

    Raises
    ------
    ReconcileError
        When the ledger or the bucket cannot be read, a HEAD or the queue fails (the checkpoint
        keeps what was done), or the checkpoint of ``run_id`` is of another request.
    """
    space = _Workspace(request, r.bucket)
    report.run_id = space.run_id
    try:
        if space.final.exists():
            _restore(report, json.loads(space.final.read_text()))
            report.resumed = True
            return True
        spill = LedgerSpill.open(space.spill, r.bucket)
        try:
            _Run(r, request, report, tick, pool, spill, space).run(started)
        except TransientError as exc:
            raise ReconcileError(f"reading the bucket's state failed: {exc}") from exc
        finally:
            spill.close()
        space.finish(report.as_dict())
        return False
    finally:
        space.cleanup()


def _restore(report: ReconcileReport, saved: dict[str, Any]) -> None:
    for name in (*_COUNTS, "duration_s"):
        if name in saved:
            setattr(report, name, saved[name])


class _Run:
    """One invocation of a listing run, from its checkpoint to the end."""

    def __init__(
        self,
        r: ListingReconciler,
        request: ReconcileRequest,
        report: ReconcileReport,
        tick: Progress,
        pool: Executor,
        spill: LedgerSpill,
        space: _Workspace,
    ) -> None:
        self.r, self.request, self.report, self.tick = r, request, report, tick
        self.spill, self.space = spill, space
        self.batch = RepairBatch(r, report, tick, request.dry_run, pool)
        self.stats = DiffStats()
        self.identity = {
            "run_id": space.run_id,
            "bucket": r.bucket,
            "prefix": request.prefix,
            "dry_run": request.dry_run,
            "margin_ms": r.margin(request),
            "scope": r.scope.as_dict(),
        }
        self.state: dict[str, Any] = {}

    # -- the checkpoint ---------------------------------------------------------------------

    def _load(self) -> None:
        saved = self.spill.state()
        if saved is None:
            self.report.taken_at_ms = int(self.r.now() * 1000)
            self.state = {
                **self.identity,
                "phase": LEDGER,
                "listing": 0,
                "marker": None,
                "after": None,
            }
            return
        mismatched = [k for k, v in self.identity.items() if saved.get(k) != v]
        if mismatched:
            raise ReconcileError(
                f"the checkpoint of run {self.space.run_id} is of another request "
                f"({', '.join(mismatched)} differ); use another run id"
            )
        self.state = saved
        _restore(self.report, saved["counts"])
        self.stats.skipped_recent = self.report.skipped_recent
        self.stats.skipped_after_snapshot = self.report.skipped_after_snapshot
        self.report.resumed = True
        # the progress bar continues from what was done
        self.tick("ledger", self.report.ledger_rows)
        if self.report.bucket_rows:
            self.tick("bucket", self.report.bucket_rows)

    def _checkpoint(self) -> None:
        """Confirm and repair the pending differences, then commit the marks with the state."""
        self.batch.flush()
        self.report.skipped_recent = self.stats.skipped_recent
        self.report.skipped_after_snapshot = self.stats.skipped_after_snapshot
        self.state["counts"] = {n: getattr(self.report, n) for n in _COUNTS}
        self.spill.commit(self.state)

    # -- the phases -------------------------------------------------------------------------

    def run(self, started: float) -> None:
        self.started = started
        self._load()
        if self.state["phase"] == LEDGER:
            self._spill_ledger()
        if self.state["phase"] == BUCKET:
            self._compare_listing()
        if self.state["phase"] == LIVE:
            self._unlisted_rows()
        self.report.duration_s = round(self.r.now() - self.started, 3)

    def _spill_ledger(self) -> None:
        report, r = self.report, self.r
        report.ledger_rows = report.ledger_requests = 0
        report.out_of_scope, report.out_of_scope_samples = 0, []
        report.held_effects = report.held_oldest_seconds = 0
        self.spill.restart()
        prefix, contains = self.request.prefix, r.scope.contains
        now_ms = int(r.now() * 1000)
        for page in r.scan_ledger_pages(report, self.tick):
            kept = []
            for row in page:
                key = row.key
                if not key.startswith(prefix):
                    continue
                if not contains(key):
                    report.out_of_scope_row(key)
                    continue
                report.count_held(row, now_ms, r.targets)
                kept.append(row)
            report.ledger_rows += len(kept)
            self.spill.add(kept, now_ms / 1000)
        self.spill.build()
        self.state["phase"] = BUCKET
        self._checkpoint()

    def _compare_listing(self) -> None:
        r, report, state = self.r, self.report, self.state
        prefixes = listing_prefixes(self.request.prefix, r.scope.prefixes)
        taken_at = report.taken_at_ms - r.margin(self.request)
        self.stats.snapshot_ms, report.margin_s = report.taken_at_ms, r.margin(self.request) / 1000
        contains = r.scope.contains
        pages_since = 0
        while state["listing"] < len(prefixes):
            prefix = prefixes[state["listing"]]
            pages = r.listing.pages(r.bucket, prefix, state["marker"], self.request.page_size)
            for page in _prefetched(pages, r):
                report.bucket_requests += 1
                report.bucket_rows += len(page.rows)
                self.tick("bucket", len(page.rows))
                truth = bucket_truth(page.rows, prefix=prefix)
                keys = sorted(k for k in truth if contains(k))
                report.bucket_keys += len(keys)
                rows = self.spill.take(keys)
                r.held.add(len(rows))
                for key in keys:
                    self._compare(rows.get(key), key, truth[key], taken_at)
                r.held.drop(len(rows))
                if page.marker is None:
                    state["listing"], state["marker"] = state["listing"] + 1, None
                else:
                    state["marker"] = page.marker
                pages_since += 1
                if self.batch.full or pages_since >= COMMIT_PAGES:
                    self._checkpoint()
                    pages_since = 0
        state["phase"] = LIVE
        self._checkpoint()

    def _compare(self, row: LedgerRow | None, key: str, seen: Truth, taken_at: int) -> None:
        if row is None:
            found = classify_unrecorded(key, seen, taken_at_ms=taken_at, stats=self.stats)
        else:
            found = classify(
                row,
                seen,
                taken_at_ms=taken_at,
                compare_versions=True,
                compare_etags=True,
                stats=self.stats,
            )
        if found is not None:
            self._found(found)

    def _found(self, drift: Drift) -> None:
        self.report.count(drift)
        self.batch.add(drift)

    def _unlisted_rows(self) -> None:
        r, state = self.r, self.state
        taken_at = self.report.taken_at_ms - r.margin(self.request)
        self.stats.snapshot_ms = self.report.taken_at_ms
        self.report.margin_s = r.margin(self.request) / 1000
        while True:
            rows = self.spill.unseen(state["after"], LIVE_CHUNK)
            if not rows:
                break
            r.held.add(len(rows))
            for row in rows:
                found = classify(
                    row,
                    None,
                    taken_at_ms=taken_at,
                    compare_versions=True,
                    compare_etags=True,
                    stats=self.stats,
                )
                if found is not None:
                    self._found(found)
            state["after"] = rows[-1].key
            r.held.drop(len(rows))
            if self.batch.full:
                self._checkpoint()
        state["phase"] = DONE
        self._checkpoint()
