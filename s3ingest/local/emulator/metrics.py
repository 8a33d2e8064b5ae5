"""The functions' metrics in the emulator's CloudWatch, as deployed: a Lambda function prints
each invocation's metrics as an embedded metric format (EMF) document, and CloudWatch Logs puts
them into CloudWatch metrics
(https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html).
Locally nothing reads the functions' logs, so what ``s3ingest status`` reads from metrics (the
last reconciliation's drift) is put here, with the same namespace, names and dimensions.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from aws_lambda_powertools.metrics import EphemeralMetrics

from s3ingest_fn.contract import METRICS_NAMESPACE, METRICS_SERVICE, STACK_DIMENSION


def put_emf(cloudwatch: Any, document: Mapping[str, Any]) -> int:
    """Put the metrics of one EMF ``document`` (``{"_aws": {"Timestamp", "CloudWatchMetrics":
    [{"Namespace", "Dimensions", "Metrics"}]}, <dimension>: value, <metric>: value(s)}``) with
    ``PutMetricData``, one datum per metric and dimension set; returns how many were put."""
    meta = document["_aws"]
    at = datetime.fromtimestamp(int(meta["Timestamp"]) / 1000, UTC)
    put = 0
    for directive in meta["CloudWatchMetrics"]:
        data = []
        for names in directive["Dimensions"]:
            # by name: CloudWatch matches a metric's dimensions in any order, moto in order
            dimensions = [{"Name": n, "Value": str(document[n])} for n in sorted(names)]
            for metric in directive["Metrics"]:
                raw = document[metric["Name"]]
                values = [float(v) for v in (raw if isinstance(raw, list) else [raw])]
                data.append(
                    {
                        "MetricName": metric["Name"],
                        "Dimensions": dimensions,
                        "Timestamp": at,
                        "Unit": metric.get("Unit", "None"),
                        "Values": values,
                    }
                )
        for start in range(0, len(data), 20):
            cloudwatch.put_metric_data(
                Namespace=directive["Namespace"], MetricData=data[start : start + 20]
            )
        put += len(data)
    return put


def record_reconciliation(
    cloudwatch: Any, stack: str, summary: Mapping[str, Any], heartbeat: bool = True
) -> int:
    """Put the metrics the reconcile functions emit at the end of a run of ``summary``
    (:func:`s3ingest_fn.handlers.reconcile.emit_summary_metrics`: ``drift_total`` and the
    rest) as stack ``stack``'s; returns how many were put."""
    from s3ingest_fn.handlers.reconcile import emit_summary_metrics

    metrics = EphemeralMetrics(namespace=METRICS_NAMESPACE, service=METRICS_SERVICE)
    metrics.add_dimension(name=STACK_DIMENSION, value=stack)
    emit_summary_metrics(metrics, summary, heartbeat=heartbeat)
    document = metrics.serialize_metric_set()
    metrics.clear_metrics()
    return put_emf(cloudwatch, document)


def keep_end_time_second() -> None:
    """moto's ``GetMetricData`` drops ``EndTime``'s fraction of a second, leaving out a
    datapoint put earlier in that second; round ``EndTime`` up to the next second instead (what
    is after the query's end is later than now: nothing). Applied once per process
    (:mod:`s3ingest.local.emulator.moto_patches`); idempotent."""
    from moto.cloudwatch.models import CloudWatchBackend

    original = CloudWatchBackend.get_metric_data
    if getattr(original, "_s3ingest_local", False):
        return

    def get_metric_data(
        self: Any,
        queries: list[dict[str, Any]],
        start_time: datetime,
        end_time: datetime,
        scan_by: str = "TimestampAscending",
    ) -> list[dict[str, Any]]:
        if end_time.microsecond:
            end_time = end_time.replace(microsecond=0) + timedelta(seconds=1)
        return original(self, queries, start_time, end_time, scan_by)

    get_metric_data._s3ingest_local = True  # type: ignore[attr-defined]
    CloudWatchBackend.get_metric_data = get_metric_data  # type: ignore[method-assign]
