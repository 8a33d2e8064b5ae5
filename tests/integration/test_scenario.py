"""The scenario runner (``s3ingest local scenario``): raw bodies, S3 operations, flush chaos."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from s3ingest.cli import app
from s3ingest.local.scenario import ScenarioError, parse_lines, run_scenario
from tests.samples import load_sample


def write(tmp_path: Path, lines: list[Any]) -> Path:
    path = tmp_path / "scenario.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return path


def test_scenario_with_raw_bodies_operations_and_chaos(emulator: Any, tmp_path: Path) -> None:
    # GIVEN a real EventBridge sample retargeted at the scenario's bucket, a TestEvent, garbage,
    # and S3 operations flushed with duplicates and reordering
    sample = load_sample("powertools__s3EventBridgeNotificationObjectCreatedEvent.json")
    assert isinstance(sample, dict)
    sample["detail"]["bucket"]["name"] = "scenario-bucket"
    path = write(tmp_path, [
        {"bucket": "scenario-bucket", "versioning": "Enabled"},
        {"op": "deliver", "body": sample},
        {"op": "deliver", "body": load_sample("awsdocs-s3ug__notification-TestEvent.json")},
        {"op": "deliver", "body": "not json at all"},
        {"op": "put", "key": "a b+c.txt", "body": "one"},
        {"op": "put", "key": "a b+c.txt", "body": "two"},
        {"op": "delete", "key": "gone.txt"},
        {"op": "flush", "chaos": {"seed": 4, "duplicate": 0.5, "reorder": True, "drop": 0.0}},
    ])
    # WHEN it runs
    result = run_scenario(path, emulator=emulator)
    # THEN each message has its outcome, attributed to its step
    by_step = {}
    for m in result["messages"]:
        by_step.setdefault(m["step"], []).append(m["outcome"])
    # the sample's object: the ledger applies it, but the bucket has no such key, so the example
    # processor's pinned read finds nothing: the record ends superseded (C8), with no effect
    assert by_step[2] == ["superseded"]
    assert by_step[3] == ["ignored"]
    assert by_step[4] == ["invalid"]
    assert set(by_step[8]) <= {"applied", "duplicate", "stale"}
    keys = {r["key"]: r for r in result["ledger"]}
    assert keys["a b+c.txt"]["state"] == "present"
    assert keys["gone.txt"]["state"] == "deleted"
    # the sample's key was never written to the bucket: the ledger and bucket disagree on it
    assert result["converged"] is False
    assert result["differences"] == ["present in ledger but not visible: 'IMG_m7fzo3.jpg'"]
    assert [o["key"] for o in result["bucket"]] == ["a b+c.txt"]
    # the effects ran for the winning changes and were listed with their ids; every applied
    # change was published on the change bus
    effects = {(e["key"], e["kind"]) for e in result["effects"]}
    assert ("a b+c.txt", "created") in effects and ("gone.txt", "removed") in effects
    assert "IMG_m7fzo3.jpg" not in {e["key"] for e in result["effects"]}
    rows = {r["key"]: r for r in result["ledger"]}
    published = {c["detail"]["key"]: c["detail"]["id"] for c in result["changes"]}
    assert set(published) == set(rows)
    assert all(len(e["id"]) == 32 for e in result["effects"])
    assert result["effects_problems"] == []


def test_scenario_cli_json_output(tmp_path: Path) -> None:
    path = write(tmp_path, [
        # no processor: with one, the put's effect may read the already-deleted object and end
        # superseded, depending on which of the batch's two records a thread takes first
        {"bucket": "cli-bucket", "versioning": None, "processor": None},
        {"op": "put", "key": "x", "body": "1"},
        {"op": "delete", "key": "x"},
        {"op": "flush", "chaos": {"seed": 1, "reorder": True}},
    ])
    result = CliRunner().invoke(app, ["local", "scenario", str(path), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert set(doc) >= {"messages", "ledger", "bucket", "converged"}
    assert doc["converged"] is True
    assert doc["bucket"] == []
    assert [r["state"] for r in doc["ledger"]] == ["deleted"]
    assert {m["outcome"] for m in doc["messages"]} <= {"applied", "stale"}
    for m in doc["messages"]:
        assert set(m) >= {"step", "outcome", "reason", "bucket", "key", "sequencer"}


@pytest.mark.parametrize(("lines", "message"), [
    (['{"op": "jump"}'], "unknown op"),
    (['{"op": "put", "key": "k"}'], "needs body"),
    (["[1, 2]"], "expected a JSON object"),
    (["{nope"], "not JSON"),
    (['{"op": "flush", "chaos": {"drop": 2}}'], "within 0..1"),
    (['{"op": "put", "key": "k", "body": "b"}', '{"bucket": "late"}'], "only the first line"),
    (['{"bucket": "b", "versioning": "Sometimes"}'], "versioning must be"),
    (['{"bucket": "Bad_Bucket!!"}'], "not a valid S3 bucket name"),
    (['{"op": "flush", "chaos": "fast"}'], "chaos must be a JSON object"),
    (['{"op": "flush", "chaos": {"seed": "abc"}}'], "seed must be a whole number"),
    (['{"op": "flush", "chaos": {"reorder": "yes"}}'], "reorder must be true or false"),
    (['{"op": "put", "key": "k", "body": 5}'], "body must be a string"),
    (['{"op": "put", "key": "k", "body": "b", "extra": true}'], "takes no extra"),
    (['{"op": "delete", "key": "k", "version_id": ""}'], "non-empty string"),
    (['{"op": "put", "key": "' + "k" * 1025 + '", "body": "b"}'], "over 1024 bytes"),
    (['{"op": "put", "key": "nul\\u0000", "body": "b"}'], "control character"),
])
def test_bad_scenario_lines_are_reported_with_their_line(lines: list[str], message: str) -> None:
    # each bad line is reported as a ScenarioError naming its line, never a traceback
    with pytest.raises(ScenarioError, match=message) as info:
        parse_lines(lines)
    assert "line " in str(info.value)


def test_non_utf8_scenario_file_is_a_scenario_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'\xff\xfe{"op":"put"}\n')
    result = CliRunner().invoke(app, ["local", "scenario", str(path)])
    assert result.exit_code == 2
    assert "not UTF-8" in result.output


@pytest.mark.parametrize(("setup", "version", "message"), [
    ({"bucket": "unversioned-bkt", "versioning": None}, "xyz", "not versioned"),
    ({"bucket": "versioned-bkt", "versioning": "Enabled"}, "no-such-version", "has no version"),
])
def test_impossible_version_deletes_are_refused(emulator: Any, tmp_path: Path,
                                                setup: dict[str, Any], version: str,
                                                message: str) -> None:
    path = write(tmp_path, [setup, {"op": "put", "key": "a", "body": "1"},
                            {"op": "delete", "key": "a", "version_id": version}])
    with pytest.raises(ScenarioError, match=f"line 3: .*{message}"):
        run_scenario(path, emulator=emulator)


def test_scenario_exits_1_when_not_converged(tmp_path: Path) -> None:
    # a put whose event is never flushed: the ledger is behind the bucket
    path = write(tmp_path, [{"op": "put", "key": "x", "body": "1"}])
    result = CliRunner().invoke(app, ["local", "scenario", str(path), "--json"])
    assert result.exit_code == 1
    assert json.loads(result.stdout)["converged"] is False


def test_backfill_step_brings_in_objects_whose_events_were_lost(emulator: Any,
                                                                tmp_path: Path) -> None:
    path = write(tmp_path, [
        {"bucket": "backfill-bkt", "versioning": "Enabled"},
        {"op": "put", "key": "before pipeline.csv", "body": "1"},
        {"op": "put", "key": "also+before", "body": "2"},
        {"op": "flush", "chaos": {"drop": 1.0}},
        {"op": "backfill"},
        {"op": "put", "key": "live.csv", "body": "3"},
        {"op": "flush", "chaos": {"seed": 1, "duplicate": 0.5, "reorder": True}},
    ])
    result = run_scenario(path, emulator=emulator)
    assert result["converged"] is True
    (job,) = result["backfills"]
    assert (job["step"], job["total"], job["succeeded"], job["failed"]) == (5, 2, 2, 0)
    assert {m["key"] for m in result["messages"]} == {"live.csv"}


@pytest.mark.parametrize(("lines", "message"), [
    (['{"bucket": "a..b"}'], "not a valid S3 bucket name"),
    (['{"bucket": "192.168.1.1"}'], "not a valid S3 bucket name"),
    (['{"bucket": "b-one"}', '{"bucket": "b-two"}'], "only the first line"),
    (['{"op": "put", "key": "a", "key": "b", "body": "1"}'], "given twice"),
    (['{"op": "backfill", "source": "listing"}'], "accepts: no fields"),
    (['{"bucket": "plain-bkt", "versioning": null}', '{"op": "put", "key": "k", "body": "1"}',
      '{"op": "delete", "key": "k", "version_id": "abc"}'], "line 3: the bucket is not versioned"),
])
def test_more_bad_lines_are_caught_before_anything_runs(lines: list[str], message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        parse_lines(lines)


def test_unicode_line_separators_inside_strings_are_not_line_breaks(emulator: Any,
                                                                     tmp_path: Path) -> None:
    path = tmp_path / "u2028.jsonl"
    path.write_text('{"op": "put", "key": "a\u2028b\u0085c", "body": "1"}\n{"op": "flush"}\n',
                    encoding="utf-8")
    result = run_scenario(path, emulator=emulator)
    assert [r["key"] for r in result["ledger"]] == ["a\u2028b\u0085c"]
    assert result["converged"] is True
