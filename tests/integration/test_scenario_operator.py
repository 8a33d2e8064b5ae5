"""Scenario steps running the operator's commands (``held``, ``repair``, ``verify``) through the
same functions as the CLI; each step's entry is what the command prints with ``--json``."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from s3ingest.local.rehearsal.scenario import run_scenario


def write(tmp_path: Path, lines: list[Any]) -> Path:
    path = tmp_path / "scenario.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return path


def test_held_lists_the_held_changes_as_the_command_prints_them(
    emulator: Any, tmp_path: Path
) -> None:
    # GIVEN a hold policy holding every delete after the first of its window
    path = write(
        tmp_path,
        [
            {
                "bucket": f"held-{uuid.uuid4().hex[:10]}",
                "hold": {"deletes": {"above": 1, "windowSeconds": 300}},
            },
            {"op": "put", "key": "a", "body": "1"},
            {"op": "put", "key": "b", "body": "2"},
            {"op": "put", "key": "c", "body": "3"},
            {"op": "flush"},
            {"op": "delete", "key": "a"},
            {"op": "flush"},
            {"op": "delete", "key": "b"},
            {"op": "delete", "key": "c"},
            {"op": "flush"},
            {"op": "held"},
            {"op": "reject", "key": "b"},
            {"op": "held", "limit": 1},
        ],
    )
    result = run_scenario(path, emulator=emulator)
    assert result["error"] is None
    first, after = result["held_pages"]
    assert first["step"] == 11 and first["next"] is None
    assert sorted(h["key"] for h in first["held"]) == ["b", "c"]
    assert {"bucket", "key", "processor", "kind", "change_id", "held_at"} <= set(first["held"][0])
    assert [h["key"] for h in after["held"]] == ["c"]
    # the end-of-run list agrees with the last page
    assert [h["key"] for h in result["held"]] == ["c"]


def test_repair_repairs_a_key_whose_event_was_lost(emulator: Any, tmp_path: Path) -> None:
    # GIVEN a put whose event was dropped: the ledger has no row for it
    path = write(
        tmp_path,
        [
            {"bucket": f"rep-{uuid.uuid4().hex[:10]}"},
            {"op": "put", "key": "lost.csv", "body": "1"},
            {"op": "flush", "chaos": {"drop": 1.0}},
            {"op": "repair", "key": "lost.csv"},
            {"op": "repair", "key": "lost.csv"},
        ],
    )
    result = run_scenario(path, emulator=emulator)
    assert result["error"] is None
    repaired, again = result["repairs"]
    # THEN the first queues a repair, waits and settles; the second finds nothing due
    assert repaired["due"] == ["absent-from-ledger"]
    assert (repaired["queued"], repaired["settled"], repaired["agrees"]) == (True, True, True)
    assert repaired["before"] is None and repaired["after"]["state"] == "present"
    assert (again["due"], again["queued"], again["settled"]) == ([], False, None)
    assert result["converged"] is True, result["differences"]


def test_repair_that_does_not_settle_fails_the_step(emulator: Any, tmp_path: Path) -> None:
    # GIVEN a lost event and a failing processor: the repair is applied, but its effect stays
    # pending (the message comes back), so the row never settles within the wait
    path = write(
        tmp_path,
        [
            {"bucket": f"rep-{uuid.uuid4().hex[:10]}"},
            {"op": "put", "key": "k", "body": "1"},
            {"op": "flush", "chaos": {"drop": 1.0}},
            {"op": "fail_processor", "on": True},
            {"op": "repair", "key": "k", "wait": 3},
        ],
    )
    result = run_scenario(path, emulator=emulator)
    assert result["error"] == (
        "line 5: repair failed: 'k' did not settle or still differs from the bucket"
    )
    (entry,) = result["repairs"]
    assert (entry["queued"], entry["waited"], entry["settled"]) == (True, True, False)


def test_verify_sends_the_canary_through_the_scenarios_deployment(
    emulator: Any, tmp_path: Path
) -> None:
    path = write(
        tmp_path,
        [
            {"bucket": f"ver-{uuid.uuid4().hex[:10]}"},
            {"op": "put", "key": "a", "body": "1"},
            {"op": "flush"},
            {"op": "verify"},
        ],
    )
    result = run_scenario(path, emulator=emulator)
    assert result["error"] is None
    (entry,) = result["verifications"]
    assert entry["ok"] is True and entry["key"].startswith("_s3ingest-canary/")
    assert [h["name"] for h in entry["hops"]] == [
        "put -> ledger row",
        "put -> change event",
        "delete -> tombstone",
        "delete -> change event",
    ]
    assert result["converged"] is True, result["differences"]
