"""Operating after an incident (CONTRACT C14, C9): replay, DLQ redrive, explain, status.
Against the emulator where it implements the calls, with botocore Stubber where it does not
(SQS message-move tasks; CloudWatch metric data)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

from s3ingest.commands.explain import explain
from s3ingest.commands.redrive import (
    inspect_dlq,
    move_task_status,
    redrive_all,
    redrive_valid,
)
from s3ingest.commands.replay import (
    REPLAY_OUTCOMES,
    OperationError,
    ReplayTarget,
    check_window,
    replay_outcomes,
    start_replay,
)
from s3ingest.commands.status import status
from s3ingest.local.emulator.chaos import Chaos
from s3ingest.local.stack.runtime import LocalRuntime

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@pytest.mark.contract("C14")
def test_replay_is_scoped_to_the_ingest_rule() -> None:
    # moto's StartReplay ignores FilterArns (it re-delivers to every matching rule), so the
    # scoping is proven on the exact request instead
    events = boto3.client(
        "events", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    target = ReplayTarget(
        archive_arn="arn:aws:events:us-east-1:1:archive/a",
        bus_arn="arn:aws:events:us-east-1:1:event-bus/default",
        rule_arn="arn:aws:events:us-east-1:1:rule/ingest",
    )
    start, end = NOW - timedelta(hours=2), NOW - timedelta(minutes=30)
    with Stubber(events) as stub:
        stub.add_response(
            "start_replay",
            {"State": "STARTING"},
            {
                "ReplayName": "r-1",
                "EventSourceArn": target.archive_arn,
                "EventStartTime": start,
                "EventEndTime": end,
                "Destination": {"Arn": target.bus_arn, "FilterArns": [target.rule_arn]},
            },
        )
        assert start_replay(events, target, start, end, name="r-1", now=NOW) == "r-1"


@pytest.mark.contract("C14")
def test_replay_twice_changes_nothing_and_is_counted_apart(emulator: Any) -> None:
    rt = LocalRuntime(emulator, versioning="Enabled")
    rt.faithful.put("a b", "1")
    rt.faithful.put("a b", "2")
    rt.faithful.delete("gone")
    rt.flush(Chaos(seed=2, reorder=True))
    rt.drain()
    rows = rt.ledger_rows()
    live = len(rt.delivered)
    # WHEN the archive is replayed twice
    rt.replay()
    rt.replay()
    # THEN the replayed events were counted apart and changed nothing
    replayed = rt.delivered[live:]
    assert len(replayed) == 2 * live
    assert {d.result.extra["source"] for d in replayed} == {"replay"}
    assert {d.result.outcome.value for d in replayed} <= {"duplicate", "stale"}
    assert rt.ledger_rows() == rows


@pytest.mark.contract("C14")
def test_replay_repairs_a_ledger_a_bad_deploy_lost(emulator: Any) -> None:
    rt = LocalRuntime(emulator, versioning=None)
    for i in range(5):
        rt.faithful.put(f"k{i}", "x")
    rt.flush()
    rt.drain()
    for row in rt.ledger_rows()[:3]:  # a bad deploy deleted rows
        rt.ddb.delete_item(
            TableName=rt.resources.table, Key={"pk": {"S": f"{row.bucket}/{row.key}"}}
        )
    assert not rt.compare().converged
    rt.replay()
    assert rt.compare().converged


@pytest.mark.contract("C14")
@pytest.mark.parametrize(
    ("start", "end", "message"),
    [
        (NOW - timedelta(hours=1), NOW - timedelta(minutes=5), "ingestion lag"),
        (NOW - timedelta(hours=1), NOW - timedelta(hours=2), "must be after"),
    ],
)
def test_replay_window_is_refused_when_unsafe(start: datetime, end: datetime, message: str) -> None:
    with pytest.raises(OperationError, match=message):
        check_window(start, end, now=NOW)
    check_window(NOW - timedelta(hours=2), NOW - timedelta(minutes=10), now=NOW)


@pytest.mark.contract("C9")
def test_dlq_is_classified_and_only_valid_messages_move_back(emulator: Any) -> None:
    # GIVEN an invalid message dead-lettered by the handler, and a valid one whose retries ran
    # out (sent straight to the DLQ, as SQS would after maxReceiveCount)
    rt = LocalRuntime(emulator, versioning="Enabled")
    rt.send_raw("{not json")
    rt.drain()
    rt.faithful.put("retry me", "1")
    (event,) = rt.faithful.take_pending()
    rt.sqs.send_message(QueueUrl=rt.resources.dlq_url, MessageBody=json.dumps(event))
    # WHEN the DLQ is inspected and redriven without --include-invalid
    summary = inspect_dlq(rt.sqs, rt.resources.dlq_url, peek_visibility=0)
    moved = redrive_valid(rt.sqs, rt.resources.dlq_url, rt.resources.queue_url, max_messages=10)
    rt.drain()
    # THEN the invalid one stays, the valid one is ingested
    assert summary["by_reason"] == {"malformed-json": 1, "retries-exhausted": 1}
    assert summary["by_kind"] == {"invalid:malformed-json": 1, "created": 1}
    assert summary["sample_keys"] == ["retry me"]
    assert moved == {"moved": 1, "kept_invalid": 1}
    assert rt.compare().converged
    assert [m["reason"] for m in rt.dead_letters()] == ["malformed-json"]


def test_message_move_task_is_started_and_followed() -> None:
    sqs = boto3.client(
        "sqs", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    dlq, src = "arn:aws:sqs:us-east-1:1:dlq", "arn:aws:sqs:us-east-1:1:ingest"
    with Stubber(sqs) as stub:
        stub.add_response(
            "start_message_move_task",
            {"TaskHandle": "h1"},
            {"SourceArn": dlq, "DestinationArn": src, "MaxNumberOfMessagesPerSecond": 50},
        )
        stub.add_response(
            "list_message_move_tasks",
            {
                "Results": [
                    {
                        "TaskHandle": "h1",
                        "Status": "RUNNING",
                        "SourceArn": dlq,
                        "DestinationArn": src,
                        "ApproximateNumberOfMessagesMoved": 40,
                        "ApproximateNumberOfMessagesToMove": 100,
                    }
                ]
            },
            {"SourceArn": dlq, "MaxResults": 1},
        )
        assert redrive_all(sqs, dlq, src, max_per_second=50) == "h1"
        assert move_task_status(sqs, dlq) == {
            "status": "RUNNING",
            "moved": 40,
            "to_move": 100,
            "failure": None,
        }


def test_explain_shows_ledger_beside_bucket(emulator: Any) -> None:
    rt = LocalRuntime(emulator, versioning="Enabled")
    v = rt.faithful.put("doc", "1").version_id
    rt.flush()
    rt.drain()
    rt.faithful.delete("doc")
    rt.faithful.take_pending()  # the delete event is lost
    result = explain(
        rt.ledger.get(rt.resources.bucket, "doc"), rt.objects.current(rt.resources.bucket, "doc")
    )
    assert result["ledger"]["state"] == "present"
    assert result["ledger"]["version_id"] == v
    assert (result["ledger"]["last_reason"], result["ledger"]["source"]) == (
        "newer-sequencer",
        "live",
    )
    assert result["bucket"]["visible"] is False
    assert result["agrees"] is False
    assert result["effect"] is None  # no processor
    assert explain(None, rt.objects.current(rt.resources.bucket, "never"))["agrees"] is True


def test_explain_shows_the_processor_effect_of_the_row_change(emulator: Any) -> None:
    from s3ingest.local.stack.runtime import local_settings

    rt = LocalRuntime(emulator, local_settings(change_stream=False), versioning="Enabled")
    rt.faithful.put("doc", "1")
    rt.flush()
    rt.drain()
    row = rt.ledger.get(rt.resources.bucket, "doc")
    assert row is not None
    result = explain(row, rt.objects.current(rt.resources.bucket, "doc"))
    assert row.effect is not None
    assert result["effect"] == {
        "status": "done",
        "fencing_token": row.effect.token,
        "lease_until": None,
        "completed_for_change": row.change_id,
        "completed_version": 1,
        "behind": False,
        "waiting_changes": [],
        "held": None,
    }
    assert result["effects"] == {"default": result["effect"]}
    assert result["ledger"]["change_id"] == rt.effects[-1].change_id


def test_status_gathers_one_screen() -> None:
    result = _stubbed_status(
        dlq=1, change_dlq=2, age=42.0, drift=2.0, delivery=True, newest_backfill="SUCCEEDED"
    )
    assert result == {
        "healthy": False,
        "problems": [
            "dead letter queue holds 1 message(s)",
            "change dead letter queue holds 2 message(s)",
            "the last reconciliation found 2 difference(s)",
        ],
        "queue": {"visible": 7, "in_flight": 3, "oldest_age_seconds": 42},
        "dead_letter_queue": {"visible": 1, "in_flight": 0},
        "last_drift": {"drift_total": 2, "at": NOW.isoformat()},
        "eventbridge_delivery": True,
        "last_backfill": {
            "arn": "arn:aws:states:us-east-1:1:execution:B:e1",
            "status": "SUCCEEDED",
        },
        "running_backfills": [],
        "running_replays": ["r1"],
        "change_dead_letter_queue": {"visible": 2, "in_flight": 0},
    }


def test_status_is_healthy_only_when_nothing_is_wrong() -> None:
    healthy = _stubbed_status(
        dlq=0, change_dlq=0, age=42.0, drift=0.0, delivery=True, newest_backfill="SUCCEEDED"
    )
    assert (healthy["healthy"], healthy["problems"]) == (True, [])
    sick = _stubbed_status(
        dlq=0, change_dlq=0, age=1200.0, drift=0.0, delivery=False, newest_backfill="FAILED"
    )
    assert sick["healthy"] is False
    assert sick["problems"] == [
        "the oldest ingest message is 1200 s old (more than 900 s)",
        "EventBridge delivery is off on landing-bkt: no events reach the pipeline",
        "the newest backfill ended FAILED",
    ]


def _stubbed_status(
    *, dlq: int, change_dlq: int, age: float, drift: float, delivery: bool, newest_backfill: str
) -> dict[str, Any]:
    """``status`` of stack ``S3Ingest-prod`` against botocore Stubber, which checks that every
    metric query selects that stack's own series."""
    kw: dict[str, Any] = {
        "region_name": "us-east-1",
        "aws_access_key_id": "x",
        "aws_secret_access_key": "x",
    }
    sqs, cw, sfn, events, s3 = (
        boto3.client("sqs", **kw),
        boto3.client("cloudwatch", **kw),
        boto3.client("stepfunctions", **kw),
        boto3.client("events", **kw),
        boto3.client("s3", **kw),
    )
    outputs = {
        "QueueUrl": "https://sqs/1/ingest",
        "DeadLetterQueueUrl": "https://sqs/1/dlq",
        "BackfillStateMachineArn": "arn:aws:states:us-east-1:1:stateMachine:B",
        "ArchiveArn": "arn:aws:events:us-east-1:1:archive/a",
        "ChangeDeadLetterQueueUrl": "https://sqs/1/change-dlq",
        "BucketName": "landing-bkt",
    }
    own = [{"Name": "service", "Value": "s3ingest"}, {"Name": "stack", "Value": "S3Ingest-prod"}]
    with (
        Stubber(sqs) as q,
        Stubber(cw) as c,
        Stubber(sfn) as f,
        Stubber(events) as e,
        Stubber(s3) as b,
    ):
        q.add_response(
            "get_queue_attributes",
            {
                "Attributes": {
                    "ApproximateNumberOfMessages": "7",
                    "ApproximateNumberOfMessagesNotVisible": "3",
                }
            },
        )
        c.add_response(
            "get_metric_data",
            {
                "MetricDataResults": [
                    {"Id": "age", "Values": [age], "Timestamps": [NOW]},
                    {"Id": "drift", "Values": [drift], "Timestamps": [NOW]},
                ]
            },
            {
                "StartTime": NOW - timedelta(days=2),
                "EndTime": NOW,
                "ScanBy": "TimestampDescending",
                "MetricDataQueries": [
                    {
                        "Id": "age",
                        "ReturnData": True,
                        "MetricStat": {
                            "Stat": "Maximum",
                            "Period": 300,
                            "Metric": {
                                "Namespace": "AWS/SQS",
                                "MetricName": "ApproximateAgeOfOldestMessage",
                                "Dimensions": [{"Name": "QueueName", "Value": "ingest"}],
                            },
                        },
                    },
                    {
                        "Id": "drift",
                        "ReturnData": True,
                        "MetricStat": {
                            "Stat": "Maximum",
                            "Period": 60,
                            "Metric": {
                                "Namespace": "S3Ingest",
                                "MetricName": "drift_total",
                                "Dimensions": own,
                            },
                        },
                    },
                ],
            },
        )
        f.add_response(
            "list_executions",
            {"executions": []},
            {"stateMachineArn": outputs["BackfillStateMachineArn"], "statusFilter": "RUNNING"},
        )
        f.add_response(
            "list_executions",
            {
                "executions": [
                    {
                        "executionArn": "arn:aws:states:us-east-1:1:execution:B:e1",
                        "stateMachineArn": outputs["BackfillStateMachineArn"],
                        "name": "e1",
                        "status": newest_backfill,
                        "startDate": NOW,
                    }
                ]
            },
            {"stateMachineArn": outputs["BackfillStateMachineArn"], "maxResults": 1},
        )
        b.add_response(
            "get_bucket_notification_configuration",
            {"EventBridgeConfiguration": {}} if delivery else {},
            {"Bucket": "landing-bkt"},
        )
        e.add_response(
            "list_replays",
            {
                "Replays": [
                    {"ReplayName": "r1", "State": "RUNNING"},
                    {"ReplayName": "r0", "State": "COMPLETED"},
                ]
            },
            {"EventSourceArn": outputs["ArchiveArn"]},
        )
        q.add_response(
            "get_queue_attributes",
            {
                "Attributes": {
                    "ApproximateNumberOfMessages": str(dlq),
                    "ApproximateNumberOfMessagesNotVisible": "0",
                }
            },
        )
        q.add_response(
            "get_queue_attributes",
            {
                "Attributes": {
                    "ApproximateNumberOfMessages": str(change_dlq),
                    "ApproximateNumberOfMessagesNotVisible": "0",
                }
            },
            {"QueueUrl": "https://sqs/1/change-dlq", "AttributeNames": ANY},
        )
        return status(
            sqs=sqs,
            cloudwatch=cw,
            sfn=sfn,
            events=events,
            s3=s3,
            outputs=outputs,
            stack="S3Ingest-prod",
            now=NOW,
        )


