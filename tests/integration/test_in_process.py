"""The emulator's clients answered in process give what moto's server gives over HTTP."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from s3ingest.local.emulator.in_process import serve_in_process
from s3ingest.local.emulator.server import REGION, Emulator

Outcome = tuple[str, Any]


def _http_client(emu: Emulator, service: str) -> Any:
    """A client of the same emulator over HTTP (no in-process handler)."""
    session: Any = boto3.session.Session()
    return session.client(
        service,
        endpoint_url=emu.endpoint_url,
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"max_attempts": 1}),
    )


def _relabel_times(value: Any, seen: dict[datetime, str]) -> Any:
    """``value`` with every timestamp in it, nested ones too, replaced by its rank of first
    appearance in ``seen`` (``"time-0"``, ...): two clients used seconds apart then give equal
    answers exactly when their timestamps agree in the same way (the object's ``LastModified``
    the same in ``HeadObject``, ``GetObject`` and ``ListObjectsV2``)."""
    if isinstance(value, datetime):
        return seen.setdefault(value, f"time-{len(seen)}")
    if isinstance(value, dict):
        return {k: _relabel_times(v, seen) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_relabel_times(v, seen) for v in value]
    return value


def _call(fn: Callable[[], Any], times: dict[datetime, str]) -> Outcome:
    try:
        result = fn()
    except ClientError as error:
        return (
            "error",
            (error.response["Error"]["Code"], error.response["ResponseMetadata"]["HTTPStatusCode"]),
        )
    if isinstance(result, dict):
        result = {k: v for k, v in result.items() if k != "ResponseMetadata"}
        if "Body" in result:
            result["Body"] = result["Body"].read()
    return ("ok", _relabel_times(result, times))


def _s3_calls(s3: Any, bucket: str) -> list[Callable[[], Any]]:
    key = "dir/a file+ünïcode%.csv"
    return [
        lambda: s3.put_object(Bucket=bucket, Key=key, Body=b"x" * 2048, Metadata={"m": "v"}),
        lambda: s3.get_object(Bucket=bucket, Key=key),
        lambda: s3.get_object(Bucket=bucket, Key=key, Range="bytes=0-9"),
        lambda: s3.head_object(Bucket=bucket, Key=key),
        lambda: s3.head_object(Bucket=bucket, Key="missing"),
        lambda: s3.get_object(Bucket=bucket, Key=key, IfMatch='"nope"'),
        lambda: s3.list_objects_v2(Bucket=bucket, EncodingType="url"),
        lambda: s3.delete_object(Bucket=bucket, Key=key),
        lambda: s3.get_object(Bucket=bucket, Key=key),
    ]


def _ddb_calls(ddb: Any, table: str) -> list[Callable[[], Any]]:
    item = {"pk": {"S": "k"}, "n": {"N": "1"}}
    return [
        lambda: ddb.put_item(TableName=table, Item=item),
        lambda: ddb.put_item(
            TableName=table, Item=item, ConditionExpression="attribute_not_exists(pk)"
        ),
        lambda: ddb.update_item(
            TableName=table,
            Key={"pk": {"S": "k"}},
            UpdateExpression="SET n = n + :one",
            ExpressionAttributeValues={":one": {"N": "1"}},
            ReturnValues="ALL_NEW",
        ),
        lambda: ddb.get_item(TableName=table, Key={"pk": {"S": "k"}}),
        lambda: ddb.update_item(TableName=table, Key={"pk": {"S": "k"}}, UpdateExpression="SET"),
    ]


@pytest.mark.parametrize("service", ["s3", "dynamodb"])
def test_in_process_answers_are_the_servers(emulator: Emulator, service: str) -> None:
    # GIVEN two fresh resources, one used through the emulator's client, one over HTTP
    answers: list[list[Outcome]] = []
    for client in (emulator.client(service), _http_client(emulator, service)):
        name = f"t-{uuid.uuid4().hex[:12]}"
        if service == "s3":
            client.create_bucket(Bucket=name)
            calls = _s3_calls(client, name)
        else:
            client.create_table(
                TableName=name,
                BillingMode="PAY_PER_REQUEST",
                KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            )
            calls = _ddb_calls(client, name)
        # WHEN the same requests are made
        times: dict[datetime, str] = {}
        outcomes = [_call(c, times) for c in calls]
        answers.append(json.loads(json.dumps(outcomes, default=str).replace(name, "NAME")))
    # THEN the answers are the same: results, bodies, error codes, statuses, and timestamps
    # (by their rank: the two objects were written at different times)
    in_process, http = answers
    assert in_process == http
    errors = [answer[1] for answer in in_process if answer[0] == "error"]
    if service == "dynamodb":
        assert ["ConditionalCheckFailedException", 400] in errors
    else:
        assert ["404", 404] in errors and ["NoSuchKey", 404] in errors


def test_the_emulators_clients_need_no_server(emulator: Emulator) -> None:
    # GIVEN a client answered in process whose endpoint has no server (port 9: nothing listens)
    session: Any = boto3.session.Session()
    s3 = session.client(
        "s3",
        endpoint_url="http://127.0.0.1:9",
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"max_attempts": 1}, connect_timeout=1),
    )
    serve_in_process(s3)
    bucket = f"t-{uuid.uuid4().hex[:12]}"
    # WHEN it makes calls
    s3.create_bucket(Bucket=bucket)
    # THEN moto's backends answered (the bucket is there for the emulator's server too)
    names = {b["Name"] for b in _http_client(emulator, "s3").list_buckets()["Buckets"]}
    assert bucket in names
