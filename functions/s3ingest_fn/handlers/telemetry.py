"""One Powertools Metrics set-up for every handler: namespace, service, and the stack dimension.

Every metric carries ``stack=<S3INGEST_STACK>`` besides ``service=s3ingest``, so two stages in
one account never share a series (their alarms select their own stack). Per-bucket counts
(:func:`bucket_metrics`) add ``bucket`` to those two, in documents of their own; a bucket of
another account's document also carries its ``account`` (a property, not a dimension).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

from s3ingest_fn import log_keys
from s3ingest_fn.config import READ_ROLES, invocation_env
from s3ingest_fn.contract import (
    BUCKET_DIMENSION,
    METRICS_NAMESPACE,
    METRICS_SERVICE,
    STACK_DIMENSION,
    STACK_ENV,
)


def function_logger(service: str) -> Logger:
    """The Powertools Logger of a function's handler, named by its role's service
    (:data:`s3ingest_fn.contract.INGEST_SERVICE`, ...: the stack's ``POWERTOOLS_SERVICE_NAME``
    of that function), so every function's logs carry the one name the stack gives it; object
    keys in its lines as ``LOG_KEYS`` says (:class:`s3ingest_fn.log_keys.KeyFilter`, with the
    invocation's :func:`key_policy`)."""
    logger = Logger(service=service)
    log_keys.install(logging.getLogger(logger.name), key_policy)
    return logger


def key_policy() -> log_keys.KeyPolicy:
    """The invocation's :class:`~s3ingest_fn.log_keys.KeyPolicy`
    (:func:`s3ingest_fn.wiring.function_key_policy`, imported when first needed)."""
    from s3ingest_fn import wiring

    return wiring.function_key_policy()


def stack_metrics() -> Metrics:
    """Powertools Metrics for this function, with the stack as a default dimension (kept
    across flushes) when ``S3INGEST_STACK`` is set, as the stack sets it on every function."""
    metrics = Metrics(namespace=METRICS_NAMESPACE, service=METRICS_SERVICE)
    stack = invocation_env().get(STACK_ENV)
    if stack:
        metrics.set_default_dimensions(**{STACK_DIMENSION: stack})
    return metrics


def bucket_metrics(counts: Mapping[tuple[str, str], int]) -> list[EphemeralMetrics]:
    """Per-bucket counts as one EMF document per bucket: ``{(bucket, metric name): n}`` ->
    a metric set with dimensions ``service``, ``stack`` (when ``S3INGEST_STACK`` is set) and
    ``bucket``, one value per name. The caller aggregates a whole invocation first, so a batch
    costs one log line per bucket (EMF:
    https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html).
    Each set is flushed with ``flush_metrics()``; it shares no state with :func:`stack_metrics`.
    """
    documents = dimension_metrics(counts, BUCKET_DIMENSION)
    accounts = bucket_accounts()
    for document, bucket in zip(documents, sorted({v for v, _ in counts}), strict=True):
        if bucket in accounts:
            # another account's bucket: its account as a property of the document (queryable
            # in Logs Insights), not a dimension: the bucket's series stay the ones alarms use
            document.add_metadata(key=ACCOUNT_PROPERTY, value=accounts[bucket])
    return documents


#: The EMF property naming a bucket's account, on the documents of other accounts' buckets.
ACCOUNT_PROPERTY = "account"


def bucket_accounts() -> dict[str, str]:
    """Each bucket of another account -> its account id (12 digits), from ``READ_ROLES``' role
    ARNs (``arn:aws:iam::<account>:role/...``); empty when none or malformed."""
    try:
        roles = json.loads(invocation_env().get(READ_ROLES) or "{}")
    except ValueError:
        return {}
    if not isinstance(roles, dict):
        return {}
    return {
        bucket: arn.split(":")[4]
        for bucket, arn in roles.items()
        if isinstance(arn, str) and arn.count(":") >= 5
    }


def dimension_metrics(
    counts: Mapping[tuple[str, str], int], dimension: str
) -> list[EphemeralMetrics]:
    """Counts per value of ``dimension`` (``bucket``, ``processor``), as
    :func:`bucket_metrics`: ``{(value, metric name): n}`` -> one document per value."""
    stack = invocation_env().get(STACK_ENV)
    documents = []
    for value in sorted({v for v, _ in counts}):
        metrics = EphemeralMetrics(namespace=METRICS_NAMESPACE, service=METRICS_SERVICE)
        if stack:
            metrics.add_dimension(name=STACK_DIMENSION, value=stack)
        metrics.add_dimension(name=dimension, value=value)
        for (v, name), n in sorted(counts.items()):
            if v == value:
                metrics.add_metric(name=name, unit=MetricUnit.Count, value=n)
        documents.append(metrics)
    return documents


@contextmanager
def invocation_metrics(**dimensions: str) -> Iterator[EphemeralMetrics]:
    """Metrics of one invocation alone, with ``service``, ``stack`` (when set) and
    ``dimensions``, flushed as one EMF document on exit (also when the handler raises; nothing
    when no metric was added). Unlike :func:`stack_metrics`, whose state Powertools shares
    across every ``Metrics`` in the process, invocations running at once in one process (the
    local runtime's Lambda service runs Distributed Map children in threads) keep their counts
    and dimensions apart.
    """
    metrics = EphemeralMetrics(namespace=METRICS_NAMESPACE, service=METRICS_SERVICE)
    stack = invocation_env().get(STACK_ENV)
    if stack:
        metrics.add_dimension(name=STACK_DIMENSION, value=stack)
    for name, value in dimensions.items():
        metrics.add_dimension(name=name, value=value)
    try:
        yield metrics
    finally:
        if metrics.metric_set:
            metrics.flush_metrics()
