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
from typer.testing import CliRunner

from s3ingest.cli import app
from s3ingest.local.rehearsal.scenario import ScenarioError, run_scenario

EXAMPLE = Path("examples/scenarios/processors-over-time.jsonl")
VERSIONS = {"sidecar": 2, "audit": 1}
SIDECAR = "s3ingest_examples.sidecar:handler"
AUDIT = "s3ingest_examples.audit:handler"
#: The example processor (the ``processor`` setting): a sidecar per visible key.
EXAMPLE_PROCESSOR = "s3ingest_examples.sidecar:process"


def _scenario(tmp_path: Path, lines: list[dict[str, Any]]) -> dict[str, Any]:
    path = tmp_path / "scenario.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    return run_scenario(path)


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
        ({"op": "reprocess", "processor": "x", "prefix": "a/"}, "prefix needs bucket"),
        (
            {"op": "reprocess", "processor": "x", "chaos": {"seed": 1, "drop": 0.5}},
            "chaos takes seed and crash only .*, not drop",
        ),
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


def test_a_failed_reprocess_run_stops_the_scenario_with_its_cause(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from s3ingest.cli import app

    lines = [
        {"bucket": "failed-run", "processors": [{"name": "sidecar", "handler": SIDECAR}]},
        {"op": "put", "key": "a.txt", "body": "a"},
        {"op": "flush"},
        {"op": "reprocess", "processor": "nope"},
        {"op": "put", "key": "never.txt", "body": "not reached"},
    ]
    path = tmp_path / "failed.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")

    result = CliRunner().invoke(app, ["local", "scenario", str(path), "--json"])

    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert doc["error"] == (
        "line 4: reprocess failed: execution FAILED: ValueError: reprocess: processor 'nope' "
        "is not configured (configured: sidecar)"
    )
    assert [obj["key"] for obj in doc["bucket"]] == ["a.txt"]  # the run stopped there
    assert doc["reprocesses"][0]["execution"]["status"] == "FAILED"


def test_what_a_processor_prints_leaves_the_json_result_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from s3ingest.cli import app

    (tmp_path / "team_printing.py").write_text(
        "def run(change, content):\n    print('processed', change.key)\n", encoding="utf-8"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    lines = [
        {"bucket": "printing", "processors": [{"name": "loud", "module": "team_printing:run"}]},
        {"op": "put", "key": "a.txt", "body": "a"},
        {"op": "flush"},
    ]
    path = tmp_path / "printing.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")

    result = CliRunner().invoke(app, ["local", "scenario", str(path), "--json"])

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["converged"] is True
    assert "processed a.txt" in result.stderr


def test_a_processor_function_configured_later_raises_the_ingest_timeout(tmp_path: Path) -> None:
    # GIVEN a deployment without processors, then a processor function (its 30 s timeout
    # raises the ingest function's, as a deploy does)
    lines: list[dict[str, Any]] = [
        {"bucket": "configured-later", "versioning": "Enabled"},
        {"op": "configure", "processors": [{"name": "audit", "handler": AUDIT}]},
        {"op": "put", "key": "a.txt", "body": "one"},
        {"op": "flush"},
    ]
    result = _scenario(tmp_path, lines)
    # THEN the change runs the processor at once: nothing retried for want of time
    assert result["converged"], result["differences"]
    assert [m["outcome"] for m in result["messages"]] == ["applied"]
    assert [e["processor"] for e in result["effects"]] == ["audit"]


def test_a_processor_removed_and_added_again_runs_each_key_once_more(tmp_path: Path) -> None:
    side = {"name": "side", "handler": SIDECAR}
    old = {"name": "old", "handler": AUDIT}
    result = _scenario(
        tmp_path,
        [
            {"bucket": "removed-readded", "versioning": "Enabled", "processors": [side, old]},
            {"op": "put", "key": "a.txt", "body": "one"},
            {"op": "flush"},
            {"op": "configure", "processors": [side]},
            {"op": "reprocess", "processor": "old", "remove": True},
            {"op": "configure", "processors": [side, old]},
            {"op": "reprocess", "processor": "old"},
        ],
    )
    # THEN converged, with no problem: the run after the removal is a first run again
    assert result["converged"], result["differences"]
    assert result["effects_problems"] == []
    runs = [e for e in result["effects"] if e["processor"] == "old"]
    assert [e["step"] for e in runs] == [3, 7] and runs[0]["id"] == runs[1]["id"]
    assert result["reprocesses"][0]["counts"]["removed"] == 1


@pytest.mark.contract("C11", "C15")
def test_a_key_changed_while_its_processor_was_removed_is_run_when_it_comes_back(
    tmp_path: Path,
) -> None:
    side = {"name": "side", "handler": SIDECAR}
    audit = {"name": "audit", "handler": AUDIT}
    # GIVEN audit removed without --remove (its state left on the row), the key changed, and
    # audit configured again
    result = _scenario(
        tmp_path,
        [
            {"bucket": "readded", "versioning": "Enabled", "processors": [audit, side]},
            {"op": "put", "key": "a.txt", "body": "one"},
            {"op": "flush"},
            {"op": "configure", "processors": [side]},
            {"op": "put", "key": "a.txt", "body": "two"},
            {"op": "flush"},
            {"op": "configure", "processors": [audit, side]},
            {"op": "reconcile", "source": "listing"},
            {"op": "reprocess", "processor": "audit"},
        ],
    )
    # THEN reconciliation counts it behind, the run runs the current change once: converged
    assert result["reconciliations"][0]["effects_behind_by_processor"] == {"audit": 1}
    assert result["reprocesses"][0]["counts"]["run"] == 1
    assert result["converged"], result["differences"]
    assert result["effects_problems"] == []
    (current,) = [e for e in result["effects"] if e["processor"] == "audit" and e["step"] == 9]
    assert (current["versionId"], current["etag"]) == (
        result["bucket"][0]["version_id"],
        result["bucket"][0]["etag"],
    )


def test_a_report_checks_only_the_processors_configured_at_the_end(tmp_path: Path) -> None:
    # GIVEN the example processor (its sidecars), then a configure step that removes it, and a
    # key written after it
    lines = [
        {"bucket": "example-dropped", "versioning": "Enabled", "processor": EXAMPLE_PROCESSOR},
        {"op": "put", "key": "a.txt", "body": "a"},
        {"op": "flush"},
        {"op": "configure", "processors": []},
        {"op": "put", "key": "b.txt", "body": "b"},
        {"op": "flush"},
    ]
    path = tmp_path / "dropped.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    # WHEN it runs, and through the CLI
    result = run_scenario(path)
    cli = CliRunner().invoke(app, ["local", "scenario", "--json", str(path)])
    # THEN the example processor's sidecars are not checked any more (b.txt has none: the
    # processor was gone when it was written), and the run passes
    assert result["error"] is None and result["converged"], result["differences"]
    assert result["effects_problems"] == []
    assert cli.exit_code == 0, cli.output
