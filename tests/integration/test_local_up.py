"""``s3ingest local up``: the stack on the emulator in a background process, written to by a
plain boto3 client against the printed endpoint, read with ``--local`` on the operator
commands through the deployed code path, and stopped by ``local down`` (issue 26); and the
S3-faithful events of writes by any client (:mod:`s3ingest.local.emulator.outside_writes`)."""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import boto3
import pytest
from typer.testing import CliRunner

from s3ingest.cli import app
from s3ingest.local.emulator import outside_writes
from s3ingest.local.stack import daemon, saved_state
from s3ingest.local.stack.runtime import LocalRuntime

#: Every wait of these tests ends by then (seconds), whatever happens.
DEADLINE_SECONDS = 90.0


def _until(check: Callable[[], Any], what: str, seconds: float = DEADLINE_SECONDS) -> Any:
    """Poll ``check`` until it returns something truthy; fail naming ``what`` after
    ``seconds``."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    pytest.fail(f"{what}: not within {seconds:.0f} s")


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    return result.exit_code, result.output


@pytest.fixture
def local_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """``s3ingest local up --json`` in a fresh directory (a ``cdk.json`` of its own,
    ``--context`` over it); the daemon this test started is stopped by its pid at the end,
    whatever the test did."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cdk.json").write_text(json.dumps({"context": {"stage": "dev"}}))
    code, output = _cli("local", "up", "--context", "versioned=true", "--json")
    assert code == 0, output
    info: dict[str, Any] = json.loads(output)
    try:
        yield info
    finally:
        pid = int(info["pid"])
        if daemon.alive(pid):
            daemon.stop(tmp_path / daemon.RUN_DIR)
        assert not daemon.alive(pid)


@pytest.mark.slow
def test_local_up_ingests_what_boto3_writes_and_local_commands_read_it(
    local_stack: dict[str, Any], tmp_path: Path
) -> None:
    # GIVEN the local stack's printed endpoint, credentials and outputs
    info = local_stack
    outputs = info["outputs"]
    for name in ("BucketName", "BucketNames", "QueueUrl", "DeadLetterQueueUrl"):
        assert name in outputs
    assert {"LedgerTableName", "ArchiveArn", "RuleArn", "InventoryBucketName"} <= set(outputs)
    kwargs = {"endpoint_url": info["endpoint"], "region_name": info["region"]}
    s3 = boto3.client("s3", **kwargs, **info["credentials"])
    bucket = info["buckets"][0]
    # WHEN a plain boto3 client writes, overwrites, copies and deletes objects
    s3.put_object(Bucket=bucket, Key="in/a b+c.csv", Body=b"one")
    s3.put_object(Bucket=bucket, Key="in/a b+c.csv", Body=b"two")
    s3.put_object(Bucket=bucket, Key="in/gone", Body=b"x")
    s3.copy_object(Bucket=bucket, Key="in/copy", CopySource={"Bucket": bucket, "Key": "in/gone"})
    s3.delete_object(Bucket=bucket, Key="in/gone")

    def explained(key: str) -> dict[str, Any] | None:
        code, output = _cli("explain", bucket, key, "--local", "--json")
        assert code == 0, output
        result: dict[str, Any] = json.loads(output)
        return result if result["agrees"] and result["ledger"].get("revision") else None

    # THEN the pipeline ingests them: explain --local shows each row agreeing with the bucket
    row = _until(lambda: explained("in/a b+c.csv"), "the overwrite ingested")
    head = s3.head_object(Bucket=bucket, Key="in/a b+c.csv")
    assert row["ledger"]["version_id"] == head["VersionId"]
    assert row["ledger"]["state"] == "present"
    copied = _until(lambda: explained("in/copy"), "the copy ingested")
    assert copied["ledger"]["last_event"] == "Object Created/CopyObject"
    gone = _until(lambda: explained("in/gone"), "the delete ingested")
    assert gone["ledger"]["state"] == "deleted"
    assert not gone["bucket"]["visible"]
    # AND status --local is healthy (exit code 0), as on a deployed stack
    code, output = _cli("status", "--local", "--json")
    assert code == 0, output
    status = json.loads(output)
    assert status["healthy"] and status["dead_letter_queue"]["visible"] == 0
    assert status["eventbridge_delivery"] is True
    # AND the other commands act on the same stack
    code, output = _cli("held", "--local", "--json")
    assert (code, json.loads(output)["held"]) == (0, [])
    assert json.loads(output)["hold_configured"] is False
    code, output = _cli("explain", "no-such-bucket", "k", "--local")
    assert code == 3 and "is not one the pipeline watches" in " ".join(output.split())
    code, output = _cli("redrive", "--local", "--dry-run", "--json")
    assert (code, json.loads(output)["dlq"]["approximate"]) == (0, 0)
    code, output = _cli("local", "status", "--json")
    assert code == 0 and json.loads(output)["running"] is True
    # WHEN a message the handler cannot read reaches the ingest queue
    sqs = boto3.client("sqs", **kwargs, **info["credentials"])
    sqs.send_message(QueueUrl=outputs["QueueUrl"], MessageBody="not json")

    def unhealthy() -> dict[str, Any] | None:
        code, output = _cli("status", "--local", "--json")
        return json.loads(output) if code == 1 else None

    # THEN status --local exits 1 for the dead-letter queue, and redrive --local classifies it
    found = _until(unhealthy, "the dead-letter queue reported")
    assert found["dead_letter_queue"]["visible"] == 1 and not found["healthy"]
    code, output = _cli("redrive", "--local", "--dry-run", "--json")
    assert code == 0 and json.loads(output)["dlq"]["by_reason"] == {"malformed-json": 1}
    # WHEN local down
    code, output = _cli("local", "down", "--json")
    # THEN only that process ended, and --local finds no stack (exit code 2)
    assert code == 0 and json.loads(output) == {"stopped": info["pid"], "state": None}
    assert not daemon.alive(int(info["pid"]))
    code, output = _cli("status", "--local")
    assert code == 2 and "no local stack: run s3ingest local up" in output
    code, output = _cli("local", "status", "--json")
    assert code == 1 and json.loads(output)["running"] is False


