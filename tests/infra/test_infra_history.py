"""The history table feature (``historyTable``; the fanout variant has it, the default not): a
rule on the change bus -> the history queue (redriven to its DLQ) -> the history writer, its
Glue database, and the Athena workgroup with the named queries of s3ingest/history_queries.py."""

from __future__ import annotations

import json
from typing import Any

from s3ingest.history_queries import QUERIES
from s3ingest_cdk.synth import Synth

OPTIONAL = (
    "AWS::Athena::WorkGroup",
    "AWS::Athena::NamedQuery",
    "AWS::Glue::Database",
)


def _writer(synth: Synth) -> dict[str, Any]:
    (writer,) = (
        f
        for f in synth.resources("AWS::Lambda::Function").values()
        if f["Properties"]["Handler"] == "s3ingest_fn.handlers.history.handler"
    )
    return writer


def test_off_by_default(synth: Synth) -> None:
    assert not synth.settings.history_table
    for kind in OPTIONAL:
        assert synth.resources(kind) == {}, kind
    handlers = {
        f["Properties"]["Handler"] for f in synth.resources("AWS::Lambda::Function").values()
    }
    assert "s3ingest_fn.handlers.history.handler" not in handlers
    assert "HistoryWorkGroup" not in synth.template.get("Outputs", {})


def test_on_the_change_bus_feeds_the_writer_once_per_batch(fanout_synth: Synth) -> None:
    synth = fanout_synth
    history = synth.pipeline.history
    assert history is not None
    queue, dlq = synth.logical_id(history.queue), synth.logical_id(history.dead_letter_queue)
    props = synth.template["Resources"][queue]["Properties"]
    assert props["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [dlq, "Arn"]},
        "maxReceiveCount": 5,
    }
    assert props["VisibilityTimeout"] == 360  # the writer's timeout (300 s) with room
    (rule,) = (
        r
        for r in synth.resources("AWS::Events::Rule").values()
        if any(t["Arn"] == {"Fn::GetAtt": [queue, "Arn"]} for t in r["Properties"]["Targets"])
    )
    # the changes and the effects done, which have a source of their own
    assert rule["Properties"]["EventPattern"] == {"source": ["s3ingest", "s3ingest.effects"]}
    bus = synth.logical_id(synth.pipeline.bus)
    assert rule["Properties"]["EventBusName"] == {"Ref": bus}
    (mapping,) = (
        m
        for m in synth.resources("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["EventSourceArn"] == {"Fn::GetAtt": [queue, "Arn"]}
    )
    assert mapping["Properties"]["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["Properties"]["ScalingConfig"] == {"MaximumConcurrency": 2}
    env = _writer(synth)["Properties"]["Environment"]["Variables"]
    assert json.loads(env["HISTORY_CATALOG"]) == {"type": "glue", "glue.max-retries": 0}
    assert env["HISTORY_TABLE"] == "s3ingest_history_fanout.history"
    assert env["DEAD_LETTER_QUEUE_URL"] == {"Ref": dlq}


def test_on_the_writer_reaches_its_table_only(fanout_synth: Synth) -> None:
    synth = fanout_synth
    history = synth.pipeline.history
    assert history is not None
    role = synth.logical_id(history.writer.role)
    statements = [
        s
        for p in synth.resources("AWS::IAM::Policy").values()
        if {"Ref": role} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    glue = [s for s in statements if any(str(a).startswith("glue:") for a in _list(s["Action"]))]
    assert len(glue) == 1
    assert "glue:CreateDatabase" not in glue[0]["Action"]
    text = json.dumps(glue[0]["Resource"])
    assert "s3ingest_history_fanout/history" in text and '"*"' not in text
    s3 = [s for s in statements if any(str(a).startswith("s3:") for a in _list(s["Action"]))]
    assert {a for s in s3 for a in _list(s["Action"])} == {
        "s3:GetObject",
        "s3:PutObject",
        "s3:DeleteObject",
        "s3:ListBucket",
    }


def test_on_the_named_queries_are_the_clis(fanout_synth: Synth) -> None:
    synth = fanout_synth
    (group,) = synth.resources("AWS::Athena::WorkGroup").values()
    assert group["Properties"]["Name"] == "s3ingest-history-fanout"
    config = group["Properties"]["WorkGroupConfiguration"]
    assert config["EnforceWorkGroupConfiguration"] is True
    named = {
        q["Properties"]["Name"]: q["Properties"]
        for q in synth.resources("AWS::Athena::NamedQuery").values()
    }
    assert set(named) == {f"s3ingest-history-{name}" for name in QUERIES}
    for name, query in QUERIES.items():
        props = named[f"s3ingest-history-{name}"]
        assert props["QueryString"] == query.render('"s3ingest_history_fanout"."history"', "athena")
        assert props["Database"] == "s3ingest_history_fanout"
    outputs = synth.template["Outputs"]
    assert outputs["HistoryWorkGroup"]["Value"] == "s3ingest-history-fanout"
    assert outputs["HistoryTable"]["Value"] == "s3ingest_history_fanout.history"


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_on_an_hourly_schedule_maintains_the_table(fanout_synth: Synth) -> None:
    synth = fanout_synth
    history = synth.pipeline.history
    assert history is not None
    writer = synth.logical_id(history.writer.function)
    (rule,) = (
        r
        for r in synth.resources("AWS::Events::Rule").values()
        if any(t["Arn"] == {"Fn::GetAtt": [writer, "Arn"]} for t in r["Properties"]["Targets"])
    )
    assert rule["Properties"]["ScheduleExpression"] == "rate(1 hour)"
    (target,) = rule["Properties"]["Targets"]
    retention = synth.settings.history_snapshot_retention_hours
    assert json.loads(target["Input"]) == {"maintenance": {"retentionHours": retention}}
    # what the maintenance commits and deletes with: the writer's own grants
    role = synth.logical_id(history.writer.role)
    actions = {
        a
        for p in synth.resources("AWS::IAM::Policy").values()
        if {"Ref": role} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        for a in _list(s["Action"])
    }
    assert {"glue:UpdateTable", "s3:DeleteObject"} <= actions
    output = synth.template["Outputs"]["HistoryWriterFunctionName"]["Value"]
    assert output == {"Ref": writer}


def test_on_the_bucket_expires_athena_results_and_deleted_history_files_only(
    fanout_synth: Synth,
) -> None:
    synth = fanout_synth
    history = synth.pipeline.history
    assert history is not None
    bucket = synth.logical_id(synth.pipeline.landings.shared.inventory)
    rules = {
        r["Id"]: r
        for r in synth.template["Resources"][bucket]["Properties"]["LifecycleConfiguration"][
            "Rules"
        ]
    }
    results = rules["ExpireAthenaResults"]
    assert results["Prefix"] == "athena-results/" and results["ExpirationInDays"] == 7
    deleted = rules["ExpireDeletedHistoryFiles"]
    assert deleted["Prefix"] == "history/"
    assert deleted["NoncurrentVersionExpiration"] == {"NoncurrentDays": 7}
    # a current file under history/ never expires: the table's snapshots read it
    for rule in rules.values():
        if "history/".startswith(rule.get("Prefix", "")) or rule.get("Prefix", "").startswith(
            "history/"
        ):
            assert "ExpirationInDays" not in rule and "ExpirationDate" not in rule, rule
