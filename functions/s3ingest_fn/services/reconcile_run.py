"""What a reconciliation run is made of, whatever its source (CONTRACT C12): the request, the
report, the error, the count of rows held in memory, and the batch of differences confirmed and
repaired together.

The reconciler (:mod:`s3ingest_fn.services.reconcile`) and the streamed ``listing`` source
(:mod:`s3ingest_fn.services.reconcile_listing`) both build on these; neither imports the other
for them. :class:`RepairBatch` asks its reconciler only for what :class:`Repairs` names.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, Protocol

from s3ingest_fn.core.diff import (
    DRIFT_KINDS,
    EFFECT_BEHIND,
    PENDING_EFFECT,
    Drift,
    Truth,
)
from s3ingest_fn.core.effects import EffectTarget
from s3ingest_fn.core.row import HELD, LedgerRow

LISTING = "listing"
INVENTORY = "inventory"
#: Default margins, milliseconds: ledger rows changed within this long before the source was
#: taken are skipped. An inventory report is built over hours after its creationTimestamp.
DEFAULT_MARGIN_MS = {LISTING: 60_000, INVENTORY: 3_600_000}
#: Differences confirmed and repaired together: the most a run holds before it confirms them.
CONFIRM_BATCH = 1000
#: Confirmed differences kept as the report's samples.
SAMPLES = 20
#: Keys kept per processor as samples of the rows behind it.
BEHIND_SAMPLES = 5

#: ``progress(phase, count)``: see :meth:`~s3ingest_fn.services.reconcile.Reconciler.run`.
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
    run_id : str or None
        A listing run's id: given again with the same ``work_dir``, the run continues from its
        checkpoint (a finished run returns its report). None: a new id.
    work_dir : str or None
        Where a listing run keeps its spilled ledger and checkpoint (``<work_dir>/<run_id>/
        <bucket>/``), resumable. None: a temporary directory removed at the end (not
        resumable), unless ``run_id`` is given (then ``<system temp dir>/s3ingest-reconcile``).
    page_size : int
        Entries per listing request (S3's maximum is 1,000).
    """

    source: str = INVENTORY
    prefix: str = ""
    dry_run: bool = False
    manifest_key: str | None = None
    margin_ms: int | None = None
    run_id: str | None = None
    work_dir: str | None = None
    page_size: int = 1000

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
    #: Rows and objects skipped as changed after the snapshot minus the margin (events of them
    #: may be in flight; CONTRACT C12), and of them those changed after the snapshot itself.
    skipped_recent: int = 0
    skipped_after_snapshot: int = 0
    #: The margin before the snapshot, seconds (rows changed within it are skipped too).
    margin_s: float = 0.0
    drift: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DRIFT_KINDS, 0))
    resolved_on_head: int = 0
    repairs_queued: int = 0
    #: Processor effects found pending with an expired lease (a repair re-runs each; C11).
    pending_effects: int = 0
    #: Processor effects behind the row: superseded with no newer change applied (a repair
    #: verifies the bucket and re-runs each against the current object; C11, C12).
    effects_behind: int = 0
    #: Processor effects held for review (``docs/hold.md``): waiting for an operator, never
    #: drift and never repaired; counted over the ledger rows the run read.
    held_effects: int = 0
    #: The age of the oldest held change when the run read it, seconds (0: none held).
    held_oldest_seconds: int = 0
    samples: list[dict[str, Any]] = field(default_factory=list)
    duration_s: float = 0.0
    #: Listing requests made (the ``listing`` source).
    bucket_requests: int = 0
    #: Ledger rows under the prefix whose key is outside the bucket's scope (a key filter added
    #: after they were written): reported, never repaired; the first few keys as samples.
    out_of_scope: int = 0
    out_of_scope_samples: list[str] = field(default_factory=list)
    #: Rows behind each configured processor (:meth:`~s3ingest_fn.core.effects.EffectTarget.behind`:
    #: no state for it, done under a lower version, superseded, an ended lease): counted and
    #: sampled, never repaired here (``s3ingest reprocess`` does the work; C11, C12).
    effects_behind_by_processor: dict[str, int] = field(default_factory=dict)
    #: The first :data:`BEHIND_SAMPLES` keys behind each processor.
    behind_samples: dict[str, list[str]] = field(default_factory=dict)
    #: The listing run's id (resume it with the same id and work directory), or None.
    run_id: str | None = None
    #: Whether the run continued from a checkpoint (or returned a finished run's report).
    resumed: bool = False

    def count(self, drift: Drift) -> None:
        """Count one difference found by :func:`~s3ingest_fn.core.diff.diff`."""
        if drift.kind == PENDING_EFFECT:
            self.pending_effects += 1
        elif drift.kind == EFFECT_BEHIND:
            self.effects_behind += 1
        else:
            self.drift[drift.kind] += 1

    def count_held(self, row: LedgerRow, now_ms: int, targets: Sequence[EffectTarget] = ()) -> None:
        """Count the row's held effects (:func:`held_ages`) in :attr:`held_effects` and
        :attr:`held_oldest_seconds`, and each of ``targets`` (the configured processors) the
        row is behind in :attr:`effects_behind_by_processor`."""
        for age in held_ages(row, now_ms):
            self.held_effects += 1
            self.held_oldest_seconds = max(self.held_oldest_seconds, age)
        for target in targets:
            if target.behind(row, now_ms):
                self.behind(target.name, row.key)

    def behind(self, processor: str, key: str, n: int = 1) -> None:
        """Count ``n`` rows behind ``processor``, ``key`` the first of them (a sample)."""
        self.effects_behind_by_processor[processor] = (
            self.effects_behind_by_processor.get(processor, 0) + n
        )
        samples = self.behind_samples.setdefault(processor, [])
        if len(samples) < BEHIND_SAMPLES:
            samples.append(key)

    @property
    def drift_total(self) -> int:
        """All differences found (before the HEAD confirmation)."""
        return sum(self.drift.values())

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        out = dict(self.__dict__)
        out["drift"] = dict(self.drift)
        out["samples"] = list(self.samples)
        out["out_of_scope_samples"] = list(self.out_of_scope_samples)
        out["effects_behind_by_processor"] = dict(self.effects_behind_by_processor)
        out["behind_samples"] = {p: list(k) for p, k in self.behind_samples.items()}
        out["drift_total"] = self.drift_total
        return out

    def add_samples(self, drifts: list[Drift]) -> None:
        """Keep the first :data:`SAMPLES` confirmed differences."""
        room = SAMPLES - len(self.samples)
        if room > 0:
            self.samples.extend(_sample(d) for d in drifts[:room])

    def out_of_scope_row(self, key: str) -> None:
        """Count a ledger row outside the bucket's scope."""
        self.out_of_scope += 1
        if len(self.out_of_scope_samples) < SAMPLES:
            self.out_of_scope_samples.append(key)


