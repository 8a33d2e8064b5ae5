"""Every outcome is a metric; replayed records are counted apart (CONTRACT C9, C14)."""

from __future__ import annotations

from s3ingest_fn.handlers import ingest
from s3ingest_fn.model import Outcome, Result


def test_replayed_records_are_counted_apart_per_outcome() -> None:
    ingest.metrics.clear_metrics()
    ingest._log_and_count(Result(Outcome.STALE, "older-sequencer", "b", "k", "00AB",
                                 extra={"source": "replay"}), "m-1")
    ingest._log_and_count(Result(Outcome.APPLIED, "newer-sequencer", "b", "k2", "00AC",
                                 extra={"source": "live"}), "m-2")
    recorded = {name: sum(m["Value"]) for name, m in ingest.metrics.metric_set.items()}
    ingest.metrics.clear_metrics()
    assert recorded == {"stale": 1, "replayed": 1, "replayed_stale": 1, "applied": 1}
