"""The drift metrics reconciliation emits, and the alarm on their total (CONTRACT C12)."""

from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from s3ingest_cdk.constructs.operational_alarms import alarm_name, runbook
from s3ingest_fn.contract import ATTESTATION_DIFFERS_METRIC, METRICS_NAMESPACE, metric_dimensions

#: Per-kind drift metrics (``drift_<kind>``), as ``s3ingest_fn.core.diff.DRIFT_KINDS``.
DRIFT_KINDS = ("missing", "deleted_but_live", "content_mismatch", "sequencer_contradicted")
TOTAL_METRIC = "drift_total"


def drift_metric(metric_name: str, *, stack_name: str, period: Duration) -> cloudwatch.Metric:
    """One drift metric (Maximum over ``period``) as the reconcile handlers of the stack
    ``stack_name`` emit it (EMF).

    Parameters
    ----------
    metric_name : str
        ``"drift_total"`` or ``"drift_<kind>"``.
    """
    return cloudwatch.Metric(
        namespace=METRICS_NAMESPACE,
        metric_name=metric_name,
        dimensions_map=metric_dimensions(stack_name),
        statistic=cloudwatch.Stats.MAXIMUM,
        period=period,
    )


class DriftAlarm(Construct):
    """Alarm when a reconciliation run found any drift between the bucket and the ledger.

    Each run emits ``drift_total`` once (CloudWatch embedded metric format, namespace
    ``S3Ingest``, dimensions ``service=s3ingest`` and ``stack=<this stack>``); the alarm fires
    when the daily maximum is at least 1. Days without a run are not breaching: no data is not
    drift (a failed run shows in the function's or the state machine's own errors, a run that
    never starts in the heartbeat alarm). Its actions are added by
    :class:`s3ingest_cdk.constructs.OperationalAlarms`, which notifies the alarm topic.

    Parameters
    ----------
    period : aws_cdk.Duration
        Evaluation period (one day by default, the default schedule's interval).

    Attributes
    ----------
    alarm : aws_cdk.aws_cloudwatch.Alarm
        The alarm on ``drift_total``.
    by_kind : dict[str, aws_cdk.aws_cloudwatch.Metric]
        ``drift_missing``, ``drift_deleted_but_live``, ``drift_content_mismatch``,
        ``drift_sequencer_contradicted`` by kind, for dashboards (no alarm on them).
    attestation : aws_cdk.aws_cloudwatch.Alarm
        ``s3ingest-<stage>-attestation``: the scheduled run's attestation, made after its
        repairs, has differing roots for a bucket (``attestation_differs`` >= 1, daily
        maximum; no data is not breaching). Its actions are added by the monitoring feature.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        runbook_base_url: str,
        period: Duration | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        period = period or Duration.days(1)
        stack_name = Stack.of(self).stack_name
        self.total = drift_metric(TOTAL_METRIC, stack_name=stack_name, period=period)
        self.by_kind = {
            kind: drift_metric(f"drift_{kind}", stack_name=stack_name, period=period)
            for kind in DRIFT_KINDS
        }
        self.alarm = cloudwatch.Alarm(
            self,
            "Alarm",
            alarm_name=alarm_name(stage, "drift"),
            alarm_description=(
                "s3ingest: reconciliation found keys where the ledger differs from the bucket "
                "(drift_total >= 1); unless the run was a dry run, repairs went through the ingest "
                f"queue. Runbook: {runbook(runbook_base_url, 'events-lost-upstream')}"
            ),
            metric=self.total,
            threshold=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self.attestation = cloudwatch.Alarm(
            self,
            "AttestationAlarm",
            alarm_name=alarm_name(stage, "attestation"),
            alarm_description=(
                "s3ingest: the scheduled reconciliation's attestation, made after its repairs, "
                "has differing roots (attestation_differs >= 1): keys whose ledger row or "
                "processor version still differs from the bucket; the document under "
                "attestations/<bucket>/ of the stack's bucket names them. Runbook: "
                f"{runbook(runbook_base_url, 'events-lost-upstream')}"
            ),
            metric=drift_metric(ATTESTATION_DIFFERS_METRIC, stack_name=stack_name, period=period),
            threshold=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
