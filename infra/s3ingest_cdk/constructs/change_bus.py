"""The change stream's bus: the stack's own EventBridge bus, its archive, and the change-stream
rule (every change to an audit log group), the example subscription teams copy."""

from __future__ import annotations

import jsii
from aws_cdk import ArnFormat, Aws, Duration, RemovalPolicy, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk.interfaces.aws_events import IRuleRef
from constructs import Construct

from s3ingest.stack_resources import CHANGE_PATTERN
from s3ingest_cdk.constructs.event_routing import event_pattern
from s3ingest_cdk.constructs.python_function import retention

#: The statement id of the change bus's policy: only the relay's role may publish.
ONLY_THE_RELAY_SID = "OnlyTheChangeRelayPublishes"

#: The principal EventBridge writes to a CloudWatch Logs target as
#: (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-resource-based.html#eb-cloudwatchlogs-permissions).
EVENTS_PRINCIPAL = "events.amazonaws.com"


def change_bus_name(stage: str) -> str:
    """The change bus's name for ``stage``: ``s3ingest-changes-<stage>`` (consumers' rules, and
    a hub's policy, :mod:`s3ingest_cdk.forwarding`, name it)."""
    return f"s3ingest-changes-{stage}"


def change_pattern() -> events.EventPattern:
    """Every change the relay publishes: ``source`` ``s3ingest`` (``CHANGE_SOURCE``), both
    detail types (``Object Ingested``, ``Object Tombstoned``), as
    :data:`s3ingest.stack_resources.CHANGE_PATTERN` (the local runtime's too)."""
    return event_pattern(CHANGE_PATTERN)


@jsii.implements(events.IRuleTarget)
class LogGroupTarget:
    """A CloudWatch Logs log group as a rule target, with no custom resource.

    ``aws_events_targets.CloudWatchLogGroup`` writes the log group's resource policy with an
    ``AwsCustomResource`` (a singleton Lambda function with a managed policy); here the policy is
    the native ``AWS::Logs::ResourcePolicy`` :class:`ChangeBus` creates, so the target is only the
    log group's ARN (without the trailing ``:*``, as CDK's target formats it).

    Parameters
    ----------
    message : str, optional
        The log event's message, with :class:`aws_cdk.aws_events.EventField` placeholders: an
        input transformer writes ``{"timestamp": <time>, "message": message}`` (the shape a
        CloudWatch Logs target takes,
        https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-targets.html); None: the
        whole event.
    """

    def __init__(self, log_group: logs.ILogGroup, message: str | None = None) -> None:
        self._log_group = log_group
        self._message = message

    def bind(self, rule: IRuleRef, id: str | None = None) -> events.RuleTargetConfig:
        """The target's configuration (``aws_events.IRuleTarget``)."""
        # Pseudo-parameters, not the synth-time region: the ARN follows where the stack deploys.
        arn = Stack.of(self._log_group).format_arn(
            service="logs",
            region=Aws.REGION,
            account=Aws.ACCOUNT_ID,
            resource="log-group",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
            resource_name=self._log_group.log_group_name,
        )
        if self._message is None:
            return events.RuleTargetConfig(arn=arn, target_resource=self._log_group)
        shape = {"timestamp": events.EventField.time, "message": self._message}
        return events.RuleTargetConfig(
            arn=arn,
            target_resource=self._log_group,
            input=events.RuleTargetInput.from_object(shape),
        )


#: What the change audit log keeps of each event with ``logKeys`` ``hashed`` or ``none``:
#: ``(name, JSON path)``; ``hashed`` adds ``keyHash`` (the relay's
#: :data:`s3ingest_fn.handlers.change_stream.KEY_HASH_FIELD`). Review events have no ``kind``
#: (the field is then empty).
AUDIT_FIELDS = (
    ("id", "$.detail.id"),
    ("bucket", "$.detail.bucket"),
    ("kind", "$.detail.kind"),
    ("rev", "$.detail.rev"),
    ("sequencer", "$.detail.sequencer"),
)


def audit_message(log_keys: str) -> str | None:
    """The audit log's message for ``log_keys`` (:class:`LogGroupTarget`): None (the whole
    event, key included) for ``plain``; else the detail type and :data:`AUDIT_FIELDS` as
    ``name=value`` pairs, plus ``keyHash`` for ``hashed``, never the key."""
    if log_keys == "plain":
        return None
    pairs = [*AUDIT_FIELDS, *((("keyHash", "$.detail.keyHash"),) if log_keys == "hashed" else ())]
    text = " ".join(f"{name}={events.EventField.from_path(path)}" for name, path in pairs)
    return f"{events.EventField.detail_type} {text}"


