"""Reconciliation: the bucket is the truth (CONTRACT C12).

One run: take the bucket's state from a listing or from the newest S3 Inventory report, scan the
ledger (a parallel Scan: about one request per megabyte of rows, not one per key), diff them,
confirm each difference with a HEAD (an inventory can lag), and queue a repair event for what is
still different. Repairs go through the ingest queue and the ingest handler like any event, as
observations (C7): they never override a newer sequenced state.

The ``listing`` source streams (:mod:`s3ingest_fn.services.reconcile_listing`): the ledger is
spilled to an on-disk SQLite file, the listing compared page by page, and the run keeps a
checkpoint so that it can resume. The ``inventory`` source holds each key's state of the report
in memory (the fan-out, :mod:`s3ingest_fn.services.fanout`, splits a big report). Both confirm
differences with HEADs in parallel and queue repairs with SendMessageBatch in parallel, batch by
batch (:class:`RepairBatch`). Only keys in the bucket's scope count; a ledger row out of it (from
before a key filter was added) is counted apart (``out_of_scope``), never repaired.
"""

from __future__ import annotations

import hashlib
import json
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence, Sized
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

from s3ingest_fn.core.diff import (
    EFFECT_BEHIND,
    PENDING_EFFECT,
    SEQUENCER_CONTRADICTED,
    DiffStats,
    Drift,
    bucket_truth,
    diff,
)
from s3ingest_fn.core.effects import EffectTarget
from s3ingest_fn.core.model import InventoryRow, TransientError
from s3ingest_fn.core.ports import Bucket, BucketListing, InventoryStore, LedgerScanner, RepairQueue
from s3ingest_fn.core.row import LedgerRow
from s3ingest_fn.core.scope import BucketScope
from s3ingest_fn.services.inventory import InventoryError, Manifest, read_rows
from s3ingest_fn.services.reconcile_listing import run_listing
from s3ingest_fn.services.reconcile_run import (
    CONFIRM_BATCH,
    DEFAULT_MARGIN_MS,
    INVENTORY,
    LISTING,
    SAMPLES,
    SUMMED,
    Progress,
    ReconcileError,
    ReconcileReport,
    ReconcileRequest,
    RepairBatch,
    RowsHeld,
    combine_reports,
    held_ages,
)

#: The run's parts (:mod:`s3ingest_fn.services.reconcile_run`) are this module's too: callers
#: import them from here.
__all__ = [
    "CONCURRENCY",
    "CONFIRM_BATCH",
    "DEFAULT_MARGIN_MS",
    "INVENTORY",
    "LISTING",
    "REPAIR_BATCH",
    "SAMPLES",
    "SCAN_SEGMENTS",
    "SUMMED",
    "Progress",
    "ReconcileError",
    "ReconcileReport",
    "ReconcileRequest",
    "Reconciler",
    "RepairBatch",
    "RowsHeld",
    "combine_reports",
    "held_ages",
]

if TYPE_CHECKING:
    from s3ingest_fn.services.attestation_pass import TreeTap

_Page = TypeVar("_Page", bound=Sized)

#: Parallel Scan segments (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Scan.html#Scan.ParallelScan).
SCAN_SEGMENTS = 8
#: HEADs (and SendMessageBatch requests) in flight at once.
CONCURRENCY = 16
#: Repair events per SendMessageBatch request (SQS's limit:
#: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessageBatch.html).
REPAIR_BATCH = 10
#: What a reconciliation does without an inventory report (``reconcile --source listing``).
LISTING_INSTEAD = "use --source listing"


