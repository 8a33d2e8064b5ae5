"""The emulator's moto patches (:mod:`s3ingest.local.emulator.fast_moto`) change nothing moto
answers.

The same requests (the ledger's own writes and reads, hand-written expressions of every kind, and
malformed ones moto rejects) run on a fresh in-process moto without the patches and with them;
every response and every error (code and message) must be the same, in order.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from s3ingest.local.emulator import fast_moto
from s3ingest_fn.adapters.dynamo_ledger import DynamoLedger
from s3ingest_fn.core import sequencer
from s3ingest_fn.core.model import TransientError
from s3ingest_fn.core.row import RowState, WriteMeta
from tests.moto_ledger import create_ledger_table, dynamodb_client

Outcome = tuple[str, Any]


@pytest.fixture
def patch_state() -> Iterator[None]:
    """Leaves the process as it found it (the session's emulator installs the patches)."""
    was = fast_moto.installed()
    yield
    if was:
        fast_moto.install()
    else:
        fast_moto.uninstall()


def _call(fn: Callable[[], Any]) -> Outcome:
    try:
        result = fn()
    except ClientError as error:
        return "error", (error.response["Error"].get("Code"), error.response["Error"]["Message"])
    except TransientError as error:
        return "transient", str(error)
    except Exception as error:  # moto raises some parse errors as they are (a 500 in the server)
        return "raised", (type(error).__name__, str(error))
    if isinstance(result, dict):
        result = {k: v for k, v in result.items() if k != "ResponseMetadata"}
    return "ok", json.loads(json.dumps(result, default=repr, sort_keys=True))


def _meta(raw_seq: str, key: str) -> WriteMeta:
    return WriteMeta(
        bucket="b",
        key=key,
        raw_key=key,
        event_name="Object Created/PutObject",
        reason="newer-sequencer",
        source="live",
        sequencer=sequencer.normalize(raw_seq),
        raw_sequencer=raw_seq,
    )


def _ledger_script(ddb: Any) -> list[Outcome]:
    """The ledger adapter's own requests: applies, duplicates, stale and tombstones."""
    ledger = DynamoLedger(ddb, "ledger", tombstone_ttl_seconds=3600, clock=lambda: 1000.0)
    present = RowState(present=True, version_id="v1", etag="e1", size=5)
    out: list[Outcome] = []
    for key in ("a b+c", "dir/é%"):
        for raw_seq, state in (
            ("0010", present),
            ("0010", present),  # duplicate: the condition fails
            ("0008", present),  # stale
            ("0020", RowState(present=False)),
            ("0018", present),  # older than the tombstone
            ("0030", RowState(present=True, version_id="v2", etag="e2", size=7)),
        ):
            meta = _meta(raw_seq, key)
            out.append(_call(functools.partial(ledger.apply_if_newer, state, meta)))
        out.append(_call(functools.partial(ledger.get, "b", key)))
    return out


def _expression_script(ddb: Any) -> list[Outcome]:
    """Hand-written requests: update, condition, filter, key-condition and projection
    expressions, valid and malformed."""
    ddb.create_table(
        TableName="t",
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[
            {"AttributeName": "h", "KeyType": "HASH"},
            {"AttributeName": "r", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "h", "AttributeType": "S"},
            {"AttributeName": "r", "AttributeType": "N"},
        ],
    )
    key = {"h": {"S": "x"}, "r": {"N": "1"}}
    names = {"#a": "a", "#b": "b", "#l": "l"}
    update = "SET #a = :a, #b = if_not_exists(#b, :zero) + :one, #l = list_append(:l, :l)"
    values = {":a": {"S": "A"}, ":zero": {"N": "0"}, ":one": {"N": "1"}, ":l": {"L": [{"N": "1"}]}}
    requests: list[Callable[[], Any]] = [
        lambda: ddb.update_item(
            TableName="t",
            Key=key,
            UpdateExpression=update,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
            ReturnValues="ALL_NEW",
        ),
        # the same expression again (served from the memo), with a condition that now holds
        lambda: ddb.update_item(
            TableName="t",
            Key=key,
            UpdateExpression=update,
            ConditionExpression="attribute_exists(#a) AND #b >= :one",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
            ReturnValues="UPDATED_NEW",
        ),
        # a condition that fails, with the old item returned
        lambda: ddb.update_item(
            TableName="t",
            Key=key,
            UpdateExpression=update,
            ConditionExpression="#b < :one OR (NOT attribute_exists(#a))",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        ),
        lambda: ddb.update_item(
            TableName="t",
            Key=key,
            UpdateExpression="REMOVE #l ADD #b :one",
            ExpressionAttributeNames={"#l": "l", "#b": "b"},
            ExpressionAttributeValues={":one": {"N": "1"}},
            ReturnValues="ALL_OLD",
        ),
        # malformed: two SET clauses, twice (a rejection is never remembered as an acceptance)
        *[
            lambda: ddb.update_item(
                TableName="t",
                Key=key,
                UpdateExpression="SET #a = :a SET #b = :one",
                ExpressionAttributeNames={"#a": "a", "#b": "b"},
                ExpressionAttributeValues={":a": {"S": "A"}, ":one": {"N": "1"}},
            )
        ]
        * 2,
        # malformed: overlapping paths, then the same expression with names that do not overlap
        lambda: ddb.update_item(
            TableName="t",
            Key=key,
            UpdateExpression="SET #p = :a, #q = :a",
            ExpressionAttributeNames={"#p": "a", "#q": "a"},
            ExpressionAttributeValues={":a": {"S": "A"}},
        ),
        lambda: ddb.update_item(
            TableName="t",
            Key=key,
            UpdateExpression="SET #p = :a, #q = :a",
            ExpressionAttributeNames={"#p": "a", "#q": "c"},
            ExpressionAttributeValues={":a": {"S": "A"}},
        ),
        lambda: ddb.update_item(
            TableName="t",
            Key=key,
            UpdateExpression="SET #p = :a, #q = :a",
            ExpressionAttributeNames={"#p": "c", "#q": "c"},
            ExpressionAttributeValues={":a": {"S": "A"}},
        ),
        # malformed: a key attribute updated (accepted first for a non-key name)
        lambda: ddb.update_item(
            TableName="t",
            Key=key,
            UpdateExpression="SET #k = :a",
            ExpressionAttributeNames={"#k": "z"},
            ExpressionAttributeValues={":a": {"S": "A"}},
        ),
        lambda: ddb.update_item(
            TableName="t",
            Key=key,
            UpdateExpression="SET #k = :a",
            ExpressionAttributeNames={"#k": "h"},
            ExpressionAttributeValues={":a": {"S": "A"}},
        ),
        # malformed: syntax, undefined placeholders, bad condition syntax, twice each
        *[
            lambda: ddb.update_item(
                TableName="t",
                Key=key,
                UpdateExpression="SET a = = :a",
                ExpressionAttributeValues={":a": {"S": "A"}},
            ),
            lambda: ddb.update_item(
                TableName="t",
                Key=key,
                UpdateExpression="SET #a = :missing",
                ExpressionAttributeNames={"#a": "a"},
                ExpressionAttributeValues={":a": {"S": "A"}},
            ),
            lambda: ddb.update_item(
                TableName="t",
                Key=key,
                UpdateExpression="SET #a = :a",
                ConditionExpression="#a = = :a",
                ExpressionAttributeNames={"#a": "a"},
                ExpressionAttributeValues={":a": {"S": "A"}},
            ),
            lambda: ddb.update_item(
                TableName="t",
                Key=key,
                UpdateExpression="SET #a = :a",
                ConditionExpression="#a = :a AND #nope = :a",
                ExpressionAttributeNames={"#a": "a"},
                ExpressionAttributeValues={":a": {"S": "A"}},
            ),
            lambda: ddb.put_item(
                TableName="t",
                Item={**key, "a": {"S": "B"}},
                ConditionExpression="begins_with(#a, :p) AND size(#a) > :n",
                ExpressionAttributeNames={"#a": "a"},
                ExpressionAttributeValues={":p": {"S": "A"}, ":n": {"N": "0"}},
            ),
        ]
        * 2,
        lambda: ddb.delete_item(
            TableName="t",
            Key={"h": {"S": "y"}, "r": {"N": "2"}},
            ConditionExpression="attribute_not_exists(h)",
        ),
        lambda: ddb.get_item(
            TableName="t",
            Key=key,
            ProjectionExpression="#a, b, l[0]",
            ExpressionAttributeNames={"#a": "a"},
        ),
        lambda: ddb.get_item(TableName="t", Key=key, ProjectionExpression="a, a"),
        lambda: ddb.scan(
            TableName="t",
            FilterExpression="#a IN (:a, :b) AND b BETWEEN :lo AND :hi",
            ExpressionAttributeNames={"#a": "a"},
            ExpressionAttributeValues={
                ":a": {"S": "A"},
                ":b": {"S": "B"},
                ":lo": {"N": "0"},
                ":hi": {"N": "9"},
            },
        ),
        lambda: ddb.scan(TableName="t", FilterExpression="a = ", ExpressionAttributeValues={}),
        lambda: ddb.query(
            TableName="t",
            KeyConditionExpression="h = :h AND r > :r",
            FilterExpression="attribute_exists(a)",
            ExpressionAttributeValues={":h": {"S": "x"}, ":r": {"N": "0"}},
            ProjectionExpression="h, r, a",
        ),
        lambda: ddb.query(
            TableName="t",
            KeyConditionExpression="h = :h AND r >",
            ExpressionAttributeValues={":h": {"S": "x"}},
        ),
        lambda: ddb.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": "t",
                        "Key": key,
                        "UpdateExpression": update,
                        "ConditionExpression": "attribute_exists(#a)",
                        "ExpressionAttributeNames": names,
                        "ExpressionAttributeValues": values,
                    }
                },
                {
                    "Update": {
                        "TableName": "t",
                        "Key": {"h": {"S": "z"}, "r": {"N": "3"}},
                        "UpdateExpression": "SET #a = :a SET #b = :one",
                        "ExpressionAttributeNames": {"#a": "a", "#b": "b"},
                        "ExpressionAttributeValues": {":a": {"S": "A"}, ":one": {"N": "1"}},
                    }
                },
            ]
        ),
        lambda: ddb.scan(TableName="t"),
    ]
    return [_call(request) for request in requests]