@pytest.mark.slow
def test_reconcile_onboard_verify_and_backfill_local_act_on_the_running_stack(
    local_stack: dict[str, Any],
) -> None:
    from s3ingest.local.emulator.inventory_writer import write_inventory
    from s3ingest_fn.adapters.dynamo_ledger.layout import PARTITION_KEY, row_pk

    # GIVEN the running local stack with two objects ingested
    info = local_stack
    outputs = info["outputs"]
    kwargs = {"endpoint_url": info["endpoint"], "region_name": info["region"]}
    s3 = boto3.client("s3", **kwargs, **info["credentials"])
    dynamodb = boto3.client("dynamodb", **kwargs, **info["credentials"])
    bucket = info["buckets"][0]
    keys = ["drift/a", "drift/b c"]
    for key in keys:
        s3.put_object(Bucket=bucket, Key=key, Body=key.encode())

    def row(key: str) -> dict[str, Any] | None:
        code, output = _cli("explain", bucket, key, "--local", "--json")
        assert code == 0, output
        found: dict[str, Any] = json.loads(output)
        ok = found["agrees"] and found["ledger"].get("state") == "present"
        return found if ok else None

    for key in keys:
        _until(partial(row, key), f"{key} ingested")
    # WHEN their ledger rows are deleted behind the pipeline's back (a drift)
    for key in keys:
        dynamodb.delete_item(
            TableName=outputs["LedgerTableName"],
            Key={PARTITION_KEY: {"S": row_pk(bucket, key)}},
        )
    assert all(row(key) is None for key in keys)
    # THEN reconcile --local finds and repairs them on that stack, with the --stack options
    code, output = _cli(
        "reconcile",
        "--local",
        "--source",
        "listing",
        "--bucket",
        bucket,
        "--margin-seconds",
        "0",
        "--json",
    )
    assert code == 0, output
    report = json.loads(output)
    assert report["bucket"] == bucket and report["drift_total"] == len(keys)
    assert report["repairs_queued"] == len(keys)
    assert sorted(s["key"] for s in report["samples"]) == keys
    # AND explain --local shows each key present again
    for key in keys:
        _until(partial(row, key), f"{key} repaired")
    # AND verify --local sends its canary through that stack
    code, output = _cli("verify", "--local", "--timeout-seconds", "60", "--json")
    assert code == 0, output
    assert json.loads(output)["ok"] is True
    # AND onboard --local runs the stack's listing backfill over its landing bucket
    code, output = _cli("onboard", "--local", "--bucket", bucket, "--yes", "--json")
    assert code == 0, output
    assert json.loads(output)["status"] == "done"
    # AND backfill start --local runs the stack's backfill machine over an inventory report
    write_inventory(s3, source_bucket=bucket, destination_bucket=outputs["InventoryBucketName"])
    code, output = _cli("backfill", "start", "--local", "--no-wait", "--json")
    assert code == 0, output
    execution = json.loads(output.splitlines()[-1])["execution"]
    assert execution.startswith(
        outputs["BackfillStateMachineArn"].replace(":stateMachine:", ":execution:")
    )

    def ended() -> dict[str, Any] | None:
        code, output = _cli("backfill", "status", "--local", "--json")
        assert code in (0, 1), output
        status: dict[str, Any] = json.loads(output)
        return status if status["status"] != "RUNNING" else None

    status = _until(ended, "the backfill ended")
    assert status["status"] == "SUCCEEDED", status
    assert status["failed"] == 0 and status["succeeded"] >= len(keys)
    code, output = _cli("status", "--local", "--json")
    assert code == 0, output


