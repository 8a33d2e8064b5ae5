"""Reconciliation: the bucket is the truth (CONTRACT C12).

One run: take the bucket's state from a listing or from the newest S3 Inventory report, scan the
ledger (a parallel Scan: about one request per megabyte of rows, not one per key), diff them,
confirm each difference with a HEAD (an inventory can lag), and queue a repair event for what is
still different. Repairs go through the ingest queue and the ingest handler like any event, as
observations (C7): they never override a newer sequenced state.
"""

from __future__ import annotations

import json
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from s3ingest_fn.core.diff import (
    DRIFT_KINDS,
    EFFECT_BEHIND,
    PENDING_EFFECT,
    DiffStats,
    Drift,
    Truth,
    bucket_truth,
    diff,
)
from s3ingest_fn.core.model import InventoryRow, TransientError
from s3ingest_fn.core.ports import Bucket, BucketListing, InventoryStore, LedgerScanner, RepairQueue
from s3ingest_fn.core.row import LedgerRow
from s3ingest_fn.services.inventory import InventoryError, Manifest, read_rows

LISTING = "listing"
INVENTORY = "inventory"
#: Default margins, milliseconds: ledger rows changed within this long before the source was
#: taken are skipped. An inventory report is built over hours after its creationTimestamp.
DEFAULT_MARGIN_MS = {LISTING: 60_000, INVENTORY: 3_600_000}
#: Parallel Scan segments (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Scan.html#Scan.ParallelScan).
SCAN_SEGMENTS = 8

Progress = Callable[[str, int], None]


class ReconcileError(RuntimeError):
    """Reconciliation could not run (no inventory report, unreadable manifest, AWS error)."""


@dataclass(frozen=True)
class ReconcileRequest:
    """What to reconcile.

    Attributes
    ----------
    source : {"listing", "inventory"}
    prefix : str
        Only keys starting with it.
    dry_run : bool
        Report the drift; queue no repair.
    manifest_key : str or None
        An inventory ``manifest.json`` key in the inventory bucket; the newest one by default.
    margin_ms : int or None
        Overrides :data:`DEFAULT_MARGIN_MS`.
    """

    source: str = INVENTORY
    prefix: str = ""
    dry_run: bool = False
    manifest_key: str | None = None
    margin_ms: int | None = None

    @classmethod
    def from_event(cls, event: dict[str, Any]) -> ReconcileRequest:
        """From a Lambda event ``{"source", "prefix", "dryRun", "manifest", "marginSeconds"}``.

        Raises
        ------
        ValueError
            For an unknown source or a wrongly typed field.
        """
        source = event.get("source", INVENTORY)
        if source not in (LISTING, INVENTORY):
            raise ValueError(f"source must be 'listing' or 'inventory', not {source!r}")
        margin = event.get("marginSeconds")
        return cls(
            source=source,
            prefix=str(event.get("prefix") or ""),
            dry_run=bool(event.get("dryRun", False)),
            manifest_key=event.get("manifest"),
            margin_ms=int(margin) * 1000 if margin is not None else None,
        )


