"""A step that fails and the recovery after it in the same scenario (``"expect_failure": true``),
and faults injected into the stack's functions (``fail_function``): the runbook's "re-run
onboard" rehearsed."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from s3ingest.local.rehearsal.scenario import ScenarioError, run_scenario


def write(tmp_path: Path, lines: list[Any]) -> Path:
    path = tmp_path / "scenario.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return path


def test_an_onboarding_that_fails_is_re_run_and_converges(emulator: Any, tmp_path: Path) -> None:
    # GIVEN an existing bucket with objects, and the listing backfill's plan function failing
    name = f"onb-{uuid.uuid4().hex[:10]}"
    path = write(
        tmp_path,
        [
            {"buckets": [{"name": name, "existing": True}]},
            {"op": "put", "key": "old/1.csv", "body": "1"},
            {"op": "put", "key": "old/2.csv", "body": "2"},
            {"op": "fail_function", "function": "ListingPlan", "kind": "raise"},
            {"op": "onboard", "expect_failure": True},
            {"op": "onboard"},
        ],
    )
    # WHEN it runs
    result = run_scenario(path, emulator=emulator)
    # THEN the first onboarding failed, recorded, and the run went on: the second converged
    assert result["error"] is None
    (failure,) = result["expected_failures"]
    assert (failure["step"], failure["op"], failure["failed"]) == (5, "onboard", True)
    assert failure["error"].startswith("line 5: onboard failed: onboarding ")
    failed, done = result["onboardings"]
    assert failed["status"] != "done" and done["status"] == "done"
    assert sorted(r["key"] for r in result["ledger"]) == ["old/1.csv", "old/2.csv"]
    assert result["converged"] is True, result["differences"]


def test_a_step_expected_to_fail_that_succeeds_stops_the_run(emulator: Any, tmp_path: Path) -> None:
    path = write(
        tmp_path,
        [
            {"bucket": f"exf-{uuid.uuid4().hex[:10]}", "processor": None},
            {"op": "put", "key": "a", "body": "1"},
            {"op": "flush", "expect_failure": True},
            {"op": "put", "key": "b", "body": "2"},
        ],
    )
    result = run_scenario(path, emulator=emulator)
    assert result["error"] == "line 3: flush was expected to fail and did not"
    assert result["expected_failures"] == [
        {"step": 3, "op": "flush", "failed": False, "error": None}
    ]
    assert [o["key"] for o in result["bucket"]] == ["a"]  # line 4 never ran


def test_an_s3_refusal_expected_to_fail_is_recorded_not_a_file_error(
    emulator: Any, tmp_path: Path
) -> None:
    path = write(
        tmp_path,
        [
            {"bucket": f"exf-{uuid.uuid4().hex[:10]}", "processor": None},
            {"op": "put", "key": "a", "body": "1", "storage_class": "STANDARD"},
            {"op": "restore", "key": "a", "expect_failure": True},
            {"op": "flush"},
        ],
    )
    result = run_scenario(path, emulator=emulator)
    assert result["error"] is None
    (failure,) = result["expected_failures"]
    assert "InvalidObjectState" in failure["error"]
    assert result["converged"] is True, result["differences"]


def test_expect_failure_must_be_a_boolean_and_a_function_must_exist(
    emulator: Any, tmp_path: Path
) -> None:
    bucket = f"exf-{uuid.uuid4().hex[:10]}"
    bad = write(tmp_path, [{"bucket": bucket}, {"op": "flush", "expect_failure": "yes"}])
    with pytest.raises(ScenarioError, match="line 2: flush expect_failure must be true or false"):
        run_scenario(bad, emulator=emulator)
    unknown = write(tmp_path, [{"bucket": bucket}, {"op": "fail_function", "function": "nope"}])
    with pytest.raises(ScenarioError, match=r"line 2: no function 'nope' \(.*ListingPlan"):
        run_scenario(unknown, emulator=emulator)
