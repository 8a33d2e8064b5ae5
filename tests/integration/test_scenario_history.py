"""The history table's example scenario (``examples/scenarios/history.jsonl``, docs/history.md):
puts, an overwrite delivered twice out of order, deletes, a hold with its approval, then a
replay of both archives; ``s3ingest history`` then lists each change of a key once in order,
``changes --since`` is exactly the scenario's applied changes, and no change key has two rows."""

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
def test_history_holds_each_change_once_after_a_replay_of_everything(emulator: Any) -> None:
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
    assert result["history"] == {
        "rows": len(keys),
        "change_keys": len(keys),
        "duplicate_keys": 0,
        "by_kind": {"approved": 1, "created": 3, "held": 1, "removed": 2},
        "dead_letters": 0,
    }
    assert len(result["replays"]) == 2

    # the trail of KEY: each of its changes once, in order (revisions increase)
    trail = history("trail", "--key", KEY)["rows"]
    assert [r["kind"] for r in trail] == ["created", "created", "removed", "held", "approved"]
    ids = {c["detail"]["id"] for c in result["changes"] if c["detail"]["key"] == KEY}
    assert {r["change_key"] for r in trail} == {k for k in keys if k.split("/")[0] in ids}
    assert len({r["change_key"] for r in trail}) == len(trail) == 5
    revs = [r["rev"] for r in trail]
    assert revs == sorted(revs)
    assert trail[-1]["actor"] and trail[-2]["actor"] == "policy"

    # changes since the scenario began: exactly its applied changes, once each
    applied = {
        c["detail"]["id"]
        for c in result["changes"]
        if c["detail-type"] in ("Object Ingested", "Object Tombstoned")
    }
    changes = history("changes", "--since", started.isoformat())["rows"]
    assert sorted(r["change_key"] for r in changes) == sorted(applied)
    assert len(applied) == 5
    ledger_keys = {(r["bucket"], r["key"]) for r in result["ledger"]}
    assert {(r["bucket"], r["key"]) for r in changes} == ledger_keys
    # and nothing before it
    later = (datetime.now(UTC) + timedelta(minutes=1)).isoformat()
    assert history("changes", "--since", later)["rows"] == []