def _run(script: Callable[[Any], list[Outcome]], patched: bool) -> list[Outcome]:
    if patched:
        fast_moto.install()
    else:
        fast_moto.uninstall()
    with mock_aws():
        ddb = dynamodb_client()
        create_ledger_table(ddb)
        return script(ddb)


@pytest.mark.parametrize("script", [_ledger_script, _expression_script])
def test_same_results_and_errors_with_and_without_the_patches(
    patch_state: None, script: Callable[[Any], list[Outcome]]
) -> None:
    # GIVEN the same requests, WHEN run on unpatched and on patched moto
    plain = _run(script, patched=False)
    fast = _run(script, patched=True)
    # THEN every response and every error is the same
    assert fast == plain
    # and the scripts do reach the paths they are meant to: successes and rejections
    kinds = {kind for kind, _ in plain}
    assert {"ok", "error"} <= kinds or {"ok", "transient"} <= kinds or kinds == {"ok"}
    if script is _expression_script:
        codes = [detail[0] for kind, detail in plain if kind == "error"]
        assert "ValidationException" in codes
        assert "ConditionalCheckFailedException" in codes
        assert "TransactionCanceledException" in codes or len(codes) >= 10


def test_queue_attributes_are_those_of_moto(patch_state: None) -> None:
    # GIVEN a queue with visible, in-flight and delayed messages
    fast_moto.uninstall()
    with mock_aws():
        sqs: Any = boto3.client(
            "sqs", region_name="us-east-1", aws_access_key_id="t", aws_secret_access_key="t"
        )
        url = sqs.create_queue(QueueName="q", Attributes={"VisibilityTimeout": "30"})["QueueUrl"]
        for i in range(5):
            sqs.send_message(QueueUrl=url, MessageBody=str(i), DelaySeconds=60 if i == 4 else 0)
        sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2)
        asks: list[list[str]] = [
            ["All"],
            ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
            ["ApproximateNumberOfMessagesDelayed", "QueueArn", "QueueArn"],
            ["FifoQueue"],
            ["NoSuchAttribute"],
            [],
        ]

        def answers() -> list[Outcome]:
            return [
                _call(functools.partial(sqs.get_queue_attributes, QueueUrl=url, AttributeNames=ask))
                for ask in asks
            ]

        # WHEN asked without and with the patches
        plain = answers()
        fast_moto.install()
        fast = answers()
    # THEN the answers are the same (counts included), and an unknown name is refused
    assert fast == plain
    assert plain[1] == (
        "ok",
        {
            "Attributes": {
                "ApproximateNumberOfMessages": "2",
                "ApproximateNumberOfMessagesNotVisible": "2",
            }
        },
    )
    assert plain[4][0] == "error"


