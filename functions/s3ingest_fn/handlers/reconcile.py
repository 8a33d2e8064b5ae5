"""The reconcile Lambda handler (schedule or on demand): the bucket is the truth (CONTRACT C12).

Event in (all optional): ``{"source": "inventory" | "listing", "prefix": str, "dryRun": bool,
"manifest": "<key of a manifest.json in the inventory bucket>", "marginSeconds": int}``. The
schedule sends ``{"source": "inventory"}``.

Result out: the run summary (:meth:`ReconcileReport.as_dict`), also logged, and the drift as
EMF metrics (``drift_missing``, ``drift_deleted_but_live``, ``drift_content_mismatch``,
``drift_total``; namespace ``S3Ingest``), which the stack's drift alarm watches.
"""

from __future__ import annotations

import os
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from s3ingest_fn.reconcile.service import ReconcileError, Reconciler, ReconcileRequest

logger = Logger(service="s3ingest-reconcile")
metrics = Metrics(namespace="S3Ingest", service="s3ingest")

_reconciler: Reconciler | None = None


def _build_from_env() -> Reconciler:
    """Clients and settings from ``LEDGER_TABLE_NAME``, ``INGEST_QUEUE_URL``, ``BUCKET_NAME``,
    ``INVENTORY_BUCKET_NAME`` and ``INVENTORY_PREFIX``.

    Raises
    ------
    ValueError
        Naming every missing variable.
    """
    import boto3

    required = ("LEDGER_TABLE_NAME", "INGEST_QUEUE_URL", "BUCKET_NAME")
    missing = [name for name in required if not os.environ.get(name)]
    if missing:
        raise ValueError("reconcile function misconfigured: missing " + ", ".join(missing))
    return Reconciler(
        s3=boto3.client("s3"), dynamodb=boto3.client("dynamodb"), sqs=boto3.client("sqs"),
        bucket=os.environ["BUCKET_NAME"], table=os.environ["LEDGER_TABLE_NAME"],
        queue_url=os.environ["INGEST_QUEUE_URL"],
        inventory_bucket=os.environ.get("INVENTORY_BUCKET_NAME") or None,
        inventory_prefix=os.environ.get("INVENTORY_PREFIX", ""))


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
    global _reconciler
    if _reconciler is None:
        _reconciler = _build_from_env()
    request = ReconcileRequest.from_event(event or {})
    try:
        report = _reconciler.run(request)
    except ReconcileError:
        logger.exception("reconciliation failed", extra={"source": request.source})
        raise
    for kind, count in report.drift.items():
        metrics.add_metric(name=f"drift_{kind}", unit=MetricUnit.Count, value=count)
    metrics.add_metric(name="drift_total", unit=MetricUnit.Count, value=report.drift_total)
    metrics.add_metric(name="repairs_queued", unit=MetricUnit.Count, value=report.repairs_queued)
    summary = report.as_dict()
    logger.info("reconciliation finished", extra=summary)
    return summary
