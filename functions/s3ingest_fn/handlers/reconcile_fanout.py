"""The fan-out reconciliation's step handler: one Lambda, dispatched on ``event["action"]``
(``plan``, ``shard_inventory``, ``shard_ledger``, ``diff_partition``, ``summarize``), invoked by
the reconcile state machine (see :mod:`s3ingest_fn.reconcile.fanout`).

Environment: as the reconcile handler (``LEDGER_TABLE_NAME``, ``INGEST_QUEUE_URL``,
``BUCKET_NAME``, ``INVENTORY_BUCKET_NAME``, ``INVENTORY_PREFIX``).
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from s3ingest_fn.handlers import reconcile as single
from s3ingest_fn.reconcile.fanout import FanOut

logger = Logger(service="s3ingest-reconcile")
metrics = Metrics(namespace="S3Ingest", service="s3ingest")

_fanout: FanOut | None = None
ACTIONS = ("plan", "shard_inventory", "shard_ledger", "diff_partition", "summarize")


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Lambda entry point (``s3ingest_fn.handlers.reconcile_fanout.handler``).

    Raises
    ------
    ValueError
        For an unknown action.
    """
    global _fanout
    action = event.get("action")
    if action not in ACTIONS:
        raise ValueError(f"action must be one of {ACTIONS}, not {action!r}")
    if _fanout is None:
        _fanout = FanOut(single._build_from_env())
    result: dict[str, Any] = getattr(_fanout, action)(event)
    if action == "summarize":
        for kind, count in result["drift"].items():
            metrics.add_metric(name=f"drift_{kind}", unit=MetricUnit.Count, value=count)
        metrics.add_metric(name="drift_total", unit=MetricUnit.Count, value=result["drift_total"])
        metrics.add_metric(name="repairs_queued", unit=MetricUnit.Count,
                           value=result["repairs_queued"])
        logger.info("reconciliation finished", extra=result)
    return result