class ChangeBus(Construct):
    """The stack's own event bus for the ordered change stream (CONTRACT C11).

    The change-stream relay publishes one event per applied ledger change to it
    (:mod:`s3ingest_fn.services.changes`: ``source`` ``s3ingest``, ``detail-type``
    ``Object Ingested`` or ``Object Tombstoned``, ``detail.id`` the change id for de-duplication,
    ``detail.rev`` / ``detail.sequencer`` for per-key order). Teams subscribe with their own
    rules on this bus.

    * An archive of every change, kept ``archive_retention``, so a consumer can replay what it
      missed (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-archive.html); replayed
      events carry ``replay-name`` and the same ``detail.id``.
    * "The change-stream rule": every change to the change audit log group (retained with the
      stack's other logs). It is the example subscription: copy it, change the target. The log
      group's resource policy lets ``events.amazonaws.com`` create streams and put events in this
      log group only (the native ``AWS::Logs::ResourcePolicy``; CloudWatch Logs allows 10 such
      policies per account and region).

    Parameters
    ----------
    log_keys : str
        The ``logKeys`` setting: with ``hashed`` or ``none`` the audit log keeps
        :func:`audit_message` of each change (``keyHash``, or nothing, for the key); subscribers
        still get the whole event.

    Raises
    ------
    ValueError
        When ``log_retention_days`` is not a CloudWatch Logs retention value.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        bus_name: str,
        archive_retention: Duration,
        log_retention_days: int,
        log_keys: str = "plain",
    ) -> None:
        super().__init__(scope, construct_id)
        self.bus = events.EventBus(
            self,
            "Bus",
            event_bus_name=bus_name,
            description="s3ingest: the ordered change stream (one event per applied change)",
        )
        self.archive = self.bus.archive(
            "Archive",
            event_pattern=change_pattern(),
            retention=archive_retention,
            description="s3ingest: replayable copy of the change stream",
        )
        self.audit_log_group = logs.LogGroup(
            self,
            "AuditLog",
            retention=retention(log_retention_days),
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.audit_log_policy = logs.ResourcePolicy(
            self,
            "AuditLogPolicy",
            policy_statements=[
                iam.PolicyStatement(
                    sid="AllowEventBridgeToWriteTheChangeAuditLog",
                    principals=[iam.ServicePrincipal(EVENTS_PRINCIPAL)],
                    actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                    resources=[self.audit_log_group.log_group_arn],
                    # Confused deputy: only for a rule of this bus, in this account (for a
                    # bus rule's target, aws:SourceArn is the rule's ARN:
                    # https://docs.aws.amazon.com/eventbridge/latest/userguide/cross-service-confused-deputy-prevention.html).
                    # The rule's own ARN cannot be named: the rule depends on this policy.
                    conditions={
                        "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
                        "ArnLike": {
                            "aws:SourceArn": (
                                f"arn:{Aws.PARTITION}:events:{Aws.REGION}:{Aws.ACCOUNT_ID}:"
                                f"rule/{bus_name}/*"
                            )
                        },
                    },
                )
            ],
        )
        self.rule = events.Rule(
            self,
            "Rule",
            event_bus=self.bus,
            description="s3ingest: the change-stream rule: every change to the change audit log",
            event_pattern=change_pattern(),
            targets=[LogGroupTarget(self.audit_log_group, audit_message(log_keys))],
        )
        # Deliveries before the policy exists would be refused.
        self.rule.node.add_dependency(self.audit_log_policy)

    def admit_only(self, *publishers: iam.IRole) -> None:
        """Give the bus a resource policy that denies ``events:PutEvents`` to every IAM principal
        but ``publishers`` (the relay's role): no one else in the account can publish
        ``source: "s3ingest"`` events that subscribers trust, whatever their IAM policies allow.

        An event bus's resource-based policy takes IAM policy statements, Deny included, with
        the global condition keys
        (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-bus-perms.html,
        https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-conditions.html,
        https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html):
        ``aws:PrincipalArn`` is the role's ARN for any session of it. AWS services acting for
        EventBridge (``aws:PrincipalIsAWSService``, such as an archive's replay) are not IAM
        callers and stay admitted. Same-account publishers need no Allow here: the relay's
        identity policy grants it (``grant_put_events_to``). CDK writes the statement as
        ``AWS::Events::EventBusPolicy``.
        """
        self._publishers = list(publishers)
        self._only = iam.PolicyStatement(
            sid=ONLY_THE_RELAY_SID,
            effect=iam.Effect.DENY,
            principals=[iam.AnyPrincipal()],
            actions=["events:PutEvents"],
            resources=[self.bus.event_bus_arn],
            conditions={
                "StringNotEquals": {"aws:PrincipalArn": [r.role_arn for r in publishers]},
                "Bool": {"aws:PrincipalIsAWSService": "false"},
            },
        )
        self.bus.add_to_resource_policy(self._only)

    def admit(self, publisher: iam.IRole) -> None:
        """Admit one more publisher to the policy :meth:`admit_only` wrote (the scheduled
        reconciliation's role, which publishes attestations); its identity policy must grant
        ``events:PutEvents`` too."""
        self._publishers.append(publisher)
        self._only.add_condition(
            "StringNotEquals", {"aws:PrincipalArn": [r.role_arn for r in self._publishers]}
        )
