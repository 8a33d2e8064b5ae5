"""The local scenario records processor runs whatever function ran them (issue 23, 4(a)): the
listing backfill's runs are in ``effects`` as the ingest function's are."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from s3ingest.local.rehearsal.scenario import run_scenario


@pytest.mark.contract("C11", "C13")
def test_a_listing_backfills_processor_runs_are_recorded(emulator: Any, tmp_path: Path) -> None:
    # GIVEN an every-change processor whose second change's event is lost
    lines = [
        {
            "bucket": "bf-hand2",
            "versioning": "Enabled",
            "processors": [
                {
                    "name": "aud",
                    "handler": "s3ingest_examples.audit:handler",
                    "mode": "every-change",
                }
            ],
        },
        {"op": "put", "key": "k", "body": "x"},
        {"op": "flush"},
        {"op": "put", "key": "k", "body": "y"},
        {"op": "flush", "chaos": {"seed": 1, "drop": 1.0}},
        {"op": "backfill", "source": "listing"},
        {"op": "reconcile", "source": "listing"},
    ]
    path = tmp_path / "scenario.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    # WHEN it runs (the listing backfill's shard function records the lost change)
    result = run_scenario(path, emulator=emulator)
    # THEN the backfill's run of the processor is among the effects: nothing is missing
    assert result["error"] is None
    assert result["converged"] is True
    assert result["effects_problems"] == []
    runs = [e for e in result["effects"] if e.get("key") == "k"]
    assert len(runs) == 2, result["effects"]
