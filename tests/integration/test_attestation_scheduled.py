"""The scheduled reconciliation's attestation (issue 38 item 3): the reconcile handler attests
each bucket after its repairs, stores the document under ``attestations/<bucket>/``, logs and
publishes its SHA-256 and counts the buckets whose roots differ (``attestation_differs``)."""

from __future__ import annotations

import hashlib
import json
import logging
import sys
from collections.abc import Sequence
from typing import Any

import pytest

from s3ingest.local.emulator.chaos import Chaos
from s3ingest.local.stack.runtime import LocalRuntime
from s3ingest_fn.core.ports import ChangeEntry, PublishOutcome


class Context:
    function_name = "reconcile"
    memory_limit_in_mb = 3008
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:reconcile"
    aws_request_id = "req-1"


class Recorder:
    def __init__(self) -> None:
        self.entries: list[ChangeEntry] = []

    def publish(self, entries: Sequence[ChangeEntry]) -> PublishOutcome:
        self.entries.extend(entries)
        return PublishOutcome(refused={}, stopped=None)


def _lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def _run(
    emulator: Any, monkeypatch: pytest.MonkeyPatch, *, repairs_applied: bool
) -> tuple[LocalRuntime, Recorder, dict[str, Any]]:
    """A deployment whose one event was lost, reconciled by the scheduled handler (the repairs
    drained before the attestation when ``repairs_applied``)."""
    rt = LocalRuntime(emulator, versioning="Enabled")
    rt.faithful.put("kept", "1")
    rt.flush(Chaos(seed=0))
    rt.drain()
    rt.faithful.put("lost", "2")
    rt.faithful.take_pending()  # lost
    rt.write_inventory()
    for name, value in {
        "AWS_ENDPOINT_URL": emulator.endpoint_url,
        "LEDGER_TABLE_NAME": rt.resources.table,
        "INGEST_QUEUE_URL": rt.resources.queue_url,
        "BUCKET_NAME": rt.resources.bucket,
        "INVENTORY_BUCKET_NAME": rt.resources.inventory_bucket,
        "INVENTORY_PREFIX": f"inventory/{rt.resources.bucket}/s3ingest-daily/",
        "ATTESTATION_BUCKET_NAME": rt.resources.inventory_bucket,
        "CHANGE_BUS_NAME": "changes",
        "S3INGEST_STACK": "S3Ingest-test",
        "POWERTOOLS_METRICS_DISABLED": "false",
    }.items():
        monkeypatch.setenv(name, value)
    from s3ingest_fn import wiring
    from s3ingest_fn.handlers import reconcile
    from s3ingest_fn.services import attestation_store

    wiring.function_reconciler.cache_clear()
    recorder = Recorder()
    monkeypatch.setattr(wiring, "function_change_publisher", lambda: recorder)

    def settle(depth: Any) -> bool:
        assert depth() >= 1  # the repair is in the ingest queue
        if repairs_applied:
            rt.drain()  # the ingest function takes the repair
        return repairs_applied

    monkeypatch.setattr(attestation_store, "settle", settle)
    # The handler's Powertools logger writes to the stream it was made with (the sys.stdout of
    # whichever test imported the handler first): this test's captured stdout for its run.
    for handler in logging.getLogger(reconcile.logger.name).handlers:
        if isinstance(handler, logging.StreamHandler):
            monkeypatch.setattr(handler, "stream", sys.stdout)
    event = {"source": "inventory", "marginSeconds": 0, "attest": True}
    summary = reconcile.handler(event, Context())
    assert summary["repairs_queued"] == 1
    return rt, recorder, summary


def _stored(rt: LocalRuntime) -> tuple[str, bytes]:
    s3 = rt.emu.client("s3")
    prefix = f"attestations/{rt.resources.bucket}/"
    listed = s3.list_objects_v2(Bucket=rt.resources.inventory_bucket, Prefix=prefix)
    keys = [o["Key"] for o in listed.get("Contents", ()) if o["Key"].endswith(".json")]
    assert len(keys) == 1, keys
    body = s3.get_object(Bucket=rt.resources.inventory_bucket, Key=keys[0])["Body"].read()
    return keys[0], body


def _differs(out: str) -> list[Any]:
    return [d["attestation_differs"] for d in _lines(out) if "attestation_differs" in d]


