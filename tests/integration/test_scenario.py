"""The scenario runner (``s3ingest local scenario``): raw bodies, S3 operations, flush chaos."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from s3ingest.cli import app
from s3ingest.local.rehearsal.scenario import ScenarioError, parse_lines, run_scenario
from tests.samples import load_sample


def write(tmp_path: Path, lines: list[Any]) -> Path:
    path = tmp_path / "scenario.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.contract("C3", "C8", "C9", "C11")
def test_scenario_with_raw_bodies_operations_and_chaos(emulator: Any, tmp_path: Path) -> None:
    # GIVEN a real EventBridge sample retargeted at the scenario's bucket, a TestEvent, garbage,
    # and S3 operations flushed with duplicates and reordering
    sample = load_sample("powertools__s3EventBridgeNotificationObjectCreatedEvent.json")
    assert isinstance(sample, dict)
    sample["detail"]["bucket"]["name"] = "scenario-bucket"
    path = write(
        tmp_path,
        [
            {"bucket": "scenario-bucket", "versioning": "Enabled"},
            {"op": "deliver", "body": sample},
            {"op": "deliver", "body": load_sample("awsdocs-s3ug__notification-TestEvent.json")},
            {"op": "deliver", "body": "not json at all"},
            {"op": "put", "key": "a b+c.txt", "body": "one"},
            {"op": "put", "key": "a b+c.txt", "body": "two"},
            {"op": "delete", "key": "gone.txt"},
            {"op": "flush", "chaos": {"seed": 4, "duplicate": 0.5, "reorder": True, "drop": 0.0}},
        ],
    )
    # WHEN it runs
    result = run_scenario(path, emulator=emulator)
    # THEN each message has its outcome, attributed to its step
    by_step: dict[int, list[str]] = {}
    for m in result["messages"]:
        by_step.setdefault(m["step"], []).append(m["outcome"])
    # the sample's object: the ledger applies it, but the bucket has no such key, so the example
    # processor's pinned read finds nothing: the record ends superseded (C8), with no effect
    assert by_step[2] == ["superseded"]
    assert by_step[3] == ["ignored"]
    assert by_step[4] == ["invalid"]
    # (the flush on line 8 delivered the events of the operations on lines 5-7)
    flushed = [m for m in result["messages"] if m["delivered_at"] == 8]
    assert {m["outcome"] for m in flushed} <= {"applied", "duplicate", "stale"}
    assert {m["step"] for m in flushed} == {5, 6, 7}
    keys = {r["key"]: r for r in result["ledger"]}
    assert keys["a b+c.txt"]["state"] == "present"
    assert keys["gone.txt"]["state"] == "deleted"
    # the sample's key was never written to the bucket: the ledger and bucket disagree on it
    assert result["converged"] is False
    assert result["differences"] == ["present in ledger but not visible: 'IMG_m7fzo3.jpg'"]
    assert [o["key"] for o in result["bucket"]] == ["a b+c.txt"]
    # the effects ran for the winning changes and were listed with their ids (but for the delete
    # of a key the ledger never held: nothing downstream saw it, issue 34); every applied change
    # was published on the change bus
    effects = {(e["key"], e["kind"]) for e in result["effects"]}
    assert ("a b+c.txt", "created") in effects and ("gone.txt", "removed") not in effects
    gone = [(m["outcome"], m["effect"]) for m in flushed if m["key"] == "gone.txt"]
    assert gone.count(("applied", "not-run: key-never-held")) == 1
    assert {effect for outcome, effect in gone if outcome != "applied"} <= {None}
    assert "IMG_m7fzo3.jpg" not in {e["key"] for e in result["effects"]}
    rows = {r["key"]: r for r in result["ledger"]}
    published = {c["detail"]["key"]: c["detail"]["id"] for c in result["changes"]}
    assert set(published) == set(rows)
    assert all(len(e["id"]) == 32 for e in result["effects"])
    assert result["effects_problems"] == []


def test_scenario_cli_json_output(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        [
            # no processor: with one, the put's effect may read the already-deleted object and end
            # superseded, depending on which of the batch's two records a thread takes first
            {"bucket": "cli-bucket", "versioning": None, "processor": None},
            {"op": "put", "key": "x", "body": "1"},
            {"op": "delete", "key": "x"},
            {"op": "flush", "chaos": {"seed": 1, "reorder": True}},
        ],
    )
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


@pytest.mark.parametrize(
    ("lines", "message"),
    [
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
    ],
)
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


@pytest.mark.parametrize(
    ("setup", "version", "message"),
    [
        ({"bucket": "unversioned-bkt", "versioning": None}, "xyz", "not versioned"),
        ({"bucket": "versioned-bkt", "versioning": "Enabled"}, "no-such-version", "has no version"),
    ],
)
def test_impossible_version_deletes_are_refused(
    emulator: Any, tmp_path: Path, setup: dict[str, Any], version: str, message: str
) -> None:
    path = write(
        tmp_path,
        [
            setup,
            {"op": "put", "key": "a", "body": "1"},
            {"op": "delete", "key": "a", "version_id": version},
        ],
    )
    with pytest.raises(ScenarioError, match=f"line 3: .*{message}"):
        run_scenario(path, emulator=emulator)


def test_scenario_exits_1_when_not_converged(tmp_path: Path) -> None:
    # a put whose event is never flushed: the ledger is behind the bucket
    path = write(tmp_path, [{"op": "put", "key": "x", "body": "1"}])
    result = CliRunner().invoke(app, ["local", "scenario", str(path), "--json"])
    assert result.exit_code == 1
    assert json.loads(result.stdout)["converged"] is False


@pytest.mark.contract("C13")
def test_backfill_step_brings_in_objects_whose_events_were_lost(
    emulator: Any, tmp_path: Path
) -> None:
    path = write(
        tmp_path,
        [
            {"bucket": "backfill-bkt", "versioning": "Enabled"},
            {"op": "put", "key": "before pipeline.csv", "body": "1"},
            {"op": "put", "key": "also+before", "body": "2"},
            {"op": "flush", "chaos": {"drop": 1.0}},
            {"op": "backfill"},
            {"op": "put", "key": "live.csv", "body": "3"},
            {"op": "flush", "chaos": {"seed": 1, "duplicate": 0.5, "reorder": True}},
        ],
    )
    result = run_scenario(path, emulator=emulator)
    assert result["converged"] is True
    (job,) = result["backfills"]
    assert (job["step"], job["total"], job["succeeded"], job["failed"]) == (5, 2, 2, 0)
    assert {m["key"] for m in result["messages"]} == {"live.csv"}


@pytest.mark.slow
@pytest.mark.contract("C12", "C13")
def test_backfill_and_reconcile_steps_run_the_state_machines(emulator: Any, tmp_path: Path) -> None:
    path = write(
        tmp_path,
        [
            {"bucket": "machines-bkt", "versioning": "Enabled"},
            {"op": "put", "key": "before pipeline.csv", "body": "1"},
            {"op": "put", "key": "100%+café", "body": "2"},
            {"op": "flush", "chaos": {"drop": 1.0}},
            {"op": "backfill", "engine": "distributed-map"},
            {"op": "put", "key": "lost later", "body": "3"},
            {"op": "flush", "chaos": {"drop": 1.0}},
            {"op": "reconcile", "fan_out": True},
        ],
    )
    result = run_scenario(path, emulator=emulator)
    assert result["error"] is None
    assert result["converged"] is True
    (backfill,) = result["backfills"]
    assert (backfill["step"], backfill["total"], backfill["failed"]) == (5, 2, 0)
    assert backfill["execution"]["status"] == "SUCCEEDED"
    (reconciliation,) = result["reconciliations"]
    assert reconciliation["execution"]["status"] == "SUCCEEDED"
    assert reconciliation["drift"]["missing"] == 1


def _two_buckets_with_lost_events(tmp_path: Path, prefix: str, step: dict[str, Any]) -> Path:
    """Two buckets, one object in each whose event was lost, then ``step``."""
    first, second = f"{prefix}-first", f"{prefix}-second"
    return write(
        tmp_path,
        [
            {"buckets": [{"name": first}, {"name": second}], "processor": None},
            {"op": "put", "bucket": first, "key": "lost.csv", "body": "1"},
            {"op": "put", "bucket": second, "key": "lost.csv", "body": "2"},
            {"op": "flush", "chaos": {"drop": 1.0}},
            step,
        ],
    )


@pytest.mark.slow
@pytest.mark.contract("C12")
def test_a_fan_out_reconcile_step_reconciles_the_bucket_it_names(
    emulator: Any, tmp_path: Path
) -> None:
    # GIVEN two buckets with a lost event each, and a fan-out reconcile step naming the second
    step = {"op": "reconcile", "source": "inventory", "fan_out": True, "bucket": "fanb-second"}
    path = _two_buckets_with_lost_events(tmp_path, "fanb", step)
    # WHEN it runs
    result = run_scenario(path, emulator=emulator)
    # THEN the second bucket was reconciled and repaired, the first left alone
    assert result["error"] is None
    (reconciliation,) = result["reconciliations"]
    assert reconciliation["bucket"] == "fanb-second"
    assert reconciliation["execution"]["status"] == "SUCCEEDED"
    assert (reconciliation["drift"]["missing"], reconciliation["repairs_queued"]) == (1, 1)
    assert {(r["bucket"], r["key"]) for r in result["ledger"]} == {("fanb-second", "lost.csv")}


@pytest.mark.slow
@pytest.mark.contract("C12")
@pytest.mark.parametrize(
    "step",
    [
        {"op": "reconcile", "source": "listing"},
        {"op": "reconcile", "source": "inventory"},
        {"op": "reconcile", "source": "inventory", "fan_out": True},
    ],
    ids=["listing", "inventory", "fan-out"],
)
def test_a_reconcile_step_without_bucket_reconciles_every_bucket_as_the_schedule_does(
    emulator: Any, tmp_path: Path, step: dict[str, Any]
) -> None:
    # GIVEN two buckets with a lost event each, and a reconcile step naming no bucket
    prefix = f"every-{step['source'][:4]}{'-fan' if step.get('fan_out') else ''}"
    path = _two_buckets_with_lost_events(tmp_path, prefix, step)
    # WHEN it runs
    result = run_scenario(path, emulator=emulator)
    # THEN both buckets were reconciled (one report each, the counts summed) and repaired
    assert result["error"] is None
    assert result["converged"] is True, result["differences"]
    (reconciliation,) = result["reconciliations"]
    names = [f"{prefix}-first", f"{prefix}-second"]
    assert reconciliation["buckets"] == names
    assert [r["bucket"] for r in reconciliation["reports"]] == names
    assert [r["drift"]["missing"] for r in reconciliation["reports"]] == [1, 1]
    assert (reconciliation["drift"]["missing"], reconciliation["repairs_queued"]) == (2, 2)
    assert {(r["bucket"], r["key"], r["state"]) for r in result["ledger"]} == {
        (name, "lost.csv", "present") for name in names
    }


def test_a_reconcile_step_without_bucket_in_a_one_bucket_scenario_reports_as_before(
    emulator: Any, tmp_path: Path
) -> None:
    # GIVEN one bucket with a lost event
    path = write(
        tmp_path,
        [
            {"bucket": "every-one-bkt", "processor": None},
            {"op": "put", "key": "lost.csv", "body": "1"},
            {"op": "flush", "chaos": {"drop": 1.0}},
            {"op": "reconcile", "source": "listing"},
        ],
    )
    result = run_scenario(path, emulator=emulator)
    # THEN its reconciliation is that bucket's report, unchanged (no per-bucket list)
    (reconciliation,) = result["reconciliations"]
    assert reconciliation["bucket"] == "every-one-bkt" and "reports" not in reconciliation
    assert reconciliation["drift"]["missing"] == 1
    assert result["converged"] is True


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"bucket": "a..b"}'], "not a valid S3 bucket name"),
        (['{"bucket": "192.168.1.1"}'], "not a valid S3 bucket name"),
        (['{"bucket": "b-one"}', '{"bucket": "b-two"}'], "only the first line"),
        (['{"op": "put", "key": "a", "key": "b", "body": "1"}'], "given twice"),
        # (a listing backfill is a step now: an unknown field is still refused)
        (
            ['{"op": "backfill", "manifest": "m.json"}'],
            "accepts: bucket, chaos, during, engine, source",
        ),
        (['{"op": "backfill", "source": "listing", "engine": "distributed-map"}'], "one engine"),
        (['{"op": "backfill", "source": "s3"}'], "inventory or listing"),
        (['{"op": "backfill", "engine": "glue"}'], "backfill engine must be one of"),
        (['{"op": "reconcile", "fan_out": "yes"}'], "fan_out must be true or false"),
        (
            ['{"op": "reconcile", "source": "listing", "fan_out": true}'],
            "fan-out reconciliation reads an inventory",
        ),
        (
            ['{"op": "replay", "from": "2026-11-30T10:00:00Z", "to": "2026-11-30T09:00:00Z"}'],
            'line 1: replay "to" .* must be after "from"',
        ),
        (
            [
                '{"bucket": "plain-bkt", "versioning": null}',
                '{"op": "put", "key": "k", "body": "1"}',
                '{"op": "delete", "key": "k", "version_id": "abc"}',
            ],
            "line 3: the bucket is not versioned",
        ),
    ],
)
def test_more_bad_lines_are_caught_before_anything_runs(lines: list[str], message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        parse_lines(lines)


def test_unicode_line_separators_inside_strings_are_not_line_breaks(
    emulator: Any, tmp_path: Path
) -> None:
    path = tmp_path / "u2028.jsonl"
    path.write_text(
        '{"op": "put", "key": "a\u2028b\u0085c", "body": "1"}\n{"op": "flush"}\n', encoding="utf-8"
    )
    result = run_scenario(path, emulator=emulator)
    assert [r["key"] for r in result["ledger"]] == ["a\u2028b\u0085c"]
    assert result["converged"] is True


# -- effects converge with the bucket; chaos stays in its flush; a report always ---------------


@pytest.mark.contract("C8", "C11", "C12")
def test_a_superseded_effect_whose_newer_events_were_lost_converges_after_reconciliation(
    emulator: Any, tmp_path: Path
) -> None:
    # GIVEN the first put's event arrives while the key holds "y" (its effect is superseded),
    # and the events of "y" and of "x" again are lost: the object is back at the first bytes
    path = write(
        tmp_path,
        [
            {"bucket": "hand7-bkt", "versioning": None},
            {"op": "put", "key": "k", "body": "x"},
            {"op": "put", "key": "k", "body": "y"},
            {
                "op": "flush",
                "chaos": {
                    "seed": 10,
                    "duplicate": 0.0,
                    "reorder": False,
                    "drop": 0.5,
                    "crash": 0.0,
                },
            },
            {"op": "put", "key": "k", "body": "x"},
            {
                "op": "flush",
                "chaos": {"seed": 1, "duplicate": 0.0, "reorder": False, "drop": 1.0, "crash": 0.0},
            },
            {"op": "reconcile", "source": "listing"},
        ],
    )
    # WHEN it runs
    result = run_scenario(path, emulator=emulator)
    # THEN the one reconciliation finds no ledger drift but the effect behind, and its repair
    # runs the effect for the current object: the sidecar is in place
    (first,) = [m for m in result["messages"] if m["delivered_at"] == 4]
    assert (first["outcome"], first["effect"], first["step"]) == ("superseded", "superseded", 2)
    (rep,) = result["reconciliations"]
    assert (rep["drift_total"], rep["effects_behind"], rep["repairs_queued"]) == (0, 1, 1)
    (repair,) = [m for m in result["messages"] if m["step"] == 7]
    assert repair["effect"] == "resumed-done"
    assert repair["resumed_change_id"] == first["change_id"]
    assert repair["change_id"] is None and repair["sequencer"] is None  # its own: none
    assert result["converged"] is True
    assert result["effects_problems"] == []
    assert result["error"] is None


def test_a_flush_crash_rate_does_not_reach_later_steps(emulator: Any, tmp_path: Path) -> None:
    # GIVEN a flush that kills every worker after its effect (the message uses up its receives
    # and reaches the dead-letter queue, the effect left pending), then a backfill and a
    # reconciliation
    path = write(
        tmp_path,
        [
            {"bucket": "crash-scope-bkt", "versioning": "Enabled"},
            {"op": "put", "key": "a", "body": "1"},
            {"op": "put", "key": "b", "body": "2"},
            {"op": "flush", "chaos": {"seed": 3, "drop": 0.5, "crash": 1.0}},
            {"op": "backfill"},
            {"op": "reconcile", "source": "listing"},
        ],
    )
    # WHEN it runs
    result = run_scenario(path, emulator=emulator)
    # THEN the flush's deliveries were killed, the backfill and the reconciliation's repairs
    # were not, and it all converged with every sidecar in place
    killed = [m for m in result["messages"] if m["effect"] == "killed"]
    assert killed and {m["delivered_at"] for m in killed} == {4}
    assert all(m["reason"] == "worker-killed-before-commit" for m in killed)
    assert result["error"] is None
    (job,) = result["backfills"]
    # the backfill is the stack's machine: its tasks run in the Lambda service, out of the
    # flush's crash injection, so none failed or was killed
    assert (job["failed"], job["execution"]["status"]) == (0, "SUCCEEDED")
    assert all(m["effect"] != "killed" for m in result["messages"] if m["delivered_at"] != 4)
    assert result["converged"] is True
    assert result["effects_problems"] == []


@pytest.mark.contract("C13")
def test_crashes_injected_into_a_backfill_are_temporary_task_failures(emulator: Any) -> None:
    from s3ingest.local.emulator.chaos import Chaos
    from s3ingest.local.stack.runtime import LocalRuntime, local_settings

    # GIVEN objects whose events were lost, and a backfill whose workers die after the effect
    rt = LocalRuntime(emulator, local_settings(), versioning="Enabled")
    for i in range(6):
        rt.faithful.put(f"old-{i}", str(i))
    rt.faithful.take_pending()
    # WHEN the backfill job runs with half its workers killed (the draws are the seed's alone:
    # with seed 2 the job meets 8 temporary failures, and every task succeeds within its
    # redrives, batch_ops.MAX_TEMPORARY_RETRIES)
    report = rt.drive_backfill_job(chaos=Chaos(seed=2, crash=0.5))
    # THEN Batch Operations saw temporary failures and retried them; nothing is lost
    assert report["temporary_retries"] > 0
    assert (report["total"], report["succeeded"], report["failed"]) == (6, 6, 0)
    assert rt.compare().converged
    assert rt.effects_report()["problems"] == []
    assert rt.check_sidecars() == []


def test_a_long_key_gets_a_sidecar_that_fits_s3s_key_limit(emulator: Any, tmp_path: Path) -> None:
    key = "deep/" + "k" * 1010  # 1,015 bytes: sidecars/<key>.json would be 1,029
    path = write(
        tmp_path,
        [{"bucket": "long-key-bkt"}, {"op": "put", "key": key, "body": "1"}, {"op": "flush"}],
    )
    result = run_scenario(path, emulator=emulator)
    assert result["converged"] is True
    assert result["effects_problems"] == []  # includes: no sidecar key over 1,024 bytes
    assert [e["key"] for e in result["effects"]] == [key]


def test_a_step_that_fails_is_reported_with_everything_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from s3ingest.local.stack.runtime import LocalRuntime

    def broken(self: LocalRuntime, *args: Any, **kwargs: Any) -> dict[str, Any]:
        raise RuntimeError("the job was cancelled")

    monkeypatch.setattr(LocalRuntime, "backfill", broken)
    path = write(
        tmp_path,
        [
            {"bucket": "report-always-bkt", "processor": None},
            {"op": "put", "key": "a", "body": "1"},
            {"op": "flush"},
            {"op": "backfill"},
            {"op": "put", "key": "never", "body": "2"},
        ],
    )
    result = CliRunner().invoke(app, ["local", "scenario", str(path), "--json"])
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert doc["error"] == "line 4: backfill failed: RuntimeError: the job was cancelled"
    assert [m["key"] for m in doc["messages"]] == ["a"]  # what ran before it is reported
    assert [o["key"] for o in doc["bucket"]] == ["a"]  # and nothing after it ran


def test_keys_s3_refuses_are_refused_by_the_local_runtime(emulator: Any) -> None:
    from s3ingest.local.stack.runtime import LocalRuntime

    rt = LocalRuntime(emulator, versioning=None)
    with pytest.raises(ValueError, match="over 1024 bytes"):
        rt.faithful.put("k" * 1025, "1")
    with pytest.raises(ValueError, match="control character"):
        rt.faithful.put("bell\x07", "1")
    rt.faithful.put("tab\there", "1")  # a tab is listed faithfully: accepted, as in the demo
    assert [o["key"] for o in rt.bucket_objects()] == ["tab\there"]


# -- scenario format: "@N" versions, messages by the line of their S3 operation ---------------


@pytest.mark.contract("C4")
def test_a_scenario_deletes_a_non_current_version_by_its_put_line(
    emulator: Any, tmp_path: Path
) -> None:
    # GIVEN two versions of a key, and a delete of the older (non-current) one by "@2"
    path = write(
        tmp_path,
        [
            {"bucket": "at-n-bkt", "versioning": "Enabled"},
            {"op": "put", "key": "k", "body": "one"},
            {"op": "put", "key": "k", "body": "two"},
            {"op": "flush"},
            {"op": "delete", "key": "k", "version_id": "@2"},
            {"op": "flush", "chaos": {"seed": 2, "duplicate": 1.0}},
            {"op": "reconcile", "source": "listing"},
        ],
    )
    # WHEN it runs
    result = run_scenario(path, emulator=emulator)
    # THEN the version put on line 2 is gone, the key stays visible with line 3's version (C4),
    # and the ledger converged with it
    assert result["converged"] is True and result["error"] is None
    (obj,) = result["bucket"]
    (row,) = result["ledger"]
    assert row["state"] == "present" and row["version_id"] == obj["version_id"]
    (put3,) = [
        e for e in result["effects"] if e["step"] == 4 and e["versionId"] == row["version_id"]
    ]
    assert put3["kind"] == "created"
    # each message names the line of the S3 operation that emitted its event, the flush that
    # delivered it, and the event's name
    by_step = {(m["step"], m["delivered_at"]) for m in result["messages"]}
    assert by_step == {(2, 4), (3, 4), (5, 6)}
    version_removed = [m for m in result["messages"] if m["step"] == 5]
    assert len(version_removed) >= 2  # duplicated: every copy is attributed to line 5
    assert {m["event"] for m in version_removed} == {
        "Object Deleted/DeleteObject/Permanently Deleted"
    }
    assert {m["outcome"] for m in version_removed} <= {"applied", "duplicate"}


@pytest.mark.contract("C4")
def test_a_suspended_buckets_null_version_is_named_by_its_put_line(
    emulator: Any, tmp_path: Path
) -> None:
    path = write(
        tmp_path,
        [
            {"bucket": "at-n-suspended", "versioning": "Suspended"},
            {"op": "put", "key": "k", "body": "one"},
            {"op": "put", "key": "j", "body": "two"},
            {"op": "delete", "key": "k", "version_id": "@2"},
            {"op": "flush", "chaos": {"seed": 1, "reorder": True}},
        ],
    )
    result = run_scenario(path, emulator=emulator)
    assert result["converged"] is True
    assert [o["key"] for o in result["bucket"]] == ["j"]
    assert {r["key"]: r["state"] for r in result["ledger"]} == {"j": "present", "k": "deleted"}


@pytest.mark.parametrize(
    ("versioning", "lines", "message"),
    [
        ("Enabled", [{"op": "delete", "key": "k", "version_id": "@2"}], "line 2: .*names no put"),
        (
            "Enabled",
            [
                {"op": "put", "key": "k", "body": "1"},
                {"op": "delete", "key": "other", "version_id": "@2"},
            ],
            "line 3: .*names the put of 'k' on line 2, not of 'other'",
        ),
        (
            "Enabled",
            [
                {"op": "put", "key": "k", "body": "1"},
                {"op": "delete", "key": "k", "version_id": "@x"},
            ],
            "line 3: .*names no put",
        ),
    ],
)
def test_a_version_reference_that_names_no_put_is_refused_before_anything_runs(
    versioning: str, lines: list[dict[str, Any]], message: str
) -> None:
    with pytest.raises(ScenarioError, match=message):
        parse_lines([json.dumps({"versioning": versioning}), *map(json.dumps, lines)])


@pytest.mark.parametrize(
    ("versioning", "second"),
    [
        ("Enabled", {"op": "delete", "key": "k", "version_id": "@2"}),  # deleted already
        ("Suspended", {"op": "put", "key": "k", "body": "again"}),  # null version replaced
        (None, {"op": "delete", "key": "k"}),  # the object is gone
    ],
)
def test_a_version_reference_to_a_version_that_is_gone_is_a_scenario_error(
    emulator: Any, tmp_path: Path, versioning: str | None, second: dict[str, Any]
) -> None:
    path = write(
        tmp_path,
        [
            {"bucket": "gone-version-bkt", "versioning": versioning},
            {"op": "put", "key": "k", "body": "1"},
            {"op": "delete", "key": "k", "version_id": "@2"} if versioning == "Enabled" else second,
            second if versioning == "Enabled" else {"op": "delete", "key": "k", "version_id": "@2"},
        ],
    )
    with pytest.raises(
        ScenarioError,
        match="line 4: version_id '@2': the version put on line 2 does not exist any more",
    ):
        run_scenario(path, emulator=emulator)


def test_the_plain_report_wraps_sequencers_and_reasons_instead_of_cutting_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")  # a narrow terminal
    path = write(
        tmp_path,
        [
            {"bucket": "narrow-bkt", "processor": None},
            {"op": "put", "key": "a key long enough to need wrapping.txt", "body": "1"},
            {"op": "flush"},
        ],
    )
    result = CliRunner().invoke(app, ["local", "scenario", str(path)])
    assert result.exit_code == 0, result.output
    assert "…" not in result.output
    # the messages table's one row, its cells joined back across the lines they wrap over
    lines = result.output.splitlines()
    body = lines[lines.index(next(x for x in lines if x.startswith("┡"))) + 1 :]
    body = body[: body.index(next(x for x in body if x.startswith("└")))]
    columns = [
        "".join(part.strip() for part in parts)
        for parts in zip(*(line.split("│")[1:-1] for line in body), strict=True)
    ]
    doc = json.loads(CliRunner().invoke(app, ["local", "scenario", str(path), "--json"]).stdout)
    (message,) = doc["messages"]
    assert len(message["sequencer"]) >= 18  # long enough to wrap in its column
    assert columns[4] == message["reason"] == "newer-sequencer"
    # (each run has its own sequencers: the same shape, whole)
    assert re.fullmatch(r"00[0-9A-F]{16,}", columns[6])
    assert len(columns[6]) == len(message["sequencer"])


def test_a_copy_step_is_ingested_as_the_copied_object(emulator: Any, tmp_path: Path) -> None:
    # GIVEN a key copied to another, then its source overwritten and deleted
    path = write(
        tmp_path,
        [
            {"bucket": f"copy-{uuid.uuid4().hex[:10]}", "versioning": "Enabled"},
            {"op": "put", "key": "in/a.csv", "body": "one"},
            {"op": "copy", "key": "out/a.csv", "source": "in/a.csv"},
            {"op": "put", "key": "in/a.csv", "body": "two"},
            {"op": "delete", "key": "in/a.csv"},
            {"op": "flush", "chaos": {"seed": 3, "duplicate": 0.5, "reorder": True}},
        ],
    )
    # WHEN it runs
    result = run_scenario(path, emulator=emulator)
    # THEN the copy's event was ingested for the copy's key, and the ledger equals the bucket
    copies = [m for m in result["messages"] if m["step"] == 3]
    assert copies and {m["key"] for m in copies} == {"out/a.csv"}
    assert "applied" in {m["outcome"] for m in copies}
    rows = {r["key"]: r["state"] for r in result["ledger"]}
    assert rows == {"in/a.csv": "deleted", "out/a.csv": "present"}
    assert [o["key"] for o in result["bucket"]] == ["out/a.csv"]
    assert result["converged"] is True, result["differences"]


def test_a_copy_of_a_deleted_key_is_a_scenario_error(emulator: Any, tmp_path: Path) -> None:
    path = write(
        tmp_path,
        [
            {"bucket": f"copy-{uuid.uuid4().hex[:10]}", "versioning": "Enabled"},
            {"op": "put", "key": "a", "body": "1"},
            {"op": "delete", "key": "a"},
            {"op": "copy", "key": "b", "source": "a"},
        ],
    )
    with pytest.raises(ScenarioError, match=r"line 4: copy failed: .*NoSuchKey"):
        run_scenario(path, emulator=emulator)


@pytest.mark.parametrize("fan_out", [False, True], ids=["listing", "fan-out"])
def test_a_status_step_after_a_reconcile_step_shows_its_drift(
    emulator: Any, tmp_path: Path, fan_out: bool
) -> None:
    # GIVEN a lost event, a reconciliation (as the schedule runs it) and a status step
    reconcile = {"op": "reconcile", "source": "inventory" if fan_out else "listing"}
    path = write(
        tmp_path,
        [
            {"bucket": f"status-drift-{int(fan_out)}", "processor": None},
            {"op": "put", "key": "lost.csv", "body": "1"},
            {"op": "flush", "chaos": {"drop": 1.0}},
            {**reconcile, **({"fan_out": True} if fan_out else {})},
            {"op": "status"},
        ],
    )
    # WHEN it runs
    result = run_scenario(path, emulator=emulator)
    # THEN status reads the reconciliation's drift from the metrics, as deployed (not None)
    assert result["error"] is None
    (reconciliation,) = result["reconciliations"]
    assert reconciliation["drift"]["missing"] == 1
    (status,) = result["statuses"]
    assert status["last_drift"] is not None
    assert status["last_drift"]["drift_total"] == 1
