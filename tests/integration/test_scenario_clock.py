"""The ``advance`` step: the scenario's clock moves forward for the pipeline's in-process code
(:mod:`s3ingest.local.rehearsal.clock`): hold windows end, sequencers carry the later time, and the
ingest path still accepts them."""

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


def _lines(advance: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Three deletes under a hold of more than one delete in 300 s, ``advance`` before the
    third."""
    return [
        {
            "bucket": f"clk-{uuid.uuid4().hex[:10]}",
            "hold": {"deletes": {"above": 1, "windowSeconds": 300}},
        },
        {"op": "put", "key": "a", "body": "1"},
        {"op": "put", "key": "b", "body": "2"},
        {"op": "put", "key": "c", "body": "3"},
        {"op": "flush"},
        {"op": "delete", "key": "a"},
        {"op": "flush"},
        {"op": "delete", "key": "b"},
        {"op": "flush"},
        *advance,
        {"op": "delete", "key": "c"},
        {"op": "flush"},
    ]


def test_advancing_past_the_hold_window_ends_it(emulator: Any, tmp_path: Path) -> None:
    # WITHOUT an advance: the third delete falls in the window and is held
    within = run_scenario(write(tmp_path, _lines([])), emulator=emulator)
    assert sorted(h["key"] for h in within["held"]) == ["b", "c"]
    # WITH the clock moved past the window: the third delete is a new window's first
    later = run_scenario(
        write(tmp_path, _lines([{"op": "advance", "seconds": 301}])), emulator=emulator
    )
    assert later["error"] is None
    assert [h["key"] for h in later["held"]] == ["b"]
    assert later["clock"] == [{"step": 10, "seconds": 301, "offset": 301.0}]
    # the sequencers carry the later time and the ingest path applied them, not "ahead"
    (after,) = [m for m in later["messages"] if m["step"] == 11]
    (before,) = [m for m in later["messages"] if m["step"] == 8]
    seconds = int(after["sequencer"][2:10], 16) - int(before["sequencer"][2:10], 16)
    assert 301 <= seconds <= 301 + 60
    assert after["outcome"] == "applied"
    assert later["converged"] is True, later["differences"]


def test_a_configure_after_an_advance_keeps_the_clock(emulator: Any, tmp_path: Path) -> None:
    sidecar = {"name": "s", "handler": "s3ingest_examples.sidecar:handler", "mode": "latest"}
    lines = _lines([{"op": "advance", "seconds": 301}])
    lines[0] = {**lines[0], "processors": [sidecar]}
    lines.insert(10, {"op": "configure", "processors": [sidecar]})
    result = run_scenario(write(tmp_path, lines), emulator=emulator)
    assert result["error"] is None
    assert [h["key"] for h in result["held"]] == ["b"]


def test_advance_takes_positive_seconds(emulator: Any, tmp_path: Path) -> None:
    bucket = f"clk-{uuid.uuid4().hex[:10]}"
    for seconds in (0, -5, "60", True):
        path = write(tmp_path, [{"bucket": bucket}, {"op": "advance", "seconds": seconds}])
        with pytest.raises(ScenarioError, match="line 2: advance seconds must be a positive"):
            run_scenario(path, emulator=emulator)
