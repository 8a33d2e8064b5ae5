"""Scenario steps for what S3 does beyond PutObject and DeleteObject: a multipart upload, a
Lifecycle expiration and a restore of an archived object, each with the event S3 sends."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from s3ingest.local.rehearsal.scenario import ScenarioError, run_scenario
from s3ingest.local.rehearsal.steps.base import Run

REAL = Path(__file__).resolve().parents[1] / "events"


def write(tmp_path: Path, lines: list[Any]) -> Path:
    path = tmp_path / "scenario.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return path


def _events(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every event the scenario's S3 operations emitted (recorded as the steps run)."""
    from s3ingest.local.rehearsal.steps import objects

    seen: list[dict[str, Any]] = []
    created = objects.created

    def record(run: Run, lineno: int, done: Any, versioning: str | None) -> None:
        seen.append(done.event)
        created(run, lineno, done, versioning)

    from s3ingest.local.rehearsal.steps import storage

    monkeypatch.setattr(storage, "created", record)
    return seen


def _shape(value: Any) -> Any:
    """The field names of an event, nested (what a consumer keys on), not its values."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    return type(value).__name__


def test_a_multipart_upload_is_ingested_with_its_reason(emulator: Any, tmp_path: Path) -> None:
    path = write(
        tmp_path,
        [
            {"bucket": f"mpu-{uuid.uuid4().hex[:10]}", "processor": None},
            {"op": "multipart", "key": "big/a.bin", "parts": 1, "body": "tail"},
            {"op": "flush"},
        ],
    )
    result = run_scenario(path, emulator=emulator)
    (message,) = result["messages"]
    assert message["event"] == "Object Created/CompleteMultipartUpload"
    assert (message["step"], message["outcome"]) == (2, "applied")
    (row,) = result["ledger"]
    assert row["etag"].endswith("-2")  # the multipart ETag: md5 of the parts' md5s, "-<parts>"
    assert result["converged"] is True, result["differences"]


def test_a_multipart_part_below_5_mib_but_the_last_is_refused(emulator: Any) -> None:
    from s3ingest.local.stack.runtime import LocalRuntime, local_settings

    rt = LocalRuntime(emulator, local_settings(processor=None))
    try:
        with pytest.raises(ValueError, match="EntityTooSmall"):
            rt.faithful.multipart("k", [b"small", b"last"])
    finally:
        rt.close()


def test_a_lifecycle_expiration_sends_what_s3_sends(
    emulator: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a key with two versions, its current version then a noncurrent one expired
    events = _events(monkeypatch)
    path = write(
        tmp_path,
        [
            {"bucket": f"lce-{uuid.uuid4().hex[:10]}", "processor": None},
            {"op": "put", "key": "logs/a", "body": "1"},
            {"op": "put", "key": "logs/a", "body": "2"},
            {"op": "expire", "key": "logs/a"},
            {"op": "flush"},
            {"op": "expire", "key": "logs/a", "version_id": "@2"},
            {"op": "flush"},
        ],
    )
    result = run_scenario(path, emulator=emulator)
    # THEN the events are shaped as S3's (the real LifecycleExpiration payload's fields) ...
    marker, gone = events
    real = json.loads(
        (REAL / "awsdocs-s3ug__eventbridge-ObjectDeleted-LifecycleExpiration.json").read_text()
    )
    assert _shape(marker) == _shape(real)
    assert marker["detail"]["requester"] == "s3.amazonaws.com"
    assert marker["detail"]["deletion-type"] == "Delete Marker Created"
    assert gone["detail"]["deletion-type"] == "Permanently Deleted"
    assert "source-ip-address" not in gone["detail"]
    # ... and the pipeline tombstones the key from the marker's event
    by_step = {m["step"]: m for m in result["messages"]}
    assert by_step[4]["event"] == "Object Deleted/Lifecycle Expiration/Delete Marker Created"
    assert by_step[4]["outcome"] == "applied"
    assert by_step[6]["event"] == "Object Deleted/Lifecycle Expiration/Permanently Deleted"
    assert [r["state"] for r in result["ledger"]] == ["deleted"]
    assert result["converged"] is True, result["differences"]


def test_expiring_a_key_without_a_current_version_is_a_scenario_error(
    emulator: Any, tmp_path: Path
) -> None:
    path = write(
        tmp_path,
        [
            {"bucket": f"lce-{uuid.uuid4().hex[:10]}", "processor": None},
            {"op": "put", "key": "a", "body": "1"},
            {"op": "delete", "key": "a"},
            {"op": "expire", "key": "a"},
        ],
    )
    with pytest.raises(ScenarioError, match=r"line 4: expire failed: .*no current version"):
        run_scenario(path, emulator=emulator)


def test_a_restore_sends_both_events_which_the_ingest_rule_does_not_match(
    emulator: Any, tmp_path: Path
) -> None:
    # GIVEN an archived object restored
    path = write(
        tmp_path,
        [
            {"bucket": f"rst-{uuid.uuid4().hex[:10]}", "processor": None},
            {"op": "put", "key": "cold/a", "body": "frozen", "storage_class": "GLACIER"},
            {"op": "flush"},
            {"op": "restore", "key": "cold/a", "days": 2},
            {"op": "flush"},
        ],
    )
    result = run_scenario(path, emulator=emulator)
    (entry,) = result["restores"]
    assert entry["events"] == ["Object Restore Initiated", "Object Restore Completed"]
    # THEN the ingest rule matches Object Created and Object Deleted only
    # (s3ingest/settings/events.py): neither restore event reaches the queue, the row is the put's
    assert [m["delivered_at"] for m in result["messages"]] == [3]
    assert [r["state"] for r in result["ledger"]] == ["present"]
    assert result["converged"] is True, result["differences"]


def test_a_restore_event_that_reaches_the_handler_is_ignored_as_metadata(emulator: Any) -> None:
    # GIVEN the restore events, sent to the queue anyway (a widened rule, a hand redrive)
    from s3ingest.local.stack.runtime import LocalRuntime, local_settings

    rt = LocalRuntime(emulator, local_settings(processor=None))
    try:
        rt.faithful.put("cold/a", "x", "GLACIER")
        rt.flush()
        rt.drain()
        for op in rt.faithful.restore("cold/a", 1):
            rt.send_raw(json.dumps(op.event))
        rt.drain()
        results = [d.result for d in rt.delivered[1:]]
        rows = rt.ledger_rows()
    finally:
        rt.close()
    # THEN the handler classifies both as metadata only (core/events.py _EB_METADATA): ignored
    assert sorted((r.outcome.value, r.reason) for r in results) == [
        ("ignored", "metadata-only: Object Restore Completed"),
        ("ignored", "metadata-only: Object Restore Initiated"),
    ]
    assert [r.state for r in rows] == ["present"]


def test_restore_events_are_shaped_as_s3s(emulator: Any) -> None:
    from s3ingest.local.stack.runtime import LocalRuntime, local_settings

    rt = LocalRuntime(emulator, local_settings(processor=None))
    try:
        rt.faithful.put("k", "x", "GLACIER")
        initiated, completed = (op.event for op in rt.faithful.restore("k", 1))
    finally:
        rt.close()
    real = json.loads((REAL / "awsdocs-s3ug__eventbridge-ObjectRestoreCompleted.json").read_text())
    assert _shape(completed) == _shape(real)
    assert completed["detail"]["requester"] == "s3.amazonaws.com"
    assert "sequencer" not in initiated["detail"]["object"]
    assert "reason" not in initiated["detail"]
    assert initiated["detail"]["source-storage-class"] == "GLACIER"
    assert "source-ip-address" in initiated["detail"]


def test_restoring_an_object_that_is_not_archived_is_a_scenario_error(
    emulator: Any, tmp_path: Path
) -> None:
    path = write(
        tmp_path,
        [
            {"bucket": f"rst-{uuid.uuid4().hex[:10]}", "processor": None},
            {"op": "put", "key": "a", "body": "1"},
            {"op": "restore", "key": "a"},
        ],
    )
    with pytest.raises(ScenarioError, match=r"line 3: restore failed: .*InvalidObjectState"):
        run_scenario(path, emulator=emulator)
