"""Monitoring: the delivery check, the alarm topic, the operational alarms and the dashboard."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from s3ingest import function_roles
from s3ingest.function_roles import CHANGE_DEAD_LETTER_DAYS
from s3ingest_cdk.constructs import (
    AlarmTopic,
    OperationalAlarms,
    OperationsDashboard,
)
from s3ingest_cdk.constructs.operational_alarms import dead_letter_age_threshold
from s3ingest_cdk.features.backfill import Backfill
from s3ingest_cdk.features.change_stream import ChangeStream
from s3ingest_cdk.features.checkpointed_run import ListingBackfill, Reprocess
from s3ingest_cdk.features.evidence import (
    SCHEDULE_TARGET_EVIDENCE,
    SCHEDULED_EVIDENCE,
)
from s3ingest_cdk.features.history import History
from s3ingest_cdk.features.ingestion import Ingestion
from s3ingest_cdk.features.reconciliation import Reconciliation
from s3ingest_cdk.features.role_function import acknowledged_function
from s3ingest_cdk.features.service import Given
from s3ingest_cdk.nag import acknowledge, grant
from s3ingest_fn.config_roles import DeliveryCheckConfig

#: How often the delivery check runs: the delivery alarm (30-minute periods) sees at least one
#: run per period.
DELIVERY_CHECK_INTERVAL = Duration.minutes(15)


class Monitoring(Construct):
    """What tells the operator something is wrong, and where to look.

    Attributes
    ----------
    delivery_check : s3ingest_cdk.constructs.function.RoleFunction
        The scheduled check of the landing bucket's EventBridge delivery (its alarm is
        ``alarms.delivery_off``).
    dead_letter_queues : dict[str, aws_cdk.aws_sqs.IQueue]
        Every dead-letter queue of the stack, by the name of its age alarm (``ingest-dlq``,
        ``rule-target-dlq``, ``change-stream-dlq``).
    dashboard : s3ingest_cdk.constructs.OperationsDashboard
        The stage's dashboard, ``s3ingest-<stage>``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        given: Given,
        ingestion: Ingestion,
        reconciliation: Reconciliation,
        backfill: Backfill | None,
        change_stream: ChangeStream | None,
        history: History | None = None,
        listing: ListingBackfill | None = None,
        reprocess: Reprocess | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        settings, code, landings, ledger_table, _, _ = given
        # Is the bucket still sending its events? (Nothing else notices when it stops.)
        # A run that fails or never runs reports nothing: the delivery alarm treats missing
        # data as breaching.
        self.delivery_check = acknowledged_function(
            self,
            dead_letters=SCHEDULED_EVIDENCE,
            row=function_roles.DELIVERY_CHECK,
            settings=settings,
            code=code,
            environment={
                **DeliveryCheckConfig(tuple(b.bucket_name for b in landings.buckets)).to_env(),
                **landings.scope_environment(self),
            },
        )
        # GetBucketNotificationConfiguration needs s3:GetBucketNotification, on these buckets
        # (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetBucketNotificationConfiguration.html).
        grant(
            self.delivery_check.function,
            ["s3:GetBucketNotification"],
            *[b.bucket_arn for b in landings.buckets],
        )
        schedule = events.Rule(
            self.delivery_check,
            "Schedule",
            description="s3ingest: checks the landing bucket's EventBridge delivery",
            schedule=events.Schedule.rate(DELIVERY_CHECK_INTERVAL),
            targets=[targets.LambdaFunction(self.delivery_check.function)],
        )
        acknowledge(schedule, "Serverless-EventBusDLQ", SCHEDULE_TARGET_EVIDENCE)
        self.alarm_topic = AlarmTopic(self, "AlarmTopic", email=settings.alarm_email)
        if self.alarm_topic.subscription is not None:
            acknowledge(
                self.alarm_topic.subscription,
                "Serverless-SNSRedrivePolicy",
                "An e-mail subscription to the alarm topic: a notification SNS cannot deliver "
                "to the address would wait in a redrive queue nobody reads (SNS dead-letter "
                "queues: https://docs.aws.amazon.com/sns/latest/dg/sns-dead-letter-queues.html), "
                "while the alarm itself stays in ALARM, with its history, in CloudWatch.",
            )
        queue = ingestion.ingest_queue
        relay = change_stream.change_relay if change_stream is not None else None
        fan_out = reconciliation.reconcile_fan_out
        reconcile_machine = reconciliation.reconcile_state_machine
        # Every function with a timeout setting, and that timeout (the duration alarms).
        function_timeout = Duration.seconds(settings.function_timeout_seconds)
        ingest_timeout = Duration.seconds(settings.ingest_timeout_seconds)
        reconcile_timeout = Duration.seconds(settings.reconcile_timeout_seconds)
        # The functions that run the processors have their timeouts raised for the processor
        # functions they invoke (Settings.ingest_side_timeout): the alarms follow them.
        timeouts: dict[str, tuple[lambda_.IFunction, Duration]] = {
            "ingest": (ingestion.ingest.function, ingest_timeout),
            "reconcile": (reconciliation.reconcile.function, reconcile_timeout),
        }
        if fan_out is not None:
            timeouts["reconcile-fan-out"] = (fan_out.function, reconcile_timeout)
        if backfill is not None:
            control = backfill.backfill_control.function
            timeouts["backfill-control"] = (control, control.timeout or reconcile_timeout)
            if backfill.backfill is not None:
                timeouts["backfill"] = (
                    backfill.backfill.function,
                    Duration.seconds(
                        settings.ingest_side_timeout(settings.backfill_function_timeout_seconds)
                    ),
                )
        if relay is not None:
            timeouts["change-relay"] = (relay.function, function_timeout)
        # Every DLQ, and the age of its oldest message that fires its alarm: the ingest DLQ is
        # a redrive target (messages keep their enqueue time), the others are sent to.
        dlq_retention = Duration.days(settings.dlq_retention_days)
        dead_letter_ages: dict[str, tuple[sqs.IQueue, Duration]] = {
            "ingest-dlq": (
                queue.dead_letter_queue,
                dead_letter_age_threshold(
                    dlq_retention, Duration.days(settings.queue_retention_days)
                ),
            ),
            "rule-target-dlq": (
                ingestion.routing.target_dead_letter_queue,
                dead_letter_age_threshold(dlq_retention, None),
            ),
        }
        if relay is not None:
            dead_letter_ages["change-stream-dlq"] = (
                relay.dead_letter_queue,
                dead_letter_age_threshold(Duration.days(CHANGE_DEAD_LETTER_DAYS), None),
            )
        if history is not None:
            dead_letter_ages["history-dlq"] = (
                history.dead_letter_queue,
                dead_letter_age_threshold(Duration.days(14), Duration.days(4)),
            )
            timeouts["history"] = (history.writer.function, Duration.seconds(300))
        self.dead_letter_queues = {what: dlq for what, (dlq, _) in dead_letter_ages.items()}
        self.alarms = OperationalAlarms(
            self,
            "Alarms",
            stage=settings.stage,
            runbook_base_url=settings.runbook_base_url,
            topic=self.alarm_topic.topic,
            queue=queue.queue,
            dead_letter_queue=queue.dead_letter_queue,
            target_dead_letter_queue=ingestion.routing.target_dead_letter_queue,
            ingest_function=ingestion.ingest.function,
            reconcile_function=reconciliation.reconcile.function,
            drift_alarm=reconciliation.drift.alarm,
            ledger_table=ledger_table,
            ingest_rule=ingestion.routing.rule,
            lag_threshold=Duration.seconds(settings.lag_alarm_seconds),
            heartbeat_period=Duration.seconds(settings.reconcile_heartbeat_seconds),
            timeouts=timeouts,
            reconcile_state_machine=(
                reconcile_machine.state_machine if reconcile_machine is not None else None
            ),
            backfill_state_machine=(
                backfill.backfill_state_machine.state_machine if backfill is not None else None
            ),
            change_relay_function=relay.function if relay is not None else None,
            change_dead_letter_queue=relay.dead_letter_queue if relay is not None else None,
            listing_state_machine=(
                listing.state_machine.state_machine if listing is not None else None
            ),
            reprocess_state_machine=(
                reprocess.state_machine.state_machine if reprocess is not None else None
            ),
            dead_letter_ages=dead_letter_ages,
            hold_threshold=(
                Duration.seconds(settings.hold_alarm_seconds) if settings.holds else None
            ),
        )
        # The attestation alarm (issue 38), notified as the drift alarm is.
        attestation = reconciliation.drift.attestation
        attestation.add_alarm_action(cw_actions.SnsAction(self.alarm_topic.topic))
        attestation.add_ok_action(cw_actions.SnsAction(self.alarm_topic.topic))
        self.alarms.alarms.append(attestation)
        if change_stream is not None:
            reconciliation.announce_on(change_stream.change_bus.bus)
            change_stream.change_bus.admit(reconciliation.reconcile.role)
            if reconciliation.reconcile_fan_out is not None:  # its summarize step attests too
                change_stream.change_bus.admit(reconciliation.reconcile_fan_out.role)
        functions: dict[str, lambda_.IFunction] = {
            "ingest": ingestion.ingest.function,
            "reconcile": reconciliation.reconcile.function,
        }
        for name, owner in (
            ("reconcile fan-out", fan_out),
            ("backfill control", backfill.backfill_control if backfill is not None else None),
            ("backfill", backfill.backfill if backfill is not None else None),
            ("change relay", relay),
            ("delivery check", self.delivery_check),
        ):
            if owner is not None:
                functions[name] = owner.function
        self.dashboard = OperationsDashboard(
            self,
            "Dashboard",
            dashboard_name=f"s3ingest-{settings.stage}",
            queue=queue.queue,
            dead_letter_queue=queue.dead_letter_queue,
            target_dead_letter_queue=ingestion.routing.target_dead_letter_queue,
            functions=functions,
            alarms=self.alarms.alarms,
            change_dead_letter_queue=relay.dead_letter_queue if relay is not None else None,
        )