def test_install_is_idempotent_and_uninstall_restores(patch_state: None) -> None:
    from moto.dynamodb.parsing.expressions import (  # type: ignore[attr-defined]
        UpdateExpressionParser,
    )
    from moto.dynamodb.parsing.validators import ActionCountValidator

    fast_moto.uninstall()
    plain_make = UpdateExpressionParser.make
    assert "traverse" not in ActionCountValidator.__dict__
    fast_moto.install()
    patched_make = UpdateExpressionParser.make
    fast_moto.install()
    assert UpdateExpressionParser.make is patched_make
    assert patched_make("SET a = :a") is patched_make("SET a = :a")  # memoised
    fast_moto.uninstall()
    assert UpdateExpressionParser.make == plain_make
    assert "traverse" not in ActionCountValidator.__dict__
    assert not fast_moto.installed()


def _eventbridge_delivery() -> dict[str, Any]:
    """One event through a rule to an SQS target (moto's input paths applied)."""
    with mock_aws():
        kw: dict[str, Any] = {
            "region_name": "us-east-1",
            "aws_access_key_id": "t",
            "aws_secret_access_key": "t",
        }
        sqs: Any = boto3.client("sqs", **kw)
        events: Any = boto3.client("events", **kw)
        url = sqs.create_queue(QueueName="q")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]
        events.put_rule(Name="r", EventPattern=json.dumps({"source": ["aws.s3"]}))
        events.put_targets(Rule="r", Targets=[{"Id": "q", "Arn": arn["QueueArn"]}])
        detail = {"bucket": {"name": "b"}, "object": {"key": "a b+c", "sequencer": "0A"}}
        events.put_events(
            Entries=[
                {
                    "Source": "aws.s3",
                    "DetailType": "Object Created",
                    "Detail": json.dumps(detail),
                    "Resources": ["arn:aws:s3:::b"],
                }
            ]
        )
        (message,) = sqs.receive_message(QueueUrl=url)["Messages"]
        body: dict[str, Any] = json.loads(message["Body"])
    return {k: v for k, v in body.items() if k not in ("id", "time")}