class Reconciler:
    """Runs reconciliation over its ports (:func:`s3ingest_fn.wiring.reconciler` builds it over
    AWS clients).

    Parameters
    ----------
    objects : Bucket
        HEAD of a key, to confirm each difference.
    listing : BucketListing
        The bucket's listing (the ``listing`` source).
    inventory : InventoryStore
        The inventory bucket's objects: reports, and the fan-out's work shards.
    repairs : RepairQueue
        The ingest queue.
    scanner : LedgerScanner
        Reads the ledger (a parallel Scan of ``table``).
    bucket : str
        The landing bucket.
    table : str
        The ledger table, for the caller to name (the scanner reads it).
    queue_url : str
        The ingest queue's URL, for the caller to name (the repair queue sends there).
    inventory_bucket : str or None
        Where the inventory reports are delivered.
    inventory_prefix : str
        ``<destination prefix>/<source bucket>/<configuration id>/``: the folder holding one
        dated folder per report.
    clock : callable
        Epoch seconds.
    scope : BucketScope or None
        The bucket's key filters (only keys in it count); None: every key.
    targets : sequence of EffectTarget
        The configured processors: rows behind each are counted
        (:attr:`ReconcileReport.effects_behind_by_processor`), never repaired.
    """

    def __init__(
        self,
        *,
        objects: Bucket,
        listing: BucketListing,
        inventory: InventoryStore,
        repairs: RepairQueue,
        scanner: LedgerScanner,
        bucket: str,
        table: str,
        queue_url: str,
        inventory_bucket: str | None = None,
        inventory_prefix: str = "",
        clock: Callable[[], float] = time.time,
        scope: BucketScope | None = None,
        targets: Sequence[EffectTarget] = (),
    ) -> None:
        self.objects, self.listing, self.inventory = objects, listing, inventory
        self.targets = tuple(targets)
        self.repairs, self.scanner = repairs, scanner
        self.bucket, self.table, self.queue_url = bucket, table, queue_url
        self.inventory_bucket, self.inventory_prefix = inventory_bucket, inventory_prefix
        self.scope = scope or BucketScope(bucket)
        self._clock = clock
        #: Rows held in memory by the last run (:class:`RowsHeld`).
        self.held = RowsHeld()

    def now(self) -> float:
        """The reconciler's clock, epoch seconds."""
        return self._clock()

    def run(
        self,
        request: ReconcileRequest,
        progress: Progress | None = None,
        tap: TreeTap | None = None,
    ) -> ReconcileReport:
        """Reconcile once.

        Parameters
        ----------
        request : ReconcileRequest
        progress : callable, optional
            ``progress(phase, count)``: ``count`` more ledger rows read ("ledger"), listing or
            inventory entries read ("bucket"), differences checked with a HEAD ("confirm"),
            repairs queued ("repair"). A resumed listing run first ticks what was done.
        tap : TreeTap, optional
            The ``inventory`` source's pass feeds it the attestation's trees
            (:mod:`s3ingest_fn.services.attestation_pass`); None for a listing run.

        Returns
        -------
        ReconcileReport

        Raises
        ------
        ReconcileError
            When the source or the ledger cannot be read, a HEAD or the queue fails (a listing
            run's checkpoint keeps what was done), or a listing run's checkpoint is of another
            request.
        ValueError
            For a tap given to a listing run.
        """
        if tap is not None and request.source == LISTING:
            raise ValueError("a listing run feeds no attestation tree")
        started = self._clock()
        report = ReconcileReport(
            source=request.source,
            bucket=self.bucket,
            prefix=request.prefix,
            dry_run=request.dry_run,
        )
        tick = progress or (lambda phase, n: None)
        self.held = RowsHeld()
        with ThreadPoolExecutor(max_workers=CONCURRENCY) as pool:
            if request.source == LISTING:
                if run_listing(self, request, report, tick, pool, started):
                    return report  # a finished run's report, as it was
            else:
                self._run_inventory(request, report, tick, pool, tap)
        report.duration_s = round(self._clock() - started, 3)
        return report

    def _run_inventory(
        self,
        request: ReconcileRequest,
        report: ReconcileReport,
        tick: Progress,
        pool: Executor,
        tap: TreeTap | None = None,
    ) -> None:
        """The ``inventory`` source: each key's state of the report in memory, the ledger
        streamed through :func:`~s3ingest_fn.core.diff.diff` (in columns when pyarrow is
        importable: :func:`columnar`), shown to ``tap``."""
        try:
            manifest_key = request.manifest_key or self.newest_manifest()
            manifest, raw, checksum = self.manifest_read(manifest_key)
            report.manifest = manifest_key
            report.taken_at_ms = manifest.created_ms
            compare_versions = "VersionId" in manifest.columns or "version_id" in manifest.columns
            compare_etags = "ETag" in manifest.columns or "e_tag" in manifest.columns
            if tap is not None:
                tap.snapshot(
                    taken_ms=manifest.created_ms,
                    margin_ms=self.margin(request),
                    versions=compare_versions,
                    etags=compare_etags,
                )
                tap.inputs["bucket"] = inventory_inputs(
                    self.inventory_bucket, manifest_key, manifest, raw, checksum
                )
            in_columns = columnar(self.scanner)
            if not in_columns:
                rows = self._inventory_rows(manifest)
                truth = bucket_truth(_counting(rows, report, tick), prefix=request.prefix)
        except TransientError as exc:
            raise ReconcileError(f"reading the bucket's state failed: {exc}") from exc
        if in_columns:
            from s3ingest_fn.services.reconcile_columnar import run_columnar

            run_columnar(
                self, request, report, tick, pool, manifest, compare_versions, compare_etags, tap
            )
            if tap is not None:
                tap.ledger_read(self.table, report.ledger_requests)
            return
        if self.scope.prefixes or self.scope.suffixes:
            truth = {k: t for k, t in truth.items() if self.scope.contains(k)}
        report.bucket_keys = len(truth)
        stats = DiffStats(snapshot_ms=report.taken_at_ms)
        report.margin_s = self.margin(request) / 1000
        batch = RepairBatch(self, report, tick, request.dry_run, pool)
        if tap is not None:
            batch.queued = tap.queued
        for d in diff(
            truth,
            self.scoped(self.scan_ledger(report, tick), report, request.prefix),
            taken_at_ms=report.taken_at_ms - self.margin(request),
            compare_versions=compare_versions,
            compare_etags=compare_etags,
            stats=stats,
            prefix=request.prefix,
            tap=tap,
        ):
            report.count(d)
            batch.add(d)
            if batch.full:
                batch.flush()
        batch.flush()
        if tap is not None:
            tap.ledger_read(self.table, report.ledger_requests)
        report.ledger_rows, report.skipped_recent = stats.ledger_rows, stats.skipped_recent
        report.skipped_after_snapshot = stats.skipped_after_snapshot

    @staticmethod
    def margin(request: ReconcileRequest) -> int:
        """The request's safety margin, milliseconds (:data:`DEFAULT_MARGIN_MS` by default)."""
        if request.margin_ms is not None:
            return request.margin_ms
        return DEFAULT_MARGIN_MS[request.source]

    def scoped(
        self, rows: Iterator[LedgerRow], report: ReconcileReport, prefix: str
    ) -> Iterator[LedgerRow]:
        """The ledger rows under ``prefix`` in the bucket's scope, their held effects counted
        (:meth:`ReconcileReport.count_held`); the others under ``prefix`` are counted in
        ``report.out_of_scope``."""
        contains = self.scope.contains
        now_ms = int(self._clock() * 1000)
        for row in rows:
            key = row.key
            if not key.startswith(prefix):
                continue
            if not contains(key):
                report.out_of_scope_row(key)
                continue
            report.count_held(row, now_ms, self.targets)
            yield row

    # -- the bucket's state -------------------------------------------------------------

    def newest_manifest(self, instead: str = LISTING_INSTEAD) -> str:
        """Key of the newest report's ``manifest.json`` under the inventory prefix (``instead``:
        what the error tells the operator to do without one).

        Raises
        ------
        ReconcileError
            When no inventory bucket is configured or no report exists yet (the first report
            arrives up to 48 hours after the configuration is created).
        """
        if not self.inventory_bucket:
            raise ReconcileError(f"no inventory bucket configured; {instead}")
        prefix, store = self.inventory_prefix, self.inventory_bucket
        folders = self.inventory.folders(store, prefix)
        dated = sorted(
            (f for f in folders if f[len(prefix) : len(prefix) + 2].isdigit()), reverse=True
        )
        for folder in dated:
            key = folder + "manifest.json"
            if not (
                self.inventory.exists(store, key)
                and self.inventory.exists(store, folder + "manifest.checksum")
            ):
                continue  # a report still being written
            return key
        raise ReconcileError(
            f"no inventory report under s3://{self.inventory_bucket}/{prefix} "
            f"yet (the first one can take up to 48 hours); {instead}"
        )

    def manifest(self, key: str) -> Manifest:
        """Read and verify one report's manifest (checksum included).

        Raises
        ------
        ReconcileError
        """
        return self.manifest_read(key)[0]

    def manifest_read(self, key: str) -> tuple[Manifest, bytes, bytes]:
        """:meth:`manifest`, with the bytes read: the manifest's and its checksum file's.

        Raises
        ------
        ReconcileError
        """
        if not self.inventory_bucket:
            raise ReconcileError("no inventory bucket configured")
        try:
            raw = self.get_inventory_object(key)
            checksum = self.get_inventory_object(key.rsplit("/", 1)[0] + "/manifest.checksum")
            return Manifest.parse(raw, checksum), raw, checksum
        except InventoryError as exc:
            raise ReconcileError(f"s3://{self.inventory_bucket}/{key}: {exc}") from exc

    def _inventory_rows(self, manifest: Manifest) -> Iterator[InventoryRow]:
        for data_key in manifest.files:
            try:
                yield from read_rows(manifest, self.get_inventory_object(data_key))
            except InventoryError as exc:
                raise ReconcileError(f"s3://{self.inventory_bucket}/{data_key}: {exc}") from exc

    def require_inventory_bucket(self) -> str:
        """The inventory bucket's name.

        Raises
        ------
        ReconcileError
            When no inventory bucket is configured.
        """
        if not self.inventory_bucket:
            raise ReconcileError("no inventory bucket configured")
        return self.inventory_bucket

    def get_inventory_object(self, key: str) -> bytes:
        """Bytes of one object of the inventory bucket.

        Raises
        ------
        ReconcileError
            When no inventory bucket is configured.
        TransientError
            When S3 fails.
        """
        return self.inventory.read(self.require_inventory_bucket(), key)

    # -- the ledger -----------------------------------------------------------------------

    def scan_ledger(self, report: ReconcileReport, tick: Progress) -> Iterator[LedgerRow]:
        """All ledger rows of this bucket: a parallel Scan, one thread per segment, streamed
        page by page through a bounded queue (memory stays a few pages, not the table)."""
        for page in self.scan_ledger_pages(report, tick):
            yield from page

    def scan_ledger_pages(
        self, report: ReconcileReport, tick: Progress
    ) -> Iterator[list[LedgerRow]]:
        """:meth:`scan_ledger`'s pages (one Scan request each), in the order they arrive; a
        page counts in :attr:`held` from its arrival until the consumer asks for the next."""
        return self.pump_pages(self.scan_pages, report, tick)

    def pump_pages(
        self,
        pages_of: Callable[[int, int], Iterator[_Page]],
        report: ReconcileReport,
        tick: Progress,
    ) -> Iterator[_Page]:
        """The pages ``pages_of(segment, total)`` yields for each of :data:`SCAN_SEGMENTS`
        segments, one thread each, through a queue of at most ``2 * SCAN_SEGMENTS`` pages (what
        a thread makes of a page, it makes in its thread)."""
        pages: queue.Queue[_Page | BaseException | None] = queue.Queue(maxsize=2 * SCAN_SEGMENTS)
        held = self.held
        stop = threading.Event()

        def put(item: _Page | BaseException | None) -> bool:
            while not stop.is_set():
                try:
                    pages.put(item, timeout=0.5)
                    return True
                except queue.Full:
                    continue
            return False

        def worker(segment: int) -> None:
            try:
                for page in pages_of(segment, SCAN_SEGMENTS):
                    held.add(len(page))
                    if not put(page):
                        return
            except BaseException as exc:  # handed to the consumer below
                put(exc)
            finally:
                put(None)

        threads = [
            threading.Thread(target=worker, args=(i,), daemon=True) for i in range(SCAN_SEGMENTS)
        ]
        for t in threads:
            t.start()
        running = len(threads)
        try:
            while running:
                item = pages.get()
                if item is None:
                    running -= 1
                elif isinstance(item, BaseException):
                    if isinstance(item, TransientError):
                        raise ReconcileError(f"scanning the ledger failed: {item}") from item
                    raise item
                else:
                    report.ledger_requests += 1
                    tick("ledger", len(item))
                    yield item
                    held.drop(len(item))
        finally:
            stop.set()  # the consumer stopped early or failed: let the workers end

    def scan_pages(self, segment: int, total: int) -> Iterator[list[LedgerRow]]:
        """The pages (one Scan request each) of one segment of a parallel Scan of this bucket's
        ledger rows."""
        return self.scanner.pages(self.bucket, segment, total)

    def scan_segment(self, segment: int, total: int) -> tuple[list[LedgerRow], int]:
        """All rows of one Scan segment and the number of requests made (the fan-out's
        ``shard_ledger`` step)."""
        rows: list[LedgerRow] = []
        requests = 0
        for page in self.scan_pages(segment, total):
            rows.extend(page)
            requests += 1
        return rows, requests

    # -- confirmation and repair ----------------------------------------------------------

    def confirm(
        self,
        drifts: list[Drift],
        report: ReconcileReport,
        tick: Progress,
        pool: Executor | None = None,
    ) -> list[Drift]:
        """Keep the differences a HEAD still shows (an inventory can lag the bucket), and every
        pending or behind effect (the bucket cannot resolve those; the repair reads it). HEADs
        run in parallel on ``pool`` (:data:`CONCURRENCY` threads of its own when None); the
        ones resolved are added to ``report.resolved_on_head``.

        Raises
        ------
        ReconcileError
            When a HEAD fails.
        """

        def still_different(d: Drift) -> bool:
            if d.kind in (PENDING_EFFECT, EFFECT_BEHIND, SEQUENCER_CONTRADICTED):
                return True  # a HEAD cannot resolve these: the repair reads bucket and row
            now = self.objects.current(self.bucket, d.key)
            row = d.ledger
            if row is None:
                return now.visible
            if not row.present:
                return now.visible
            return not now.visible or row.version_id != now.version_id or row.etag != now.etag

        try:
            if pool is None:
                with ThreadPoolExecutor(max_workers=CONCURRENCY) as own:
                    verdicts = list(own.map(still_different, drifts))
            else:
                verdicts = list(pool.map(still_different, drifts))
        except TransientError as exc:
            raise ReconcileError(f"confirming the differences failed: {exc}") from exc
        tick("confirm", len(drifts))
        confirmed = [d for d, keep in zip(drifts, verdicts, strict=True) if keep]
        report.resolved_on_head += len(drifts) - len(confirmed)  # never an effect
        return confirmed

    def queue_repairs(
        self, drifts: list[Drift], pool: Executor | None = None, tick: Progress | None = None
    ) -> int:
        """Send one repair event per drift to the ingest queue, :data:`REPAIR_BATCH` per
        SendMessageBatch request, the requests in parallel on ``pool`` (in order without one);
        return the count.

        Raises
        ------
        ReconcileError
            When SQS refuses: the queue's message (naming how many of its request were sent)
            for a single request, else also how many requests were sent in full.
        """
        bodies = [
            json.dumps(
                {
                    "s3ingestRepair": {
                        "bucket": self.bucket,
                        "key": d.key,
                        "reason": d.kind,
                        "run": uuid.uuid4().hex,
                    }
                }
            )
            for d in drifts
        ]
        chunks = [bodies[i : i + REPAIR_BATCH] for i in range(0, len(bodies), REPAIR_BATCH)]
        sent, errors = 0, []
        if pool is None or len(chunks) <= 1:
            for chunk in chunks:
                try:
                    sent += self.repairs.send(chunk)
                except TransientError as exc:
                    errors.append(exc)
                    break
        else:
            for future in [pool.submit(self.repairs.send, chunk) for chunk in chunks]:
                try:
                    sent += future.result()
                except TransientError as exc:
                    errors.append(exc)
        if errors:
            if len(chunks) == 1:
                raise ReconcileError(str(errors[0])) from errors[0]
            raise ReconcileError(
                f"{len(errors)} of {len(chunks)} repair requests refused "
                f"({sent} repairs sent in full requests): {errors[0]}"
            ) from errors[0]
        if tick is not None:
            tick("repair", sent)
        return sent