def held_ages(row: LedgerRow, now_ms: int) -> list[int]:
    """The age at ``now_ms`` (epoch ms) of each of the row's held effects, whole seconds (0
    for a held effect whose hold time is unknown): one per processor whose effect is
    ``held``."""
    return [
        max(0, (now_ms - effect.hold.at) // 1000) if effect.hold is not None else 0
        for effect in row.effects().values()
        if effect.status == HELD
    ]


#: The counters of a report that are sums over buckets (:func:`combine_reports`).
SUMMED = (
    "bucket_rows",
    "bucket_keys",
    "bucket_requests",
    "ledger_rows",
    "ledger_requests",
    "skipped_recent",
    "skipped_after_snapshot",
    "resolved_on_head",
    "repairs_queued",
    "pending_effects",
    "effects_behind",
    "held_effects",
    "out_of_scope",
)


def combine_reports(reports: list[ReconcileReport]) -> dict[str, Any]:
    """The result of a run over several buckets: one bucket's :meth:`ReconcileReport.as_dict`
    unchanged; for several, the counters summed (:data:`SUMMED`, ``drift`` by kind,
    ``drift_total``), ``source`` (the buckets' one source, or ``"mixed"``), ``bucket`` (None),
    ``buckets`` (the names), ``samples`` (the first :data:`SAMPLES`, each with its
    ``bucket``), ``duration_s`` (the sum), ``held_oldest_seconds`` (the largest) and
    ``reports`` (one :meth:`ReconcileReport.as_dict`
    per bucket, in order)."""
    if len(reports) == 1:
        return reports[0].as_dict()
    drift = {k: sum(r.drift[k] for r in reports) for k in DRIFT_KINDS}
    sources = {r.source for r in reports}
    out: dict[str, Any] = {
        "source": sources.pop() if len(sources) == 1 else "mixed",
        "bucket": None,
        "buckets": [r.bucket for r in reports],
        "prefix": reports[0].prefix if reports else "",
        "dry_run": any(r.dry_run for r in reports),
        "drift": drift,
        "drift_total": sum(drift.values()),
        "samples": [{**s, "bucket": r.bucket} for r in reports for s in r.samples][:SAMPLES],
        "duration_s": round(sum(r.duration_s for r in reports), 3),
        "reports": [r.as_dict() for r in reports],
    }
    for name in SUMMED:
        out[name] = sum(getattr(r, name) for r in reports)
    out["held_oldest_seconds"] = max((r.held_oldest_seconds for r in reports), default=0)
    behind: dict[str, int] = {}
    samples: dict[str, list[str]] = {}
    for r in reports:
        for name, n in r.effects_behind_by_processor.items():
            behind[name] = behind.get(name, 0) + n
            samples.setdefault(name, []).extend(r.behind_samples.get(name, []))
    out["effects_behind_by_processor"] = behind
    out["behind_samples"] = {name: keys[:BEHIND_SAMPLES] for name, keys in samples.items()}
    return out


class RowsHeld:
    """How many rows (ledger rows, listing entries, differences) a run holds in memory at once,
    and the most it held: the bound the streaming listing promises, counted where the rows are
    buffered (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.now = 0
        self.peak = 0

    def add(self, n: int) -> None:
        """``n`` more rows held."""
        with self._lock:
            self.now += n
            self.peak = max(self.peak, self.now)

    def drop(self, n: int) -> None:
        """``n`` rows released."""
        with self._lock:
            self.now -= n


class Repairs(Protocol):
    """What a :class:`RepairBatch` asks of its reconciler
    (:class:`~s3ingest_fn.services.reconcile.Reconciler`): HEADs to confirm differences,
    repairs queued, and the count of rows held."""

    held: RowsHeld

    def confirm(
        self,
        drifts: list[Drift],
        report: ReconcileReport,
        tick: Progress,
        pool: Executor | None = None,
    ) -> list[Drift]:
        """The differences a HEAD still shows (and every pending or behind effect)."""
        ...

    def queue_repairs(
        self, drifts: list[Drift], pool: Executor | None = None, tick: Progress | None = None
    ) -> int:
        """Queue one repair event per difference; the count queued."""
        ...


class RepairBatch:
    """Differences waiting for confirmation: :meth:`flush` confirms them with HEADs in
    parallel, keeps the samples and queues their repairs (none on a dry run), at most
    :data:`CONFIRM_BATCH` at a time (the caller flushes when :attr:`full`)."""

    def __init__(
        self,
        reconciler: Repairs,
        report: ReconcileReport,
        tick: Progress,
        dry_run: bool,
        pool: Executor,
    ) -> None:
        self.r, self.report, self.tick, self.dry_run, self.pool = (
            reconciler,
            report,
            tick,
            dry_run,
            pool,
        )
        self.pending: list[Drift] = []
        #: Told the differences whose repairs were queued (an attestation re-reads their rows).
        self.queued: Callable[[list[Drift]], None] = lambda drifts: None

    def add(self, drift: Drift) -> None:
        """One more difference (counted in the report by the caller)."""
        self.pending.append(drift)
        self.r.held.add(1)

    @property
    def full(self) -> bool:
        """Whether the batch should be flushed now."""
        return len(self.pending) >= CONFIRM_BATCH

    def flush(self) -> None:
        """Confirm and repair what is pending.

        Raises
        ------
        ReconcileError
            When a HEAD or the queue fails.
        """
        if not self.pending:
            return
        drifts, self.pending = self.pending, []
        confirmed = self.r.confirm(drifts, self.report, self.tick, self.pool)
        self.report.add_samples(confirmed)
        if not self.dry_run and confirmed:
            self.report.repairs_queued += self.r.queue_repairs(confirmed, self.pool, self.tick)
            self.queued(confirmed)
        self.r.held.drop(len(drifts))


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
