"""Reconciliation, the backfill report and the change relay over their ports: the services on
the in-memory fakes (``tests/fakes``), and the adapters that stand behind the ports with
botocore Stubber (the exact requests, and how AWS errors are classified)."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from s3ingest_fn.adapters.inventory import S3InventoryStore
from s3ingest_fn.adapters.s3_objects import S3Listing
from s3ingest_fn.adapters.sqs import SqsRepairQueue
from s3ingest_fn.core.model import InventoryRow, TransientError
from s3ingest_fn.core.row import LedgerRow
from s3ingest_fn.services.backfill_control import read_report
from s3ingest_fn.services.changes import publish
from s3ingest_fn.services.reconcile import ReconcileError, Reconciler, ReconcileRequest
from tests.fakes import (
    FakeBucket,
    FakeBucketListing,
    FakeChangePublisher,
    FakeInventoryStore,
    FakeLedger,
    FakeLedgerScanner,
    FakeRepairQueue,
)
from tests.unit.test_changes import _record

BUCKET = "bkt"
INVENTORY = "inv"
PREFIX = f"inventory/{BUCKET}/s3ingest-daily/"


def _listed(key: str, version: str, etag: str) -> InventoryRow:
    return InventoryRow(
        bucket=BUCKET,
        key=key,
        version_id=version,
        is_latest=True,
        is_delete_marker=False,
        etag=etag,
        size=1,
        last_modified_ms=1,
    )


def _reconciler(
    listing: FakeBucketListing, repairs: FakeRepairQueue, store: FakeInventoryStore | None = None
) -> Reconciler:
    """A bucket holding ``a`` and ``b``, a ledger holding ``a`` (in step) and ``c`` (gone from
    the bucket)."""
    ledger = FakeLedger()
    for key in ("a", "c"):
        ledger.rows[(BUCKET, key)] = LedgerRow(
            bucket=BUCKET, key=key, present=True, version_id="v1", etag="e1", updated_at=1
        )
    bucket = FakeBucket()
    bucket.put(BUCKET, "a", "v1", "e1")
    bucket.put(BUCKET, "b", "v1", "e1")
    return Reconciler(
        objects=bucket,
        listing=listing,
        inventory=store or FakeInventoryStore(),
        repairs=repairs,
        scanner=FakeLedgerScanner(ledger),
        bucket=BUCKET,
        table="ledger",
        queue_url="https://sqs/ingest",
        inventory_bucket=INVENTORY,
        inventory_prefix=PREFIX,
        clock=lambda: 1000.0,
    )


LISTED = [_listed("a", "v1", "e1"), _listed("b", "v1", "e1")]


@pytest.mark.contract("C12")
def test_a_listing_run_sends_one_repair_per_confirmed_difference() -> None:
    repairs = FakeRepairQueue()
    report = _reconciler(FakeBucketListing(LISTED), repairs).run(
        ReconcileRequest(source="listing", margin_ms=0)
    )
    assert report.drift == {
        "missing": 1,
        "deleted_but_live": 1,
        "content_mismatch": 0,
        "sequencer_contradicted": 0,
    }
    assert report.repairs_queued == 2
    sent = sorted((json.loads(b)["s3ingestRepair"] for b in repairs.sent), key=lambda r: r["key"])
    assert [(r["bucket"], r["key"], r["reason"]) for r in sent] == [
        (BUCKET, "b", "missing"),
        (BUCKET, "c", "deleted_but_live"),
    ]
    assert all(len(r["run"]) == 32 for r in sent)


def test_a_refused_repair_fails_the_run_naming_what_was_sent() -> None:
    reconciler = _reconciler(FakeBucketListing(LISTED), FakeRepairQueue(refuse_after=1))
    with pytest.raises(ReconcileError, match=r"^queueing repairs failed after 1: refused$"):
        reconciler.run(ReconcileRequest(source="listing", margin_ms=0))


def test_a_listing_failure_is_a_reconcile_error() -> None:
    reconciler = _reconciler(FakeBucketListing(fail=True), FakeRepairQueue())
    with pytest.raises(ReconcileError, match=r"reading the bucket's state failed: .*AccessDenied"):
        reconciler.run(ReconcileRequest(source="listing"))


def test_the_newest_complete_report_is_chosen() -> None:
    store = FakeInventoryStore()
    for folder in ("2026-01-01T01-00Z", "2026-01-02T01-00Z", "2026-01-03T01-00Z", "hive"):
        for name in ("manifest.json", "manifest.checksum"):
            store.put(INVENTORY, f"{PREFIX}{folder}/{name}", b"{}")
    # the newest is still being written: its checksum cannot be read yet
    store.unreadable.add((INVENTORY, f"{PREFIX}2026-01-03T01-00Z/manifest.checksum"))
    reconciler = _reconciler(FakeBucketListing(), FakeRepairQueue(), store)
    assert reconciler.newest_manifest() == f"{PREFIX}2026-01-02T01-00Z/manifest.json"
    store.objects.clear()
    with pytest.raises(ReconcileError, match="no inventory report"):
        reconciler.newest_manifest()


def test_without_a_report_a_backfill_names_its_own_ways_forward() -> None:
    # GIVEN no inventory report yet (issue 36: the backfill's cause named reconcile's option)
    from s3ingest_fn.services.backfill_control import BACKFILL_INSTEAD

    reconciler = _reconciler(FakeBucketListing(), FakeRepairQueue(), FakeInventoryStore())
    # THEN the backfill's error names backfill start --manifest and onboard, not --source
    with pytest.raises(ReconcileError) as raised:
        reconciler.newest_manifest(BACKFILL_INSTEAD)
    assert "backfill start --manifest KEY" in str(raised.value)
    assert "s3ingest onboard" in str(raised.value)
    assert "--source" not in str(raised.value)


@pytest.mark.contract("C13")
def test_the_backfill_report_counts_failed_tasks_only() -> None:
    store = FakeInventoryStore()
    assert read_report(store, "reports", "j1") == {
        "reportManifest": None,
        "failed": 0,
        "errors": {},
        "samples": [],
    }
    manifest = {
        "Results": [
            {"TaskExecutionStatus": "succeeded", "Bucket": "reports", "Key": "ok.csv"},
            {"TaskExecutionStatus": "failed", "Bucket": "reports", "Key": "failed.csv"},
        ]
    }
    store.put("reports", "backfill-reports/job-j1/manifest.json", json.dumps(manifest).encode())
    store.put(
        "reports",
        "failed.csv",
        b"bkt,a,,failed,PermanentFailure,200,x\nbkt,b,,failed,TemporaryFailure,200,y\n\n",
    )
    report = read_report(store, "reports", "j1", sample=1)
    assert report["reportManifest"] == "backfill-reports/job-j1/manifest.json"
    assert report["failed"] == 2
    assert report["errors"] == {"PermanentFailure": 1, "TemporaryFailure": 1}
    assert report["samples"] == [
        {
            "Bucket": "bkt",
            "Key": "a",
            "VersionId": "",
            "TaskStatus": "failed",
            "ErrorCode": "PermanentFailure",
            "HTTPStatusCode": "200",
            "ResultMessage": "x",
        }
    ]


@pytest.mark.contract("C11")
def test_publishing_stops_at_the_first_entry_the_bus_refused() -> None:
    publisher = FakeChangePublisher(accept=1)
    published, failed, _ = publish(
        publisher, "bus", [_record("1"), _record("2", op="commit"), _record("3")]
    )
    assert failed == "3"  # the commit is no change; the third record's entry was refused
    assert [json.loads(e["Detail"])["id"] for e in published] == ["id-1"]
    assert publisher.published == published


# -- the adapters behind the ports --------------------------------------------------------------


_CREDENTIALS: dict[str, Any] = {
    "region_name": "us-east-1",
    "aws_access_key_id": "x",
    "aws_secret_access_key": "x",
}


def _sqs() -> Any:
    return boto3.client("sqs", **_CREDENTIALS)


def _s3() -> Any:
    return boto3.client("s3", **_CREDENTIALS)


@pytest.mark.contract("C12")
def test_repairs_go_ten_per_send_message_batch_in_order() -> None:
    sqs = _sqs()
    bodies = [f"body-{i}" for i in range(12)]
    with Stubber(sqs) as stub:
        for chunk in (bodies[:10], bodies[10:]):
            stub.add_response(
                "send_message_batch",
                {"Successful": [], "Failed": []},
                {
                    "QueueUrl": "q",
                    "Entries": [{"Id": str(j), "MessageBody": b} for j, b in enumerate(chunk)],
                },
            )
        assert SqsRepairQueue(sqs, "q").send(bodies) == 12
        stub.assert_no_pending_responses()


def test_a_refused_repair_batch_is_a_transient_error() -> None:
    sqs = _sqs()
    failed = [{"Id": "1", "SenderFault": False, "Code": "InternalError"}]
    with Stubber(sqs) as stub:
        stub.add_response("send_message_batch", {"Successful": [], "Failed": failed})
        with pytest.raises(TransientError, match=r"^SQS refused repairs: "):
            SqsRepairQueue(sqs, "q").send(["a", "b"])
        stub.add_response("send_message_batch", {"Successful": [], "Failed": []})
        stub.add_client_error("send_message_batch", "AWS.SimpleQueueService.Throttled")
        with pytest.raises(TransientError, match=r"^queueing repairs failed after 10: "):
            SqsRepairQueue(sqs, "q").send(["x"] * 11)


def test_the_inventory_store_classifies_s3_answers() -> None:
    s3 = _s3()
    store = S3InventoryStore(s3)
    with Stubber(s3) as stub:
        stub.add_client_error("get_object", "NoSuchKey", http_status_code=404)
        assert store.read_if_exists("b", "k") is None
        stub.add_client_error("get_object", "AccessDenied", http_status_code=403)
        with pytest.raises(TransientError, match="AccessDenied"):
            store.read_if_exists("b", "k")
        stub.add_client_error("head_object", "403", http_status_code=403)
        assert store.exists("b", "k") is False  # a report still being written
        stub.add_response("head_object", {"ETag": '"0123abcd"'}, {"Bucket": "b", "Key": "k"})
        assert store.etag("b", "k") == "0123abcd"
        stub.add_response(
            "list_objects_v2",
            {"CommonPrefixes": [{"Prefix": "p/2026-01-01/"}, {"Prefix": "p/hive/"}]},
            {"Bucket": "b", "Prefix": "p/", "Delimiter": "/"},
        )
        assert store.folders("b", "p/") == ["p/2026-01-01/", "p/hive/"]


def test_a_listing_refused_by_s3_is_a_transient_error() -> None:
    s3 = _s3()
    with Stubber(s3) as stub:
        stub.add_client_error("get_bucket_versioning", "AccessDenied", http_status_code=403)
        with pytest.raises(TransientError, match="AccessDenied"):
            list(S3Listing(s3).rows(BUCKET, ""))


def _store_script(store: Any) -> list[Any]:
    """The same calls on either store; what each answered."""
    for key in ("p/2026-01-02/manifest.json", "p/2026-01-01/manifest.json", "p/top", "q/x"):
        store.put(INVENTORY, key, key.encode())
    out: list[Any] = [
        store.folders(INVENTORY, "p/"),
        list(store.keys(INVENTORY, "p/2026")),
        store.read(INVENTORY, "p/top"),
        store.read_if_exists(INVENTORY, "p/missing"),
        store.exists(INVENTORY, "p/top"),
        store.exists(INVENTORY, "p/missing"),
        store.etag(INVENTORY, "q/x"),
    ]
    with pytest.raises(TransientError):
        store.read(INVENTORY, "p/missing")
    return out


def test_the_fake_inventory_store_answers_as_the_s3_adapter() -> None:
    from moto import mock_aws

    with mock_aws():
        s3 = _s3()
        s3.create_bucket(Bucket=INVENTORY)
        real = _store_script(S3InventoryStore(s3))
    fake = _store_script(FakeInventoryStore())
    assert fake == real
    assert real[0] == ["p/2026-01-01/", "p/2026-01-02/"]
    assert real[3] is None and real[4] is True and real[5] is False


@pytest.mark.contract("C12")
def test_a_row_whose_sequencer_s3_cannot_have_sent_is_drift_even_when_its_state_matches() -> None:
    # GIVEN the bucket and the ledger in step on a and b, but a's row holds a forged sequencer
    # (64 F, written before events were checked; issue 24) and b's a real one
    repairs = FakeRepairQueue()
    reconciler = _reconciler(FakeBucketListing(LISTED), repairs)
    rows = reconciler.scanner.ledger.rows  # type: ignore[attr-defined]
    rows[(BUCKET, "a")].seq = "F" * 64
    rows[(BUCKET, "b")] = LedgerRow(
        bucket=BUCKET, key="b", present=True, version_id="v1", etag="e1", updated_at=1
    )
    rows[(BUCKET, "b")].seq = f"00{900:08X}01".ljust(64, "0")
    del rows[(BUCKET, "c")]
    # WHEN reconciliation runs
    report = reconciler.run(ReconcileRequest(source="listing", margin_ms=0))
    # THEN a gets a repair (its HEAD matches: never resolved on HEAD), counted as drift
    assert report.drift["sequencer_contradicted"] == 1 and report.drift_total == 1
    assert report.resolved_on_head == 0 and report.repairs_queued == 1
    (sent,) = [json.loads(b)["s3ingestRepair"] for b in repairs.sent]
    assert (sent["key"], sent["reason"]) == ("a", "sequencer_contradicted")
