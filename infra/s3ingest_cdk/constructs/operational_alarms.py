"""The operational alarms: dead letters, a falling-behind or lagging ingest path, failed or
missing runs, throttling, functions near their timeout, and events that stopped arriving."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from aws_cdk import Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from s3ingest_fn.contract import (
    DELIVERY_METRIC,
    HELD_OLDEST_METRIC,
    LAG_METRIC,
    METRICS_NAMESPACE,
    RECONCILE_HEARTBEAT_METRIC,
    REPROCESS_KEYS_BEHIND_METRIC,
    metric_dimensions,
)

#: Oldest message in the ingest queue before the ingest path counts as falling behind.
MAX_MESSAGE_AGE = Duration.minutes(15)
#: Age of the newest stream record the change relay got before the change stream counts as stuck
#: (the relay's ``IteratorAge``; a partial batch failure is not a function error).
MAX_CHANGE_AGE = Duration.minutes(15)

#: A function whose longest invocation in 5 minutes took more than this share of its timeout is
#: about to time out (a timed-out batch is retried whole).
DURATION_TIMEOUT_SHARE = 0.8
#: The delivery check runs every 15 minutes; each 30-minute period holds at least one run.
DELIVERY_PERIOD = Duration.minutes(30)

_FIVE_MINUTES = Duration.minutes(5)
_ONE_HOUR = Duration.hours(1)


def dead_letter_age_threshold(retention: Duration, source_retention: Duration | None) -> Duration:
    """The age of a DLQ's oldest message that fires its age alarm: half the time the DLQ is sure
    to keep a message, and at least one hour.

    A message sent to the DLQ (a rule target's or an on-failure destination's) is kept for the
    DLQ's ``retention`` from then. A message a standard queue's redrive policy moves keeps its
    original enqueue time, and so expires earlier, while ``ApproximateAgeOfOldestMessage`` counts
    from the move
    (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/setting-up-dead-letter-queue-retention.html):
    it may have spent up to ``source_retention`` in the source queue, so that DLQ is sure to keep
    it ``retention - source_retention`` only. Alarming at half leaves the other half to act (with
    the defaults: 5 of the ingest DLQ's 10 sure days, 7 of 14 for the others); the depth alarm
    already fired at the first message.
    """
    window = retention.to_seconds() - (source_retention.to_seconds() if source_retention else 0)
    return Duration.seconds(max(int(window // 2), int(_ONE_HOUR.to_seconds())))


def runbook(base_url: str, anchor: str) -> str:
    """``<base_url>#<anchor>``: the runbook section an alarm description links to (the
    ``runbookBaseUrl`` setting, an absolute ``https://`` URL)."""
    return f"{base_url}#{anchor}"


def alarm_name(stage: str, what: str) -> str:
    """``s3ingest-<stage>-<what>``: every alarm's name (unique per account and region, so two
    stages never collide)."""
    return f"s3ingest-{stage}-{what}"


def _depth(queue: sqs.IQueue) -> cloudwatch.IMetric:
    """The queue's visible messages, Maximum over 5 minutes."""
    return queue.metric_approximate_number_of_messages_visible(
        statistic=cloudwatch.Stats.MAXIMUM, period=_FIVE_MINUTES
    )


def _failed(machine: sfn.IStateMachine, label: str, period: Duration) -> cloudwatch.IMetric:
    """Executions of ``machine`` that failed, timed out or were aborted, summed over ``period``
    (https://docs.aws.amazon.com/step-functions/latest/dg/procedure-cw-metrics.html)."""
    return cloudwatch.MathExpression(
        expression="failed + timedOut + aborted",
        using_metrics={
            "failed": machine.metric_failed(statistic=cloudwatch.Stats.SUM),
            "timedOut": machine.metric_timed_out(statistic=cloudwatch.Stats.SUM),
            "aborted": machine.metric_aborted(statistic=cloudwatch.Stats.SUM),
        },
        label=f"{label} executions failed, timed out or aborted",
        period=period,
    )


def _rule_metric(rule: events.IRule, metric_name: str) -> cloudwatch.Metric:
    """A metric of a rule on the default bus: dimension ``RuleName`` only (a custom bus's
    rules add ``EventBusName``;
    https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-monitoring.html)."""
    return cloudwatch.Metric(
        namespace="AWS/Events",
        metric_name=metric_name,
        dimensions_map={"RuleName": rule.rule_name},
        statistic=cloudwatch.Stats.SUM,
        period=_FIVE_MINUTES,
    )


def _pascal(what: str) -> str:
    """``ingest-dlq`` -> ``IngestDlq``: a construct id from an alarm's ``what``."""
    return "".join(word.capitalize() for word in what.split("-"))


class _Row(NamedTuple):
    """One alarm: the attribute that holds it (``attr[key]`` for a dict attribute), its
    construct id, ``what`` (``s3ingest-<stage>-<what>``), runbook anchor, metric, threshold and
    periods (all must breach), description. Above the threshold, missing data not breaching;
    ``heartbeat``: below it, missing data breaching."""

    attr: str
    construct_id: str
    what: str
    anchor: str
    metric: cloudwatch.IMetric
    threshold: float
    periods: int
    description: str
    heartbeat: bool = False
    key: str | None = None


class OperationalAlarms(Construct):
    """Alarms on what needs an operator, each notifying ``topic`` on ALARM and on OK, each named
    ``s3ingest-<stage>-<what>``.

    Missing data is not breaching, except for the two heartbeats: a queue, function or state
    machine that is idle emits no datapoint, and idle is healthy; but a reconciliation that never
    completes, or a delivery check that stops reporting, is exactly what those alarms are for.
    Every description ends with its runbook section's absolute URL. Custom metrics are this
    stack's own series (``service=s3ingest``, ``stack=<stack name>``).

    ``timeouts``: ``what`` (``"ingest"``, ...) -> a function and its timeout, each alarmed as
    ``<what>-duration``; ``dead_letter_ages``: ``what`` -> a DLQ and the age that fires
    ``<what>-age`` (:func:`dead_letter_age_threshold`); ``heartbeat_period``: the reconcile
    schedule's interval plus a margin; ``hold_threshold`` (``holdAlarmSeconds``, hold for review
    only) is measured by each reconciliation, so that alarm can lag by up to the schedule. The
    ingest rule's metrics have the dimension ``RuleName`` only. The optional state machines and
    the change relay (with its DLQ) get their alarms where given.

    Attributes
    ----------
    dead_letters, ..., held_changes : aws_cdk.aws_cloudwatch.Alarm
        As annotated below, one per row of the table in ``__init__`` (metric, threshold,
        periods, runbook section); an optional one is None where what it watches is not given.
    dead_letter_ages, durations : dict[str, aws_cdk.aws_cloudwatch.Alarm]
        By ``what``: each DLQ's oldest message (one hourly datapoint); each function's Maximum
        ``Duration`` over 5 minutes against 80% of its timeout.
    alarms : list[aws_cdk.aws_cloudwatch.Alarm]
        Every alarm above that exists, and the drift alarm.
    """

    dead_letters: cloudwatch.Alarm
    target_dead_letters: cloudwatch.Alarm
    oldest_message_age: cloudwatch.Alarm
    ingest_errors: cloudwatch.Alarm
    ingest_throttles: cloudwatch.Alarm
    reconcile_errors: cloudwatch.Alarm
    reconcile_failed: cloudwatch.Alarm | None = None
    backfill_failed: cloudwatch.Alarm | None = None
    listing_failed: cloudwatch.Alarm | None = None
    reprocess_failed: cloudwatch.Alarm | None = None
    reprocess_keys_behind: cloudwatch.Alarm | None = None
    change_dead_letters: cloudwatch.Alarm | None = None
    change_relay_errors: cloudwatch.Alarm | None = None
    change_relay_behind: cloudwatch.Alarm | None = None
    ingest_lag: cloudwatch.Alarm
    reconcile_heartbeat: cloudwatch.Alarm
    ledger_throttles: cloudwatch.Alarm
    rule_failed_invocations: cloudwatch.Alarm
    rule_dlq_failures: cloudwatch.Alarm
    delivery_off: cloudwatch.Alarm
    held_changes: cloudwatch.Alarm | None = None

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        runbook_base_url: str,
        topic: sns.ITopic,
        queue: sqs.IQueue,
        dead_letter_queue: sqs.IQueue,
        target_dead_letter_queue: sqs.IQueue,
        ingest_function: lambda_.IFunction,
        reconcile_function: lambda_.IFunction,
        drift_alarm: cloudwatch.Alarm,
        ledger_table: dynamodb.ITable,
        ingest_rule: events.IRule,
        lag_threshold: Duration,
        heartbeat_period: Duration,
        timeouts: Mapping[str, tuple[lambda_.IFunction, Duration]],
        reconcile_state_machine: sfn.IStateMachine | None = None,
        backfill_state_machine: sfn.IStateMachine | None = None,
        change_relay_function: lambda_.IFunction | None = None,
        change_dead_letter_queue: sqs.IQueue | None = None,
        listing_state_machine: sfn.IStateMachine | None = None,
        dead_letter_ages: Mapping[str, tuple[sqs.IQueue, Duration]] | None = None,
        hold_threshold: Duration | None = None,
        reprocess_state_machine: sfn.IStateMachine | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.alarms: list[cloudwatch.Alarm] = []
        self._action = actions.SnsAction(topic)
        self._stage = stage
        self._runbook_base_url = runbook_base_url
        self._dimensions = metric_dimensions(Stack.of(self).stack_name)
        self.dead_letter_ages: dict[str, cloudwatch.Alarm] = {}
        self.durations: dict[str, cloudwatch.Alarm] = {}
        maximum, total, five, hour = (
            cloudwatch.Stats.MAXIMUM,
            cloudwatch.Stats.SUM,
            _FIVE_MINUTES,
            _ONE_HOUR,
        )
        # fmt: off
        rows = [
            _Row("dead_letters", "DeadLetterQueueDepth", "ingest-dlq-depth",
                 "poison-message-in-the-dlq", _depth(dead_letter_queue), 0, 1,
                 "s3ingest: messages in the ingest dead-letter queue (invalid or repeatedly "
                 "failing records, with their reason)"),
            _Row("target_dead_letters", "TargetDeadLetterQueueDepth", "rule-target-dlq-depth",
                 "events-lost-upstream", _depth(target_dead_letter_queue), 0, 1,
                 "s3ingest: events EventBridge could not deliver to the ingest queue are in the "
                 "rule target's dead-letter queue"),
            _Row("oldest_message_age", "OldestMessageAge", "ingest-oldest-message-age",
                 "ingest-falling-behind",
                 queue.metric_approximate_age_of_oldest_message(statistic=maximum, period=five),
                 MAX_MESSAGE_AGE.to_seconds(), 3,
                 "s3ingest: the oldest message in the ingest queue has waited more than 15 "
                 "minutes for 15 minutes"),
            _Row("ingest_errors", "IngestErrors", "ingest-errors", "ingest-falling-behind",
                 ingest_function.metric_errors(statistic=total, period=five), 0, 1,
                 "s3ingest: the ingest function failed invocations (whole batches go back to the "
                 "queue)"),
            _Row("ingest_throttles", "IngestThrottles", "ingest-throttles", "ingest-falling-behind",
                 ingest_function.metric_throttles(statistic=total, period=five), 0, 2,
                 "s3ingest: the ingest function was throttled for 10 minutes"),
            _Row("reconcile_errors", "ReconcileErrors", "reconcile-errors", "events-lost-upstream",
                 reconcile_function.metric_errors(statistic=total, period=hour), 0, 1,
                 "s3ingest: a reconciliation run failed; lost events stay unrepaired until one "
                 "succeeds"),
        ]
        if reconcile_state_machine is not None:
            rows.append(_Row(
                "reconcile_failed", "ReconcileExecutionsFailed", "reconcile-executions-failed",
                "events-lost-upstream",
                _failed(reconcile_state_machine, "Fan-out reconciliation", hour), 0, 1,
                "s3ingest: a fan-out reconciliation execution failed, timed out or was aborted; "
                "lost events stay unrepaired until one succeeds"))
        if backfill_state_machine is not None:
            rows.append(_Row(
                "backfill_failed", "BackfillExecutionsFailed", "backfill-executions-failed",
                "bucket-adopted-with-existing-objects",
                _failed(backfill_state_machine, "Backfill", five), 0, 1,
                "s3ingest: a backfill execution failed, timed out or was aborted; pre-existing "
                "objects may be missing from the ledger"))
        if listing_state_machine is not None:
            rows.append(_Row(
                "listing_failed", "ListingExecutionsFailed", "listing-executions-failed",
                "bucket-adopted-with-existing-objects",
                _failed(listing_state_machine, "Listing backfill", five), 0, 1,
                "s3ingest: a listing backfill execution failed, timed out or was aborted; the "
                "objects of its key ranges may be missing from the ledger"))
        if reprocess_state_machine is not None:
            rows.append(_Row(
                "reprocess_failed", "ReprocessExecutionsFailed", "reprocess-executions-failed",
                "reprocess-run-failed", _failed(reprocess_state_machine, "Reprocess", five), 0, 1,
                "s3ingest: a reprocess execution failed, timed out or was aborted; rows of its "
                "segments may still be behind for the processor (run it again with the same "
                "--run to resume)"))
            rows.append(_Row(
                "reprocess_keys_behind", "ReprocessKeysBehind", "reprocess-keys-behind",
                "reprocess-run-failed",
                self._custom(REPROCESS_KEYS_BEHIND_METRIC, maximum, five), 0, 1,
                "s3ingest: a reprocess run ended with keys behind (a processor failed or its "
                "worker died: their effects stay pending; the run's summary names them and the "
                "command that finishes them)"))
        for what, (dlq, threshold) in (dead_letter_ages or {}).items():
            rows.append(_Row(
                "dead_letter_ages", _pascal(what) + "OldestMessageAge", f"{what}-age",
                "dlq-messages-near-expiry",
                dlq.metric_approximate_age_of_oldest_message(statistic=maximum, period=hour),
                threshold.to_seconds(), 1,
                f"s3ingest: the oldest message of the dead-letter queue {what} has been there more "
                f"than {threshold.to_seconds() / 86_400:g} days; it expires before long unless "
                "redriven or read", key=what))
        relay, relay_dlq = change_relay_function, change_dead_letter_queue
        if relay is not None and relay_dlq is not None:
            rows.extend([
                _Row("change_dead_letters", "ChangeStreamDeadLetterQueueDepth",
                     "change-stream-dlq-depth", "change-stream-dlq", _depth(relay_dlq), 0, 1,
                     "s3ingest: the change relay dead-lettered changes it can never publish (each "
                     "message holds the reason and the change), or gave up on a batch it could "
                     "not publish (the message holds the batch's stream position; the ledger rows "
                     "still hold them)"),
                _Row("change_relay_errors", "ChangeRelayErrors", "change-relay-errors",
                     "change-stream-errors", relay.metric_errors(statistic=total, period=five),
                     0, 1,
                     "s3ingest: the change-stream relay failed invocations (Lambda retries the "
                     "batch; the stream's shard waits)"),
                _Row("change_relay_behind", "ChangeRelayIteratorAge", "change-relay-iterator-age",
                     "change-stream-errors",
                     relay.metric("IteratorAge", statistic=maximum, period=five),
                     MAX_CHANGE_AGE.to_milliseconds(), 3,
                     "s3ingest: the change-stream relay has been more than 15 minutes behind the "
                     "ledger for 15 minutes (changes are not being published)"),
            ])
        rows.extend([
            _Row("ingest_lag", "IngestLag", "ingest-lag", "ingest-lag",
                 self._custom(LAG_METRIC, cloudwatch.Stats.p(99), five),
                 lag_threshold.to_milliseconds(), 1,
                 "s3ingest: the p99 end-to-end lag of live events (S3 event time to ledger "
                 f"decision) was above {int(lag_threshold.to_seconds())} s over 5 minutes "
                 "(replays excluded)"),
            _Row("reconcile_heartbeat", "ReconcileHeartbeat", "reconcile-heartbeat",
                 "reconciliation-not-running",
                 self._custom(RECONCILE_HEARTBEAT_METRIC, total, heartbeat_period), 1, 1,
                 "s3ingest: no reconciliation completed in the last "
                 f"{heartbeat_period.to_hours():g} hours (the schedule's interval plus 1 hour); "
                 "lost events are not being repaired", heartbeat=True),
            _Row("ledger_throttles", "LedgerThrottles", "ledger-throttles", "ledger-throttled",
                 cloudwatch.MathExpression(
                     expression="reads + writes",
                     using_metrics={
                         "reads": ledger_table.metric("ReadThrottleEvents", statistic=total),
                         "writes": ledger_table.metric("WriteThrottleEvents", statistic=total),
                     },
                     label="Ledger read and write throttle events",
                     period=five,
                 ), 0, 1,
                 "s3ingest: DynamoDB throttled reads or writes of the ledger table (records are "
                 "retried; a sustained burst fills the dead-letter queue)"),
            *(
                _Row("durations", _pascal(what) + "Duration", f"{what}-duration",
                     "function-near-timeout",
                     function.metric_duration(statistic=maximum, period=five),
                     DURATION_TIMEOUT_SHARE * timeout.to_milliseconds(), 1,
                     f"s3ingest: an invocation of the {what} function took more than 80% of its "
                     f"{int(timeout.to_seconds())} s timeout", key=what)
                for what, (function, timeout) in timeouts.items()
            ),
            _Row("rule_failed_invocations", "IngestRuleFailedInvocations",
                 "ingest-rule-failed-invocations", "ingest-rule-failing",
                 _rule_metric(ingest_rule, "FailedInvocations"), 0, 1,
                 "s3ingest: the ingest rule failed to deliver events to the ingest queue and "
                 "could not put them in its dead-letter queue either"),
            _Row("rule_dlq_failures", "IngestRuleDlqFailures", "ingest-rule-dlq-failures",
                 "ingest-rule-failing",
                 _rule_metric(ingest_rule, "InvocationsFailedToBeSentToDlq"), 0, 1,
                 "s3ingest: the ingest rule could not send undeliverable events to its "
                 "dead-letter queue: those events are lost"),
            _Row("delivery_off", "DeliveryOff", "eventbridge-delivery-off",
                 "eventbridge-delivery-off",
                 self._custom(DELIVERY_METRIC, cloudwatch.Stats.MINIMUM, DELIVERY_PERIOD), 1, 2,
                 "s3ingest: the landing bucket's EventBridge delivery is off, or the delivery "
                 "check stopped reporting, for 1 hour; no event reaches the pipeline",
                 heartbeat=True),
        ])
        if hold_threshold is not None:  # one datapoint a reconciliation: the heartbeat's period
            seconds = int(hold_threshold.to_seconds())
            rows.append(_Row(
                "held_changes", "HeldChanges", "held-changes", "held-changes",
                self._custom(HELD_OLDEST_METRIC, maximum, heartbeat_period), seconds, 1,
                f"s3ingest: a change has been held for review for more than {seconds} s (as the "
                "last reconciliation measured it); its processor effect waits for approve or "
                "reject"))
        # fmt: on
        for row in rows:
            alarm = self._alarm(row)
            if row.key is None:
                setattr(self, row.attr, alarm)
            else:
                getattr(self, row.attr)[row.key] = alarm
        drift_alarm.add_alarm_action(self._action)
        drift_alarm.add_ok_action(self._action)
        self.alarms.append(drift_alarm)

    def _custom(self, metric_name: str, statistic: str, period: Duration) -> cloudwatch.Metric:
        """One of this stack's own custom metrics (namespace ``S3Ingest``)."""
        return cloudwatch.Metric(
            namespace=METRICS_NAMESPACE,
            metric_name=metric_name,
            dimensions_map=self._dimensions,
            statistic=statistic,
            period=period,
        )

    def _alarm(self, row: _Row) -> cloudwatch.Alarm:
        """The alarm of ``row``, named ``s3ingest-<stage>-<what>``; notifies the topic on ALARM
        and on OK."""
        alarm = cloudwatch.Alarm(
            self,
            row.construct_id,
            alarm_name=alarm_name(self._stage, row.what),
            metric=row.metric,
            threshold=row.threshold,
            comparison_operator=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD
            if row.heartbeat
            else cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=row.periods,
            datapoints_to_alarm=row.periods,
            treat_missing_data=cloudwatch.TreatMissingData.BREACHING
            if row.heartbeat
            else cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=f"{row.description}. Runbook: "
            f"{runbook(self._runbook_base_url, row.anchor)}",
        )
        alarm.add_alarm_action(self._action)
        alarm.add_ok_action(self._action)
        self.alarms.append(alarm)
        return alarm