def inventory_inputs(
    store: str | None, key: str, manifest: Manifest, raw: bytes, checksum: bytes
) -> dict[str, object]:
    """An attestation's ``inputs.bucket`` for an inventory report: where its manifest is
    (``store``, ``key``), its checksum file's value, the SHA-256 of its bytes, its time and
    its data files' count."""
    from s3ingest_fn.core.attestation import iso_ms

    return {
        "kind": INVENTORY,
        "inventory_bucket": store,
        "manifest": key,
        "manifest_checksum": checksum.decode("ascii", "replace").strip().lower(),
        "manifest_sha256": hashlib.sha256(raw).hexdigest(),
        "taken_at": iso_ms(manifest.created_ms),
        "taken_at_ms": manifest.created_ms,
        "files": len(manifest.files),
    }


def columnar(scanner: LedgerScanner) -> bool:
    """Whether the ``inventory`` source runs in columns
    (:mod:`~s3ingest_fn.services.reconcile_columnar`): the scanner reads pages as columns (it
    was given a decoder: pyarrow is importable); else the per-key pass over
    :func:`~s3ingest_fn.core.diff.diff`."""
    return getattr(scanner, "decode", None) is not None


def _counting(
    rows: Iterator[InventoryRow], report: ReconcileReport, tick: Progress
) -> Iterator[InventoryRow]:
    for row in rows:
        report.bucket_rows += 1
        if report.bucket_rows % 10_000 == 0:
            tick("bucket", 10_000)
        yield row
    tick("bucket", report.bucket_rows % 10_000)
