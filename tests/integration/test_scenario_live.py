"""Live traffic while a backfill, onboarding or reprocess step's execution runs (their
``"during"`` lines), and the steps' check of those lines."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from s3ingest.local.rehearsal.scenario import ScenarioError, run_scenario

SIDECAR = {"name": "sidecar", "handler": "s3ingest_examples.sidecar:handler", "mode": "latest"}


def write(tmp_path: Path, lines: list[Any]) -> Path:
    path = tmp_path / "scenario.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return path


def test_traffic_during_an_onboarding_converges(emulator: Any, tmp_path: Path) -> None:
    # GIVEN an existing bucket, onboarded while its users keep writing and deleting
    name = f"live-{uuid.uuid4().hex[:10]}"
    path = write(
        tmp_path,
        [
            {"buckets": [{"name": name, "existing": True}]},
            {"op": "put", "key": "old/1.csv", "body": "1"},
            {"op": "put", "key": "old/2.csv", "body": "2"},
            {
                "op": "onboard",
                "during": [
                    {"op": "put", "key": "new/3.csv", "body": "3"},
                    {"op": "put", "key": "old/2.csv", "body": "2, changed"},
                    {"op": "delete", "key": "old/1.csv"},
                ],
            },
        ],
    )
    result = run_scenario(path, emulator=emulator)
    assert result["error"] is None
    (onboarded,) = result["onboardings"]
    assert onboarded["status"] == "done"
    assert onboarded["during"] == {"ops": 3, "while_running": True}
    # THEN the traffic's events were delivered (named by the onboard line) and the end agrees
    assert {m["key"] for m in result["messages"] if m["step"] == 4} >= {"new/3.csv", "old/1.csv"}
    states = {r["key"]: r["state"] for r in result["ledger"]}
    assert states == {"old/1.csv": "deleted", "old/2.csv": "present", "new/3.csv": "present"}
    assert result["converged"] is True, result["differences"]


@pytest.mark.parametrize(
    "backfill",
    [{"source": "listing"}, {"engine": "distributed-map"}, {"engine": "batch-operations"}],
)
def test_traffic_during_a_backfill_converges(
    emulator: Any, tmp_path: Path, backfill: dict[str, Any]
) -> None:
    # GIVEN objects whose events were lost, backfilled while new writes land
    path = write(
        tmp_path,
        [
            {"bucket": f"live-{uuid.uuid4().hex[:10]}"},
            {"op": "put", "key": "a", "body": "1"},
            {"op": "put", "key": "b", "body": "2"},
            {"op": "flush", "chaos": {"drop": 1.0}},
            {
                "op": "backfill",
                **backfill,
                "during": [
                    {"op": "put", "key": "c", "body": "3"},
                    {"op": "delete", "key": "a"},
                ],
            },
        ],
    )
    result = run_scenario(path, emulator=emulator)
    assert result["error"] is None
    (entry,) = result["backfills"]
    assert entry["execution"]["status"] == "SUCCEEDED"
    assert entry["during"]["ops"] == 2
    states = {r["key"]: r["state"] for r in result["ledger"]}
    assert states == {"a": "deleted", "b": "present", "c": "present"}
    assert result["converged"] is True, result["differences"]


def test_traffic_during_a_reprocess_converges(emulator: Any, tmp_path: Path) -> None:
    # GIVEN keys behind a raised processor version, reprocessed while writes go on
    path = write(
        tmp_path,
        [
            {"bucket": f"live-{uuid.uuid4().hex[:10]}", "processors": [SIDECAR]},
            {"op": "put", "key": "r/1", "body": "1"},
            {"op": "put", "key": "r/2", "body": "2"},
            {"op": "flush"},
            {"op": "configure", "processors": [{**SIDECAR, "version": 2}]},
            {
                "op": "reprocess",
                "processor": "sidecar",
                "during": [
                    {"op": "put", "key": "r/1", "body": "1, changed"},
                    {"op": "put", "key": "r/3", "body": "3"},
                ],
            },
        ],
    )
    result = run_scenario(path, emulator=emulator)
    assert result["error"] is None
    (entry,) = result["reprocesses"]
    assert entry["execution"]["status"] == "SUCCEEDED"
    assert entry["during"]["ops"] == 2
    assert result["converged"] is True, result["differences"]
    assert result["effects_problems"] == []


def test_during_lines_are_checked_as_lines(emulator: Any, tmp_path: Path) -> None:
    bucket = f"live-{uuid.uuid4().hex[:10]}"
    cases = [
        ({"op": "backfill", "during": [{"op": "flush"}]}, "during\\[0\\] must be one of put"),
        ({"op": "onboard", "during": {"op": "put"}}, "during must be a list of step lines"),
        (
            {"op": "backfill", "during": [{"op": "put", "key": "k"}]},
            "op 'put' needs body \\(in during\\[0\\]\\)",
        ),
    ]
    for line, message in cases:
        path = write(tmp_path, [{"bucket": bucket}, line])
        with pytest.raises(ScenarioError, match=f"line 2: .*{message}"):
            run_scenario(path, emulator=emulator)


@pytest.mark.parametrize("op", ["backfill", "onboard"])
def test_workers_killed_during_a_backfill_or_onboarding_still_converge(
    emulator: Any, tmp_path: Path, op: str
) -> None:
    # GIVEN objects the pipeline has not seen, brought in with workers killed between an
    # effect and its commit
    name = f"crash-{uuid.uuid4().hex[:10]}"
    if op == "backfill":
        setup: dict[str, Any] = {"bucket": name}
        lost: list[dict[str, Any]] = [{"op": "flush", "chaos": {"drop": 1.0}}]
        step: dict[str, Any] = {"op": "backfill", "source": "listing"}
    else:
        setup, lost, step = {"buckets": [{"name": name, "existing": True}]}, [], {"op": "onboard"}
    puts = [{"op": "put", "key": f"k{i}", "body": str(i)} for i in range(6)]
    path = write(tmp_path, [setup, *puts, *lost, {**step, "chaos": {"seed": 2, "crash": 0.5}}])
    result = run_scenario(path, emulator=emulator)
    # THEN workers were killed, the machine's retries finished the work, and the end agrees
    assert result["error"] is None
    assert any(e["crashed_before_commit"] for e in result["effects"])
    assert result["converged"] is True, result["differences"]
    assert result["effects_problems"] == []


def test_a_backfills_chaos_takes_seed_and_crash_only(emulator: Any, tmp_path: Path) -> None:
    path = write(
        tmp_path,
        [{"bucket": f"crash-{uuid.uuid4().hex[:10]}"}, {"op": "onboard", "chaos": {"drop": 0.5}}],
    )
    with pytest.raises(ScenarioError, match="line 2: an onboard step's chaos takes seed and"):
        run_scenario(path, emulator=emulator)