def test_rows_keep_their_last_three_applied_decisions(emulator: Any) -> None:
    # GIVEN four writes to one key, delivered in order, and a duplicate
    rt = LocalRuntime(emulator, versioning="Enabled")
    for body in ("1", "2", "3"):
        rt.faithful.put("k", body)
        rt.flush()
        rt.drain()
    rt.faithful.delete("k")
    (marker,) = rt.faithful.take_pending()
    for _ in range(2):  # the second delivery is a duplicate: no write, no history entry
        rt.faithful.pending.append(marker)
        rt.flush()
        rt.drain()
    # WHEN the key is explained
    result = explain(
        rt.ledger.get(rt.resources.bucket, "k"), rt.objects.current(rt.resources.bucket, "k")
    )
    # THEN the newest three applied decisions are there, newest first, and the sequencers fall
    seqs = [
        e["sequencer"]
        for e in (d.result.__dict__ for d in rt.delivered)
        if e["outcome"].value == "applied"
    ]
    assert [h["seq"] for h in result["history"]] == seqs[::-1][:3]
    assert [h["state"] for h in result["history"]] == ["deleted", "present", "present"]
    assert result["history"][0]["event"] == "Object Deleted/DeleteObject/Delete Marker Created"
    assert [d.result.outcome.value for d in rt.delivered][-1] == "duplicate"
    assert result["agrees"] is True


