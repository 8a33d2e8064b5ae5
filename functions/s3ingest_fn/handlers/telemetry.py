"""One Powertools Metrics set-up for every handler: namespace, service, and the stack dimension.

Every metric carries ``stack=<S3INGEST_STACK>`` besides ``service=s3ingest``, so two stages in
one account never share a series (their alarms select their own stack).
"""

from __future__ import annotations

import os

from aws_lambda_powertools import Metrics

from s3ingest_fn.contract import METRICS_NAMESPACE, METRICS_SERVICE, STACK_DIMENSION, STACK_ENV


def stack_metrics() -> Metrics:
    """Powertools Metrics for this function, with the stack as a default dimension (kept
    across flushes) when ``S3INGEST_STACK`` is set, as the stack sets it on every function."""
    metrics = Metrics(namespace=METRICS_NAMESPACE, service=METRICS_SERVICE)
    stack = os.environ.get(STACK_ENV)
    if stack:
        metrics.set_default_dimensions(**{STACK_DIMENSION: stack})
    return metrics
