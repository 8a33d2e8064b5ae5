"""``s3ingest attest verify FILE`` without --stack or --local (issue 38): an auditor's run with
the default AWS credentials chain reads the inputs the document names, no stack needed."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from typer.testing import CliRunner

from s3ingest.cli import app
from s3ingest_fn.services.attestation import recompute

BUCKET = "auditor-attestations"
LEAVES_KEY = "attestations/landing/20261207T000000000Z.leaves.jsonl"


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """moto's S3 behind the default credentials chain (the environment's keys, no stack)."""
    monkeypatch.delenv("S3INGEST_STACK", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        yield client


def _document(leaves: bytes) -> dict[str, Any]:
    side = {"version_id": "", "etag": "e1", "state": "present", "processors": {}}
    assert json.loads(leaves)["bucket"] == side
    doc: dict[str, Any] = {
        "attestation": "s3ingest-attestation/1",
        "bucket": "landing",
        "prefix": "",
        "processors": [],
        "fields": ["etag", "version_id"],
        "inputs": {
            "bucket": {"kind": "listing"},
            "ledger": {"kind": "ledger-scan"},
            "leaves": {
                "bucket": BUCKET,
                "key": LEAVES_KEY,
                "version_id": None,
                "sha256": hashlib.sha256(leaves).hexdigest(),
                "bytes": len(leaves),
            },
        },
        "roots": {},
    }
    doc["roots"] = recompute(doc, leaves)["roots"]
    return doc


def _leaves() -> bytes:
    side = {"version_id": "", "etag": "e1", "state": "present", "processors": {}}
    return (json.dumps({"key": "a.csv", "bucket": side, "ledger": side}) + "\n").encode()


def test_verify_without_a_stack_reads_the_inputs_with_the_default_credentials(
    s3: Any, tmp_path: Path
) -> None:
    leaves = _leaves()
    s3.put_object(Bucket=BUCKET, Key=LEAVES_KEY, Body=leaves)
    saved = tmp_path / "attestation.json"
    saved.write_text(json.dumps(_document(leaves)))
    # WHEN an auditor verifies it with neither --stack nor --local: match, exit code 0
    result = CliRunner().invoke(app, ["attest", "verify", str(saved), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["match"] is True
    # WHEN the leaves are gone: exit code 1, the input named
    s3.delete_object(Bucket=BUCKET, Key=LEAVES_KEY)
    result = CliRunner().invoke(app, ["attest", "verify", str(saved), "--json"])
    assert result.exit_code == 1, result.output
    assert json.loads(result.output)["gone"] == ["leaves"]