@pytest.mark.contract("C14")
def test_replay_outcomes_come_from_the_replayed_metrics() -> None:
    cw = boto3.client(
        "cloudwatch", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    with Stubber(cw) as stub:
        stub.add_response(
            "get_metric_data",
            {
                "MetricDataResults": [
                    {"Id": "o0", "Label": "applied", "Values": [2.0, 1.0]},
                    {"Id": "o1", "Label": "duplicate", "Values": [40.0]},
                    {"Id": "o2", "Label": "stale", "Values": []},
                ]
            },
            {
                "MetricDataQueries": [
                    {
                        "Id": f"o{i}",
                        "Label": outcome,
                        "ReturnData": True,
                        "MetricStat": {
                            "Stat": "Sum",
                            "Period": 60,
                            "Metric": {
                                "Namespace": "S3Ingest",
                                "MetricName": f"replayed_{outcome}",
                                "Dimensions": [
                                    {"Name": "service", "Value": "s3ingest"},
                                    {"Name": "stack", "Value": "S3Ingest-dev"},
                                ],
                            },
                        },
                    }
                    for i, outcome in enumerate(REPLAY_OUTCOMES)
                ],
                "StartTime": NOW - timedelta(hours=1),
                "EndTime": NOW,
            },
        )
        counts = replay_outcomes(cw, "S3Ingest-dev", NOW - timedelta(hours=1), NOW)
    assert counts == {"applied": 3, "duplicate": 40, "stale": 0}
