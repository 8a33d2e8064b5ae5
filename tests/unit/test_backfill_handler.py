"""The backfill handler against the Batch Operations fixtures in ``tests/events/``
(docs/payloads.md section 7): request shapes of schema 1.0 and 2.0, and the response S3 requires."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from s3ingest_fn.core.decide import IngestService
from s3ingest_fn.core.model import InvalidMessageError, ObjectState
from s3ingest_fn.services.backfill import bucket_of, handle_invocation, parse_task
from tests.fakes import FakeBucket as Bucket
from tests.fakes import FakeLedger
from tests.samples import load_sample

pytestmark = pytest.mark.contract("C13")


def sample(name: str) -> dict[str, Any]:
    doc = load_sample(name)
    assert isinstance(doc, dict)
    return doc


# (sample, schema, bucket, key, version) written from the files by hand
SAMPLES = [
    (
        "powertools__s3BatchOperationEventSchemaV2.json",
        "2.0",
        "powertools-dataset",
        "prefix/dataset/dataset.20231222.json.gz",
        None,
    ),
    (
        "java-libs__s3_batch_event_v2.json",
        "2.0",
        "source-directory-bucket-name",
        "s3objectkey",
        None,
    ),
    (
        "awsdocs-s3ug__batchops-request-v1.json",
        "1.0",
        "awsexamplebucket1",
        "customerImage1.jpg",
        "1",
    ),
    ("awsdocs-lambda__s3-batch-request-v1.json", "1.0", None, None, None),
    ("powertools__s3BatchOperationEventSchemaV1.json", "1.0", None, None, None),
]


@pytest.mark.parametrize(("name", "schema", "bucket", "key", "version"), SAMPLES)
def test_samples_get_a_valid_response_with_every_task(
    name: str, schema: str, bucket: str | None, key: str | None, version: str | None
) -> None:
    event = sample(name)
    task = event["tasks"][0]
    if bucket is not None:
        parsed = parse_task(task, schema)
        assert (parsed.bucket, parsed.key, parsed.version_id) == (bucket, key, version)
    present = ObjectState(visible=True, version_id="v9", etag="e9", size=3)
    target = bucket_of(task, schema)
    objects = {(target, parse_task(task, schema).key): present}
    service = IngestService(FakeLedger(), Bucket(objects), scope_bucket=target)
    response = handle_invocation(copy.deepcopy(event), service)
    assert response["invocationSchemaVersion"] == event["invocationSchemaVersion"]
    assert response["invocationId"] == event["invocationId"]
    assert response["treatMissingKeysAs"] == "PermanentFailure"
    assert [r["taskId"] for r in response["results"]] == [t["taskId"] for t in event["tasks"]]
    assert [r["resultCode"] for r in response["results"]] == ["Succeeded"]
    assert response["results"][0]["resultString"] == "applied: observed-bucket-state"
    json.dumps(response)  # what Lambda returns must serialise


@pytest.mark.contract("C1")
def test_key_with_space_and_plus_is_decoded_as_the_inventory_wrote_it() -> None:
    # S3 Inventory CSV manifests form-encode keys: "a b+c.txt" is written "a+b%2Bc.txt"
    event = sample("powertools__s3BatchOperationEventSchemaV2.json")
    event["tasks"][0]["s3Key"] = "dir/a+b%2Bc.txt"
    bucket = Bucket({("powertools-dataset", "dir/a b+c.txt"): ObjectState(True, None, "e", 1)})
    ledger = FakeLedger()
    service = IngestService(ledger, bucket, scope_bucket="powertools-dataset")
    response = handle_invocation(event, service)
    assert response["results"][0]["resultCode"] == "Succeeded"
    assert bucket.heads == [("powertools-dataset", "dir/a b+c.txt")]
    row = ledger.get("powertools-dataset", "dir/a b+c.txt")
    assert row is not None and row.source == "backfill" and row.raw_key == "dir/a+b%2Bc.txt"


@pytest.mark.contract("C7")
def test_object_deleted_since_the_inventory_succeeds_with_a_reason() -> None:
    event = sample("powertools__s3BatchOperationEventSchemaV2.json")
    service = IngestService(FakeLedger(), Bucket(), scope_bucket="powertools-dataset")
    (result,) = handle_invocation(event, service)["results"]
    assert (result["resultCode"], result["resultString"]) == (
        "Succeeded",
        "ignored: observed-absent-not-in-ledger",
    )


def test_throttling_is_a_temporary_failure_and_bad_input_permanent() -> None:
    event = sample("powertools__s3BatchOperationEventSchemaV2.json")
    flaky = IngestService(FakeLedger(), Bucket(fail=True), scope_bucket="powertools-dataset")
    assert (
        handle_invocation(copy.deepcopy(event), flaky)["results"][0]["resultCode"]
        == "TemporaryFailure"
    )
    service = IngestService(FakeLedger(), Bucket(), scope_bucket="powertools-dataset")
    bad = copy.deepcopy(event)
    bad["tasks"][0]["s3Key"] = "bad%ZZ"
    (result,) = handle_invocation(bad, service)["results"]
    assert result["resultCode"] == "PermanentFailure"
    assert "bad-percent-encoding" in result["resultString"]
    other = copy.deepcopy(event)
    other["tasks"][0]["s3Bucket"] = "someone-elses-bucket"
    (result,) = handle_invocation(other, service)["results"]
    assert result["resultCode"] == "PermanentFailure"
    assert "not this stack's landing bucket" in result["resultString"]
    unknown = copy.deepcopy(event)
    unknown["invocationSchemaVersion"] = "3.0"
    (result,) = handle_invocation(unknown, service)["results"]
    assert result["resultCode"] == "PermanentFailure"


def test_sam_template_sample_has_placeholders_that_are_still_valid_text() -> None:
    event = sample("sam-cli__S3BatchInvocation.json")
    task = parse_task(event["tasks"][0], "1.0")
    assert (task.bucket, task.key) == ("{{{bucket_arn}}}", "{{{key}}}")


def test_task_without_bucket_is_invalid() -> None:
    with pytest.raises(InvalidMessageError, match="missing-bucket"):
        parse_task({"taskId": "t", "s3Key": "k"}, "2.0")
