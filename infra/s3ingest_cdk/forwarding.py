"""Several Regions, one change stream (``docs/organisation.md``): each Region's pipeline keeps
its own change bus, and a :class:`ChangeStreamForwarder` in its stack sends every change to one
hub bus (:class:`ChangeStreamHub`) in another Region (and optionally another account).

- The forwarder is a rule on the pipeline's change bus matching every change
  (:func:`~s3ingest_cdk.constructs.change_bus.change_pattern`) with the hub bus as its target:
  a rule sending to a bus in another Region (or account) needs an IAM role EventBridge assumes,
  with ``events:PutEvents`` on that bus
  (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-cross-region.html,
  https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-cross-account.html), and gets a
  dead-letter queue in its own Region
  (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-rule-dlq.html). No input: the
  hub receives the event as matched (same ``id``, ``time``, ``source``, ``detail-type`` and
  ``detail``; the envelope's ``account`` and ``region`` are expected to stay the publishing
  pipeline's, which no AWS page found states: ``detail.bucket`` tells Regions apart).
  The rule reads its own bus: it needs no ``events:PutEvents`` there, so the
  change bus still admits only the relay (``ONLY_THE_RELAY_SID``).
- The hub is a bus whose resource policy admits ``events:PutEvents`` from the named forwarders
  only: their accounts, their rules (``aws:SourceArn``, the rule ARN, as EventBridge documents
  for cross-Region senders,
  https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-bus-example-policy-restrict-rule.html),
  their roles (``aws:PrincipalArn``), ``source`` ``s3ingest`` only (``events:source``,
  https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-conditions.html), and denies
  every other IAM caller and every other source, same account included; with an archive.

Names are fixed, so a hub's policy names forwarders in other Regions without cross-Region
references: the rule ``s3ingest-forward-changes`` on ``s3ingest-changes-<stage>``, the role
``s3ingest-fwd-<stage>-<region>``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import Aws, Duration, Token
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from constructs import Construct

from s3ingest.settings import CHANGE_SOURCE, SettingsError
from s3ingest.settings.buckets import ACCOUNT_RE
from s3ingest_cdk.constructs.change_bus import EVENTS_PRINCIPAL, change_bus_name, change_pattern
from s3ingest_cdk.constructs.ingest_queue import rule_dead_letter_queue
from s3ingest_cdk.constructs.operational_alarms import alarm_name, runbook
from s3ingest_cdk.deputy import hold_to_account
from s3ingest_cdk.encryption import encrypt_everything
from s3ingest_cdk.pipeline import S3IngestPipeline

#: The forwarding rule's name on each pipeline's change bus.
FORWARD_RULE_NAME = "s3ingest-forward-changes"
#: The pipeline's attribute that records its forwarder.
_FORWARDED = "_s3ingest_forwarded"
#: The hub bus's default name.
HUB_BUS_NAME = "s3ingest-changes-hub"
#: How long the hub's archive keeps changes by default.
HUB_ARCHIVE_RETENTION = Duration.days(365)
#: The hub policy's statement ids.
HUB_ADMITS_SID = "AdmitTheRegionalForwarders"
HUB_ONLY_FORWARDERS_SID = "OnlyTheRegionalForwardersPublish"
HUB_ONLY_CHANGES_SID = "OnlyS3IngestChanges"


def forwarder_role_name(stage: str, region: str) -> str:
    """The forwarder role's name (IAM names are per account: the Region keeps two Regions'
    forwarders apart): ``s3ingest-fwd-<stage>-<region>``, at most 60 characters."""
    return f"s3ingest-fwd-{stage}-{region}"


def hub_bus_arn(account: str, region: str, bus_name: str = HUB_BUS_NAME) -> str:
    """The hub bus's ARN (``arn:<partition>:events:<region>:<account>:event-bus/<name>``)."""
    return f"arn:{Aws.PARTITION}:events:{region}:{account}:event-bus/{bus_name}"


@dataclass(frozen=True)
class ForwardedRegion:
    """One regional pipeline a hub admits: its ``account`` (12 digits), ``region`` and
    ``stage`` (which names its change bus, rule and role)."""

    account: str
    region: str
    stage: str

    def rule_arn(self) -> str:
        """The forwarding rule's ARN (``aws:SourceArn`` of its deliveries)."""
        return (
            f"arn:{Aws.PARTITION}:events:{self.region}:{self.account}:"
            f"rule/{change_bus_name(self.stage)}/{FORWARD_RULE_NAME}"
        )

    def role_arn(self) -> str:
        """The forwarder role's ARN (``aws:PrincipalArn`` of its deliveries)."""
        name = forwarder_role_name(self.stage, self.region)
        return f"arn:{Aws.PARTITION}:iam::{self.account}:role/{name}"


