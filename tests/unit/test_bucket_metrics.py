"""Outcomes counted per bucket (issue 15): the stack-wide series keep their ``stack`` dimension
(the alarms select it); each invocation adds one document per bucket with ``bucket`` too."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest

from s3ingest_fn.contract import OTHER_BUCKET
from s3ingest_fn.core.model import Outcome, Result
from s3ingest_fn.handlers import ingest
from s3ingest_fn.handlers.telemetry import bucket_metrics
from s3ingest_fn.services.ingest import MessageProcessor


def _result(outcome: Outcome, bucket: str | None, **extra: object) -> Result:
    return Result(outcome, "r", bucket, "k", "00AB", extra=dict(extra))


def test_outcomes_are_aggregated_per_bucket_and_other_buckets_share_one_name() -> None:
    results = [
        _result(Outcome.APPLIED, "raw"),
        _result(Outcome.APPLIED, "raw"),
        _result(Outcome.STALE, "raw"),
        _result(Outcome.APPLIED, "curated"),
        _result(Outcome.IGNORED, "someone-a", scope="other-bucket"),
        _result(Outcome.IGNORED, "someone-b", scope="other-bucket"),
        _result(Outcome.IGNORED, "raw", scope="key-filter"),
        _result(Outcome.INVALID, None),  # no bucket: only the stack-wide count has it
    ]
    assert ingest.per_bucket(results) == {
        ("raw", "applied"): 2,
        ("raw", "stale"): 1,
        ("raw", "ignored"): 1,
        ("curated", "applied"): 1,
        (OTHER_BUCKET, "ignored"): 2,
    }


def test_one_document_per_bucket_with_service_stack_and_bucket(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("S3INGEST_STACK", "s3ingest-prod")
    documents = bucket_metrics({("raw", "applied"): 2, ("raw", "stale"): 1, ("cur", "applied"): 5})
    docs = [cast(dict[str, Any], d.serialize_metric_set()) for d in documents]
    assert [d["bucket"] for d in docs] == ["cur", "raw"]
    for doc in docs:
        (directive,) = doc["_aws"]["CloudWatchMetrics"]
        assert sorted(directive["Dimensions"][0]) == ["bucket", "service", "stack"]
        assert (doc["service"], doc["stack"]) == ("s3ingest", "s3ingest-prod")
    assert (docs[0]["applied"], docs[1]["applied"], docs[1]["stale"]) == ([5.0], [2.0], [1.0])


class _Processor:
    def __init__(self, results: list[Result]) -> None:
        self.results = results

    def process(self, body: Any, message_id: str = "") -> list[Result]:
        return [self.results[int(body)]]


def test_a_batch_emits_its_per_bucket_documents_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    results = [_result(Outcome.APPLIED, "raw"), _result(Outcome.APPLIED, "raw")]
    handler = ingest.make_handler(cast(MessageProcessor, _Processor(results)), 2)
    event = {
        "Records": [
            {"messageId": str(i), "body": str(i), "eventSource": "aws:sqs", "attributes": {}}
            for i in range(2)
        ]
    }
    handler(event, None)  # flushes its invocation's own metrics (nothing shared to clear)
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines() if '"_aws"' in x]
    per_bucket = [doc for doc in lines if doc.get("bucket") == "raw"]
    assert len(per_bucket) == 1 and per_bucket[0]["applied"] in (2.0, [2.0])


def test_a_remote_buckets_document_carries_its_account_but_keeps_its_dimensions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN a bucket of account 222233334444 among the stack's (READ_ROLES names its role)
    role = "arn:aws:iam::222233334444:role/s3ingest-source-read-eu-west-1"
    monkeypatch.setenv("READ_ROLES", json.dumps({"far": role}))
    documents = bucket_metrics({("far", "applied"): 3, ("raw", "applied"): 1})
    docs = {
        d["bucket"]: d for d in (cast(dict[str, Any], x.serialize_metric_set()) for x in documents)
    }
    # THEN its document names the account, as a property; the local bucket's names none
    assert docs["far"]["account"] == "222233334444" and "account" not in docs["raw"]
    for doc in docs.values():
        (directive,) = doc["_aws"]["CloudWatchMetrics"]
        assert sorted(directive["Dimensions"][0]) == ["bucket", "service"]
