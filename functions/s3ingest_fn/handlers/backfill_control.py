"""The backfill state machine's Lambda steps: ``prepare``, ``report``, ``backfill_file``,
``summarize`` (see :mod:`s3ingest_fn.services.backfill_control`). Environment: as the reconcile and
ingest functions, plus ``REPORT_BUCKET_NAME`` for ``report``.
"""

from __future__ import annotations

from typing import Any

from s3ingest_fn import wiring
from s3ingest_fn.config_roles import BackfillControlConfig
from s3ingest_fn.contract import BACKFILL_SERVICE
from s3ingest_fn.handlers import resume
from s3ingest_fn.handlers.telemetry import function_logger
from s3ingest_fn.services import backfill_control

logger = function_logger(BACKFILL_SERVICE)
ACTIONS = ("prepare", "report", "backfill_file", "summarize")


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Lambda entry point (``s3ingest_fn.handlers.backfill_control.handler``).

    Raises
    ------
    ValueError
        For an unknown action.
    """
    action = event.get("action")
    if action not in ACTIONS:
        raise ValueError(f"action must be one of {ACTIONS}, not {action!r}")
    if action == "summarize":
        return backfill_control.summarize(event)
    reconciler = wiring.function_reconciler()
    if action == "prepare":
        result = backfill_control.prepare(reconciler, event)
    elif action == "report":
        result = backfill_control.read_report(
            reconciler.inventory,
            str(wiring.function_config(BackfillControlConfig).report_bucket_name),
            str(event["jobId"]),
        )
    else:
        service = wiring.function_ingest_service()
        service.bind_context(context)
        result = backfill_control.backfill_file(reconciler, service, event)
    logger.info(
        "backfill step",
        extra={"action": action, **{k: v for k, v in result.items() if k != "samples"}},
    )
    return result


#: the cold start ends with this module (see :mod:`s3ingest_fn.handlers`)
resume()
