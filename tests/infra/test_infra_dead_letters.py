"""Dead-letter queues and state machines (issue 24): every DLQ retained with its logical id and
alarmed on the age of its oldest message well before it expires; every state machine alarmed on
failed, timed-out and aborted executions. Each check walks the template, so a DLQ or state
machine added later without its alarm fails here."""

from __future__ import annotations

from typing import Any

import pytest

from s3ingest_cdk.constructs.operational_alarms import dead_letter_age_threshold

from .conftest import TEAM_VARIANTS, VARIANTS

#: The DLQs' logical ids as the templates had them before the DLQs were retained (commit
#: 5db4616): retaining them must not rename them (a new id deploys a new, empty queue).
DLQ_IDS = {"IngestDeadLetterQueueE8016E9B", "RoutingTargetDeadLetterQueueFEC4F13F"}
CHANGE_DLQ_ID = "ChangeRelayDeadLetterQueue81CC1262"
HISTORY_DLQ_ID = "HistoryDeadLetterQueue764C6AA2"
#: The team app's (``Stack(app, "Team")`` holding ``S3IngestPipeline(stack, "Ingest")``).
TEAM_DLQ_IDS = {
    "IngestIngestionIngestDeadLetterQueue09951EC6",
    "IngestIngestionRoutingTargetDeadLetterQueue66892101",
    "IngestChangeStreamChangeRelayDeadLetterQueue1124D6CF",
}

DAY = 86_400


def _template(variant: str, request: pytest.FixtureRequest) -> dict[str, Any]:
    template: dict[str, Any] = request.getfixturevalue(variant).template
    return template


def _queue_id(value: Any) -> str | None:
    """The logical id of the queue an ARN or URL value names (``Fn::GetAtt [id, Arn]``/``Ref``)."""
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return str(value["Fn::GetAtt"][0])
    if isinstance(value, dict) and "Ref" in value:
        return str(value["Ref"])
    return None


def dead_letter_queues(template: dict[str, Any]) -> dict[str, str | None]:
    """Every DLQ of the template -> the queue it is a redrive target of (None: sent to): the
    targets of queues' ``RedrivePolicy``, of rule targets' ``DeadLetterConfig`` and of event
    source mappings' on-failure destinations."""
    resources = template["Resources"]
    found: dict[str, str | None] = {}
    for logical_id, resource in resources.items():
        props = resource.get("Properties", {})
        if resource["Type"] == "AWS::SQS::Queue" and "RedrivePolicy" in props:
            target = _queue_id(props["RedrivePolicy"]["deadLetterTargetArn"])
            assert target is not None
            found[target] = logical_id
        elif resource["Type"] == "AWS::Events::Rule":
            for target in props.get("Targets", []):
                dlq = _queue_id(target.get("DeadLetterConfig", {}).get("Arn"))
                if dlq is not None:
                    found.setdefault(dlq, None)
        elif resource["Type"] == "AWS::Lambda::EventSourceMapping":
            on_failure = props.get("DestinationConfig", {}).get("OnFailure", {})
            dlq = _queue_id(on_failure.get("Destination"))
            if dlq is not None and resources[dlq]["Type"] == "AWS::SQS::Queue":
                found.setdefault(dlq, None)
    return found


def _alarms(template: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::CloudWatch::Alarm"
    ]


def _age_alarms(template: dict[str, Any], queue_id: str) -> list[dict[str, Any]]:
    return [
        alarm
        for alarm in _alarms(template)
        if alarm.get("MetricName") == "ApproximateAgeOfOldestMessage"
        and alarm.get("Dimensions")
        == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [queue_id, "QueueName"]}}]
    ]


@pytest.mark.parametrize("variant", VARIANTS + TEAM_VARIANTS)
def test_every_dead_letter_queue_is_retained_under_its_id(
    variant: str, request: pytest.FixtureRequest
) -> None:
    template = _template(variant, request)
    dlqs = dead_letter_queues(template)
    if variant in TEAM_VARIANTS:
        assert set(dlqs) == TEAM_DLQ_IDS
    else:
        settings = request.getfixturevalue(variant).settings
        assert set(dlqs) == (
            DLQ_IDS
            | ({CHANGE_DLQ_ID} if settings.change_stream else set())
            | ({HISTORY_DLQ_ID} if settings.history_table else set())
        )
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] != "AWS::SQS::Queue":
            continue
        kept = "Retain" if logical_id in dlqs else "Delete"
        assert resource["DeletionPolicy"] == kept, logical_id
        assert resource["UpdateReplacePolicy"] == kept, logical_id


@pytest.mark.parametrize("variant", VARIANTS + TEAM_VARIANTS)
def test_every_dead_letter_queue_alarms_before_its_messages_expire(
    variant: str, request: pytest.FixtureRequest
) -> None:
    template = _template(variant, request)
    queues = template["Resources"]
    for dlq, source in dead_letter_queues(template).items():
        (alarm,) = _age_alarms(template, dlq)
        retention = queues[dlq]["Properties"]["MessageRetentionPeriod"]
        # the metric counts from the move: a redriven message may have spent the source
        # queue's whole retention there already
        sure = retention - (queues[source]["Properties"]["MessageRetentionPeriod"] if source else 0)
        assert alarm["Threshold"] == max(sure // 2, 3600)
        assert alarm["Threshold"] <= sure - 3 * DAY  # well before (default retentions)
        assert alarm["Statistic"] == "Maximum"
        assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
        assert "#dlq-messages-near-expiry" in alarm["AlarmDescription"]
        assert alarm["AlarmActions"] and alarm["OKActions"]


def test_threshold_rule() -> None:
    from aws_cdk import Duration

    days = Duration.days
    assert dead_letter_age_threshold(days(14), days(4)).to_seconds() == 5 * DAY
    assert dead_letter_age_threshold(days(14), None).to_seconds() == 7 * DAY
    # nothing sure left: the alarm still exists, an hour after the move (the depth alarm fired)
    assert dead_letter_age_threshold(days(4), days(4)).to_seconds() == 3600


@pytest.mark.parametrize("variant", VARIANTS + TEAM_VARIANTS)
def test_every_state_machine_has_a_failure_alarm(
    variant: str, request: pytest.FixtureRequest
) -> None:
    template = _template(variant, request)
    machines = [
        logical_id
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == "AWS::StepFunctions::StateMachine"
    ]
    assert machines
    for machine in machines:
        watched: set[str] = set()
        for alarm in _alarms(template):
            for metric in alarm.get("Metrics", []):
                stat = metric.get("MetricStat", {}).get("Metric", {})
                if stat.get("Namespace") == "AWS/States" and stat.get("Dimensions") == [
                    {"Name": "StateMachineArn", "Value": {"Ref": machine}}
                ]:
                    watched.add(stat["MetricName"])
        assert watched == {"ExecutionsFailed", "ExecutionsTimedOut", "ExecutionsAborted"}, machine
