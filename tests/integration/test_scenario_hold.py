"""The example scenario of hold for review (``examples/scenarios/hold-mass-delete.jsonl``,
``docs/hold.md``): a mass delete with the breaker on is tombstoned at once, no delete effect
runs past the breaker until approved, approved ones then run with their change events, a
rejected one never runs, and the trail names the approver."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from s3ingest.local.rehearsal.scenario import ScenarioError, run_scenario
from s3ingest.local.stack.runtime import LOCAL_ACTOR

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "scenarios" / "hold-mass-delete.jsonl"


@pytest.mark.contract("C11")
def test_a_mass_delete_is_held_until_approved_and_a_rejected_delete_never_runs(
    emulator: Any,
) -> None:
    result = run_scenario(EXAMPLE, emulator=emulator)
    assert result["error"] is None and result["converged"], result["differences"]
    assert result["effects_problems"] == []
    # the ledger tombstoned all five deletes
    deleted = {r["key"] for r in result["ledger"] if r["state"] == "deleted"}
    assert deleted == {f"published/{i}.jpg" for i in range(1, 6)}
    # each processor ran the first two deletes at once, then 3 and 4 only after approval
    # (the lines of the approvals: 23 and 24), and never 5
    for name in ("catalog", "audit"):
        removed = [
            (e["key"], e["step"])
            for e in result["effects"]
            if e["processor"] == name and e["kind"] == "removed"
        ]
        keys = [k for k, _ in removed]
        assert sorted(keys) == [f"published/{i}.jpg" for i in range(1, 5)], name
        after = {k: step for k, step in removed if k in ("published/3.jpg", "published/4.jpg")}
        assert after == {"published/3.jpg": 23, "published/4.jpg": 24}, name
    assert result["held"] == []
    # the change stream: five tombstones, six holds (3 keys x 2 processors), the decisions
    by_type = Counter(c["detail-type"] for c in result["changes"])
    assert by_type["Object Tombstoned"] == 5
    assert by_type["Object Held"] == 6
    assert by_type["Change Approved"] == 4 and by_type["Change Rejected"] == 2
    # the trail per key names the approver
    trails = {t["key"]: t["decisions"] for t in result["trail"]}
    assert [(d["action"], d["actor"]) for d in trails["published/3.jpg"]][:2] == [
        ("approved", LOCAL_ACTOR),
        ("approved", LOCAL_ACTOR),
    ]
    # every review step decided something
    assert [(r["op"], len(r["decided"])) for r in result["reviews"]] == [
        ("approve", 2),
        ("approve", 2),
        ("reject", 2),
    ]
    assert {d["action"] for d in trails["published/5.jpg"]} == {"held", "rejected"}


def test_a_scenario_with_an_invalid_hold_is_refused_before_anything_runs(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"hold": {"deletes": {"above": -1}, "prefix": ["x"]}}\n{"op": "flush"}\n')
    with pytest.raises(ScenarioError, match="above") as err:
        run_scenario(path)
    assert "unknown key 'prefix'" in str(err.value)


def test_approve_and_reject_steps_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"op": "approve"}\n')
    with pytest.raises(ScenarioError, match="needs key"):
        run_scenario(path)
    path.write_text('{"op": "reject", "key": "k", "change": 3}\n')
    with pytest.raises(ScenarioError, match="change must be a string"):
        run_scenario(path)


def test_the_hold_deletes_demo_holds_a_mass_delete_until_approved() -> None:
    from typer.testing import CliRunner

    from s3ingest.cli import app

    result = CliRunner().invoke(app, ["local", "demo", "--hold-deletes", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    # 30 tombstones at once; the breaker let the first 5 deletes run and held 25 ...
    assert report["tombstoned"] == report["deleted"] == 30
    assert report["ran_before_review"] == report["breaker_above"] == 5
    assert report["held"] == 25
    # ... which ran only after their approval, each once, with their change events
    assert report["approved"] == report["ran_after_approval"] == 25
    assert report["held_after"] == 0
    assert report["change_events_by_type"]["Object Held"] == 25
    assert report["change_events_by_type"]["Change Approved"] == 25
    assert report["converged"] and report["effects_problems"] == []
    assert [d["action"] for d in report["trail_example"]["decisions"]] == ["approved", "held"]
