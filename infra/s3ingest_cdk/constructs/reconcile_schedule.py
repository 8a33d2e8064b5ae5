"""The schedule that starts reconciliation (CONTRACT C12)."""

from __future__ import annotations

from aws_cdk import aws_events as events
from constructs import Construct


class ReconcileSchedule(Construct):
    """A scheduled EventBridge rule (default bus) with one target: the reconcile function, or the
    fan-out state machine.

    https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-scheduled-rule-pattern.html

    Parameters
    ----------
    scope : constructs.Construct
        Parent construct.
    construct_id : str
        Construct id.
    schedule_expression : str
        ``rate(...)`` or ``cron(...)`` (``settings.reconcile_schedule``, validated there).
    target : aws_cdk.aws_events.IRuleTarget
        What the rule starts, with its input (``aws_events_targets.LambdaFunction`` or
        ``aws_events_targets.SfnStateMachine``).

    Attributes
    ----------
    rule : aws_cdk.aws_events.Rule
        The scheduled rule.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        schedule_expression: str,
        target: events.IRuleTarget,
    ) -> None:
        super().__init__(scope, construct_id)
        self.rule = events.Rule(
            self,
            "Rule",
            description="s3ingest: scheduled reconciliation of the ledger with the bucket",
            schedule=events.Schedule.expression(schedule_expression),
            targets=[target],
        )
