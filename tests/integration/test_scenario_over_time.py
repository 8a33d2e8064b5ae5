"""Processors over time in a scenario (issue 27's Done-when): objects put under one processor;
a second processor added and the first one's version raised mid-scenario; both reprocessed
with drops and crashes injected; the run ends converged, every visible key's output current
for both processors at their versions, and no effect run twice without a kill."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from s3ingest.local.scenario import ScenarioError, run_scenario

EXAMPLE = Path("examples/scenarios/processors-over-time.jsonl")
VERSIONS = {"sidecar": 2, "audit": 1}


@pytest.fixture(scope="module")
def result() -> dict[str, Any]:
    return run_scenario(EXAMPLE)


@pytest.mark.contract("C11", "C15")
def test_the_example_ends_converged_with_every_output_current(result: dict[str, Any]) -> None:
    assert result["error"] is None
    assert result["converged"], result["differences"]
    assert result["effects_problems"] == []
    # every visible object has, for each processor, a run at its version of that very version
    for obj in result["bucket"]:
        for processor, version in VERSIONS.items():
            runs = [
                e
                for e in result["effects"]
                if e["processor"] == processor
                and e["key"] == obj["key"]
                and e["version"] == version
                and not e["crashed_before_commit"]
            ]
            assert runs, f"{processor} never ran at version {version} for {obj['key']!r}"
            assert (runs[-1]["versionId"], runs[-1]["etag"]) == (obj["version_id"], obj["etag"])


def test_no_effect_ran_twice_without_a_kill_and_kills_were_injected(
    result: dict[str, Any],
) -> None:
    runs = Counter(
        (e["processor"], e["key"], e["id"], e["version"])
        for e in result["effects"]
        if not e["crashed_before_commit"]
    )
    assert max(runs.values()) == 1
    assert any(e["crashed_before_commit"] for e in result["effects"])
    assert result["dropped"] > 0
    first_sidecar, first_audit = result["reprocesses"][:2]
    assert first_sidecar["version"] == 2 and first_sidecar["counts"]["run"] > 0
    assert first_audit["counts"]["run"] > 0
    # the deleted key was never run by the processors added or changed after its delete
    assert not [e for e in result["effects"] if e["key"] == "notes/gone.txt" and e["step"] > 12]


def test_the_second_runs_find_nothing_behind(result: dict[str, Any]) -> None:
    last = result["reprocesses"][-2:]
    assert [r["counts"]["behind"] for r in last] == [0, 0]
    assert all(r["execution"]["status"] == "SUCCEEDED" for r in last)


def test_a_processor_added_and_never_reprocessed_is_not_converged(tmp_path: Path) -> None:
    lines = [
        {
            "bucket": "later",
            "processors": [{"name": "sidecar", "handler": "s3ingest_examples.sidecar:handler"}],
        },
        {"op": "put", "key": "a.txt", "body": "a"},
        {"op": "flush"},
        {
            "op": "configure",
            "processors": [
                {"name": "sidecar", "handler": "s3ingest_examples.sidecar:handler"},
                {"name": "audit", "handler": "s3ingest_examples.audit:handler"},
            ],
        },
        {"op": "reconcile", "source": "listing"},
    ]
    path = tmp_path / "later.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")

    result = run_scenario(path)

    assert not result["converged"]
    assert result["differences"] == [
        "audit: 'a.txt': no effect for the row's change " + _change(result)
    ]
    assert result["reconciliations"][0]["effects_behind_by_processor"] == {"audit": 1}
    assert result["reconciliations"][0]["repairs_queued"] == 0  # counted, not flooded


def _change(result: dict[str, Any]) -> str:
    return str(next(e["id"] for e in result["effects"] if e["key"] == "a.txt"))


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ({"op": "reprocess"}, "needs processor"),
        ({"op": "reprocess", "processor": "x", "rate": 0}, "rate must be a positive"),
        ({"op": "reprocess", "processor": "x", "dry_run": "yes"}, "dry_run must be true"),
        ({"op": "configure", "processors": [{"name": "a", "module": "x"}]}, "line 2"),
        (
            {"op": "configure", "processors": [{"name": "a", "module": "m:f", "version": 0}]},
            "version",
        ),
    ],
)
def test_bad_steps_are_scenario_errors_naming_the_line(
    tmp_path: Path, step: dict[str, Any], message: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(
        json.dumps({"bucket": "bad-steps"}) + "\n" + json.dumps(step) + "\n", encoding="utf-8"
    )
    with pytest.raises(ScenarioError, match=message):
        run_scenario(path)
