"""The scheduled attestation's wait for its repairs and its change event (issue 38)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from s3ingest_fn.core.ports import ChangeEntry, PublishOutcome
from s3ingest_fn.services import attestation_store


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_settle_waits_until_the_queue_is_empty() -> None:
    clock, depths = Clock(), iter([3, 1, 0])
    assert attestation_store.settle(
        lambda: next(depths), budget_s=60, poll_s=5, clock=clock, sleep=clock.sleep
    )
    assert clock.now == 10


def test_settle_gives_up_after_its_budget() -> None:
    clock = Clock()
    assert not attestation_store.settle(
        lambda: 1, budget_s=12, poll_s=5, clock=clock, sleep=clock.sleep
    )
    assert clock.now == 15


def _stored() -> dict[str, Any]:
    return {
        "document": {
            "stack": "S",
            "bucket": "b",
            "snapshot": {"taken_at": "2026-12-07T00:00:00.000000Z"},
            "equal": False,
            "roots": {"bucket": "aa", "ledger": "bb"},
            "counts": {"keys": 3},
            "differences_total": 1,
        },
        "location": {"bucket": "store", "key": "attestations/b/x.json", "version_id": "v1"},
        "document_sha256": "cc",
    }


class Refusing:
    def publish(self, entries: Sequence[ChangeEntry]) -> PublishOutcome:
        return PublishOutcome(refused={0: "too large"}, stopped=None)


def test_the_change_event_carries_the_documents_sha256_and_where_it_is() -> None:
    entry = attestation_store.attestation_event(_stored(), "bus")
    assert (entry["Source"], entry["DetailType"], entry["EventBusName"]) == (
        "s3ingest",
        "Attestation Made",
        "bus",
    )
    assert entry["Resources"] == ["arn:aws:s3:::store/attestations/b/x.json"]
    detail = json.loads(entry["Detail"])
    assert detail["document_sha256"] == "cc" and detail["equal"] is False
    assert detail["differing"] == 1 and detail["taken_at"] == "2026-12-07T00:00:00.000000Z"
    # a refused event is said so (the handler logs it)
    assert attestation_store.announce(_stored(), Refusing(), "bus") is False


def test_a_document_is_put_with_a_checksum_whatever_the_sdks_setting(
    monkeypatch: Any,
) -> None:
    """S3 refuses a PutObject without Content-MD5 or a checksum header into a bucket under
    Object Lock; with ``request_checksum_calculation`` ``when_required`` the SDK sends none
    unless the request names an algorithm (API_PutObject)."""
    import boto3
    from botocore.config import Config
    from botocore.stub import Stubber

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    config = Config(request_checksum_calculation="when_required")
    s3 = boto3.client("s3", region_name="us-east-1", config=config)
    expected = {
        "Bucket": "locked",
        "Key": "attestations/b/x.json",
        "Body": b"{}",
        "ContentType": "application/json",
        "ChecksumAlgorithm": "SHA256",
    }
    with Stubber(s3) as stub:
        stub.add_response("put_object", {"VersionId": "v1"}, expected_params=expected)
        put = attestation_store.put
        assert put(s3, "locked", "attestations/b/x.json", b"{}", "application/json") == "v1"
        stub.assert_no_pending_responses()
