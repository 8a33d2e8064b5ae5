"""The operations dashboard: outcomes, drift, queues, functions and every alarm's state."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from s3ingest_cdk.constructs.drift_alarm import DRIFT_KINDS, TOTAL_METRIC, drift_metric
from s3ingest_fn.contract import METRICS_NAMESPACE, metric_dimensions

#: The ingest handler's per-message metrics: one per outcome (CONTRACT C9,
#: ``s3ingest_fn.core.model.Outcome``), and ``replayed`` for events replayed from the archive (C14).
OUTCOME_METRICS = (
    "applied",
    "duplicate",
    "stale",
    "superseded",
    "ignored",
    "invalid",
    "retried",
    "replayed",
)

_PERIOD = Duration.minutes(5)
_WIDTH = 12  # half of the dashboard's 24 columns


def outcome_metric(metric_name: str, *, stack_name: str) -> cloudwatch.Metric:
    """One ingest outcome metric as the stack ``stack_name``'s handler emits it (EMF), summed per
    5 minutes."""
    return cloudwatch.Metric(
        namespace=METRICS_NAMESPACE,
        metric_name=metric_name,
        dimensions_map=metric_dimensions(stack_name),
        statistic=cloudwatch.Stats.SUM,
        period=_PERIOD,
        label=metric_name,
    )


class OperationsDashboard(Construct):
    """One CloudWatch dashboard for the stage.

    Rows: the ingest outcomes and the drift found by reconciliation; the ingest queue (depth, age
    of its oldest message) and the dead-letter queues; every function's errors, throttles and
    duration; the state of every alarm.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        dashboard_name: str,
        queue: sqs.IQueue,
        dead_letter_queue: sqs.IQueue,
        target_dead_letter_queue: sqs.IQueue,
        functions: Mapping[str, lambda_.IFunction],
        alarms: Sequence[cloudwatch.IAlarm],
        change_dead_letter_queue: sqs.IQueue | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        maximum, summed = cloudwatch.Stats.MAXIMUM, cloudwatch.Stats.SUM
        dead_letter_queues = {
            "Ingest DLQ": dead_letter_queue,
            "Rule target DLQ": target_dead_letter_queue,
        }
        if change_dead_letter_queue is not None:
            dead_letter_queues["Change stream DLQ"] = change_dead_letter_queue
        # Reconciliation emits the drift metrics once per run: the hourly maximum shows each run.
        stack_name = Stack.of(self).stack_name
        drift = [
            drift_metric(name, stack_name=stack_name, period=Duration.hours(1))
            for name in (TOTAL_METRIC, *(f"drift_{kind}" for kind in DRIFT_KINDS))
        ]

        def each(what: str, statistic: str) -> list[cloudwatch.IMetric]:
            """Every function's ``metric_<what>``, labelled ``"<name> <what>"``."""
            return [
                getattr(f, f"metric_{what}")(
                    label=f"{name} {what}", statistic=statistic, period=_PERIOD
                )
                for name, f in functions.items()
            ]

        self.dashboard = cloudwatch.Dashboard(
            self,
            "Dashboard",
            dashboard_name=dashboard_name,
            widgets=[
                [
                    cloudwatch.GraphWidget(
                        title="Ingest outcomes (messages per 5 minutes)",
                        left=[
                            outcome_metric(name, stack_name=stack_name) for name in OUTCOME_METRICS
                        ],
                        width=_WIDTH,
                    ),
                    cloudwatch.GraphWidget(
                        title="Drift found by reconciliation (keys per run)",
                        left=drift,
                        width=_WIDTH,
                    ),
                ],
                [
                    cloudwatch.GraphWidget(
                        title="Ingest queue",
                        left=[
                            queue.metric_approximate_number_of_messages_visible(
                                label="Messages visible", statistic=maximum, period=_PERIOD
                            )
                        ],
                        right=[
                            queue.metric_approximate_age_of_oldest_message(
                                label="Age of oldest message (s)", statistic=maximum, period=_PERIOD
                            )
                        ],
                        width=_WIDTH,
                    ),
                    cloudwatch.GraphWidget(
                        title="Dead-letter queues (messages visible)",
                        left=[
                            dlq.metric_approximate_number_of_messages_visible(
                                label=label, statistic=maximum, period=_PERIOD
                            )
                            for label, dlq in dead_letter_queues.items()
                        ],
                        width=_WIDTH,
                    ),
                ],
                [
                    cloudwatch.GraphWidget(
                        title="Lambda errors and throttles (per 5 minutes)",
                        left=each("errors", summed),
                        right=each("throttles", summed),
                        width=_WIDTH,
                    ),
                    cloudwatch.GraphWidget(
                        title="Lambda duration (maximum, ms)",
                        left=each("duration", maximum),
                        width=_WIDTH,
                    ),
                ],
                [
                    cloudwatch.AlarmStatusWidget(
                        title="Alarms",
                        alarms=list(alarms),
                        width=2 * _WIDTH,
                    )
                ],
            ],
        )