@dataclass
class ReconcileReport:
    """The run summary: the reconcile Lambda's result, the CLI's table, the log line."""

    source: str
    bucket: str
    prefix: str
    dry_run: bool
    taken_at_ms: int = 0
    manifest: str | None = None
    bucket_rows: int = 0
    bucket_keys: int = 0
    ledger_rows: int = 0
    ledger_requests: int = 0
    skipped_recent: int = 0
    drift: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DRIFT_KINDS, 0))
    resolved_on_head: int = 0
    repairs_queued: int = 0
    #: Processor effects found pending with an expired lease (a repair re-runs each; C11).
    pending_effects: int = 0
    #: Processor effects behind the row: superseded with no newer change applied (a repair
    #: verifies the bucket and re-runs each against the current object; C11, C12).
    effects_behind: int = 0
    samples: list[dict[str, Any]] = field(default_factory=list)
    duration_s: float = 0.0

    def count(self, drift: Drift) -> None:
        """Count one difference found by :func:`~s3ingest_fn.core.diff.diff`."""
        if drift.kind == PENDING_EFFECT:
            self.pending_effects += 1
        elif drift.kind == EFFECT_BEHIND:
            self.effects_behind += 1
        else:
            self.drift[drift.kind] += 1

    @property
    def drift_total(self) -> int:
        """All differences found (before the HEAD confirmation)."""
        return sum(self.drift.values())

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        out = dict(self.__dict__)
        out["drift_total"] = self.drift_total
        return out


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
    ) -> None:
        self.objects, self.listing, self.inventory = objects, listing, inventory
        self.repairs, self.scanner = repairs, scanner
        self.bucket, self.table, self.queue_url = bucket, table, queue_url
        self.inventory_bucket, self.inventory_prefix = inventory_bucket, inventory_prefix
        self._clock = clock

    def run(self, request: ReconcileRequest, progress: Progress | None = None) -> ReconcileReport:
        """Reconcile once.

        Parameters
        ----------
        request : ReconcileRequest
        progress : callable, optional
            ``progress(phase, count)`` as rows are read ("bucket", "ledger", "confirm").

        Returns
        -------
        ReconcileReport

        Raises
        ------
        ReconcileError
            When the source cannot be read.
        """
        started = self._clock()
        report = ReconcileReport(
            source=request.source,
            bucket=self.bucket,
            prefix=request.prefix,
            dry_run=request.dry_run,
        )
        tick = progress or (lambda phase, n: None)
        try:
            if request.source == LISTING:
                report.taken_at_ms = int(self._clock() * 1000)
                rows: Iterator[InventoryRow] = self.listing.rows(self.bucket, request.prefix)
                compare_versions = compare_etags = True
            else:
                manifest_key = request.manifest_key or self.newest_manifest()
                manifest = self.manifest(manifest_key)
                report.manifest = manifest_key
                report.taken_at_ms = manifest.created_ms
                rows = self._inventory_rows(manifest)
                compare_versions = (
                    "VersionId" in manifest.columns or "version_id" in manifest.columns
                )
                compare_etags = "ETag" in manifest.columns or "e_tag" in manifest.columns
            counted = _counting(rows, report, tick)
            truth = bucket_truth(counted, prefix=request.prefix)
        except TransientError as exc:
            raise ReconcileError(f"reading the bucket's state failed: {exc}") from exc
        report.bucket_keys = len(truth)
        margin = (
            request.margin_ms
            if request.margin_ms is not None
            else DEFAULT_MARGIN_MS[request.source]
        )
        stats = DiffStats()
        drifts = list(
            diff(
                truth,
                self.scan_ledger(report, tick),
                taken_at_ms=report.taken_at_ms - margin,
                compare_versions=compare_versions,
                compare_etags=compare_etags,
                stats=stats,
                prefix=request.prefix,
            )
        )
        report.ledger_rows, report.skipped_recent = stats.ledger_rows, stats.skipped_recent
        for d in drifts:
            report.count(d)
        confirmed = self.confirm(drifts, report, tick)
        report.samples = [_sample(d) for d in confirmed[:20]]
        if not request.dry_run:
            report.repairs_queued = self.queue_repairs(confirmed)
        report.duration_s = round(self._clock() - started, 3)
        return report

    # -- the bucket's state -------------------------------------------------------------

    def newest_manifest(self) -> str:
        """Key of the newest report's ``manifest.json`` under the inventory prefix.

        Raises
        ------
        ReconcileError
            When no inventory bucket is configured or no report exists yet (the first report
            arrives up to 48 hours after the configuration is created).
        """
        if not self.inventory_bucket:
            raise ReconcileError("no inventory bucket configured; use --source listing")
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
            "yet (the first one can take up to 48 hours); use --source listing"
        )

    def manifest(self, key: str) -> Manifest:
        """Read and verify one report's manifest (checksum included).

        Raises
        ------
        ReconcileError
        """
        if not self.inventory_bucket:
            raise ReconcileError("no inventory bucket configured")
        try:
            raw = self.get_inventory_object(key)
            checksum = self.get_inventory_object(key.rsplit("/", 1)[0] + "/manifest.checksum")
            return Manifest.parse(raw, checksum)
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
        pages: queue.Queue[list[LedgerRow] | BaseException | None] = queue.Queue(
            maxsize=2 * SCAN_SEGMENTS
        )

        stop = threading.Event()

        def put(item: list[LedgerRow] | BaseException | None) -> bool:
            while not stop.is_set():
                try:
                    pages.put(item, timeout=0.5)
                    return True
                except queue.Full:
                    continue
            return False

        def worker(segment: int) -> None:
            try:
                for page in self.scan_pages(segment, SCAN_SEGMENTS):
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
                    yield from item
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

    def confirm(self, drifts: list[Drift], report: ReconcileReport, tick: Progress) -> list[Drift]:
        """Keep the differences a HEAD still shows (an inventory can lag the bucket), and every
        pending or behind effect (the bucket cannot resolve those; the repair reads it)."""

        def still_different(d: Drift) -> bool:
            if d.kind in (PENDING_EFFECT, EFFECT_BEHIND):
                return True
            now = self.objects.current(self.bucket, d.key)
            row = d.ledger
            if row is None:
                return now.visible
            if not row.present:
                return now.visible
            return not now.visible or row.version_id != now.version_id or row.etag != now.etag

        with ThreadPoolExecutor(max_workers=16) as pool:
            verdicts = list(pool.map(still_different, drifts))
        tick("confirm", len(drifts))
        confirmed = [d for d, keep in zip(drifts, verdicts, strict=True) if keep]
        report.resolved_on_head = len(drifts) - len(confirmed)  # never an effect
        return confirmed

    def queue_repairs(self, drifts: list[Drift]) -> int:
        """Send one repair event per drift to the ingest queue, in order (the
        :class:`~s3ingest_fn.core.ports.RepairQueue` sends batches of 10); return the count.

        Raises
        ------
        ReconcileError
            When SQS refuses.
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
        try:
            return self.repairs.send(bodies)
        except TransientError as exc:
            raise ReconcileError(str(exc)) from exc


def _counting(
    rows: Iterator[InventoryRow], report: ReconcileReport, tick: Progress
) -> Iterator[InventoryRow]:
    for row in rows:
        report.bucket_rows += 1
        if report.bucket_rows % 10_000 == 0:
            tick("bucket", 10_000)
        yield row
    tick("bucket", report.bucket_rows % 10_000)


def _sample(d: Drift) -> dict[str, Any]:
    row, truth = d.ledger, d.bucket or Truth(False, None, None, None)
    return {
        "kind": d.kind,
        "key": d.key,
        "ledger_state": row.state if row else None,
        "ledger_version_id": row.version_id if row else None,
        "ledger_etag": row.etag if row else None,
        "bucket_visible": truth.visible,
        "bucket_version_id": truth.version_id,
        "bucket_etag": truth.etag,
    }
