"""Per-processor effect counts: what the ingest handler emits (``effect_<status>`` with a
``processor`` dimension) and what ``s3ingest status`` reads back from them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from s3ingest.commands.status import processor_effects
from s3ingest_fn.core.model import Outcome, Result
from s3ingest_fn.handlers.ingest import per_processor


def _result(effect: object) -> Result:
    return Result(
        outcome=Outcome.APPLIED, reason="r", bucket="b", key="k", extra={"effect": effect}
    )


def test_effects_are_counted_per_processor_and_status() -> None:
    counts = per_processor(
        [
            _result({"thumbs": "done", "audit": "failed"}),
            _result({"audit": "resumed-done"}),
            _result("superseded"),  # the single processor's status
            _result("already-recorded"),  # no effect ran: not counted
            _result(None),
        ]
    )
    assert dict(counts) == {
        ("thumbs", "effect_done"): 1,
        ("audit", "effect_failed"): 1,
        ("audit", "effect_done"): 1,
        ("default", "effect_superseded"): 1,
    }


class _CloudWatch:
    """Answers GetMetricData with given sums per query id, and keeps the request."""

    def __init__(self, values: dict[str, list[float]]) -> None:
        self.values = values
        self.request: dict[str, Any] = {}

    def get_metric_data(self, **request: Any) -> dict[str, Any]:
        self.request = request
        return {
            "MetricDataResults": [
                {"Id": q["Id"], "Values": self.values.get(q["Id"], [])}
                for q in request["MetricDataQueries"]
            ]
        }


def test_status_reads_each_processors_counts_of_the_last_hour() -> None:
    cw = _CloudWatch({"p0_done": [3, 2], "p1_failed": [4]})
    now = datetime(2026, 12, 1, 12, tzinfo=UTC)
    got = processor_effects(cw, "S3Ingest-dev", ["thumbs", "audit"], now)
    assert got == {
        "thumbs": {"done": 5, "failed": 0, "superseded": 0},
        "audit": {"done": 0, "failed": 4, "superseded": 0},
    }
    (query, *_) = cw.request["MetricDataQueries"]
    assert query["MetricStat"]["Metric"]["MetricName"] == "effect_done"
    assert {"Name": "processor", "Value": "thumbs"} in query["MetricStat"]["Metric"]["Dimensions"]
    assert {"Name": "stack", "Value": "S3Ingest-dev"} in query["MetricStat"]["Metric"]["Dimensions"]
    assert cw.request["StartTime"] == datetime(2026, 12, 1, 11, tzinfo=UTC)
