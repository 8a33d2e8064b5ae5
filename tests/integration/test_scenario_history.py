"""The history table's example scenario (``examples/scenarios/history.jsonl``, docs/history.md):
puts, an overwrite delivered twice out of order, deletes, a hold with its approval, a processor
version change with a held delete and a reprocess, then a replay of both archives; ``s3ingest
history`` then lists each change of a key once in order (its effects done too), ``changes
--since`` is exactly the scenario's applied changes, ``processor`` exactly the keys a version
has not reached, and no change key has two rows."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from s3ingest.cli import app
from s3ingest.local.rehearsal.scenario import run_scenario
from s3ingest_fn.services.history import KINDS, change_key
from tests.cli_env import BARE

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "scenarios" / "history.jsonl"
KEY = "reports/q1.csv"


def history(*args: str) -> dict[str, Any]:
    got = CliRunner().invoke(app, ["history", *args, "--local", "--json"], env=BARE)
    assert got.exit_code == 0, got.output
    return dict(json.loads(got.stdout))


@pytest.mark.contract("C11")
def test_history_holds_each_change_and_effect_once_after_a_replay_of_everything(
    emulator: Any,
) -> None:
    started = datetime.now(UTC) - timedelta(seconds=1)
    result = run_scenario(EXAMPLE, emulator=emulator)
    assert result["error"] is None and result["converged"], result["differences"]
    # every change went out at least twice (the change archive's replay), as its own key
    delivered = [
        change_key(KINDS[c["detail-type"]], c["detail"])
        for c in result["changes"]
        if c["detail-type"] in KINDS
    ]
    keys = set(delivered)
    assert all(n >= 2 for n in Counter(delivered).values())
    # and each effect the catalog committed done is a row of its own (Effect Done): q1's three
    # changes, q2's two, q3 by version 1 and by the reprocess's version 2, q4's put
    done = 8
    assert result["history"] == {
        "rows": len(keys) + done,
        "change_keys": len(keys) + done,
        "duplicate_keys": 0,
        "by_kind": {"approved": 1, "created": 5, "done": done, "held": 2, "removed": 3},
        "dead_letters": 0,
    }
    assert len(result["replays"]) == 2

    # the trail of KEY: each of its changes once, in order (revisions increase), each change
    # followed by the catalog's effect done (the delete's once approved)
    trail = history("trail", "--key", KEY)["rows"]
    assert [r["kind"] for r in trail] == [
        *("created", "done", "created", "done"),
        *("removed", "held", "approved", "done"),
    ]
    ids = {c["detail"]["id"] for c in result["changes"] if c["detail"]["key"] == KEY}
    applied_ids = [r["change_key"] for r in trail if r["kind"] in ("created", "removed")]
    assert {r["change_key"] for r in trail} == {
        *(k for k in keys if k.split("/")[0] in ids),
        *(f"{i}/done/catalog/1" for i in applied_ids),
    }
    assert len({r["change_key"] for r in trail}) == len(trail) == 8
    revs = [r["rev"] for r in trail]
    assert revs == sorted(revs)
    assert trail[-2]["actor"] and trail[-3]["actor"] == "policy"

    # changes since the scenario began: exactly its applied changes, once each
    applied = {
        c["detail"]["id"]
        for c in result["changes"]
        if c["detail-type"] in ("Object Ingested", "Object Tombstoned")
    }
    changes = history("changes", "--since", started.isoformat())["rows"]
    assert sorted(r["change_key"] for r in changes) == sorted(applied)
    assert len(applied) == 8
    ledger_keys = {(r["bucket"], r["key"]) for r in result["ledger"]}
    assert {(r["bucket"], r["key"]) for r in changes} == ledger_keys
    # and nothing before it
    later = (datetime.now(UTC) + timedelta(minutes=1)).isoformat()
    assert history("changes", "--since", later)["rows"] == []

    # the keys a catalog version has not reached (its effects done are rows): version 2 did
    # the new q4's put and, by the reprocess, q3; q4's delete is held, not done
    held = ("reports/q4.csv", "removed", None, "held")
    assert _behind(2) == [held]
    assert _behind(1) == [held]
    # version 3 (never deployed) has reached nothing: q3, done by version 2, and the held q4;
    # the deleted q1 and q2 (their removals done) are not behind
    assert _behind(3) == [("reports/q3.csv", "created", 2, None), held]
    # a processor never configured: every visible key (q3), no removal it never reviewed
    other = history("processor", "--processor", "other")["rows"]
    assert [r["key"] for r in other] == ["reports/q3.csv"]


def _behind(version: int) -> list[tuple[str, str, int | None, str | None]]:
    rows = history("processor", "--processor", "catalog", "--processor-version", str(version))[
        "rows"
    ]
    return [(r["key"], r["kind"], r["done_version"], r["review"]) for r in rows]
