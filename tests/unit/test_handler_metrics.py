"""Every outcome is a metric; replayed records are counted apart (CONTRACT C9, C14); live records
carry their end-to-end lag; every metric names its stack; a record's log line is written when
that record finishes."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest
from aws_lambda_powertools.metrics import EphemeralMetrics

from s3ingest_fn.contract import LAG_METRIC
from s3ingest_fn.core.model import Outcome, Result
from s3ingest_fn.handlers import ingest
from s3ingest_fn.handlers.telemetry import invocation_metrics, stack_metrics
from s3ingest_fn.services.ingest import MessageProcessor


@pytest.mark.contract("C9", "C14")
def test_replayed_records_are_counted_apart_per_outcome() -> None:
    sink = EphemeralMetrics(namespace="S3Ingest")
    ingest._count(
        sink, Result(Outcome.STALE, "older-sequencer", "b", "k", "00AB", extra={"source": "replay"})
    )
    ingest._count(
        sink,
        Result(Outcome.APPLIED, "newer-sequencer", "b", "k2", "00AC", extra={"source": "live"}),
    )
    recorded = {name: sum(m["Value"]) for name, m in sink.metric_set.items()}
    assert recorded == {"stale": 1, "replayed": 1, "replayed_stale": 1, "applied": 1}


@pytest.mark.parametrize(
    ("outcome", "source", "event_time", "lag"),
    [
        (Outcome.APPLIED, "live", "2026-12-01T10:00:00Z", 1_500),
        (Outcome.SUPERSEDED, "live", "2026-12-01T09:59:58.500Z", 3_000),
        (Outcome.DUPLICATE, "live", "2026-12-01T09:00:00Z", None),  # a redriven copy: no write
        (Outcome.APPLIED, "replay", "2026-12-01T10:00:00Z", None),  # replayed: not S3's latency
        (Outcome.APPLIED, "repair", None, None),
        (Outcome.RETRIED, "live", "2026-12-01T10:00:00Z", None),  # measured when it completes
        (Outcome.APPLIED, "live", "yesterday", None),  # informational field: no crash (C3)
    ],
)
def test_live_records_carry_their_end_to_end_lag(
    outcome: Outcome, source: str, event_time: str | None, lag: int | None
) -> None:
    extra: dict[str, object] = {"source": source}
    if event_time:
        extra["event_time"] = event_time
    result = Result(outcome, "r", "b", "k", "00AB", extra=extra)
    ingest._add_lag(result, finished_ms=1_796_119_201_500.0)  # 2026-12-01T10:00:01.5Z
    assert result.extra.get("lag_ms") == lag
    sink = EphemeralMetrics(namespace="S3Ingest")
    ingest._count(sink, result)
    recorded = {name: m["Value"] for name, m in sink.metric_set.items()}
    assert recorded.get(LAG_METRIC) == ([lag] if lag is not None else None)


def test_every_metric_carries_the_stack_as_a_dimension(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("S3INGEST_STACK", "s3ingest-prod")
    metrics = stack_metrics()
    try:
        metrics.add_metric(name="applied", unit="Count", value=1)
        # the dimensions are top-level keys of the EMF document, beside the typed ``_aws``
        doc = cast(dict[str, Any], metrics.serialize_metric_set())
    finally:
        metrics.clear_metrics()
        metrics.clear_default_dimensions()
    (directive,) = doc["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == "S3Ingest"
    assert sorted(directive["Dimensions"][0]) == ["service", "stack"]
    assert (doc["service"], doc["stack"]) == ("s3ingest", "s3ingest-prod")


class _Stalling:
    """Records each body; the second one fails the test if the first one's log line is not
    written yet (as if the invocation timed out while it ran)."""

    def __init__(self, logged: list[str]) -> None:
        self.logged = logged

    def process(self, body: Any, message_id: str = "") -> list[Result]:
        if body == "second":
            assert self.logged == ["m-1"], "the first record's line waited for the batch"
        return [Result(Outcome.IGNORED, "test-event", extra={"source": "live"})]


@pytest.mark.contract("C9")
def test_a_records_log_line_is_written_when_that_record_finishes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    logged: list[str] = []
    monkeypatch.setattr(ingest, "_log_record", lambda result, message_id: logged.append(message_id))
    handler = ingest.make_handler(cast(MessageProcessor, _Stalling(logged)), 1)
    records = [
        {
            "messageId": f"m-{i}",
            "receiptHandle": "r",
            "body": body,
            "attributes": {},
            "messageAttributes": {},
            "md5OfBody": "",
            "eventSource": "aws:sqs",
            "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:q",
            "awsRegion": "us-east-1",
        }
        for i, body in ((1, "first"), (2, "second"))
    ]
    response = handler({"Records": records}, None)
    assert response == {"batchItemFailures": []}
    assert logged == ["m-1", "m-2"]


def test_invocations_running_at_once_keep_their_metrics_apart(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN two invocations in one process at once (the local runtime's Distributed Map children)
    monkeypatch.setenv("S3INGEST_STACK", "s3ingest-prod")
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    capsys.readouterr()
    with invocation_metrics(bucket="first") as first:
        with invocation_metrics(bucket="second") as second:
            first.add_metric(name="listing_listed", unit="Count", value=3)
            second.add_metric(name="listing_listed", unit="Count", value=5)
        with invocation_metrics(bucket="idle"):
            pass  # nothing added: no document
    # THEN each flushes its own document, with its own bucket and count, and nothing leaks
    docs = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    assert [(d["bucket"], d["stack"], d["listing_listed"]) for d in docs] == [
        ("second", "s3ingest-prod", [5.0]),
        ("first", "s3ingest-prod", [3.0]),
    ]
    assert [sorted(d["_aws"]["CloudWatchMetrics"][0]["Dimensions"][0]) for d in docs] == [
        ["bucket", "service", "stack"]
    ] * 2