def test_eventbridge_deliveries_are_those_of_moto(patch_state: None) -> None:
    # GIVEN one event through a rule to a queue, WHEN delivered without and with the patches
    fast_moto.uninstall()
    plain = _eventbridge_delivery()
    fast_moto.install()
    fast = _eventbridge_delivery()
    again = _eventbridge_delivery()  # the input paths now come from the memo
    # THEN the delivered bodies are the same (apart from the event's own id and time)
    assert fast == plain == again
    assert plain["detail"]["object"]["key"] == "a b+c"
    assert plain["resources"] == ["arn:aws:s3:::b"]


def test_module_listing_is_that_of_moto(patch_state: None) -> None:
    from moto import backends

    fast_moto.uninstall()
    plain = list(backends.list_of_moto_modules())
    fast_moto.install()
    assert list(backends.list_of_moto_modules()) == plain
    assert {"dynamodb", "sqs", "s3", "events"} <= set(plain)


def _scanned_pages(numbers: bool = False) -> list[list[str]]:
    """Every page of a paged, segmented Scan of a table with keys in no order (numbers: a
    table keyed by numbers, which the patch leaves to moto's own sort)."""
    import random

    rng = random.Random(7)
    with mock_aws():
        client = dynamodb_client()
        kind = "N" if numbers else "S"
        client.create_table(
            TableName="t",
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": kind}],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        )
        for i in range(120):
            key = str(rng.randint(-500, 500) * 7 + i) if numbers else f"b/{rng.random()} é {i}"
            client.put_item(TableName="t", Item={"pk": {kind: key}})
        pages = []
        for segment in range(3):
            kwargs: dict[str, Any] = {
                "TableName": "t",
                "Limit": 7,
                "Segment": segment,
                "TotalSegments": 3,
            }
            while True:
                page = client.scan(**kwargs)
                pages.append([item["pk"][kind] for item in page["Items"]])
                if "LastEvaluatedKey" not in page:
                    break
                kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    return pages


@pytest.mark.parametrize("numbers", [False, True])
def test_scan_pages_are_those_of_moto(patch_state: None, numbers: bool) -> None:
    # GIVEN a table of keys put in no order, WHEN scanned in pages without and with the patches
    fast_moto.uninstall()
    plain = _scanned_pages(numbers)
    fast_moto.install()
    fast = _scanned_pages(numbers)
    # THEN every page holds the same keys in the same order, and every key was seen once
    assert fast == plain
    assert len({k for page in plain for k in page}) == 120
