"""The operational alarms: dead letters, a falling-behind or lagging ingest path, failed or
missing runs, throttling, functions near their timeout, and events that stopped arriving."""

from __future__ import annotations

from collections.abc import Mapping

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
    dead_letters, target_dead_letters, oldest_message_age : aws_cdk.aws_cloudwatch.Alarm
        Ingest DLQ depth > 0; rule target DLQ depth > 0; oldest ingest message > 15 minutes.
    ingest_errors, ingest_throttles, reconcile_errors : aws_cdk.aws_cloudwatch.Alarm
        Lambda ``Errors`` / ``Throttles`` > 0.
    reconcile_failed, backfill_failed, listing_failed, reprocess_failed : Alarm or None
        Failed, timed-out or aborted executions: fan-out reconciliations, backfills, listing
        backfills, reprocess runs.
    reprocess_keys_behind : Alarm or None
        A reprocess run that ended with keys behind: ``reprocess_keys_behind`` (emitted by the
        run's summary, stack dimensions) Maximum over 5 minutes > 0, missing data not breaching.
    dead_letter_ages : dict[str, aws_cdk.aws_cloudwatch.Alarm]
        ``what`` -> the DLQ's oldest message older than its threshold (one hourly datapoint).
    change_dead_letters, change_relay_errors, change_relay_behind : aws_cdk.aws_cloudwatch.Alarm
        or None
        Change-stream DLQ depth > 0; relay ``Errors`` > 0; relay ``IteratorAge`` > 15 minutes for
        15 minutes (``changeStream`` only).
    ingest_lag, reconcile_heartbeat, ledger_throttles : aws_cdk.aws_cloudwatch.Alarm
        p99 lag over 5 minutes > ``lag_threshold``; ``reconcile_completed`` Sum < 1 over
        ``heartbeat_period`` (missing data breaching); ledger read + write throttle events > 0.
    durations : dict[str, aws_cdk.aws_cloudwatch.Alarm]
        ``what`` -> Maximum ``Duration`` over 5 minutes > 80% of the function's timeout.
    rule_failed_invocations, rule_dlq_failures : aws_cdk.aws_cloudwatch.Alarm
        The ingest rule's ``FailedInvocations`` > 0 and ``InvocationsFailedToBeSentToDlq`` > 0.
    delivery_off : aws_cdk.aws_cloudwatch.Alarm
        ``eventbridge_delivery_enabled`` Minimum < 1 in two 30-minute periods (missing data
        breaching): the bucket stopped sending events to EventBridge, or the check stopped.
    held_changes : aws_cdk.aws_cloudwatch.Alarm or None
        ``held_oldest_seconds`` Maximum over ``heartbeat_period`` > ``hold_threshold`` seconds
        (missing data not breaching; ``hold_threshold`` only).
    alarms : list[aws_cdk.aws_cloudwatch.Alarm]
        Every alarm above that exists, and the drift alarm.
    """

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

        self.dead_letters = self._above_zero(
            "DeadLetterQueueDepth",
            "ingest-dlq-depth",
            dead_letter_queue.metric_approximate_number_of_messages_visible(
                statistic=cloudwatch.Stats.MAXIMUM, period=_FIVE_MINUTES
            ),
            "s3ingest: messages in the ingest dead-letter queue (invalid or repeatedly failing "
            "records, with their reason)",
            "poison-message-in-the-dlq",
        )
        self.target_dead_letters = self._above_zero(
            "TargetDeadLetterQueueDepth",
            "rule-target-dlq-depth",
            target_dead_letter_queue.metric_approximate_number_of_messages_visible(
                statistic=cloudwatch.Stats.MAXIMUM, period=_FIVE_MINUTES
            ),
            "s3ingest: events EventBridge could not deliver to the ingest queue are in the rule "
            "target's dead-letter queue",
            "events-lost-upstream",
        )
        self.oldest_message_age = self._alarm(
            "OldestMessageAge",
            "ingest-oldest-message-age",
            queue.metric_approximate_age_of_oldest_message(
                statistic=cloudwatch.Stats.MAXIMUM, period=_FIVE_MINUTES
            ),
            threshold=MAX_MESSAGE_AGE.to_seconds(),
            evaluation_periods=3,
            description=(
                "s3ingest: the oldest message in the ingest queue has waited more than "
                "15 minutes for 15 minutes"
            ),
            anchor="ingest-falling-behind",
        )
        self.ingest_errors = self._above_zero(
            "IngestErrors",
            "ingest-errors",
            ingest_function.metric_errors(statistic=cloudwatch.Stats.SUM, period=_FIVE_MINUTES),
            "s3ingest: the ingest function failed invocations (whole batches go back to the queue)",
            "ingest-falling-behind",
        )
        self.ingest_throttles = self._alarm(
            "IngestThrottles",
            "ingest-throttles",
            ingest_function.metric_throttles(statistic=cloudwatch.Stats.SUM, period=_FIVE_MINUTES),
            threshold=0,
            evaluation_periods=2,
            description="s3ingest: the ingest function was throttled for 10 minutes",
            anchor="ingest-falling-behind",
        )
        self.reconcile_errors = self._above_zero(
            "ReconcileErrors",
            "reconcile-errors",
            reconcile_function.metric_errors(statistic=cloudwatch.Stats.SUM, period=_ONE_HOUR),
            "s3ingest: a reconciliation run failed; lost events stay unrepaired until one succeeds",
            "events-lost-upstream",
        )
        self.reconcile_failed: cloudwatch.Alarm | None = None
        if reconcile_state_machine is not None:
            self.reconcile_failed = self._executions_failed(
                "ReconcileExecutionsFailed",
                "reconcile-executions-failed",
                reconcile_state_machine,
                "Fan-out reconciliation",
                "s3ingest: a fan-out reconciliation execution failed, timed out or was aborted; "
                "lost events stay unrepaired until one succeeds",
                "events-lost-upstream",
                period=_ONE_HOUR,
            )
        self.backfill_failed: cloudwatch.Alarm | None = None
        if backfill_state_machine is not None:
            self.backfill_failed = self._executions_failed(
                "BackfillExecutionsFailed",
                "backfill-executions-failed",
                backfill_state_machine,
                "Backfill",
                "s3ingest: a backfill execution failed, timed out or was aborted; pre-existing "
                "objects may be missing from the ledger",
                "bucket-adopted-with-existing-objects",
            )
        self.listing_failed: cloudwatch.Alarm | None = None
        if listing_state_machine is not None:
            self.listing_failed = self._executions_failed(
                "ListingExecutionsFailed",
                "listing-executions-failed",
                listing_state_machine,
                "Listing backfill",
                "s3ingest: a listing backfill execution failed, timed out or was aborted; the "
                "objects of its key ranges may be missing from the ledger",
                "bucket-adopted-with-existing-objects",
            )
        self.reprocess_failed: cloudwatch.Alarm | None = None
        self.reprocess_keys_behind: cloudwatch.Alarm | None = None
        if reprocess_state_machine is not None:
            self.reprocess_failed = self._executions_failed(
                "ReprocessExecutionsFailed",
                "reprocess-executions-failed",
                reprocess_state_machine,
                "Reprocess",
                "s3ingest: a reprocess execution failed, timed out or was aborted; rows of its "
                "segments may still be behind for the processor (run it again with the same "
                "--run to resume)",
                "reprocess-run-failed",
            )
            self.reprocess_keys_behind = self._alarm(
                "ReprocessKeysBehind",
                "reprocess-keys-behind",
                self._custom(REPROCESS_KEYS_BEHIND_METRIC, cloudwatch.Stats.MAXIMUM, _FIVE_MINUTES),
                threshold=0,
                evaluation_periods=1,
                description=(
                    "s3ingest: a reprocess run ended with keys behind (a processor failed or its "
                    "worker died: their effects stay pending; the run's summary names them and "
                    "the command that finishes them)"
                ),
                anchor="reprocess-run-failed",
            )
        self.dead_letter_ages: dict[str, cloudwatch.Alarm] = {}
        for what, (dlq, threshold) in (dead_letter_ages or {}).items():
            self.dead_letter_ages[what] = self._dead_letter_age(what, dlq, threshold)
        self.change_dead_letters: cloudwatch.Alarm | None = None
        self.change_relay_errors: cloudwatch.Alarm | None = None
        self.change_relay_behind: cloudwatch.Alarm | None = None
        if change_relay_function is not None and change_dead_letter_queue is not None:
            self._change_stream(change_relay_function, change_dead_letter_queue)
        self._operating(
            ledger_table=ledger_table,
            ingest_rule=ingest_rule,
            lag_threshold=lag_threshold,
            heartbeat_period=heartbeat_period,
            timeouts=timeouts,
        )
        self.held_changes: cloudwatch.Alarm | None = None
        if hold_threshold is not None:
            self.held_changes = self._held_changes(hold_threshold, heartbeat_period)
        drift_alarm.add_alarm_action(self._action)
        drift_alarm.add_ok_action(self._action)
        self.alarms.append(drift_alarm)

    def _executions_failed(
        self,
        alarm_id: str,
        what: str,
        machine: sfn.IStateMachine,
        label: str,
        description: str,
        anchor: str,
        *,
        period: Duration = _FIVE_MINUTES,
    ) -> cloudwatch.Alarm:
        """Executions of ``machine`` that failed, timed out or were aborted, summed over
        ``period`` (https://docs.aws.amazon.com/step-functions/latest/dg/procedure-cw-metrics.html)."""
        return self._above_zero(
            alarm_id,
            what,
            cloudwatch.MathExpression(
                expression="failed + timedOut + aborted",
                using_metrics={
                    "failed": machine.metric_failed(statistic=cloudwatch.Stats.SUM),
                    "timedOut": machine.metric_timed_out(statistic=cloudwatch.Stats.SUM),
                    "aborted": machine.metric_aborted(statistic=cloudwatch.Stats.SUM),
                },
                label=f"{label} executions failed, timed out or aborted",
                period=period,
            ),
            description,
            anchor,
        )

    def _dead_letter_age(self, what: str, dlq: sqs.IQueue, threshold: Duration) -> cloudwatch.Alarm:
        """The DLQ's oldest message older than ``threshold``: it expires unseen unless an
        operator acts (:func:`dead_letter_age_threshold`)."""
        days = threshold.to_seconds() / 86_400
        return self._alarm(
            "".join(word.capitalize() for word in what.split("-")) + "OldestMessageAge",
            f"{what}-age",
            dlq.metric_approximate_age_of_oldest_message(
                statistic=cloudwatch.Stats.MAXIMUM, period=_ONE_HOUR
            ),
            threshold=threshold.to_seconds(),
            evaluation_periods=1,
            description=(
                f"s3ingest: the oldest message of the dead-letter queue {what} has been there more "
                f"than {days:g} days; it expires before long unless redriven or read"
            ),
            anchor="dlq-messages-near-expiry",
        )

    def _held_changes(self, threshold: Duration, period: Duration) -> cloudwatch.Alarm:
        """A change held for review longer than ``threshold``: its effect waits for an
        operator's approve or reject (``docs/hold.md``). The age comes from the reconciliation
        (one datapoint per run), so the period is the heartbeat's: each holds a run."""
        seconds = int(threshold.to_seconds())
        return self._alarm(
            "HeldChanges",
            "held-changes",
            self._custom(HELD_OLDEST_METRIC, cloudwatch.Stats.MAXIMUM, period),
            threshold=seconds,
            evaluation_periods=1,
            description=(
                f"s3ingest: a change has been held for review for more than {seconds} s (as the "
                "last reconciliation measured it); its processor effect waits for approve or "
                "reject"
            ),
            anchor="held-changes",
        )

    def _change_stream(self, relay: lambda_.IFunction, dead_letter_queue: sqs.IQueue) -> None:
        """The change stream's alarms: dropped batches, relay failures, a stuck stream."""
        self.change_dead_letters = self._above_zero(
            "ChangeStreamDeadLetterQueueDepth",
            "change-stream-dlq-depth",
            dead_letter_queue.metric_approximate_number_of_messages_visible(
                statistic=cloudwatch.Stats.MAXIMUM, period=_FIVE_MINUTES
            ),
            "s3ingest: the change relay dead-lettered changes it can never publish (each message "
            "holds the reason and the change), or gave up on a batch it could not publish "
            "(the message holds the batch's stream position; the ledger rows still hold them)",
            "change-stream-dlq",
        )
        self.change_relay_errors = self._above_zero(
            "ChangeRelayErrors",
            "change-relay-errors",
            relay.metric_errors(statistic=cloudwatch.Stats.SUM, period=_FIVE_MINUTES),
            "s3ingest: the change-stream relay failed invocations (Lambda retries the batch; "
            "the stream's shard waits)",
            "change-stream-errors",
        )
        self.change_relay_behind = self._alarm(
            "ChangeRelayIteratorAge",
            "change-relay-iterator-age",
            relay.metric("IteratorAge", statistic=cloudwatch.Stats.MAXIMUM, period=_FIVE_MINUTES),
            threshold=MAX_CHANGE_AGE.to_milliseconds(),
            evaluation_periods=3,
            description=(
                "s3ingest: the change-stream relay has been more than 15 minutes behind the "
                "ledger for 15 minutes (changes are not being published)"
            ),
            anchor="change-stream-errors",
        )

    def _operating(
        self,
        *,
        ledger_table: dynamodb.ITable,
        ingest_rule: events.IRule,
        lag_threshold: Duration,
        heartbeat_period: Duration,
        timeouts: Mapping[str, tuple[lambda_.IFunction, Duration]],
    ) -> None:
        """The signals of a pipeline in production: lag, the reconciliation heartbeat, ledger
        throttling, functions near their timeout, the ingest rule failing, delivery off."""
        seconds = int(lag_threshold.to_seconds())
        self.ingest_lag = self._alarm(
            "IngestLag",
            "ingest-lag",
            self._custom(LAG_METRIC, cloudwatch.Stats.p(99), _FIVE_MINUTES),
            threshold=lag_threshold.to_milliseconds(),
            evaluation_periods=1,
            description=(
                f"s3ingest: the p99 end-to-end lag of live events (S3 event time to ledger "
                f"decision) was above {seconds} s over 5 minutes (replays excluded)"
            ),
            anchor="ingest-lag",
        )
        hours = heartbeat_period.to_hours()
        self.reconcile_heartbeat = self._alarm(
            "ReconcileHeartbeat",
            "reconcile-heartbeat",
            self._custom(RECONCILE_HEARTBEAT_METRIC, cloudwatch.Stats.SUM, heartbeat_period),
            threshold=1,
            comparison=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            missing=cloudwatch.TreatMissingData.BREACHING,
            evaluation_periods=1,
            description=(
                f"s3ingest: no reconciliation completed in the last {hours:g} hours (the "
                "schedule's interval plus 1 hour); lost events are not being repaired"
            ),
            anchor="reconciliation-not-running",
        )
        self.ledger_throttles = self._above_zero(
            "LedgerThrottles",
            "ledger-throttles",
            cloudwatch.MathExpression(
                expression="reads + writes",
                using_metrics={
                    "reads": ledger_table.metric(
                        "ReadThrottleEvents", statistic=cloudwatch.Stats.SUM
                    ),
                    "writes": ledger_table.metric(
                        "WriteThrottleEvents", statistic=cloudwatch.Stats.SUM
                    ),
                },
                label="Ledger read and write throttle events",
                period=_FIVE_MINUTES,
            ),
            "s3ingest: DynamoDB throttled reads or writes of the ledger table (records are "
            "retried; a sustained burst fills the dead-letter queue)",
            "ledger-throttled",
        )
        self.durations: dict[str, cloudwatch.Alarm] = {}
        for what, (function, timeout) in timeouts.items():
            construct_id = "".join(word.capitalize() for word in what.split("-")) + "Duration"
            self.durations[what] = self._alarm(
                construct_id,
                f"{what}-duration",
                function.metric_duration(statistic=cloudwatch.Stats.MAXIMUM, period=_FIVE_MINUTES),
                threshold=DURATION_TIMEOUT_SHARE * timeout.to_milliseconds(),
                evaluation_periods=1,
                description=(
                    f"s3ingest: an invocation of the {what} function took more than 80% of its "
                    f"{int(timeout.to_seconds())} s timeout"
                ),
                anchor="function-near-timeout",
            )
        self.rule_failed_invocations = self._above_zero(
            "IngestRuleFailedInvocations",
            "ingest-rule-failed-invocations",
            self._rule_metric(ingest_rule, "FailedInvocations"),
            "s3ingest: the ingest rule failed to deliver events to the ingest queue and could not "
            "put them in its dead-letter queue either",
            "ingest-rule-failing",
        )
        self.rule_dlq_failures = self._above_zero(
            "IngestRuleDlqFailures",
            "ingest-rule-dlq-failures",
            self._rule_metric(ingest_rule, "InvocationsFailedToBeSentToDlq"),
            "s3ingest: the ingest rule could not send undeliverable events to its dead-letter "
            "queue: those events are lost",
            "ingest-rule-failing",
        )
        self.delivery_off = self._alarm(
            "DeliveryOff",
            "eventbridge-delivery-off",
            self._custom(DELIVERY_METRIC, cloudwatch.Stats.MINIMUM, DELIVERY_PERIOD),
            threshold=1,
            comparison=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            missing=cloudwatch.TreatMissingData.BREACHING,
            evaluation_periods=2,
            description=(
                "s3ingest: the landing bucket's EventBridge delivery is off, or the delivery "
                "check stopped reporting, for 1 hour; no event reaches the pipeline"
            ),
            anchor="eventbridge-delivery-off",
        )

    def _custom(self, metric_name: str, statistic: str, period: Duration) -> cloudwatch.Metric:
        """One of this stack's own custom metrics (namespace ``S3Ingest``)."""
        return cloudwatch.Metric(
            namespace=METRICS_NAMESPACE,
            metric_name=metric_name,
            dimensions_map=self._dimensions,
            statistic=statistic,
            period=period,
        )

    @staticmethod
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

    def _above_zero(
        self, alarm_id: str, what: str, metric: cloudwatch.IMetric, description: str, anchor: str
    ) -> cloudwatch.Alarm:
        return self._alarm(
            alarm_id,
            what,
            metric,
            threshold=0,
            evaluation_periods=1,
            description=description,
            anchor=anchor,
        )

    def _alarm(
        self,
        alarm_id: str,
        what: str,
        metric: cloudwatch.IMetric,
        *,
        threshold: float,
        evaluation_periods: int,
        description: str,
        anchor: str,
        comparison: cloudwatch.ComparisonOperator = (
            cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD
        ),
        missing: cloudwatch.TreatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING,
    ) -> cloudwatch.Alarm:
        """``metric`` compared with ``threshold`` (by default: above it) in all of
        ``evaluation_periods`` periods, named ``s3ingest-<stage>-<what>``; notifies the topic on
        ALARM and on OK."""
        alarm = cloudwatch.Alarm(
            self,
            alarm_id,
            alarm_name=alarm_name(self._stage, what),
            metric=metric,
            threshold=threshold,
            comparison_operator=comparison,
            evaluation_periods=evaluation_periods,
            datapoints_to_alarm=evaluation_periods,
            treat_missing_data=missing,
            alarm_description=(
                f"{description}. Runbook: {runbook(self._runbook_base_url, anchor)}"
            ),
        )
        alarm.add_alarm_action(self._action)
        alarm.add_ok_action(self._action)
        self.alarms.append(alarm)
        return alarm
