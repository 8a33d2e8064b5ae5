"""``s3ingest status``'s ``last_attestation`` (issue 38 item 3): per landing bucket the newest
document under ``attestations/<bucket>/`` of the stack's bucket, unhealthy when its roots
differ; nothing without the ``InventoryBucketName`` output."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from s3ingest.commands.status import _attestations

STORE = "stack-own-bucket"


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=STORE)
        yield client


def _put(s3: Any, bucket: str, stamp: str, *, equal: bool, differing: int) -> bytes:
    body = json.dumps(
        {
            "bucket": bucket,
            "snapshot": {"taken_at": stamp},
            "equal": equal,
            "counts": {"keys": 3},
            "differences_total": differing,
        }
    ).encode()
    key = f"attestations/{bucket}/{stamp.replace(':', '').replace('-', '')}.json"
    s3.put_object(Bucket=STORE, Key=key, Body=body)
    s3.put_object(Bucket=STORE, Key=key[: -len(".json")] + ".leaves.jsonl", Body=b"")
    return body


def test_status_shows_each_buckets_newest_attestation_and_its_verdict(s3: Any) -> None:
    _put(s3, "a", "2026-12-06T00:00:00Z", equal=True, differing=0)
    newest = _put(s3, "a", "2026-12-07T00:00:00Z", equal=False, differing=2)
    outputs = {"InventoryBucketName": STORE, "BucketNames": "a,b", "BucketName": "a"}
    found, problems = _attestations(s3, outputs)
    made = found["last_attestation"]["a"]
    assert (made["taken_at"], made["equal"], made["differing"]) == (
        "2026-12-07T00:00:00Z",
        False,
        2,
    )
    assert made["sha256"] == hashlib.sha256(newest).hexdigest()
    assert made["document"] == f"s3://{STORE}/attestations/a/20261207T000000Z.json"
    assert found["last_attestation"]["b"] is None  # never attested
    assert problems == [
        "the last attestation of a (2026-12-07T00:00:00Z) has differing roots (2 key(s))"
    ]


def test_status_has_no_attestation_key_without_the_stacks_bucket(s3: Any) -> None:
    assert _attestations(s3, {"BucketName": "a"}) == ({}, [])


def test_status_reads_the_locked_attestation_bucket_when_the_stack_has_one(s3: Any) -> None:
    # GIVEN attestationRetentionDays: the documents in their own bucket, the stack's bucket
    # holding an older one from before the setting
    _put(s3, "a", "2026-12-07T00:00:00Z", equal=True, differing=0)
    s3.create_bucket(Bucket="locked-attestations")
    body = json.dumps(
        {
            "bucket": "a",
            "snapshot": {"taken_at": "2026-12-01T00:00:00Z"},
            "equal": False,
            "counts": {"keys": 3},
            "differences_total": 1,
        }
    ).encode()
    s3.put_object(
        Bucket="locked-attestations", Key="attestations/a/20261201T000000Z.json", Body=body
    )
    outputs = {
        "InventoryBucketName": STORE,
        "AttestationBucketName": "locked-attestations",
        "BucketName": "a",
    }
    found, _ = _attestations(s3, outputs)
    # THEN status reads the locked bucket's, not the stack bucket's newer one
    made = found["last_attestation"]["a"]
    assert made["document"] == "s3://locked-attestations/attestations/a/20261201T000000Z.json"
    assert made["equal"] is False


def test_an_attestation_status_cannot_read_is_a_problem_not_a_clean_bill(s3: Any) -> None:
    # GIVEN a newest document that is not an attestation (or one the caller may not read)
    s3.put_object(Bucket=STORE, Key="attestations/a/20261207T000000Z.json", Body=b"{not json")
    outputs = {"InventoryBucketName": STORE, "BucketName": "a"}
    found, problems = _attestations(s3, outputs)
    # THEN no verdict, and status says it could not read one instead of staying healthy
    assert found["last_attestation"]["a"] is None
    assert len(problems) == 1
    assert problems[0].startswith("the last attestation of a could not be read: ")


def test_an_access_denied_read_names_its_code(s3: Any) -> None:
    from botocore.exceptions import ClientError

    from s3ingest.commands.status import _reason

    denied = ClientError(
        {"Error": {"Code": "AccessDenied", "Message": "Access Denied"}}, "GetObject"
    )
    assert _reason(denied) == "AccessDenied: Access Denied"
