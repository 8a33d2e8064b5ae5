"""The schedule that starts reconciliation (CONTRACT C12)."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_events as events
from constructs import Construct

#: EventBridge's limit of targets per rule
#: (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-quota.html).
TARGETS_PER_RULE = 5


class ReconcileSchedule(Construct):
    """A scheduled EventBridge rule (default bus) with its targets: the reconcile function, or
    the fan-out state machine once per bucket; beyond five targets (EventBridge's limit per
    rule) more rules with the same schedule (``Rule2``, ``Rule3``, ...).

    https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-scheduled-rule-pattern.html

    Parameters
    ----------
    schedule_expression : str
        ``rate(...)`` or ``cron(...)`` (``settings.reconcile_schedule``, validated there).
    targets : sequence of aws_cdk.aws_events.IRuleTarget
        What the rule starts, with its input (``aws_events_targets.LambdaFunction`` or
        ``aws_events_targets.SfnStateMachine``).

    Attributes
    ----------
    rule : aws_cdk.aws_events.Rule
        The (first) scheduled rule.
    rules : list of aws_cdk.aws_events.Rule
        Every scheduled rule.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        schedule_expression: str,
        targets: Sequence[events.IRuleTarget],
    ) -> None:
        super().__init__(scope, construct_id)
        self.rules = [
            events.Rule(
                self,
                "Rule" if start == 0 else f"Rule{start // TARGETS_PER_RULE + 1}",
                description="s3ingest: scheduled reconciliation of the ledger with the bucket",
                schedule=events.Schedule.expression(schedule_expression),
                targets=list(targets[start : start + TARGETS_PER_RULE]),
            )
            for start in range(0, len(targets), TARGETS_PER_RULE)
        ]
        self.rule = self.rules[0]
