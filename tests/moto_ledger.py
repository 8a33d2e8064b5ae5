"""A ledger table on moto's in-process DynamoDB, with the key schema the stack deploys
(:mod:`s3ingest_fn.adapters.dynamo_ledger` owns the attribute names)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
from moto import mock_aws

from s3ingest_fn.adapters.dynamo_ledger import PARTITION_KEY


def dynamodb_client() -> Any:
    """A DynamoDB client for moto (fake credentials, us-east-1); call inside ``mock_aws``."""
    return boto3.client(
        "dynamodb",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def create_ledger_table(client: Any, table: str = "ledger") -> None:
    """Create the ledger table: partition key only, on-demand."""
    client.create_table(
        TableName=table,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": PARTITION_KEY, "AttributeType": "S"}],
        KeySchema=[{"AttributeName": PARTITION_KEY, "KeyType": "HASH"}],
    )


@contextmanager
def moto_ledger_table(table: str = "ledger") -> Iterator[Any]:
    """moto's DynamoDB with the ledger table created; yields the client."""
    with mock_aws():
        client = dynamodb_client()
        create_ledger_table(client, table)
        yield client


#: The two ledgers the decision tests run against, alike (:func:`counting_ledger`).
LEDGER_KINDS = ("fake", "dynamodb")


@contextmanager
def counting_ledger(kind: str, now: float, tombstone_ttl_seconds: int = 3600) -> Iterator[Any]:
    """A :class:`tests.fakes.CountingLedger` over the in-memory fake (``kind`` ``"fake"``) or
    the DynamoDB adapter on moto (``"dynamodb"``), both with the clock stopped at ``now``
    (epoch seconds)."""
    from s3ingest_fn.adapters.dynamo_ledger import DynamoLedger
    from tests.fakes import CountingLedger, FakeLedger

    if kind == "fake":
        yield CountingLedger(
            FakeLedger(clock=lambda: now, tombstone_ttl_seconds=tombstone_ttl_seconds)
        )
        return
    with moto_ledger_table("ledger") as client:
        yield CountingLedger(
            DynamoLedger(
                client, "ledger", tombstone_ttl_seconds=tombstone_ttl_seconds, clock=lambda: now
            )
        )
