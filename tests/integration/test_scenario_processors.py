"""Done-when checks of the processors issue on the local runtime, end to end (SQS, the ingest
handler, processor functions run in-process by their handler path, presigned reads from the
emulator): three processors with different filters for one upload, one failing and
recovering; ``processors`` in the scenario's set-up line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from s3ingest.local.scenario import ScenarioError, parse_lines, run_scenario


def _runs(result: dict[str, Any], processor: str) -> list[tuple[str, str]]:
    return [(e["key"], e["kind"]) for e in result["effects"] if e["processor"] == processor]


@pytest.mark.contract("C11")
def test_example_processors_scenario_runs_three_processors_one_failing_and_recovering() -> None:
    # GIVEN examples/scenarios/processors.jsonl: sidecar (latest), audit (every-change) and
    # flaky (images/*.jpg creates only, failing its first attempt at each change)
    result = run_scenario(Path("examples/scenarios/processors.jsonl"))
    # THEN it converges with no effect problem ...
    assert result["error"] is None
    assert result["converged"] is True, result["differences"]
    assert result["effects_problems"] == []
    # ... each processor ran exactly the changes its filters select, once each ...
    every = [
        ("images/cat.jpg", "created"),
        ("docs/readme.txt", "created"),
        ("images/cat.jpg", "created"),
        ("docs/readme.txt", "removed"),
    ]
    assert sorted(_runs(result, "sidecar")) == sorted(every)
    assert sorted(_runs(result, "audit")) == sorted(every)
    assert _runs(result, "flaky") == [("images/cat.jpg", "created")] * 2
    # ... flaky failed once per change and its retry (a duplicate) re-ran only flaky
    failed = [m for m in result["messages"] if m["outcome"] == "retried"]
    assert len(failed) == 2
    assert all("processor 'flaky'" in m["reason"] for m in failed)
    assert all(set(m["effect_errors"]) == {"flaky"} for m in failed)
    assert all(
        m["effect"] == {"sidecar": "done", "audit": "done", "flaky": "failed"} for m in failed
    )
    resumed = [m for m in result["messages"] if m["effect"] == {"flaky": "resumed-done"}]
    assert len(resumed) == 2 and {m["outcome"] for m in resumed} == {"duplicate"}
    # ... and the ledger rows record each processor's own state
    rows = {r["key"]: r for r in result["ledger"]}
    assert set(rows) == {"images/cat.jpg", "docs/readme.txt"}


def test_processors_and_processor_are_exclusive_in_the_set_up_line() -> None:
    setup = {"processor": None, "processors": [{"name": "a", "module": "m:f"}]}
    with pytest.raises(ScenarioError, match="processor or processors, not both"):
        parse_lines([json.dumps(setup)])


def test_an_invalid_processor_entry_is_refused_before_anything_runs() -> None:
    setup = {"processors": [{"name": "Bad Name", "handler": "pkg.mod:handler"}]}
    with pytest.raises(ScenarioError, match=r"line 1: .*processors"):
        parse_lines([json.dumps(setup)])
