"""The reconcile Lambda handler (schedule or on demand): the bucket is the truth (CONTRACT C12).

Environment: see :func:`s3ingest_fn.wiring.function_reconciler`.

Event in (all optional): ``{"bucket": str, "source": "inventory" | "listing", "prefix": str,
"dryRun": bool, "manifest": "<key of a manifest.json in the inventory bucket>",
"marginSeconds": int, "attest": bool}``. The schedule sends ``{"source": "inventory",
"attest": true}``. Without ``bucket``
every bucket of ``SCOPE`` is reconciled in turn; a bucket without an inventory
(``INVENTORIES``) is reconciled from its listing.

Result out: the run summary (:meth:`ReconcileReport.as_dict`; for several buckets the
superset of :func:`~s3ingest_fn.services.reconcile.combine_reports`, one report per bucket
under ``reports``), also logged, and the drift as EMF metrics (``drift_missing``,
``drift_deleted_but_live``, ``drift_content_mismatch``, ``drift_total``, summed over the
buckets; namespace ``S3Ingest``), which the stack's drift alarm watches, and the held effects
(``held_effects``, ``held_oldest_seconds``: the largest over the buckets), which the
held-changes alarm watches. When some buckets fail,
the others are still reconciled and counted, then the invocation fails naming the failed ones
(the heartbeat metric is emitted only when every bucket completed).

Attestation (issue 38): with ``"attest": true`` in the event (the schedule sends it) and
``ATTESTATION_BUCKET_NAME`` set (the stack's own bucket), a run that is not a dry run waits
for its repairs to leave the ingest queue (at most
:data:`~s3ingest_fn.services.attestation_store.SETTLE_SECONDS`), then attests each reconciled
bucket (:mod:`s3ingest_fn.services.attestation_store`): an ``inventory`` run from the trees
its own pass built (:mod:`s3ingest_fn.services.attestation_pass`; the rows of the keys it
repaired read again by GetItem, nothing else), a ``listing`` run from a second listing and
Scan; the document
under ``attestations/<bucket>/``, its SHA-256 in the log (key ``attestation_sha256``) and,
with ``CHANGE_BUS_NAME``, on the change bus (detail-type ``Attestation Made``); the metric
``attestation_differs`` counts the buckets whose roots differ (the attestation alarm watches
it). An attestation that cannot be made fails the invocation after the others.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from typing import Any

from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

from s3ingest_fn import wiring
from s3ingest_fn.config import CHANGE_BUS_NAME, STACK_ENV, invocation_env
from s3ingest_fn.contract import (
    ATTESTATION_DIFFERS_METRIC,
    EFFECTS_BEHIND_PROCESSOR_METRIC,
    HELD_EFFECTS_METRIC,
    HELD_OLDEST_METRIC,
    PROCESSOR_DIMENSION,
    RECONCILE_HEARTBEAT_METRIC,
    RECONCILE_SERVICE,
)
from s3ingest_fn.core.diff import DRIFT_KINDS
from s3ingest_fn.handlers import resume
from s3ingest_fn.handlers.telemetry import function_logger, invocation_metrics
from s3ingest_fn.services import attestation_store
from s3ingest_fn.services.reconcile import (
    INVENTORY,
    LISTING,
    ReconcileError,
    ReconcileReport,
    ReconcileRequest,
    combine_reports,
)

logger = function_logger(RECONCILE_SERVICE)


def emit_drift_metrics(
    sink: EphemeralMetrics,
    drift: dict[str, int],
    repairs_queued: int,
    pending_effects: int = 0,
    effects_behind: int = 0,
    heartbeat: bool = True,
    held_effects: int = 0,
    held_oldest_seconds: int = 0,
) -> None:
    """Add ``drift_<kind>``, ``drift_total``, ``repairs_queued``, ``effects_pending`` (processor
    effects found stuck and re-queued), ``effects_behind`` (effects superseded with no newer
    change, re-queued), ``held_effects`` (effects held for review, never re-queued),
    ``held_oldest_seconds`` (the oldest held change's age when the run read it; 0: none) and
    the heartbeat ``reconcile_completed`` (1) to ``sink`` (the drift alarm watches
    ``drift_total``, the held-changes alarm ``held_oldest_seconds``, the heartbeat alarm the
    heartbeat; ``heartbeat=False`` leaves it out); the caller flushes them
    (:func:`~s3ingest_fn.handlers.telemetry.invocation_metrics`: this invocation's alone)."""
    for kind, count in drift.items():
        sink.add_metric(name=f"drift_{kind}", unit=MetricUnit.Count, value=count)
    sink.add_metric(name="drift_total", unit=MetricUnit.Count, value=sum(drift.values()))
    sink.add_metric(name="repairs_queued", unit=MetricUnit.Count, value=repairs_queued)
    sink.add_metric(name="effects_pending", unit=MetricUnit.Count, value=pending_effects)
    sink.add_metric(name="effects_behind", unit=MetricUnit.Count, value=effects_behind)
    sink.add_metric(name=HELD_EFFECTS_METRIC, unit=MetricUnit.Count, value=held_effects)
    sink.add_metric(name=HELD_OLDEST_METRIC, unit=MetricUnit.Seconds, value=held_oldest_seconds)
    if heartbeat:
        # the heartbeat: a run that got this far completed (its alarm fires when none did)
        sink.add_metric(name=RECONCILE_HEARTBEAT_METRIC, unit=MetricUnit.Count, value=1)


def emit_summary_metrics(sink: Any, summary: Mapping[str, Any], heartbeat: bool = True) -> None:
    """:func:`emit_drift_metrics` of a run's summary (``ReconcileReport.as_dict``,
    :func:`~s3ingest_fn.services.reconcile.combine_reports`' or the fan-out's ``summarize``)."""
    emit_drift_metrics(
        sink,
        summary["drift"],
        summary["repairs_queued"],
        summary.get("pending_effects", 0),
        summary.get("effects_behind", 0),
        heartbeat=heartbeat,
        held_effects=summary.get("held_effects", 0),
        held_oldest_seconds=summary.get("held_oldest_seconds", 0),
    )


def emit_behind_metrics(behind: dict[str, int]) -> None:
    """Emit ``effects_behind_processor`` (rows behind each processor: never run for the row's
    change, or done under a lower version; ``s3ingest reprocess`` takes them up), one
    invocation's metrics per processor with its ``processor`` dimension."""
    for name, count in sorted(behind.items()):
        with invocation_metrics(**{PROCESSOR_DIMENSION: name}) as metrics:
            metrics.add_metric(
                name=EFFECTS_BEHIND_PROCESSOR_METRIC, unit=MetricUnit.Count, value=count
            )


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Lambda entry point (``s3ingest_fn.handlers.reconcile.handler``).

    Raises
    ------
    ReconcileError
        When the source cannot be read (the invocation fails; the schedule retries it).
    ValueError
        For an invalid event.
    """
    event = event or {}
    request = ReconcileRequest.from_event(event)
    named = event.get("bucket")
    buckets = [str(named)] if named else list(wiring.function_reconcile_buckets())
    reports: list[ReconcileReport] = []
    failed: list[str] = []
    taps: dict[str, attestation_store.TreeTap] = {}
    attesting = (
        not request.dry_run
        and event.get("attest") is True
        and bool(invocation_env().get(attestation_store.ATTESTATION_BUCKET_ENV))
    )
    for bucket in buckets:
        reconciler = wiring.function_reconciler(bucket)
        own = request
        if request.source == INVENTORY and not reconciler.inventory_bucket:
            own = replace(request, source=LISTING, manifest_key=None)  # no inventory: list it
        tap = None
        if attesting and own.source == INVENTORY:  # the trees from the run's own pass
            tap = taps[reconciler.bucket] = attestation_store.tap_for(reconciler)
        try:
            reports.append(reconciler.run(own, tap=tap))
        except ReconcileError as exc:
            logger.exception(
                "reconciliation failed", extra={"source": own.source, "bucket": bucket}
            )
            if len(buckets) == 1:
                raise
            failed.append(f"{bucket}: {exc}")
    drift = {k: sum(r.drift[k] for r in reports) for k in DRIFT_KINDS}
    with invocation_metrics() as metrics:
        emit_drift_metrics(
            metrics,
            drift,
            sum(r.repairs_queued for r in reports),
            sum(r.pending_effects for r in reports),
            sum(r.effects_behind for r in reports),
            heartbeat=not failed,
            held_effects=sum(r.held_effects for r in reports),
            held_oldest_seconds=max((r.held_oldest_seconds for r in reports), default=0),
        )
    summary = combine_reports(reports) if reports else {"reports": []}
    emit_behind_metrics(summary.get("effects_behind_by_processor") or {})
    logger.info("reconciliation finished", extra=summary)
    if reports and not request.dry_run and event.get("attest") is True:
        failed += attest_after_repairs(reports, taps)
    if failed:
        raise ReconcileError(
            f"reconciliation failed for {len(failed)} of {len(buckets)} buckets: "
            + "; ".join(failed)
        )
    return summary


def attest_after_repairs(
    reports: list[ReconcileReport], taps: Mapping[str, attestation_store.TreeTap] | None = None
) -> list[str]:
    """Attest each reconciled bucket once its repairs left the ingest queue (the module's
    docstring): from its run's pass where ``taps`` has the bucket's (an ``inventory`` run:
    the repaired keys' rows read again, nothing else), else from a second read of its
    source; emit ``attestation_differs``. Returns the buckets whose attestation failed,
    each ``"<bucket>: <why>"`` (nothing when ``ATTESTATION_BUCKET_NAME`` is unset)."""
    taps = taps or {}
    env = invocation_env()
    store_bucket = env.get(attestation_store.ATTESTATION_BUCKET_ENV)
    if not store_bucket:
        return []
    clients = wiring.function_clients()
    first = wiring.function_reconciler(reports[0].bucket)
    if any(r.repairs_queued or r.pending_effects or r.effects_behind for r in reports):
        depth = attestation_store.queue_depth(wiring.client(clients, "sqs"), first.queue_url)
        if not attestation_store.settle(depth):
            logger.warning("repairs still queued when attesting")
    s3, bus = wiring.client(clients, "s3"), env.get(CHANGE_BUS_NAME)
    failed: list[str] = []
    differs = 0
    ledger = wiring.ledger(wiring.client(clients, "dynamodb"), first.table, 0)
    for report in reports:
        try:
            stored = attestation_store.scheduled(
                wiring.function_reconciler(report.bucket),
                s3,
                store_bucket=store_bucket,
                stack=env.get(STACK_ENV, ""),
                source=report.source,
                margin_ms=round(report.margin_s * 1000),
                prefix=report.prefix,
                tap=taps.get(report.bucket),
                read_row=partial(ledger.get, report.bucket),
            )
        except attestation_store.AttestError as exc:
            logger.exception("attestation failed", extra={"bucket": report.bucket})
            failed.append(f"{report.bucket}: attestation: {exc}")
            continue
        differs += not stored["document"]["equal"]
        said_of(stored, bus)
    emit_differs(differs)
    return failed


def said_of(stored: dict[str, Any], bus: str | None) -> dict[str, Any]:
    """Log a stored attestation (its SHA-256 as ``attestation_sha256``) and, with ``bus``,
    announce it on the change bus; returns :func:`attestation_store.summary`."""
    said = attestation_store.summary(stored)
    logger.info("attestation made", extra={**said, "attestation_sha256": stored["document_sha256"]})
    if bus and not attestation_store.announce(stored, wiring.function_change_publisher(), bus):
        logger.error("the change bus did not take the attestation", extra=said)
    return said


def emit_differs(differs: int) -> None:
    """Emit ``attestation_differs`` (the buckets whose roots differ; the attestation alarm)."""
    with invocation_metrics() as metrics:
        metrics.add_metric(name=ATTESTATION_DIFFERS_METRIC, unit=MetricUnit.Count, value=differs)


#: the cold start ends with this module (see :mod:`s3ingest_fn.handlers`)
resume()