def test_the_scheduled_run_attests_equal_roots_after_its_repairs(
    emulator: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rt, recorder, _ = _run(emulator, monkeypatch, repairs_applied=True)
    key, body = _stored(rt)
    document = json.loads(body)
    assert document["equal"] is True and document["stack"] == "S3Ingest-test"
    # the repaired key changed after the inventory's snapshot: left out, as reconciliation does
    assert (document["counts"]["keys"], document["counts"]["skipped_recent"]) == (1, 1)
    sha = hashlib.sha256(body).hexdigest()
    out = capsys.readouterr().out
    # THEN its SHA-256 is in the log and on the change bus; no bucket's roots differ
    made = [d for d in _lines(out) if d.get("message") == "attestation made"]
    assert [d["attestation_sha256"] for d in made] == [sha]
    assert [e["DetailType"] for e in recorder.entries] == ["Attestation Made"]
    detail = json.loads(recorder.entries[0]["Detail"])
    assert detail["document_sha256"] == sha and detail["location"]["key"] == key
    assert detail["equal"] is True
    assert _differs(out) in ([0], [[0]], [0.0])


def test_the_scheduled_run_counts_a_bucket_whose_roots_still_differ(
    emulator: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rt, recorder, _ = _run(emulator, monkeypatch, repairs_applied=False)
    _, body = _stored(rt)
    document = json.loads(body)
    assert document["equal"] is False
    assert [d["key"] for d in document["differences"]] == ["lost"]
    assert json.loads(recorder.entries[0]["Detail"])["equal"] is False
    assert _differs(capsys.readouterr().out) in ([1], [[1]], [1.0])


def test_the_local_schedule_attests_every_bucket_after_draining_its_repairs(
    emulator: Any,
) -> None:
    # GIVEN a local deployment whose one event was lost
    rt = LocalRuntime(emulator, versioning="Enabled")
    rt.faithful.put("kept", "1")
    rt.flush(Chaos(seed=0))
    rt.drain()
    rt.faithful.put("lost", "2")
    rt.faithful.take_pending()
    # WHEN reconciled as the schedule does (its repairs drained)
    summary = rt.reconcile_every_bucket("listing")
    assert summary["repairs_queued"] == 1
    # THEN the bucket's attestation, made after the repairs, has equal roots over both keys
    _, body = _stored(rt)
    document = json.loads(body)
    assert document["equal"] is True and document["counts"]["keys"] == 2
    # and attestation_differs (0) is in the emulator's CloudWatch, as the function emits it
    listed = rt.emu.client("cloudwatch").list_metrics(MetricName="attestation_differs")
    stacks = {
        d["Value"] for m in listed["Metrics"] for d in m["Dimensions"] if d["Name"] == "stack"
    }
    assert rt.metrics_stack in stacks


def test_the_local_stacks_bucket_is_versioned_and_records_the_documents_versions(
    emulator: Any,
) -> None:
    # GIVEN a local deployment (its bucket versioned, as the stack's)
    rt = LocalRuntime(emulator)
    s3 = rt.emu.client("s3")
    versioning = s3.get_bucket_versioning(Bucket=rt.resources.inventory_bucket)
    assert versioning.get("Status") == "Enabled"
    rt.faithful.put("kept", "1")
    rt.flush(Chaos(seed=0))
    rt.drain()
    # WHEN the schedule attests
    rt.reconcile_every_bucket("listing")
    key, _ = _stored(rt)
    document = json.loads(
        s3.get_object(Bucket=rt.resources.inventory_bucket, Key=key)["Body"].read()
    )
    # THEN the leaves' version id is recorded, and a deleted document keeps its version
    assert document["inputs"]["leaves"]["version_id"]
    s3.delete_object(Bucket=rt.resources.inventory_bucket, Key=key)
    versions = s3.list_object_versions(Bucket=rt.resources.inventory_bucket, Prefix=key)
    assert [v["Key"] for v in versions.get("Versions", [])] == [key]


def test_the_scheduled_attestation_reads_the_report_and_the_ledger_once(
    emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN every AWS request of the process counted (the setup's, the run's, the attestation's)
    from botocore.client import BaseClient

    calls: list[tuple[str, dict[str, Any]]] = []
    make = BaseClient._make_api_call  # type: ignore[attr-defined]

    def counting(self: Any, operation: str, params: dict[str, Any]) -> Any:
        calls.append((operation, dict(params)))
        return make(self, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", counting)
    from s3ingest_fn.handlers import reconcile

    started = [0]
    handler = reconcile.handler

    def marked(event: dict[str, Any], context: Any) -> Any:
        started[0] = len(calls)  # the setup's requests before
        return handler(event, context)

    monkeypatch.setattr(reconcile, "handler", marked)
    # WHEN the scheduled run reconciles from its inventory and attests after its repairs
    rt, _, _ = _run(emulator, monkeypatch, repairs_applied=True)
    document = json.loads(_stored(rt)[1])
    assert document["equal"] is True
    # THEN the ledger was scanned once (one first page a segment), each of the report's
    # objects read once, and the one repaired key's row read again alone
    table, store = rt.resources.table, rt.resources.inventory_bucket
    run = calls[started[0] :]
    scans = [p for op, p in run if op == "Scan" and p.get("TableName") == table]
    first_pages = [p["Segment"] for p in scans if "ExclusiveStartKey" not in p]
    assert sorted(first_pages) == list(range(scans[0]["TotalSegments"]))
    reads = [
        p["Key"]
        for op, p in run
        if op == "GetObject" and p["Bucket"] == store and p["Key"].startswith("inventory/")
    ]
    assert reads and len(reads) == len(set(reads)), reads
    # and the landing bucket was not listed (by the run or its attestation)
    landing = rt.resources.bucket
    assert not [
        op
        for op, p in calls[started[0] :]
        if op.startswith("ListObject") and p.get("Bucket") == landing
    ]


def test_the_local_schedule_attests_an_inventory_run_from_its_own_pass(emulator: Any) -> None:
    # GIVEN a local deployment whose one event was lost
    rt = LocalRuntime(emulator, versioning="Enabled")
    rt.faithful.put("kept", "1")
    rt.flush(Chaos(seed=0))
    rt.drain()
    rt.faithful.put("lost", "2")
    rt.faithful.take_pending()
    # WHEN reconciled from an inventory as the schedule does (its repairs drained)
    summary = rt.reconcile_every_bucket("inventory")
    assert summary["repairs_queued"] == 1
    # THEN the attestation is the run's pass's: the report it read named, the repaired key's
    # row (written after the report) skipped, the other key attested equal
    _, body = _stored(rt)
    document = json.loads(body)
    assert document["snapshot"]["source"] == "inventory"
    assert document["inputs"]["bucket"]["manifest"].endswith("manifest.json")
    assert document["equal"] is True
    assert (document["counts"]["keys"], document["counts"]["skipped_recent"]) == (1, 1)
