"""The listing backfill state machine's Lambda steps: ``plan``, ``list_shard``, ``summarize``
(see :mod:`s3ingest_fn.services.listing_backfill`).

Shapes (issue 15's design, section 3):

* ``plan``: ``{"bucket"?, "run"}`` -> ``{"bucket", "run", "shards": [{"id", "bucket",
  "prefix", "start_after", "end_before"}], "done": n, "probes": n}`` (``bucket`` defaults to
  the first of ``SCOPE``);
* ``list_shard``: ``{"run", "shard"}`` -> ``{"run", "shard", "done", "counts", "requests",
  "added"}`` (``counts``, ``requests``: the shard's totals so far; ``added``: this call's
  counts); the state machine calls it again while ``done`` is false;
* ``summarize``: ``{"bucket"?, "run"}`` -> ``{"bucket", "run", "shards", "done", "counts",
  "requests"}``.

Environment: as the backfill function (``LEDGER_TABLE_NAME``, ``DEAD_LETTER_QUEUE_URL``,
``TOMBSTONE_TTL_SECONDS``, ``RECORD_CONCURRENCY``, ``SCOPE`` / ``BUCKET_NAME``, ``PROCESSOR``),
plus ``CHECKPOINT_BUCKET_NAME``. The role needs ``s3:ListBucket`` and ``s3:ListBucketVersions``
on the landing buckets, ``s3:GetObject`` (HEAD) on their objects, and ``s3:GetObject``,
``s3:PutObject``, ``s3:ListBucket`` on the checkpoint bucket's ``backfill-listing/`` prefix.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from s3ingest_fn import wiring
from s3ingest_fn.contract import BUCKET_DIMENSION, LISTING_SERVICE
from s3ingest_fn.handlers import resume
from s3ingest_fn.handlers.telemetry import function_logger, invocation_metrics
from s3ingest_fn.services.listing_backfill import Shard

logger = function_logger(LISTING_SERVICE)


def _bucket(event: dict[str, Any]) -> str:
    bucket = event.get("bucket")
    if bucket:
        return str(bucket)
    names = wiring.function_listing_backfill().scope.names
    if not names:
        raise ValueError("no bucket given and none in SCOPE / BUCKET_NAME")
    return names[0]


@logger.inject_lambda_context(clear_state=True)
def plan(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Lambda entry point ``s3ingest_fn.handlers.listing_backfill.plan``.

    Raises
    ------
    ValueError
        No ``run``, or a bucket that is not one of the pipeline's.
    """
    backfill = wiring.function_listing_backfill()
    bucket = _bucket(event)
    result = backfill.plan(bucket, str(event.get("run") or ""))
    with invocation_metrics(**{BUCKET_DIMENSION: bucket}) as metrics:
        metrics.add_metric(
            name="listing_shards", unit=MetricUnit.Count, value=len(result["shards"])
        )
        metrics.add_metric(name="listing_probes", unit=MetricUnit.Count, value=result["probes"])
    logger.info(
        "listing backfill planned",
        extra={
            "bucket": bucket,
            "run": result["run"],
            "shards": len(result["shards"]),
            "done": result["done"],
            "probes": result["probes"],
        },
    )
    return result


@logger.inject_lambda_context(clear_state=True)
def list_shard(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Lambda entry point ``s3ingest_fn.handlers.listing_backfill.list_shard``: lists until the
    shard ends or less than the service's margin of the invocation's time is left.

    Raises
    ------
    ValueError
        A malformed shard or run.
    TransientError
        S3 or the ledger kept failing (the state machine retries; the shard resumes from its
        last checkpoint).
    """
    backfill = wiring.function_listing_backfill()
    backfill.service.bind_context(context)
    shard = Shard.of(dict(event.get("shard") or {}))
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    result = backfill.list_shard(str(event.get("run") or ""), shard, remaining)
    with invocation_metrics(**{BUCKET_DIMENSION: shard.bucket}) as metrics:
        for name, added in result["added"].items():
            if added:
                metrics.add_metric(name=f"listing_{name}", unit=MetricUnit.Count, value=added)
    logger.info(
        "listing shard",
        extra={
            "bucket": shard.bucket,
            "run": result["run"],
            "shard_id": shard.id,
            "done": result["done"],
            "counts": result["counts"],
            "requests": result["requests"],
        },
    )
    return result


@logger.inject_lambda_context(clear_state=True)
def summarize(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Lambda entry point ``s3ingest_fn.handlers.listing_backfill.summarize``."""
    backfill = wiring.function_listing_backfill()
    result = backfill.summarize(_bucket(event), str(event.get("run") or ""))
    logger.info("listing backfill summary", extra=result)
    return result


#: the cold start ends with this module (see :mod:`s3ingest_fn.handlers`)
resume()
