"""The reprocess state machine's Lambda steps: ``plan``, ``segment``, ``summarize`` (see
:mod:`s3ingest_fn.services.reprocess`).

Shapes (issue 27, part 3):

* ``plan``: ``{"request": <the execution's input>, "owner": <the execution's id>,
  "limit"?: <the segment function's reserved concurrency>}`` (or the input itself), the
  input ``{"run", "processor", "bucket"?, "prefix"?, "rate"?,
  "dry_run"?, "remove"?, "segments"?, "concurrency"?}`` -> ``{...request, "version",
  "owner", "segments": [{"run", "segment", "total"}], "total", "done"}`` (the segments
  already done left out: planning a run again resumes it);
* ``segment``: ``{"run", "segment", "processor"?, "owner"?}`` -> ``{"run", "segment",
  "done", "counts", "requests", "added"}`` (``counts``, ``requests``: the segment's totals so
  far; ``added``: this call's counts); the state machine calls it again while ``done`` is
  false;
* ``summarize``: ``{"run"}`` -> ``{...request, "version", "segments", "done", "counts",
  "requests", "failures", "left_behind": {"count", "keys", "command"}, "estimated_cost_usd"}``.

Metrics (per ``processor``): ``reprocess_<count>`` of each count a segment call added
(``reprocess_run``, ``reprocess_failed``, ``reprocess_superseded``, ...), and
``reprocess_segments`` planned; the summary's ``reprocess_keys_behind`` (the keys the run
left behind, 0 when none; the stack's dimensions only), which the reprocess alarm watches.

Environment: the ingest function's (``LEDGER_TABLE_NAME``, ``DEAD_LETTER_QUEUE_URL``,
``TOMBSTONE_TTL_SECONDS``, ``RECORD_CONCURRENCY``, ``SCOPE`` / ``BUCKET_NAME``, ``PROCESSORS``
or ``PROCESSOR``, ``HOLD``), plus ``CHECKPOINT_BUCKET_NAME``
(:class:`~s3ingest_fn.config_roles.ReprocessConfig`). The segment's role needs ``dynamodb:Scan``
and the ledger rules' grants (it runs the processors); every step ``s3:GetObject`` (and plan
and segment ``s3:PutObject``) on the checkpoint bucket's ``reprocess/`` prefix.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from s3ingest_fn import wiring
from s3ingest_fn.contract import (
    PROCESSOR_DIMENSION,
    REPROCESS_KEYS_BEHIND_METRIC,
    REPROCESS_METRIC_PREFIX,
    REPROCESS_SERVICE,
)
from s3ingest_fn.handlers import resume
from s3ingest_fn.handlers.telemetry import function_logger, invocation_metrics

logger = function_logger(REPROCESS_SERVICE)


@logger.inject_lambda_context(clear_state=True)
def plan(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Lambda entry point ``s3ingest_fn.handlers.reprocess.plan``.

    Raises
    ------
    ValueError
        A malformed request, a processor not configured (or, with ``remove``, still
        configured), a bucket not one of the pipeline's, or a run that exists with another
        request or another version of the processor.
    TransientError
        The checkpoint bucket refused the plan (the state machine retries).
    """
    request = event.get("request", event)
    owner = event.get("owner") if "request" in event else None
    limit = int(event.get("limit") or 0) if "request" in event else 0
    plan = wiring.function_reprocessor().plan(dict(request), owner, limit or None)
    result = {**plan, "owner": owner}
    processor = str(result["processor"])
    with invocation_metrics(**{PROCESSOR_DIMENSION: processor}) as metrics:
        metrics.add_metric(
            name=f"{REPROCESS_METRIC_PREFIX}segments",
            unit=MetricUnit.Count,
            value=len(result["segments"]),
        )
    logger.info(
        "reprocess planned",
        extra={
            "run": result["run"],
            "processor": processor,
            "version": result["version"],
            "segments": len(result["segments"]),
            "total": result["total"],
            "done": result["done"],
            "dry_run": result["dry_run"],
            "remove": result["remove"],
        },
    )
    return result


@logger.inject_lambda_context(clear_state=True)
def segment(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Lambda entry point ``s3ingest_fn.handlers.reprocess.segment``: runs pages until the
    segment ends or less than the service's margin of the invocation's time is left.

    Raises
    ------
    ValueError
        A malformed run or segment, a run without a plan, a processor whose version changed
        since the plan, or a run another execution took over (``RunTakenOver``).
    TransientError
        The ledger or the checkpoint bucket kept failing, or no row could start (the state
        machine retries; the segment resumes from its last checkpoint).
    """
    reprocessor = wiring.function_reprocessor()
    reprocessor.service.bind_context(context)
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    result = reprocessor.segment(
        str(event.get("run") or ""),
        int(event["segment"]),
        remaining,
        owner=event.get("owner") or None,
        memory_mb=int(getattr(context, "memory_limit_in_mb", 0) or 0) or None,
    )
    processor = str(event.get("processor") or "")
    dimensions = {PROCESSOR_DIMENSION: processor} if processor else {}
    with invocation_metrics(**dimensions) as metrics:
        for name, added in result["added"].items():
            if added:
                metrics.add_metric(
                    name=f"{REPROCESS_METRIC_PREFIX}{name}", unit=MetricUnit.Count, value=added
                )
    logger.info(
        "reprocess segment",
        extra={
            "run": result["run"],
            "processor": processor,
            "segment": result["segment"],
            "done": result["done"],
            "counts": result["counts"],
            "requests": result["requests"],
        },
    )
    return result


@logger.inject_lambda_context(clear_state=True)
def summarize(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Lambda entry point ``s3ingest_fn.handlers.reprocess.summarize``.

    Raises
    ------
    ValueError
        An unknown run.
    """
    result = wiring.function_reprocessor().summarize(str(event.get("run") or ""))
    behind = int((result.get("left_behind") or {}).get("count") or 0)
    with invocation_metrics() as metrics:  # the stack's dimensions alone: the alarm's series
        metrics.add_metric(name=REPROCESS_KEYS_BEHIND_METRIC, unit=MetricUnit.Count, value=behind)
    logger.info("reprocess summary", extra=result)
    return result


#: the cold start ends with this module (see :mod:`s3ingest_fn.handlers`)
resume()
