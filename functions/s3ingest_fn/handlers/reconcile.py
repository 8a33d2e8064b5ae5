"""The reconcile Lambda handler (schedule or on demand): the bucket is the truth (CONTRACT C12).

Environment: see :func:`s3ingest_fn.wiring.function_reconciler`.

Event in (all optional): ``{"source": "inventory" | "listing", "prefix": str, "dryRun": bool,
"manifest": "<key of a manifest.json in the inventory bucket>", "marginSeconds": int}``. The
schedule sends ``{"source": "inventory"}``.

Result out: the run summary (:meth:`ReconcileReport.as_dict`), also logged, and the drift as
EMF metrics (``drift_missing``, ``drift_deleted_but_live``, ``drift_content_mismatch``,
``drift_total``; namespace ``S3Ingest``), which the stack's drift alarm watches.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from s3ingest_fn import wiring
from s3ingest_fn.contract import RECONCILE_HEARTBEAT_METRIC
from s3ingest_fn.handlers.telemetry import stack_metrics
from s3ingest_fn.services.reconcile import ReconcileError, ReconcileRequest

logger = Logger(service="s3ingest-reconcile")
metrics = stack_metrics()


def emit_drift_metrics(
    sink: Metrics,
    drift: dict[str, int],
    repairs_queued: int,
    pending_effects: int = 0,
    effects_behind: int = 0,
) -> None:
    """Add ``drift_<kind>``, ``drift_total``, ``repairs_queued``, ``effects_pending`` (processor
    effects found stuck and re-queued) and ``effects_behind`` (effects superseded with no newer
    change, re-queued) and the heartbeat ``reconcile_completed`` (1) to ``sink`` (the drift
    alarm watches ``drift_total``, the heartbeat alarm the heartbeat); the calling handler's
    ``log_metrics`` flushes them."""
    for kind, count in drift.items():
        sink.add_metric(name=f"drift_{kind}", unit=MetricUnit.Count, value=count)
    sink.add_metric(name="drift_total", unit=MetricUnit.Count, value=sum(drift.values()))
    sink.add_metric(name="repairs_queued", unit=MetricUnit.Count, value=repairs_queued)
    sink.add_metric(name="effects_pending", unit=MetricUnit.Count, value=pending_effects)
    sink.add_metric(name="effects_behind", unit=MetricUnit.Count, value=effects_behind)
    # the heartbeat: a run that got this far completed (its alarm fires when none did)
    sink.add_metric(name=RECONCILE_HEARTBEAT_METRIC, unit=MetricUnit.Count, value=1)


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Lambda entry point (``s3ingest_fn.handlers.reconcile.handler``).

    Raises
    ------
    ReconcileError
        When the source cannot be read (the invocation fails; the schedule retries it).
    ValueError
        For an invalid event.
    """
    request = ReconcileRequest.from_event(event or {})
    try:
        report = wiring.function_reconciler().run(request)
    except ReconcileError:
        logger.exception("reconciliation failed", extra={"source": request.source})
        raise
    emit_drift_metrics(
        metrics, report.drift, report.repairs_queued, report.pending_effects, report.effects_behind
    )
    summary = report.as_dict()
    logger.info("reconciliation finished", extra=summary)
    return summary
