"""The operational alarms: dead letters, a falling-behind ingest path, failed runs."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

#: Where each alarm's description sends the operator.
RUNBOOK = "docs/runbook.md"
#: Oldest message in the ingest queue before the ingest path counts as falling behind.
MAX_MESSAGE_AGE = Duration.minutes(15)
#: Age of the newest stream record the change relay got before the change stream counts as stuck
#: (the relay's ``IteratorAge``; a partial batch failure is not a function error).
MAX_CHANGE_AGE = Duration.minutes(15)

_FIVE_MINUTES = Duration.minutes(5)
_ONE_HOUR = Duration.hours(1)


def runbook(anchor: str) -> str:
    """``docs/runbook.md#<anchor>``: the runbook section an alarm description names."""
    return f"{RUNBOOK}#{anchor}"


class OperationalAlarms(Construct):
    """Alarms on what needs an operator, each notifying ``topic`` on ALARM and on OK.

    Missing data is not breaching throughout: a queue, function or state machine that is idle
    emits no datapoint, and idle is healthy. Every description names its runbook section.

    Parameters
    ----------
    scope : constructs.Construct
        Parent construct.
    construct_id : str
        Construct id.
    topic : aws_cdk.aws_sns.ITopic
        The alarm and OK action of every alarm (and of ``drift_alarm``).
    queue, dead_letter_queue : aws_cdk.aws_sqs.IQueue
        The ingest queue and its dead-letter queue.
    target_dead_letter_queue : aws_cdk.aws_sqs.IQueue
        The ingest rule target's dead-letter queue (events EventBridge could not deliver).
    ingest_function, reconcile_function : aws_cdk.aws_lambda.IFunction
        The ingest function and the single-run reconcile function.
    drift_alarm : aws_cdk.aws_cloudwatch.Alarm
        The drift alarm (``DriftAlarm.alarm``); gets the same actions.
    reconcile_state_machine : aws_cdk.aws_stepfunctions.IStateMachine, optional
        The fan-out reconciliation (``reconcileFanOut`` only).
    backfill_state_machine : aws_cdk.aws_stepfunctions.IStateMachine, optional
        The backfill (only when the stack owns the inventory).
    change_relay_function : aws_cdk.aws_lambda.IFunction, optional
        The change-stream relay (``changeStream`` only; with ``change_dead_letter_queue``).
    change_dead_letter_queue : aws_cdk.aws_sqs.IQueue, optional
        The relay's on-failure destination: stream batches it gave up on.

    Attributes
    ----------
    dead_letters, target_dead_letters, oldest_message_age : aws_cdk.aws_cloudwatch.Alarm
        Ingest DLQ depth > 0; rule target DLQ depth > 0; oldest ingest message > 15 minutes.
    ingest_errors, ingest_throttles, reconcile_errors : aws_cdk.aws_cloudwatch.Alarm
        Lambda ``Errors`` / ``Throttles`` > 0.
    reconcile_failed, backfill_failed : aws_cdk.aws_cloudwatch.Alarm or None
        Failed fan-out reconciliations; failed, timed-out or aborted backfills.
    change_dead_letters, change_relay_errors, change_relay_behind : aws_cdk.aws_cloudwatch.Alarm
        or None
        Change-stream DLQ depth > 0; relay ``Errors`` > 0; relay ``IteratorAge`` > 15 minutes for
        15 minutes (``changeStream`` only).
    alarms : list[aws_cdk.aws_cloudwatch.Alarm]
        Every alarm above that exists, and the drift alarm.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        topic: sns.ITopic,
        queue: sqs.IQueue,
        dead_letter_queue: sqs.IQueue,
        target_dead_letter_queue: sqs.IQueue,
        ingest_function: lambda_.IFunction,
        reconcile_function: lambda_.IFunction,
        drift_alarm: cloudwatch.Alarm,
        reconcile_state_machine: sfn.IStateMachine | None = None,
        backfill_state_machine: sfn.IStateMachine | None = None,
        change_relay_function: lambda_.IFunction | None = None,
        change_dead_letter_queue: sqs.IQueue | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.alarms: list[cloudwatch.Alarm] = []
        self._action = actions.SnsAction(topic)

        self.dead_letters = self._above_zero(
            "DeadLetterQueueDepth",
            dead_letter_queue.metric_approximate_number_of_messages_visible(
                statistic=cloudwatch.Stats.MAXIMUM, period=_FIVE_MINUTES
            ),
            "s3ingest: messages in the ingest dead-letter queue (invalid or repeatedly failing "
            "records, with their reason)",
            "poison-message-in-the-dlq",
        )
        self.target_dead_letters = self._above_zero(
            "TargetDeadLetterQueueDepth",
            target_dead_letter_queue.metric_approximate_number_of_messages_visible(
                statistic=cloudwatch.Stats.MAXIMUM, period=_FIVE_MINUTES
            ),
            "s3ingest: events EventBridge could not deliver to the ingest queue are in the rule "
            "target's dead-letter queue",
            "events-lost-upstream",
        )
        self.oldest_message_age = self._alarm(
            "OldestMessageAge",
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
            ingest_function.metric_errors(statistic=cloudwatch.Stats.SUM, period=_FIVE_MINUTES),
            "s3ingest: the ingest function failed invocations (whole batches go back to the queue)",
            "ingest-falling-behind",
        )
        self.ingest_throttles = self._alarm(
            "IngestThrottles",
            ingest_function.metric_throttles(statistic=cloudwatch.Stats.SUM, period=_FIVE_MINUTES),
            threshold=0,
            evaluation_periods=2,
            description="s3ingest: the ingest function was throttled for 10 minutes",
            anchor="ingest-falling-behind",
        )
        self.reconcile_errors = self._above_zero(
            "ReconcileErrors",
            reconcile_function.metric_errors(statistic=cloudwatch.Stats.SUM, period=_ONE_HOUR),
            "s3ingest: a reconciliation run failed; lost events stay unrepaired until one succeeds",
            "events-lost-upstream",
        )
        self.reconcile_failed: cloudwatch.Alarm | None = None
        if reconcile_state_machine is not None:
            self.reconcile_failed = self._above_zero(
                "ReconcileExecutionsFailed",
                reconcile_state_machine.metric_failed(
                    statistic=cloudwatch.Stats.SUM, period=_ONE_HOUR
                ),
                "s3ingest: a fan-out reconciliation execution failed; lost events stay "
                "unrepaired until one succeeds",
                "events-lost-upstream",
            )
        self.backfill_failed: cloudwatch.Alarm | None = None
        if backfill_state_machine is not None:
            self.backfill_failed = self._above_zero(
                "BackfillExecutionsFailed",
                cloudwatch.MathExpression(
                    expression="failed + timedOut + aborted",
                    using_metrics={
                        "failed": backfill_state_machine.metric_failed(
                            statistic=cloudwatch.Stats.SUM
                        ),
                        "timedOut": backfill_state_machine.metric_timed_out(
                            statistic=cloudwatch.Stats.SUM
                        ),
                        "aborted": backfill_state_machine.metric_aborted(
                            statistic=cloudwatch.Stats.SUM
                        ),
                    },
                    label="Backfill executions failed, timed out or aborted",
                    period=_FIVE_MINUTES,
                ),
                "s3ingest: a backfill execution failed, timed out or was aborted; pre-existing "
                "objects may be missing from the ledger",
                "bucket-adopted-with-existing-objects",
            )
        self.change_dead_letters: cloudwatch.Alarm | None = None
        self.change_relay_errors: cloudwatch.Alarm | None = None
        self.change_relay_behind: cloudwatch.Alarm | None = None
        if change_relay_function is not None and change_dead_letter_queue is not None:
            self._change_stream(change_relay_function, change_dead_letter_queue)
        drift_alarm.add_alarm_action(self._action)
        drift_alarm.add_ok_action(self._action)
        self.alarms.append(drift_alarm)

    def _change_stream(self, relay: lambda_.IFunction, dead_letter_queue: sqs.IQueue) -> None:
        """The change stream's alarms: dropped batches, relay failures, a stuck stream."""
        self.change_dead_letters = self._above_zero(
            "ChangeStreamDeadLetterQueueDepth",
            dead_letter_queue.metric_approximate_number_of_messages_visible(
                statistic=cloudwatch.Stats.MAXIMUM, period=_FIVE_MINUTES
            ),
            "s3ingest: the change stream gave up on changes it could not publish for 24 hours "
            "(their stream positions are in its dead-letter queue; the ledger rows still hold "
            "them)",
            "change-stream-dlq",
        )
        self.change_relay_errors = self._above_zero(
            "ChangeRelayErrors",
            relay.metric_errors(statistic=cloudwatch.Stats.SUM, period=_FIVE_MINUTES),
            "s3ingest: the change-stream relay failed invocations (Lambda retries the batch; "
            "the stream's shard waits)",
            "change-stream-errors",
        )
        self.change_relay_behind = self._alarm(
            "ChangeRelayIteratorAge",
            relay.metric("IteratorAge", statistic=cloudwatch.Stats.MAXIMUM, period=_FIVE_MINUTES),
            threshold=MAX_CHANGE_AGE.to_milliseconds(),
            evaluation_periods=3,
            description=(
                "s3ingest: the change-stream relay has been more than 15 minutes behind the "
                "ledger for 15 minutes (changes are not being published)"
            ),
            anchor="change-stream-errors",
        )

    def _above_zero(
        self, alarm_id: str, metric: cloudwatch.IMetric, description: str, anchor: str
    ) -> cloudwatch.Alarm:
        return self._alarm(
            alarm_id,
            metric,
            threshold=0,
            evaluation_periods=1,
            description=description,
            anchor=anchor,
        )

    def _alarm(
        self,
        alarm_id: str,
        metric: cloudwatch.IMetric,
        *,
        threshold: float,
        evaluation_periods: int,
        description: str,
        anchor: str,
    ) -> cloudwatch.Alarm:
        """``metric`` > ``threshold`` in all of ``evaluation_periods`` periods; notifies the
        topic on ALARM and on OK."""
        alarm = cloudwatch.Alarm(
            self,
            alarm_id,
            metric=metric,
            threshold=threshold,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=evaluation_periods,
            datapoints_to_alarm=evaluation_periods,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=f"{description}. Runbook: {runbook(anchor)}",
        )
        alarm.add_alarm_action(self._action)
        alarm.add_ok_action(self._action)
        self.alarms.append(alarm)
        return alarm
