"""Completeness attestations (issue 38): the ``attest`` scenario step over the local runtime,
``attest verify`` of the stored document, and an input gone."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from s3ingest.commands.attest import load_document, verify_document
from s3ingest.local.rehearsal.scenario import run_scenario


def _run(emulator: Any, tmp_path: Path, lines: list[dict[str, Any]]) -> dict[str, Any]:
    path = tmp_path / "scenario.jsonl"
    bucket = {"bucket": f"attest-{uuid.uuid4().hex[:10]}", "versioning": "Enabled"}
    path.write_text("\n".join(json.dumps(x) for x in [bucket, *lines]) + "\n", encoding="utf-8")
    result: dict[str, Any] = run_scenario(path, emulator=emulator)
    assert result["error"] is None, result["error"]
    return result


def test_a_converged_scenario_attests_equal_roots(emulator: Any, tmp_path: Path) -> None:
    # GIVEN puts, an overwrite and a delete, every event delivered
    result = _run(
        emulator,
        tmp_path,
        [
            {"op": "put", "key": "a.txt", "body": "one"},
            {"op": "put", "key": "b é.txt", "body": "two"},
            {"op": "put", "key": "a.txt", "body": "three"},
            {"op": "put", "key": "gone.txt", "body": "x"},
            {"op": "delete", "key": "gone.txt"},
            {"op": "flush"},
            {"op": "attest", "source": "listing"},
            {"op": "attest", "source": "listing"},
            {"op": "attest", "source": "inventory"},
        ],
    )
    # THEN each attestation's roots are equal, over the two visible keys, and verified
    first, second, inventory = result["attestations"]
    for made in (first, second, inventory):
        doc = made["document"]
        assert doc["equal"] is True
        assert doc["roots"]["bucket"] == doc["roots"]["ledger"]
        assert doc["counts"]["keys"] == 2 and doc["differences"] == []
        assert made["verified"]["match"] is True, made["verified"]
    # the same snapshot's state attested twice: byte-identical roots
    assert first["document"]["roots"] == second["document"]["roots"]
    assert inventory["document"]["roots"] == first["document"]["roots"]
    assert inventory["document"]["inputs"]["bucket"]["manifest_checksum"]
    assert [c["status"] for c in inventory["verified"]["checks"]] == [
        "match",
        "match",
        "not kept",
    ]
    assert result["converged"] is True


def test_a_dropped_event_attests_different_roots_naming_its_key(
    emulator: Any, tmp_path: Path
) -> None:
    # GIVEN one put delivered and one whose event is dropped, no reconciliation after
    result = _run(
        emulator,
        tmp_path,
        [
            {"op": "put", "key": "kept.txt", "body": "one"},
            {"op": "flush"},
            {"op": "put", "key": "lost.txt", "body": "two"},
            {"op": "flush", "chaos": {"seed": 1, "drop": 1.0}},
            {"op": "attest", "source": "listing"},
        ],
    )
    (made,) = result["attestations"]
    doc = made["document"]
    # THEN the roots differ and the tree's path names the dropped key, and only it
    assert doc["equal"] is False
    assert doc["roots"]["bucket"] != doc["roots"]["ledger"]
    assert [d["key"] for d in doc["differences"]] == ["lost.txt"]
    assert doc["differences"][0]["path"] == [1]  # the second of two leaves
    assert doc["counts"] == {
        "keys": 2,
        "bucket_present": 2,
        "ledger_present": 1,
        "skipped_recent": 0,
        "differing": 1,
    }
    # the document still verifies: it states what was, roots differing included
    assert made["verified"]["match"] is True


def test_verify_says_which_input_is_gone(emulator: Any, tmp_path: Path) -> None:
    result = _run(
        emulator,
        tmp_path,
        [{"op": "put", "key": "a.txt", "body": "one"}, {"op": "flush"}, {"op": "attest"}],
    )
    saved = tmp_path / "attestation.json"
    saved.write_text(json.dumps(result["attestations"][0]))
    doc = load_document(saved.read_text())
    s3 = emulator.client("s3")
    leaves = doc["inputs"]["leaves"]
    assert verify_document(doc, s3)["match"] is True
    # WHEN the leaves file is deleted (its version, in a bucket with versioning)
    version = {"VersionId": leaves["version_id"]} if leaves["version_id"] else {}
    s3.delete_object(Bucket=leaves["bucket"], Key=leaves["key"], **version)
    # THEN verify names it
    found = verify_document(doc, s3)
    assert found["match"] is False and found["gone"] == ["leaves"]
    # and a tampered document does not match
    doc["roots"]["ledger"] = "00" * 32
    assert verify_document(doc, s3)["match"] is False


def test_a_document_that_is_not_an_attestation_is_refused() -> None:
    with pytest.raises(ValueError, match="not an s3ingest attestation"):
        load_document(json.dumps({"roots": {}}))


def test_a_raised_processor_version_attests_the_keys_behind_it(
    emulator: Any, tmp_path: Path
) -> None:
    # GIVEN two keys processed by the sidecar at version 1, then its version raised to 2 and
    # an audit processor added that only concerns reports/
    sidecar = {"name": "sidecar", "handler": "s3ingest_examples.sidecar:handler", "mode": "latest"}
    audit = {
        "name": "audit",
        "handler": "s3ingest_examples.audit:handler",
        "mode": "every-change",
        "prefixes": ["reports/"],
    }
    path = tmp_path / "scenario.jsonl"
    lines = [
        {
            "bucket": f"attest-{uuid.uuid4().hex[:10]}",
            "versioning": "Enabled",
            "processors": [sidecar],
        },
        {"op": "put", "key": "reports/a.csv", "body": "a"},
        {"op": "put", "key": "notes/b.txt", "body": "b"},
        {"op": "flush"},
        {"op": "attest"},
        {"op": "configure", "processors": [{**sidecar, "version": 2}, audit]},
        {"op": "attest", "processors": ["sidecar"]},
        {"op": "attest", "processors": ["audit"]},
        {"op": "reprocess", "processor": "sidecar"},
        {"op": "reprocess", "processor": "audit"},
        {"op": "attest"},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    result = run_scenario(path, emulator=emulator)
    assert result["error"] is None, result["error"]
    before, sidecar_v2, audit_added, after = (a["document"] for a in result["attestations"])
    # THEN at version 1 the roots are equal; once raised, both keys are behind the sidecar
    assert before["equal"] and before["processors"][0]["version"] == 1
    assert not sidecar_v2["equal"]
    assert [d["key"] for d in sidecar_v2["differences"]] == ["notes/b.txt", "reports/a.csv"]
    # the audit processor is owed only the key its filter concerns
    assert [d["key"] for d in audit_added["differences"]] == ["reports/a.csv"]
    # after the reprocess runs both processors are done at their versions: equal roots
    assert after["equal"], after["differences"]
    assert [(p["name"], p["version"]) for p in after["processors"]] == [
        ("audit", 1),
        ("sidecar", 2),
    ]


def test_verify_names_an_inventory_report_gone(emulator: Any, tmp_path: Path) -> None:
    result = _run(
        emulator,
        tmp_path,
        [
            {"op": "put", "key": "a.txt", "body": "one"},
            {"op": "flush"},
            {"op": "attest", "source": "inventory"},
        ],
    )
    doc = result["attestations"][0]["document"]
    report = doc["inputs"]["bucket"]
    s3 = emulator.client("s3")
    # WHEN the report's manifest expires
    s3.delete_object(Bucket=report["inventory_bucket"], Key=report["manifest"])
    # THEN the leaves still match, and the report is named gone
    found = verify_document(doc, s3)
    assert found["match"] is False and found["gone"] == ["bucket"]
    assert found["checks"][0]["status"] == "match"


def test_a_locked_attestation_outlives_a_delete_until_its_retention(
    emulator: Any, tmp_path: Path
) -> None:
    """``attestationRetentionDays``: the documents and leaves in the stack's Attestations
    bucket under S3 Object Lock, compliance mode (moto keeps the lock and refuses the delete
    of a locked version, as S3 does)."""
    from datetime import UTC, datetime, timedelta

    from botocore.exceptions import ClientError

    from s3ingest.local.stack.runtime import local_settings

    path = tmp_path / "scenario.jsonl"
    lines = [
        {"bucket": f"attest-{uuid.uuid4().hex[:10]}", "versioning": "Enabled"},
        {"op": "put", "key": "a.txt", "body": "one"},
        {"op": "flush"},
        {"op": "attest"},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    settings = local_settings(attestation_retention_days=30)
    result = run_scenario(path, settings=settings, emulator=emulator)
    assert result["error"] is None, result["error"]
    (made,) = result["attestations"]
    assert made["verified"]["match"] is True
    s3 = emulator.client("s3")
    leaves = made["document"]["inputs"]["leaves"]
    for where in (made["location"], leaves):
        assert where["bucket"].startswith("s3ingest-attestations-")
        version = {"Bucket": where["bucket"], "Key": where["key"], "VersionId": where["version_id"]}
        head = s3.head_object(**version)
        assert head["ObjectLockMode"] == "COMPLIANCE"
        left = head["ObjectLockRetainUntilDate"] - datetime.now(UTC)
        assert timedelta(days=29) < left <= timedelta(days=30)
        with pytest.raises(ClientError) as refused:
            s3.delete_object(**version)
        assert refused.value.response["Error"]["Code"] == "AccessDenied"
    assert verify_document(made["document"], s3)["match"] is True
