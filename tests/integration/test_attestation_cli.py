"""``s3ingest attest`` and ``s3ingest attest verify`` (issue 38): usage errors before any AWS
call, and both on the stack ``s3ingest local up`` runs (exit codes as docs/attestation.md
says)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from typer.testing import CliRunner

from s3ingest.cli import app
from s3ingest.local.stack import daemon


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    return result.exit_code, result.output


def test_a_manifest_needs_the_inventory_source() -> None:
    code, output = _cli("attest", "--manifest", "m.json", "--local")
    assert code == 2 and "--manifest needs --source inventory" in " ".join(output.split())


def test_verify_refuses_a_file_that_is_not_an_attestation(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"roots": {}}))
    code, output = _cli("attest", "verify", str(path), "--local")
    assert code == 2 and "not an s3ingest attestation document" in " ".join(output.split())


@pytest.fixture
def local_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """``s3ingest local up --json`` in a fresh directory; its daemon stopped at the end."""
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


@pytest.mark.slow
def test_attest_and_verify_on_the_local_stack(local_stack: dict[str, Any], tmp_path: Path) -> None:
    info = local_stack
    kwargs = {"endpoint_url": info["endpoint"], "region_name": info["region"]}
    s3 = boto3.client("s3", **kwargs, **info["credentials"])
    bucket = info["buckets"][0]
    s3.put_object(Bucket=bucket, Key="in/a.csv", Body=b"one")
    # GIVEN the put ingested and its effects done (the ledger says so: an attestation taken while
    # the row is written leaves the key out of both sides, as changed after its snapshot)
    end = time.monotonic() + 90
    while True:
        code, output = _cli("explain", bucket, "in/a.csv", "--local", "--json")
        assert code == 0, output
        seen = json.loads(output)
        effects = seen.get("effects") or {}
        if seen["agrees"] and all(e["status"] == "done" for e in effects.values()):
            break
        assert time.monotonic() < end, output
        time.sleep(0.5)
    code, output = _cli("attest", "--local", "--margin-seconds", "0", "--json")
    assert code == 0, output
    made = json.loads(output)
    assert made["document"]["equal"] and made["document"]["counts"]["keys"] == 1
    saved = tmp_path / "attestation.json"
    saved.write_text(output)
    # WHEN verified while its inputs exist: match, exit code 0
    code, output = _cli("attest", "verify", str(saved), "--local", "--json")
    assert code == 0 and json.loads(output)["match"] is True, output
    # WHEN its leaves are gone: exit code 1, the input named
    leaves = made["document"]["inputs"]["leaves"]
    version = {"VersionId": leaves["version_id"]} if leaves["version_id"] else {}
    s3.delete_object(Bucket=leaves["bucket"], Key=leaves["key"], **version)
    code, output = _cli("attest", "verify", str(saved), "--local")
    assert code == 1 and "gone" in output and "leaves" in output
    # AND a processor the stack does not run is a usage error
    code, output = _cli("attest", "--local", "--processor", "no-such", "--json")
    assert code == 2 and "not configured" in output
