"""The backfill Lambda handler, invoked by S3 Batch Operations (schema 2.0 or 1.0).

Event in and response out: see :func:`s3ingest_fn.services.backfill.handle_invocation`.
Metrics: ``backfill_<resultCode>`` per task, and ``backfill_effects_pending`` per task whose
row is written while a processor's effect failed (a ``Succeeded`` task).
Environment as the ingest function: ``LEDGER_TABLE_NAME``, ``DEAD_LETTER_QUEUE_URL`` (unused
here, validated alike), ``TOMBSTONE_TTL_SECONDS``, ``SCOPE`` (else ``BUCKET_NAME``).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote_plus

from aws_lambda_powertools.metrics import MetricUnit

from s3ingest_fn import wiring
from s3ingest_fn.contract import BACKFILL_EFFECTS_PENDING_METRIC, BACKFILL_SERVICE
from s3ingest_fn.handlers import resume
from s3ingest_fn.handlers.telemetry import function_logger, invocation_metrics
from s3ingest_fn.services.backfill import EFFECTS_PENDING, handle_invocation

logger = function_logger(BACKFILL_SERVICE)


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Lambda entry point (``s3ingest_fn.handlers.backfill.handler``)."""
    service = wiring.function_ingest_service()
    service.bind_context(context)
    response = handle_invocation(event, service)
    with invocation_metrics() as metrics:
        for result in response["results"]:
            code = result["resultCode"]
            metrics.add_metric(name=f"backfill_{code}", unit=MetricUnit.Count, value=1)
            if str(result.get("resultString", "")).startswith(EFFECTS_PENDING):
                metrics.add_metric(
                    name=BACKFILL_EFFECTS_PENDING_METRIC, unit=MetricUnit.Count, value=1
                )
    tasks = [t if isinstance(t, dict) else {} for t in event.get("tasks") or []]
    for task, result in zip(tasks, response["results"], strict=False):
        # the task's key (URL-encoded) names it in the line, as LOG_KEYS says (with its text)
        raw = task.get("s3Key")
        keys = {"encoded_key": raw, "key": unquote_plus(raw)} if isinstance(raw, str) else {}
        logger.info(
            "backfill task",
            extra={"job_id": (event.get("job") or {}).get("id"), **result, **keys},
        )
    return response


#: the cold start ends with this module (see :mod:`s3ingest_fn.handlers`)
resume()
