"""Hold for review in the stack: the held-changes alarm (exact properties, only with a hold),
and the change stream's filter passing the review writes."""

from __future__ import annotations

import json
from typing import Any

from s3ingest_cdk.synth import PROJECT_ROOT, Synth

from .conftest import HOLD_ALARM_SECONDS


def _held_alarm(synth: Synth) -> dict[str, Any]:
    alarm = synth.pipeline.alarms.held_changes
    assert alarm is not None
    properties: dict[str, Any] = synth.template["Resources"][synth.logical_id(alarm)]["Properties"]
    return properties


def test_the_held_changes_alarm_watches_the_oldest_held_change(processors_synth: Synth) -> None:
    synth = processors_synth
    topic = {"Ref": synth.logical_id(synth.pipeline.alarm_topic.topic)}
    properties = _held_alarm(synth)
    ignored = ("AlarmDescription", "AlarmName", "Tags")
    assert {k: v for k, v in properties.items() if k not in ignored} == {
        "Namespace": "S3Ingest",
        "MetricName": "held_oldest_seconds",
        "Dimensions": [
            {"Name": "service", "Value": "s3ingest"},
            {"Name": "stack", "Value": synth.stack.stack_name},
        ],
        # the reconciliation measures it once per run: each period holds one run
        "Statistic": "Maximum",
        "Period": synth.settings.reconcile_heartbeat_seconds,
        "Threshold": HOLD_ALARM_SECONDS,
        "ComparisonOperator": "GreaterThanThreshold",
        "EvaluationPeriods": 1,
        "DatapointsToAlarm": 1,
        "TreatMissingData": "notBreaching",
        "AlarmActions": [topic],
        "OKActions": [topic],
    }
    assert synth.settings.reconcile_heartbeat_seconds == 25 * 3_600
    assert properties["AlarmName"] == "s3ingest-procs-held-changes"
    assert properties["AlarmDescription"].startswith("s3ingest: ")
    anchor = "held-changes"
    assert properties["AlarmDescription"].endswith(
        f"Runbook: {synth.settings.runbook_base_url}#{anchor}"
    )
    runbook = (PROJECT_ROOT / "docs" / "runbook.md").read_text()
    assert f'<a id="{anchor}"></a>' in runbook
    # ... and it is one of the pipeline's alarms (the dashboard's list)
    assert synth.pipeline.alarms.held_changes in synth.pipeline.alarms.alarms


def test_no_hold_no_held_changes_alarm_and_no_variables(synth: Synth, fanout_synth: Synth) -> None:
    # the default app and the single-processor app hold nothing
    for variant in (synth, fanout_synth):
        assert variant.pipeline.alarms.held_changes is None
        names = [
            resource["Properties"].get("AlarmName")
            for resource in variant.resources("AWS::CloudWatch::Alarm").values()
        ]
        assert not [n for n in names if isinstance(n, str) and n.endswith("-held-changes")]
        for resource in variant.resources("AWS::Lambda::Function").values():
            variables = resource["Properties"].get("Environment", {}).get("Variables", {})
            assert "HOLD" not in variables and "TRAIL_LENGTH" not in variables


def test_the_change_stream_passes_the_review_writes(fanout_synth: Synth) -> None:
    # the relay is invoked for applied changes and for hold, approve and reject (the change
    # stream publishes Object Held, Change Approved and Change Rejected)
    (mapping,) = [
        m
        for m in fanout_synth.resources("AWS::Lambda::EventSourceMapping").values()
        if "FilterCriteria" in m["Properties"]
    ]
    # (this variant has the history table, so a second filter passes effects done: op "done")
    changes, effects = (
        json.loads(f["Pattern"]) for f in mapping["Properties"]["FilterCriteria"]["Filters"]
    )
    assert changes["eventName"] == ["INSERT", "MODIFY"]
    assert changes["dynamodb"]["NewImage"]["op"]["S"] == ["apply", "hold", "approve", "reject"]
    assert effects["dynamodb"]["NewImage"]["op"]["S"] == ["done"]