@pytest.mark.slow
def test_a_state_saved_on_down_is_loaded_on_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # the state key's folder
    state = tmp_path / "rehearsal"
    started: list[int] = []

    def up() -> dict[str, Any]:
        code, output = _cli("local", "up", "--state", str(state), "--json")
        assert code == 0, output
        info: dict[str, Any] = json.loads(output)
        started.append(int(info["pid"]))
        return info

    def client(info: dict[str, Any]) -> Any:
        return boto3.client(
            "s3",
            endpoint_url=info["endpoint"],
            region_name=info["region"],
            **info["credentials"],
        )

    def row(bucket: str, key: str, revision: int) -> dict[str, Any] | None:
        code, output = _cli("explain", bucket, key, "--local", "--json")
        assert code == 0, output
        found: dict[str, Any] = json.loads(output)
        ok = found["agrees"] and found["ledger"].get("revision") == revision
        return found if ok else None

    try:
        # GIVEN a local stack with a state folder, an object ingested, then local down
        first = up()
        assert first["restored"] is False
        bucket = first["buckets"][0]
        client(first).put_object(Bucket=bucket, Key="kept", Body=b"one")
        _until(lambda: row(bucket, "kept", 1), "the first write ingested")
        code, output = _cli("local", "down", "--json")
        assert code == 0 and json.loads(output)["state"] == str(state.resolve())
        assert (state / saved_state.STATE_FILE).is_file()
        # (a 0600 file in a 0700 folder, signed with a 0600 key: issue 34)
        assert stat.S_IMODE(state.stat().st_mode) == 0o700
        assert stat.S_IMODE((state / saved_state.STATE_FILE).stat().st_mode) == 0o600
        assert stat.S_IMODE(saved_state.key_path().stat().st_mode) == 0o600
        assert saved_state.key_path().is_relative_to(tmp_path)
        # WHEN local up loads it
        second = up()
        # THEN the same bucket, its object and its ledger row are back, on a new endpoint
        assert second["restored"] is True and second["buckets"] == first["buckets"]
        assert second["outputs"]["QueueUrl"].startswith(second["endpoint"])
        assert client(second).get_object(Bucket=bucket, Key="kept")["Body"].read() == b"one"
        assert row(bucket, "kept", 1)
        # AND the pipeline goes on from there: an overwrite is a newer change of that row
        client(second).put_object(Bucket=bucket, Key="kept", Body=b"two")
        after = _until(lambda: row(bucket, "kept", 2), "the overwrite ingested")
        assert after["ledger"]["last_reason"] == "newer-sequencer"
        code, _ = _cli("status", "--local", "--json")
        assert code == 0
    finally:
        for pid in started:
            if daemon.alive(pid):
                daemon.stop(tmp_path / daemon.RUN_DIR)
        assert not any(daemon.alive(pid) for pid in started)


