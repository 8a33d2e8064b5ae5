"""The fan-out reconciliation's step handler: one Lambda, dispatched on ``event["action"]``
(``plan``, ``shard_inventory``, ``shard_ledger``, ``diff_partition``, ``summarize``), invoked by
the reconcile state machine (see :mod:`s3ingest_fn.services.fanout`).

Environment: see :func:`s3ingest_fn.wiring.function_reconciler`. The bucket comes from the
event (:func:`~s3ingest_fn.services.fanout.bucket_of`: the machine's input ``{"bucket": B}``,
carried by the plan and its run id; default the pipeline's first bucket).
"""

from __future__ import annotations

from typing import Any

from s3ingest_fn import wiring
from s3ingest_fn.contract import RECONCILE_SERVICE
from s3ingest_fn.handlers import resume
from s3ingest_fn.handlers.reconcile import emit_behind_metrics, emit_summary_metrics
from s3ingest_fn.handlers.telemetry import function_logger, invocation_metrics
from s3ingest_fn.services.fanout import FanOut, bucket_of

logger = function_logger(RECONCILE_SERVICE)

ACTIONS = ("plan", "shard_inventory", "shard_ledger", "diff_partition", "summarize")


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Lambda entry point (``s3ingest_fn.handlers.reconcile_fanout.handler``).

    Raises
    ------
    ValueError
        For an unknown action.
    """
    action = event.get("action")
    if action not in ACTIONS:
        raise ValueError(f"action must be one of {ACTIONS}, not {action!r}")
    fan_out = FanOut(wiring.function_reconciler(bucket_of(event)))
    result: dict[str, Any] = getattr(fan_out, action)(event)
    if action == "summarize":
        with invocation_metrics() as metrics:
            emit_summary_metrics(metrics, result)
        emit_behind_metrics(result.get("effects_behind_by_processor") or {})
        logger.info("reconciliation finished", extra=result)
    return result


#: the cold start ends with this module (see :mod:`s3ingest_fn.handlers`)
resume()
