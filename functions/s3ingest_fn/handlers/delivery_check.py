"""The scheduled EventBridge delivery check: is each landing bucket still sending its events?

If another deploy rewrites a bucket's notification configuration without
``EventBridgeConfiguration``, S3 stops emitting events to EventBridge and nothing else notices:
ingestion just stops. Each run reads the configuration of every bucket in
``DELIVERY_CHECK_BUCKETS`` (comma-separated) and emits ``eventbridge_delivery_enabled``: 1 when
every bucket has delivery on, 0 when any has it off (the alarm fires on 0 and on missing data).
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from s3ingest_fn import wiring
from s3ingest_fn.config_roles import DeliveryCheckConfig
from s3ingest_fn.contract import DELIVERY_CHECK_SERVICE, DELIVERY_METRIC
from s3ingest_fn.core.ports import EventDelivery
from s3ingest_fn.handlers import resume
from s3ingest_fn.handlers.telemetry import function_logger, invocation_metrics

logger = function_logger(DELIVERY_CHECK_SERVICE)


def check(delivery: EventDelivery, buckets: list[str]) -> dict[str, bool]:
    """Each bucket's EventBridge delivery, on or off
    (:func:`s3ingest_fn.wiring.event_delivery` reads it from S3).

    Raises
    ------
    TransientError
        When S3 does not answer for a bucket.
    """
    return {bucket: delivery.enabled(bucket) for bucket in buckets}


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Lambda entry point (``s3ingest_fn.handlers.delivery_check.handler``), on a schedule.

    Returns
    -------
    dict
        ``{"buckets": {name: bool}, "enabled": bool}``.
    """
    buckets = list(wiring.function_config(DeliveryCheckConfig).buckets)
    states = check(wiring.function_event_delivery(), buckets)
    enabled = all(states.values())
    for bucket, on in states.items():
        # off: S3 sends this bucket's events nowhere s3ingest listens (runbook:
        # eventbridge-delivery-off)
        (logger.info if on else logger.error)(
            "eventbridge delivery checked", extra={"bucket": bucket, "enabled": on}
        )
    with invocation_metrics() as metrics:
        metrics.add_metric(name=DELIVERY_METRIC, unit=MetricUnit.Count, value=int(enabled))
    return {"buckets": states, "enabled": enabled}


#: the cold start ends with this module (see :mod:`s3ingest_fn.handlers`)
resume()
