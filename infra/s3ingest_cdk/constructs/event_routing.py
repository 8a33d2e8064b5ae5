"""EventBridge routing of the bucket's events: the ingest rule, its target DLQ and the archive."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import Aws, Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from s3ingest_cdk.constructs.ingest_queue import secure_queue

#: EventBridge's maxima for a target's retry policy: 185 attempts within 24 hours
#: (https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_RetryPolicy.html).
MAX_RETRY_ATTEMPTS = 185
MAX_EVENT_AGE = Duration.hours(24)

#: The role id CDK's targets look up before making their own (``singletonEventRole``): a role
#: made by :func:`rule_role` under this id takes the place, and the logical id, of CDK's.
EVENTS_ROLE_ID = "EventsRole"


def rule_role(scope: Construct, construct_id: str = EVENTS_ROLE_ID) -> iam.Role:
    """A role only EventBridge rules of this stack's account and Region may assume (a rule
    target's role: starting a state machine, sending to another bus): the trust carries
    ``aws:SourceAccount`` and ``aws:SourceArn`` (the account's rules), against the confused
    deputy (https://docs.aws.amazon.com/eventbridge/latest/userguide/cross-service-confused-deputy-prevention.html,
    https://docs.aws.amazon.com/IAM/latest/UserGuide/confused-deputy.html). CDK grants the target's
    action on it when the target is given ``role=``."""
    rules = f"arn:{Aws.PARTITION}:events:{Aws.REGION}:{Aws.ACCOUNT_ID}:rule/*"
    return iam.Role(
        scope,
        construct_id,
        assumed_by=iam.ServicePrincipal("events.amazonaws.com").with_conditions(
            {
                "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
                "ArnLike": {"aws:SourceArn": rules},
            }
        ),
    )


# Event pattern JSON keys and the `events.EventPattern` fields that render them.
_PATTERN_FIELDS = {
    "account": "account",
    "detail": "detail",
    "detail-type": "detail_type",
    "id": "id",
    "region": "region",
    "resources": "resources",
    "source": "source",
    "time": "time",
    "version": "version",
}


#: A top-level ``$or`` (one alternative per bucket owner account): ``events.EventPattern`` has
#: no field for it, so :func:`exact_pattern` writes the whole pattern on the resource.
_OR = "$or"


def event_pattern(pattern: Mapping[str, Any]) -> events.EventPattern:
    """The ``events.EventPattern`` rendering exactly ``pattern`` (EventBridge pattern JSON),
    but for a top-level ``$or`` (:func:`exact_pattern` adds it).

    Raises
    ------
    ValueError
        When ``pattern`` has a top-level key an EventBridge pattern cannot hold.
    """
    unknown = sorted(set(pattern) - set(_PATTERN_FIELDS) - {_OR})
    if unknown:
        raise ValueError(f"not EventBridge event pattern fields: {', '.join(unknown)}")
    return events.EventPattern(
        **{_PATTERN_FIELDS[key]: value for key, value in pattern.items() if key != _OR}
    )


def exact_pattern(construct: events.Rule | events.Archive, pattern: Mapping[str, Any]) -> None:
    """Make ``construct``'s ``EventPattern`` exactly ``pattern`` when it holds a top-level
    ``$or`` (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-create-pattern-operators.html#eb-filtering-complex-example-or);
    without one :func:`event_pattern` renders it whole and nothing changes."""
    if _OR not in pattern:
        return
    resource = construct.node.default_child
    if not isinstance(resource, (events.CfnRule, events.CfnArchive)):  # pragma: no cover
        raise TypeError("an events.Rule or events.Archive has a CfnRule or CfnArchive child")
    resource.add_property_override("EventPattern", dict(pattern))


class IngestRouting(Construct):
    """Route the landing bucket's events from the default bus to the ingest queue, and archive them.

    A rule on the default event bus (where S3 delivers, https://docs.aws.amazon.com/AmazonS3/latest/userguide/EventBridge.html)
    sends matching events to the queue, retrying for EventBridge's maximum of 185 attempts / 24 h
    and then parking the event in its own encrypted, TLS-only dead-letter queue
    (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-rule-dlq.html). An archive on the
    same bus with the same pattern keeps the events for replay (CONTRACT C14,
    https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-archive.html).

    Parameters
    ----------
    pattern : Mapping[str, Any]
        The event pattern of the rule and of the archive (``settings.ingest_event_pattern``).
    archive_retention : aws_cdk.Duration
        How long the archive keeps events (whole days).

    Attributes
    ----------
    target_dead_letter_queue : aws_cdk.aws_sqs.Queue
        Events EventBridge could not deliver to the queue.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        pattern: Mapping[str, Any],
        queue: sqs.IQueue,
        archive_retention: Duration,
        dead_letter_retention_period: Duration,
    ) -> None:
        super().__init__(scope, construct_id)
        # The default bus by an ARN of pseudo-parameters, so the archive's SourceArn follows the
        # partition and region the stack is deployed to.
        default_bus = events.EventBus.from_event_bus_arn(
            self,
            "DefaultBus",
            f"arn:{Aws.PARTITION}:events:{Aws.REGION}:{Aws.ACCOUNT_ID}:event-bus/default",
        )
        self.target_dead_letter_queue = secure_queue(
            self, "TargetDeadLetterQueue", retention_period=dead_letter_retention_period
        )
        self.rule = events.Rule(  # no event_bus: the default bus
            self,
            "Rule",
            description="s3ingest: the landing bucket's Object Created / Object Deleted events",
            event_pattern=event_pattern(pattern),
            targets=[
                targets.SqsQueue(
                    queue,
                    dead_letter_queue=self.target_dead_letter_queue,
                    retry_attempts=MAX_RETRY_ATTEMPTS,
                    max_event_age=MAX_EVENT_AGE,
                )
            ],
        )
        self.archive = events.Archive(
            self,
            "Archive",
            source_event_bus=default_bus,
            event_pattern=event_pattern(pattern),
            retention=archive_retention,
            description="s3ingest: replayable copy of the ingest rule's events",
        )
        exact_pattern(self.rule, pattern)
        exact_pattern(self.archive, pattern)