@pytest.mark.slow
def test_a_processor_added_over_a_saved_state_is_brought_up_to_date(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # the state key's folder
    state = tmp_path / "rehearsal"
    sidecar = {"name": "sidecar", "module": "s3ingest_examples.sidecar:process"}
    audit = {"name": "audit", "handler": "s3ingest_examples.audit:handler"}
    started: list[int] = []

    def up(*context: str) -> dict[str, Any]:
        args = [arg for pair in context for arg in ("--context", pair)]
        code, output = _cli("local", "up", "--state", str(state), *args, "--json")
        assert code == 0, output
        info: dict[str, Any] = json.loads(output.splitlines()[-1])
        started.append(int(info["pid"]))
        return info

    def explained(bucket: str, key: str) -> dict[str, Any]:
        code, output = _cli("explain", bucket, key, "--local", "--json")
        assert code == 0, output
        found: dict[str, Any] = json.loads(output)
        return found

    try:
        # GIVEN a local stack running the sidecar, an object ingested, the state saved
        first = up(f"processors={json.dumps([sidecar])}")
        bucket = first["buckets"][0]
        s3 = boto3.client(
            "s3",
            endpoint_url=first["endpoint"],
            region_name=first["region"],
            **first["credentials"],
        )
        s3.put_object(Bucket=bucket, Key="kept.txt", Body=b"one")
        _until(
            lambda: (
                explained(bucket, "kept.txt")["effects"].get("sidecar", {}).get("status") == "done"
            ),
            "the sidecar ran",
        )
        code, output = _cli("local", "down", "--json")
        assert code == 0, output
        # WHEN it is brought up again with audit added (a deploy over the saved state)
        second = up(f"processors={json.dumps([sidecar, audit])}")
        assert second["restored"] is True
        assert second["outputs"]["ProcessorNames"] == "sidecar,audit"
        # THEN the existing key is behind audit alone, and a reprocess run brings it up to date
        effects = explained(bucket, "kept.txt")["effects"]
        assert effects["audit"]["behind"] is True and effects["sidecar"]["behind"] is False
        code, output = _cli("reprocess", "--local", "--processor", "audit", "--json")
        assert code == 0, output
        assert json.loads(output.splitlines()[-1])["counts"]["run"] == 1
        assert explained(bucket, "kept.txt")["effects"]["audit"]["behind"] is False
        code, _ = _cli("local", "down", "--json")
        assert code == 0
        # AND another setting over a saved state is refused before anything starts
        code, output = _cli("local", "up", "--state", str(state), "--context", "stage=other")
        assert code == 2 and "processors and hold only" in output
        # AND a hold alone is deployed over the saved processors
        third = up('hold={"prefixes": ["held/"]}')
        assert third["restored"] is True
        assert third["outputs"]["ProcessorNames"] == "sidecar,audit"
        s3 = boto3.client(
            "s3",
            endpoint_url=third["endpoint"],
            region_name=third["region"],
            **third["credentials"],
        )
        s3.put_object(Bucket=bucket, Key="held/new.txt", Body=b"wait")

        def held() -> list[str]:
            code, output = _cli("held", "--local", "--json")
            assert code == 0, output
            page = json.loads(output)
            return sorted(h["processor"] for h in page["held"] if h["key"] == "held/new.txt")

        assert _until(lambda: held() == ["audit", "sidecar"], "the new change held for both")
    finally:
        for pid in started:
            if daemon.alive(pid):
                daemon.stop(tmp_path / daemon.RUN_DIR)
        assert not any(daemon.alive(pid) for pid in started)


def test_local_up_refuses_a_processor_that_cannot_be_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a team's processor importing a package it did not declare
    monkeypatch.chdir(tmp_path)
    (tmp_path / "procs" / "team").mkdir(parents=True)
    (tmp_path / "procs" / "team" / "__init__.py").write_text("")
    (tmp_path / "procs" / "team" / "fx.py").write_text(
        "import not_a_declared_package\ndef run(change, content):\n    pass\n"
    )
    processors = json.dumps([{"name": "fx", "module": "team.fx:run"}])
    # WHEN local up deploys it
    code, output = _cli(
        "local",
        "up",
        "--context",
        f"processors={processors}",
        "--context",
        "processorPackageDir=procs",
    )
    # THEN a usage error naming the package and where to declare it, as synth's; nothing runs
    assert code == 2, output
    assert "No module named 'not_a_declared_package'" in output
    assert "requirements.txt in processorPackageDir" in output
    assert "Traceback" not in output
    with pytest.raises(daemon.LocalStackError):
        daemon.running(tmp_path / daemon.RUN_DIR)


def test_a_state_of_another_moto_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pickle

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    payload = pickle.dumps({"format": 2, "moto": "0.1"})
    mac = saved_state._mac(saved_state._key(create=True), "0.1", payload)
    header = json.dumps({"format": 2, "moto": "0.1", "hmac-sha256": mac}).encode()
    (tmp_path / saved_state.STATE_FILE).write_bytes(header + b"\n" + payload)
    with pytest.raises(saved_state.StateError, match=r"moto 0\.1"):
        saved_state.load(tmp_path)
    assert saved_state.load(tmp_path / "empty") is None


def test_local_without_a_running_stack_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for args in (
        ("status", "--local"),
        ("explain", "b", "k", "--local"),
        ("held", "--local"),
        ("approve", "b", "k", "--local"),
        ("reject", "b", "k", "--local"),
        ("redrive", "--local"),
        ("replay", "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-01T01:00:00Z", "--local"),
        ("repair", "k", "--local"),
        ("log-key", "k", "--local"),
        ("backfill", "status", "--local"),
    ):
        code, output = _cli(*args)
        assert code == 2, (args, output)
        assert "no local stack: run s3ingest local up" in output, (args, output)
    # AND the commands with a fresh local runtime of their own keep refusing the --stack options
    for args in (
        ("reconcile", "--local", "--bucket", "b"),
        ("backfill", "start", "--local", "--no-wait"),
    ):
        code, output = _cli(*args)
        assert code == 2 and "running local stack" in output, (args, output)
    code, output = _cli("local", "down")
    assert code == 1 and "no local stack" in output


def test_a_stale_run_file_is_not_a_running_stack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a run file naming a process that is not the daemon (this test's own pid)
    monkeypatch.chdir(tmp_path)
    (tmp_path / daemon.RUN_DIR).mkdir()
    (tmp_path / daemon.RUN_DIR / daemon.RUN_FILE).write_text(json.dumps({"pid": os.getpid()}))
    # THEN nothing runs, and local down signals no one
    assert daemon.probe(tmp_path / daemon.RUN_DIR)["running"] is False
    code, _ = _cli("local", "down")
    assert code == 1


def test_local_up_refuses_invalid_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, output = _cli("local", "up", "--context", "batchSize=zero")
    assert code == 2 and "batchSize" in output
    code, output = _cli("local", "up", "--context", "noequals")
    assert code == 2 and "key=value" in output
    assert not (tmp_path / daemon.RUN_DIR / daemon.RUN_FILE).exists()


def test_writes_by_any_client_emit_the_events_faithful_s3_builds(emulator: Any) -> None:
    # GIVEN a watched landing bucket, versioned, and a client of the emulator over HTTP
    rt = LocalRuntime(emulator, versioning="Enabled")
    faithful = rt.faithful
    outside_writes.watch(faithful)
    try:
        s3 = boto3.client(
            "s3",
            endpoint_url=emulator.endpoint_url,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        bucket = faithful.bucket
        # WHEN it puts, copies, completes a multipart upload and deletes (marker, then version)
        put = s3.put_object(Bucket=bucket, Key="a b+c", Body=b"abc")
        s3.copy_object(Bucket=bucket, Key="copy", CopySource={"Bucket": bucket, "Key": "a b+c"})
        upload = s3.create_multipart_upload(Bucket=bucket, Key="big")["UploadId"]
        part = s3.upload_part(Bucket=bucket, Key="big", UploadId=upload, PartNumber=1, Body=b"p")
        s3.complete_multipart_upload(
            Bucket=bucket,
            Key="big",
            UploadId=upload,
            MultipartUpload={"Parts": [{"ETag": part["ETag"], "PartNumber": 1}]},
        )
        marker = s3.delete_object(Bucket=bucket, Key="a b+c")
        s3.delete_object(Bucket=bucket, Key="a b+c", VersionId=put["VersionId"])
        events = faithful.take_pending()
    finally:
        outside_writes.unwatch(faithful.bucket)
        rt.close()
    # THEN one S3-faithful event per write, in write order, with increasing sequencers
    details = [e["detail"] for e in events]
    assert [d["reason"] for d in details] == [
        "PutObject",
        "CopyObject",
        "CompleteMultipartUpload",
        "DeleteObject",
        "DeleteObject",
    ]
    assert details[0]["object"] == {
        "key": "a+b%2Bc",
        "size": 3,
        "etag": put["ETag"].strip('"'),
        "version-id": put["VersionId"],
        "sequencer": details[0]["object"]["sequencer"],
    }
    assert details[3]["deletion-type"] == "Delete Marker Created"
    assert details[3]["object"]["version-id"] == marker["VersionId"]
    assert details[4]["deletion-type"] == "Permanently Deleted"
    assert details[4]["object"]["version-id"] == put["VersionId"]
    seqs = [d["object"]["sequencer"] for d in details]
    assert sorted(seqs, key=lambda s: s.ljust(32, "0")) == seqs and len(set(seqs)) == len(seqs)
    # AND an unwatched bucket's writes record nothing
    s3.put_object(Bucket=bucket, Key="after", Body=b"x")
    assert faithful.take_pending() == []