class ChangeStreamForwarder(Construct):
    """Every change of one regional pipeline, to a hub bus of another Region (module docstring).

    Parameters
    ----------
    hub_bus_arn : str
        The hub bus (:func:`hub_bus_arn`), in another Region or account.

    Attributes
    ----------
    rule : aws_cdk.aws_events.Rule
        The forwarding rule (``s3ingest-forward-changes``) on the pipeline's change bus.
    role : aws_cdk.aws_iam.Role
        The role EventBridge assumes to put the events on the hub bus (that bus only).
    dead_letter_queue : aws_cdk.aws_sqs.Queue
        Changes the rule could not deliver (retained with the stack's deletion; SSE-SQS, or
        the pipeline's ``kmsKeyArn`` key).
    alarm : aws_cdk.aws_cloudwatch.Alarm
        ``s3ingest-<stage>-change-forward-dlq-depth``: a message in that queue, to the
        pipeline's alarm topic (runbook ``change-forward-dlq``).

    Raises
    ------
    SettingsError
        When the pipeline has no change stream or a forwarder already, or ``hub_bus_arn`` is
        not an event bus ARN.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        pipeline: S3IngestPipeline,
        hub_bus_arn: str,
    ) -> None:
        super().__init__(scope, construct_id)
        problems = []
        if pipeline.change_bus is None:
            problems.append("pipeline: the forwarder needs changeStream on")
        if getattr(pipeline, _FORWARDED, False):
            problems.append(
                "pipeline: it has a forwarder already (one hub per pipeline: the rule's name "
                f"{FORWARD_RULE_NAME} is fixed; consumers fan out from the hub)"
            )
        if not Token.is_unresolved(hub_bus_arn) and not _is_bus_arn(hub_bus_arn):
            problems.append(f"hub_bus_arn: {hub_bus_arn!r} is not an event bus ARN")
        if problems or pipeline.change_bus is None:
            raise SettingsError(problems)
        setattr(pipeline, _FORWARDED, True)
        stage = pipeline.settings.stage
        source_bus = pipeline.change_bus.bus
        # this stack's own account and Region, as the hub names it
        rule_arn = ForwardedRegion(Aws.ACCOUNT_ID, Aws.REGION, stage).rule_arn()
        # The execution role of a cross-Region bus target; its trust names this rule only
        # (https://docs.aws.amazon.com/eventbridge/latest/userguide/cross-service-confused-deputy-prevention.html).
        self.role = iam.Role(
            self,
            "Role",
            role_name=forwarder_role_name(stage, Aws.REGION),
            description="s3ingest: forwards the change stream to the hub bus",
            assumed_by=iam.ServicePrincipal(EVENTS_PRINCIPAL).with_conditions(
                {
                    "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
                    "ArnEquals": {"aws:SourceArn": rule_arn},
                }
            ),
        )
        # Its messages are changes the hub missed: evidence, kept as the pipeline's DLQs are.
        self.dead_letter_queue = rule_dead_letter_queue(self, "DeadLetterQueue")
        hub = events.EventBus.from_event_bus_arn(self, "HubBus", hub_bus_arn)
        # CDK grants the role events:PutEvents on the hub bus only.
        self.rule = events.Rule(
            self,
            "Rule",
            rule_name=FORWARD_RULE_NAME,
            event_bus=source_bus,
            description="s3ingest: every change, to the hub bus of the organisation's stream",
            event_pattern=change_pattern(),
            targets=[
                targets.EventBus(hub, role=self.role, dead_letter_queue=self.dead_letter_queue)
            ],
        )
        depth = self.dead_letter_queue.metric_approximate_number_of_messages_visible(
            statistic=cloudwatch.Stats.MAXIMUM, period=Duration.minutes(5)
        )
        self.alarm = cloudwatch.Alarm(
            self,
            "DeadLetterAlarm",
            alarm_name=alarm_name(stage, "change-forward-dlq-depth"),
            metric=depth,
            threshold=0,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=(
                "s3ingest: changes the forwarding rule could not deliver to the hub bus. "
                f"Runbook: {runbook(pipeline.settings.runbook_base_url, 'change-forward-dlq')}"
            ),
        )
        self.alarm.add_alarm_action(actions.SnsAction(pipeline.topic))
        self.alarm.add_ok_action(actions.SnsAction(pipeline.topic))
        if pipeline.encryption_key is not None:
            # kmsKeyArn: the dead-letter queue too (the key's policy admits this account's
            # rules as senders, s3ingest.encryption.key_policy_statements)
            encrypt_everything(self, pipeline.encryption_key)
        # the dead-letter queue's statement for the rule, held to this account too
        hold_to_account(self)


def _is_bus_arn(arn: str) -> bool:
    parts = arn.split(":", 5)
    return (
        len(parts) == 6
        and parts[0] == "arn"
        and parts[2] == "events"
        and parts[5].startswith("event-bus/")
    )


class ChangeStreamHub(Construct):
    """The one bus several Regions' change streams are forwarded to (module docstring).

    Parameters
    ----------
    bus_name : str
        The hub bus's name (:data:`HUB_BUS_NAME`); the forwarders' ``hub_bus_arn`` names it.

    Attributes
    ----------
    bus : aws_cdk.aws_events.EventBus
    archive : aws_cdk.aws_events.Archive
        Every change the hub received, replayable onto the hub bus.

    Raises
    ------
    SettingsError
        When ``forwarded`` is empty, names an account that is not 12 digits, or names one
        Region and stage twice.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        forwarded: Sequence[ForwardedRegion],
        bus_name: str = HUB_BUS_NAME,
        archive_retention: Duration = HUB_ARCHIVE_RETENTION,
    ) -> None:
        super().__init__(scope, construct_id)
        problems = _hub_problems(forwarded)
        if problems:
            raise SettingsError(problems)
        self.bus = events.EventBus(
            self,
            "Bus",
            event_bus_name=bus_name,
            description="s3ingest: the change streams of several Regions",
        )
        self.archive = self.bus.archive(
            "Archive",
            event_pattern=change_pattern(),
            retention=archive_retention,
            description="s3ingest: replayable copy of the forwarded change streams",
        )
        accounts = sorted({f.account for f in forwarded})
        roles = [f.role_arn() for f in forwarded]
        bus_arn = self.bus.event_bus_arn
        # Another account's forwarder needs an Allow here; this account's needs none (its
        # role's identity policy), and the Denies below hold for both.
        self.bus.add_to_resource_policy(
            iam.PolicyStatement(
                sid=HUB_ADMITS_SID,
                principals=[iam.AccountPrincipal(a) for a in accounts],
                actions=["events:PutEvents"],
                resources=[bus_arn],
                conditions={
                    "StringEquals": {"events:source": CHANGE_SOURCE},
                    "ArnEquals": {
                        "aws:SourceArn": [f.rule_arn() for f in forwarded],
                        "aws:PrincipalArn": roles,
                    },
                },
            )
        )
        # No IAM caller but the forwarders' roles; services (the archive's replay) stay.
        self.bus.add_to_resource_policy(
            iam.PolicyStatement(
                sid=HUB_ONLY_FORWARDERS_SID,
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=["events:PutEvents"],
                resources=[bus_arn],
                conditions={
                    "ArnNotEquals": {"aws:PrincipalArn": roles},
                    "Bool": {"aws:PrincipalIsAWSService": "false"},
                },
            )
        )
        self.bus.add_to_resource_policy(
            iam.PolicyStatement(
                sid=HUB_ONLY_CHANGES_SID,
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=["events:PutEvents"],
                resources=[bus_arn],
                conditions={"StringNotEquals": {"events:source": CHANGE_SOURCE}},
            )
        )


def _hub_problems(forwarded: Sequence[ForwardedRegion]) -> list[str]:
    problems = []
    if not forwarded:
        problems.append("forwarded: name at least one regional pipeline")
    seen: set[tuple[str, str, str]] = set()
    for index, item in enumerate(forwarded):
        if not ACCOUNT_RE.match(item.account):
            problems.append(f"forwarded[{index}].account: {item.account!r} is not an account id")
        key = (item.account, item.region, item.stage)
        if key in seen:
            problems.append(f"forwarded[{index}]: {key} is named twice")
        seen.add(key)
    return problems
