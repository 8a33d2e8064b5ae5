"""Every S3 event fixture in ``tests/events/`` through ``parse_body`` (CONTRACT C1, C2, C3, C9).

The expectations, written by hand, and how each file's shape turns into SQS message bodies are
in :mod:`tests.sample_expectations`; this module turns the files into bodies and checks them.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from functools import cache
from typing import Any

import pytest

from s3ingest_fn.core.events import parse_body
from s3ingest_fn.core.model import InvalidMessageError, Kind
from tests.sample_expectations import (
    BODY,
    EXPECTED,
    KNOWN_BUGS,
    LAMBDA_SNS,
    PLACEHOLDER_SEQUENCERS,
    PLAIN,
    REAL_SEQUENCER,
    SKIPPED,
    SQS,
    Ch,
    Ignored,
    Invalid,
)
from tests.samples import load_sample, sample_names

# --- turning a sample file into SQS message bodies ----------------------------------------------


def _from_dynamodb(value: Any) -> Any:
    """DynamoDB-typed JSON (``{"M": {"k": {"S": "v"}}}``) to plain JSON, as a Lambda wrote it."""
    [(tag, inner)] = value.items()
    if tag == "M":
        return {k: _from_dynamodb(v) for k, v in inner.items()}
    if tag == "L":
        return [_from_dynamodb(v) for v in inner]
    if tag == "N":
        return int(inner)
    if tag == "NULL":
        return None
    return inner  # S, BOOL


def _snapshot_events(node: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(node, list):
        for i, item in enumerate(node):
            yield from _snapshot_events(item, f"{path}/{i}")
        return
    if not isinstance(node, dict):
        return
    if set(node) == {"M"} and isinstance(node["M"], dict):
        yield from _snapshot_events(_from_dynamodb(node), path)
    elif "eventName" in node and "s3" in node:  # one notification record
        yield path, json.dumps({"Records": [node]})
    elif "Records" in node or "detail-type" in node:
        yield path, json.dumps(node)
    elif node.get("Type") == "Notification":  # the snapshot tool pre-parsed Message
        message = node["Message"]
        envelope = dict(node, Message=message if isinstance(message, str) else json.dumps(message))
        yield path, json.dumps(envelope)
    else:
        for name, child in node.items():
            yield from _snapshot_events(child, f"{path}/{name}")


@cache
def bodies(name: str) -> dict[str, str]:
    """The SQS message bodies a sample file stands for, by body id."""
    mode, _ = EXPECTED[name]
    doc = load_sample(name)
    assert isinstance(doc, dict)
    if mode == PLAIN:
        return {BODY: json.dumps(doc)}
    if mode == SQS:
        return {f"Records/{i}/body": r["body"] for i, r in enumerate(doc["Records"])}
    if mode == LAMBDA_SNS:
        return {
            f"Records/{i}/Sns/Message": r["Sns"]["Message"] for i, r in enumerate(doc["Records"])
        }
    found: dict[str, str] = {}
    for test_id, entry in doc.items():
        short = test_id.rsplit("::", 1)[-1]
        for path, body in _snapshot_events(entry["recorded-content"], short):
            assert path not in found, path
            found[path] = body
    return found


def _placeholders_replaced(node: Any) -> Any:
    """``node`` with every placeholder sequencer replaced by :data:`REAL_SEQUENCER`, inside SNS
    ``Message`` strings too."""
    if isinstance(node, list):
        return [_placeholders_replaced(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for name, value in node.items():
        if name == "sequencer" and value in PLACEHOLDER_SEQUENCERS:
            out[name] = REAL_SEQUENCER
        elif name == "Message" and isinstance(value, str):
            try:
                out[name] = json.dumps(_placeholders_replaced(json.loads(value)))
            except ValueError:
                out[name] = value
        else:
            out[name] = _placeholders_replaced(value)
    return out


def _with_real_sequencer(want: Ch) -> Ch:
    if want.seq not in PLACEHOLDER_SEQUENCERS:
        return want
    return dataclasses.replace(want, seq=REAL_SEQUENCER, ordered=want.kind is not Kind.METADATA)


def _orders_a_placeholder(expected: tuple[Ch, ...]) -> bool:
    return any(w.seq in PLACEHOLDER_SEQUENCERS and w.kind is not Kind.METADATA for w in expected)


# --- the tests -----------------------------------------------------------------------------------


def test_every_sample_file_is_covered_or_explicitly_skipped() -> None:
    on_disk = sample_names()
    assert not set(EXPECTED) & set(SKIPPED)
    assert sorted(on_disk - set(EXPECTED) - set(SKIPPED)) == [], "classify the new sample file(s)"
    assert sorted((set(EXPECTED) | set(SKIPPED)) - on_disk) == [], "sample file(s) gone"


def test_only_batch_operations_inventory_responses_and_validation_files_are_skipped() -> None:
    assert sorted(SKIPPED) == sorted(
        [
            "aws-lambda-go__s3-batch-job-event-request-1.0.json",
            "aws-lambda-go__s3-batch-job-event-request-2.0.json",
            "aws-lambda-go__s3-batch-job-event-response.json",
            "awsdocs-lambda__s3-batch-request-v1.json",
            "awsdocs-lambda__s3-batch-response-v1.json",
            "awsdocs-lambda__sqs-batchItemFailures-response.json",
            "awsdocs-s3ug__batchops-request-v1.json",
            "awsdocs-s3ug__batchops-response-v1.AS-PUBLISHED-INVALID-JSON.txt",
            "awsdocs-s3ug__inventory-manifest-CSV.json",
            "awsdocs-s3ug__inventory-manifest-ORC.json",
            "awsdocs-s3ug__inventory-manifest-Parquet.json",
            "java-libs__s3_batch_event_v2.json",
            "java-libs__s3_batch_response.json",
            "java-libs__sqs_batch_response.json",
            "localstack__test_s3_notifications_eventbridge.validation.json",
            "localstack__test_s3_notifications_lambda.validation.json",
            "localstack__test_s3_notifications_sns.validation.json",
            "localstack__test_s3_notifications_sqs.validation.json",
            "orcabus-filemanager__csv_inventory.csv.gz",
            "orcabus-filemanager__csv_inventory_manifest.checksum",
            "orcabus-filemanager__csv_inventory_manifest.json",
            "orcabus-filemanager__csv_inventory_no_version.csv.gz",
            "orcabus-filemanager__csv_inventory_no_version_manifest.checksum",
            "orcabus-filemanager__csv_inventory_no_version_manifest.json",
            "orcabus-filemanager__orc_inventory.orc",
            "orcabus-filemanager__orc_inventory_manifest.checksum",
            "orcabus-filemanager__orc_inventory_manifest.json",
            "orcabus-filemanager__parquet_inventory.parquet",
            "orcabus-filemanager__parquet_inventory_manifest.checksum",
            "orcabus-filemanager__parquet_inventory_manifest.json",
            "powertools__s3BatchOperationEventSchemaV1.json",
            "powertools__s3BatchOperationEventSchemaV2.json",
            "sam-cli__S3BatchInvocation.json",
        ]
    )


@pytest.mark.parametrize(
    "name", sorted(n for n, r in SKIPPED.items() if r == "S3 Batch Operations request")
)
def test_skipped_batch_operations_requests_are_batch_operations_requests(name: str) -> None:
    doc = load_sample(name)
    assert isinstance(doc, dict)
    assert doc["invocationSchemaVersion"] in ("1.0", "2.0") and doc["tasks"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_body_of_a_covered_file_has_an_expectation(name: str) -> None:
    _, table = EXPECTED[name]
    assert sorted(bodies(name)) == sorted(table)


def _cases() -> Iterator[Any]:
    for name, (_, table) in EXPECTED.items():
        for body_id in table:
            bug = KNOWN_BUGS.get((name, body_id))
            marks = [pytest.mark.xfail(strict=True, reason=bug)] if bug else []
            yield pytest.param(name, body_id, id=f"{name}:{body_id}", marks=marks)


@pytest.mark.contract("C1", "C2", "C3", "C9")
@pytest.mark.parametrize(("name", "body_id"), list(_cases()))
def test_sample_body_parses_as_written_by_hand(name: str, body_id: str) -> None:
    expected = EXPECTED[name][1][body_id]
    body = bodies(name)[body_id]

    if isinstance(expected, Invalid):
        with pytest.raises(InvalidMessageError) as info:
            parse_body(body)
        assert info.value.reason == expected.reason
        return

    if isinstance(expected, Ignored):
        parsed = parse_body(body)
        assert (parsed.ignored_reason, parsed.changes) == (expected.reason, [])
        return

    if _orders_a_placeholder(expected):
        # C2, C9: as written, a sequencer S3 never sends: invalid. With a real one in its
        # place, every other field as written by hand.
        with pytest.raises(InvalidMessageError) as info:
            parse_body(body)
        assert info.value.reason == "sequencer-not-hex"
        body = json.dumps(_placeholders_replaced(json.loads(body)))
        expected = tuple(_with_real_sequencer(w) for w in expected)

    parsed = parse_body(body)
    assert parsed.ignored_reason is None
    assert len(parsed.changes) == len(expected)
    for change, want in zip(parsed.changes, expected, strict=True):
        got = {
            "fmt": change.fmt,
            "kind": change.kind,
            "bucket": change.bucket,
            "key": change.key,
            "raw_key": change.raw_key,
            "raw_sequencer": change.raw_sequencer,
            "version_id": change.version_id,
            "etag": change.etag,
            "size": change.size,
        }
        assert got == {
            "fmt": want.fmt,
            "kind": want.kind,
            "bucket": want.bucket,
            "key": want.key,
            "raw_key": want.raw_key if want.raw_key is not None else want.key,
            "raw_sequencer": want.seq,
            "version_id": want.version,
            "etag": want.etag,
            "size": want.size,
        }
        if want.event is not None:
            assert change.event_name == want.event
        if want.ordered:
            assert want.seq is not None
            assert change.sequencer == want.seq.upper().ljust(64, "0")
        else:
            assert change.sequencer is None
