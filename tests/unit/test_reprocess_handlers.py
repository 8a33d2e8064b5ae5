"""The reprocess handlers (issue 27) pass the state machine's shapes through to the service and
count per processor: a stand-in :class:`~s3ingest_fn.services.reprocess.Reprocessor`."""

from __future__ import annotations

import json
from typing import Any

import pytest

from s3ingest_fn import wiring
from s3ingest_fn.handlers import reprocess


class Context:
    function_name = "reprocess"
    memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:reprocess"
    aws_request_id = "req-1"

    def get_remaining_time_in_millis(self) -> int:
        return 600_000


class Service:
    def __init__(self) -> None:
        self.bound: list[Any] = []

    def bind_context(self, context: Any) -> None:
        self.bound.append(context)


class FakeReprocessor:
    def __init__(self) -> None:
        self.service = Service()
        self.calls: list[tuple[Any, ...]] = []

    def plan(
        self, value: dict[str, Any], owner: str | None = None, limit: int | None = None
    ) -> dict[str, Any]:
        call = ("plan", value) if owner is None else ("plan", value, owner)
        self.calls.append(call if limit is None else (*call, limit))
        segments = [{"run": value["run"], "segment": i, "total": 2} for i in range(2)]
        return {
            **value,
            "dry_run": False,
            "remove": False,
            "version": 3,
            "segments": segments,
            "total": 2,
            "done": 0,
        }

    def segment(
        self, run: str, segment: int, remaining: Any, *, owner: Any = None, memory_mb: Any = None
    ) -> dict[str, Any]:
        self.calls.append(("segment", run, segment, remaining()))
        self.calls.append(("segment-of", owner, memory_mb))
        added = {"scanned": 5, "behind": 2, "run": 1, "failed": 1}
        return {
            "run": run,
            "segment": segment,
            "done": True,
            "counts": added,
            "requests": {},
            "added": added,
        }

    def summarize(self, run: str) -> dict[str, Any]:
        self.calls.append(("summarize", run))
        return {"run": run, "done": 2}


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeReprocessor:
    made = FakeReprocessor()
    monkeypatch.setattr(wiring, "function_reprocessor", lambda: made)
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    monkeypatch.setenv("S3INGEST_STACK", "s3ingest-test")
    return made


def test_the_steps_pass_the_shapes_through(
    fake: FakeReprocessor, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    event = {"run": "r", "processor": "thumbs", "segments": 2}
    plan = reprocess.plan(event, Context())
    assert plan["segments"][1] == {"run": "r", "segment": 1, "total": 2}
    assert fake.calls[0] == ("plan", event)
    result = reprocess.segment({"run": "r", "segment": 1, "processor": "thumbs"}, Context())
    assert result["done"] is True and fake.calls[1] == ("segment", "r", 1, 600_000)
    assert fake.calls[2] == ("segment-of", None, 1024)  # the function's memory, for the estimate
    assert len(fake.service.bound) == 1
    assert reprocess.summarize({"run": "r"}, Context()) == {"run": "r", "done": 2}
    # the state machine's shapes: the execution owns the run, its segments say so
    owned = reprocess.plan({"request": event, "owner": "exec-1"}, Context())
    assert fake.calls[-1] == ("plan", event, "exec-1") and owned["owner"] == "exec-1"
    reprocess.plan({"request": event, "owner": "exec-1", "limit": 3}, Context())
    assert fake.calls[-1] == ("plan", event, "exec-1", 3)  # the reserved concurrency
    reprocess.segment(
        {"run": "r", "segment": 0, "processor": "thumbs", "owner": "exec-1"}, Context()
    )
    assert fake.calls[-1] == ("segment-of", "exec-1", 1024)
    # metrics per processor: the segments planned, and each count a segment call added
    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    by_processor = [doc for doc in emf if doc.get("processor") == "thumbs"]
    assert any(doc.get("reprocess_segments") == [2.0] for doc in by_processor)
    segment_doc = next(doc for doc in by_processor if "reprocess_run" in doc)
    assert segment_doc["reprocess_run"] == segment_doc["reprocess_failed"] == [1.0]
    assert segment_doc["stack"] == "s3ingest-test"


def test_reconciliation_emits_the_rows_behind_each_processor(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from s3ingest_fn.handlers.reconcile import emit_behind_metrics

    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    capsys.readouterr()
    emit_behind_metrics({"thumbs": 3, "audit": 0})
    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    found = {
        doc["processor"]: doc["effects_behind_processor"]
        for doc in emf
        if "effects_behind_processor" in doc
    }
    assert found in ({"audit": 0, "thumbs": 3}, {"audit": [0], "thumbs": [3]})


def test_the_summary_emits_the_keys_left_behind_for_the_alarm(
    fake: FakeReprocessor, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a run whose summary left two keys behind
    samples = [{"bucket": "b", "key": "k1"}, {"bucket": "b", "key": "k2"}]
    left = {"count": 2, "samples": samples, "command": "s3ingest reprocess --processor t"}
    monkeypatch.setattr(fake, "summarize", lambda run: {"run": run, "left_behind": left})
    capsys.readouterr()
    # WHEN the summary step runs
    assert reprocess.summarize({"run": "r"}, Context())["left_behind"] == left
    # THEN it emits reprocess_keys_behind with the stack's dimensions only (the alarm's series)
    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    (doc,) = [d for d in emf if "reprocess_keys_behind" in d]
    assert doc["reprocess_keys_behind"] == [2.0]
    (directive,) = doc["_aws"]["CloudWatchMetrics"]
    assert [sorted(d) for d in directive["Dimensions"]] == [["service", "stack"]]
    assert doc["stack"] == "s3ingest-test"
