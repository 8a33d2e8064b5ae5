"""Effects left behind, and the documented step that finishes them (issue 34).

Item 9: a processor outage during a backfill: every engine and ``onboard`` complete the ledger
while a processor fails, report the effects left behind, and the scenario fixes the processor
and finishes them with the documented step (``s3ingest reprocess``), ending converged. Item 7:
a reprocess run whose workers crash names the keys it left behind and the command that
finishes them; that command, as the scenario's next step, is all it takes to converge.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from s3ingest.local.rehearsal.scenario import run_scenario

SIDECAR = "s3ingest_examples.sidecar:handler"
KEYS = ("a.csv", "b.csv", "c.csv")


def _scenario(tmp_path: Path, lines: list[dict[str, Any]], emulator: Any) -> dict[str, Any]:
    path = tmp_path / "outage.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    return run_scenario(path, emulator=emulator)


def _outage(step: dict[str, Any], bucket: str) -> list[dict[str, Any]]:
    """Objects whose events were lost, a processor failing through ``step``, then the fix and
    the finishing run."""
    return [
        {"bucket": bucket, "processors": [{"name": "sidecar", "handler": SIDECAR}]},
        *({"op": "put", "key": key, "body": key} for key in KEYS),
        {"op": "flush", "chaos": {"drop": 1.0}},
        {"op": "fail_processor", "on": True},
        step,
        {"op": "fail_processor", "on": False},
        {"op": "reprocess", "processor": "sidecar"},
    ]


@pytest.mark.contract("C11", "C13", "C15")
@pytest.mark.parametrize(
    "step",
    [
        {"op": "backfill"},
        {"op": "backfill", "engine": "distributed-map"},
        {"op": "backfill", "source": "listing"},
    ],
    ids=["batch-operations", "distributed-map", "listing"],
)
def test_a_backfill_completes_the_ledger_through_a_processor_outage(
    emulator: Any, tmp_path: Path, step: dict[str, Any]
) -> None:
    # GIVEN three objects the ledger never heard of, and the only processor failing (a bucket
    # of each engine's own: the emulator outlives a test, and a versioned bucket another engine's
    # scenario wrote would hold its versions too)
    # WHEN a backfill runs through the outage, the processor is fixed, and reprocess runs
    bucket = "outage-" + (step.get("engine") or step.get("source") or "batch-operations")
    result = _scenario(tmp_path, _outage(step, bucket), emulator)

    # THEN the backfill succeeded with every row written and the effects reported pending
    assert result["error"] is None
    (backfill,) = result["backfills"]
    assert backfill["execution"]["status"] == "SUCCEEDED"
    assert backfill.get("failed", 0) == 0
    if step.get("source") == "listing":
        assert backfill["counts"]["effects_pending"] == 3
    elif step.get("engine") == "distributed-map":
        assert backfill["outcomes"] == {"effects_pending": 3}
    else:  # a job's tasks succeeded (their effects pending: the backfill_effects_pending metric)
        assert (backfill["succeeded"], backfill["total"]) == (3, 3)
    # and the finishing run ran the three effects: the scenario ends converged
    (run,) = result["reprocesses"]
    assert run["counts"]["run"] == 3 and run["counts"]["failed"] == 0
    assert result["converged"], result["differences"]
    assert result["effects_problems"] == []


FLAKY = "s3ingest_examples.flaky:handler"


@pytest.mark.contract("C11", "C13", "C15")
def test_a_processor_fixed_by_a_new_configuration_finishes_what_the_backfill_left(
    emulator: Any, tmp_path: Path
) -> None:
    # GIVEN a processor configured to fail (its first attempt at each change), and objects
    # whose events were lost
    lines: list[dict[str, Any]] = [
        {"bucket": "outage-configured", "processors": [{"name": "sidecar", "handler": FLAKY}]},
        *({"op": "put", "key": key, "body": key} for key in KEYS),
        {"op": "flush", "chaos": {"drop": 1.0}},
        # WHEN the Distributed Map backfills them, a configuration fixes the processor, and
        # the documented step runs
        {"op": "backfill", "engine": "distributed-map"},
        {"op": "configure", "processors": [{"name": "sidecar", "handler": SIDECAR}]},
        {"op": "reprocess", "processor": "sidecar"},
    ]
    result = _scenario(tmp_path, lines, emulator)
    # THEN the backfill succeeded with the three effects pending, and the run finished them
    assert result["error"] is None
    (backfill,) = result["backfills"]
    assert backfill["execution"]["status"] == "SUCCEEDED"
    assert backfill["outcomes"] == {"effects_pending": 3}
    (run,) = result["reprocesses"]
    assert run["counts"]["run"] == 3 and run["left_behind"]["count"] == 0
    assert result["converged"], result["differences"]
    assert result["effects_problems"] == []


@pytest.mark.contract("C11", "C15")
def test_onboarding_through_a_processor_outage_completes_the_ledger_and_reports_the_effects(
    emulator: Any, tmp_path: Path
) -> None:
    # GIVEN an existing bucket holding three objects, and the only processor failing
    lines = _outage({"op": "onboard"}, "unused")
    lines[0] = {
        "buckets": [{"name": "outage-existing", "existing": True}],
        "processors": [{"name": "sidecar", "handler": SIDECAR}],
    }
    # WHEN it is onboarded through the outage (and nothing more)
    stopped = _scenario(tmp_path, lines[:-2], emulator)
    # THEN onboarding is done: every row written, the effects reported pending with their cure
    assert stopped["error"] is None
    (onboarded,) = stopped["onboardings"]
    assert onboarded["status"] == "done"
    assert onboarded["backfill"]["output"]["counts"]["effects_pending"] == 3
    assert onboarded["effects_pending"]["count"] == 3
    assert "s3ingest reprocess --processor NAME" in onboarded["effects_pending"]["finish"]
    assert stopped["converged"], stopped["differences"]  # the ledger equals the bucket
    assert len([p for p in stopped["effects_problems"] if "still pending" in p]) == 3
    # WHEN the processor is fixed and the named command runs
    result = _scenario(tmp_path, lines, emulator)
    # THEN the effects are done: converged, no effect pending
    (run,) = result["reprocesses"]
    assert run["counts"]["run"] == 3
    assert result["converged"], result["differences"]
    assert result["effects_problems"] == []


AUDIT = "s3ingest_examples.audit:handler"


@pytest.mark.contract("C11", "C15")
def test_a_reprocess_run_with_crashes_names_what_it_left_and_the_named_command_finishes_it(
    emulator: Any, tmp_path: Path
) -> None:
    # GIVEN eight keys under one processor, and a second processor added later
    keys = [f"k{i}.csv" for i in range(8)]
    sidecar = {"name": "sidecar", "handler": SIDECAR}
    lines: list[dict[str, Any]] = [
        {"bucket": "crash-run", "processors": [sidecar]},
        *({"op": "put", "key": key, "body": key} for key in keys),
        {"op": "flush"},
        {"op": "configure", "processors": [sidecar, {"name": "audit", "handler": AUDIT}]},
        # WHEN its reprocess run's workers die half the time before their commits
        {"op": "reprocess", "processor": "audit", "chaos": {"crash": 0.5, "seed": 3}},
    ]
    crashed = _scenario(tmp_path, lines, emulator)
    (first,) = crashed["reprocesses"]
    behind = first["left_behind"]
    # THEN the summary names the keys left behind, their count, and the command that ends them
    assert first["counts"]["failed"] > 0
    assert behind["count"] == first["counts"]["failed"]
    assert len(behind["samples"]) == min(behind["count"], 5)
    assert {sample["key"] for sample in behind["samples"]} <= set(keys)
    assert behind["command"] == "s3ingest reprocess --processor audit"
    pending = sorted(p for p in crashed["effects_problems"] if "still pending" in p)
    assert len(pending) == behind["count"], crashed["effects_problems"]
    # and that command (the scenario's reprocess step with the same options) is all it takes
    lines.append({"op": "reprocess", "processor": "audit"})
    result = _scenario(tmp_path, lines, emulator)
    first, second = result["reprocesses"]
    assert first["left_behind"] == behind  # the same seed: the same crashes
    assert second["counts"]["run"] == behind["count"]
    assert second["left_behind"] == {"count": 0, "samples": [], "command": None}
    assert result["error"] is None
    assert result["converged"], result["differences"]
    assert result["effects_problems"] == []
