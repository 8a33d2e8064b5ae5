"""Ledger item size and write units per write, for keys of 20, 200 and 512 bytes.

Each key gets the largest item the ledger writes for it: a 63-character bucket name (the longest
S3 allows), a versioned object with a multipart ETag, a replayed ``CompleteMultipartUpload``
event, an effect claimed after an earlier one completed, and the three decisions of history
kept. The items are written by the real adapter (:class:`DynamoLedger` on moto) and measured by
DynamoDB's item-size rule (:func:`item_size`); the layout the previous release wrote (the key in
``pk``, ``key`` and ``raw_key``, the sequencer padded to 64 characters, the history as maps) is
measured alongside for comparison. Target: 1 write unit (at most 1 KB) for keys up to 512 bytes,
also for a key S3 encodes (spaces) whose event carries it in S3's own form; a key received in
another form (``%20`` for a space) keeps that form too, and is shown apart.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import boto3
from moto import mock_aws

from s3ingest_fn.adapters.dynamo_ledger import DynamoLedger, event_key, item_size, write_units
from s3ingest_fn.core import sequencer
from s3ingest_fn.core.row import Claim, RowState, WriteMeta

BUCKET = "b" * 63
VERSION = "Zlt1vQkT3XvnNb9cS9b0pIjM0ZDQ5yGx"
ETAG = "d41d8cd98f00b204e9800998ecf8427e-10000"
EVENT = "ObjectCreated:CompleteMultipartUpload"
SEQUENCERS = ("0055AED6DCD90281E5", "0055AED6DCD90281E6", "0055AED6DCD90281E7")
KEY_BYTES = (20, 200, 512)


def _largest_item(
    client: Any, ledger: DynamoLedger, key: str, raw_key: str | None = None
) -> dict[str, Any]:
    for i, raw in enumerate(SEQUENCERS):
        ledger.apply_if_newer(
            RowState(True, VERSION, ETAG, 5_000_000_000),
            WriteMeta(
                BUCKET,
                key,
                raw_key or key,
                EVENT,
                "newer-sequencer",
                "replay",
                sequencer.normalize(raw),
                raw,
            ),
            Claim(now_ms=1_800_000_000_000 + i, lease_until_ms=1_800_000_900_000),
        )
        if i < len(SEQUENCERS) - 1:
            ledger.finish(BUCKET, key, i + 1, "done")
    item: dict[str, Any] = client.get_item(
        TableName="ledger", Key={"pk": {"S": f"{BUCKET}/{key}"}}
    )["Item"]
    return item


def _previous_layout(key: str) -> dict[str, Any]:
    """The same row in the layout of the previous release (its ``ledger.py`` docstring)."""
    seq = sequencer.normalize(SEQUENCERS[-1])
    assert seq is not None
    decision = {
        "M": {
            "seq": {"S": SEQUENCERS[-1]},
            "event": {"S": EVENT},
            "reason": {"S": "newer-sequencer"},
            "source": {"S": "replay"},
            "at": {"N": "1800000000002"},
            "state": {"S": "present"},
        }
    }
    return {
        "pk": {"S": f"{BUCKET}/{key}"},
        "bucket": {"S": BUCKET},
        "key": {"S": key},
        "raw_key": {"S": key},
        "state": {"S": "present"},
        "seq": {"S": seq},
        "raw_seq": {"S": SEQUENCERS[-1]},
        "observed": {"BOOL": False},
        "version_id": {"S": VERSION},
        "etag": {"S": ETAG},
        "size": {"N": "5000000000"},
        "rev": {"N": "5"},
        "event_name": {"S": EVENT},
        "reason": {"S": "newer-sequencer"},
        "source": {"S": "replay"},
        "updated_at": {"N": "1800000000002"},
        "op": {"S": "apply"},
        "chg_id": {"S": "0" * 32},
        "chg_seq": {"S": SEQUENCERS[-1]},
        "fx": {"S": "pending"},
        "fx_token": {"N": "5"},
        "fx_lease": {"N": "1800000900000"},
        "fx_done": {"S": "1" * 32},
        "h0": decision,
        "h1": decision,
        "h2": decision,
    }


def run() -> None:
    """Print the figures."""
    with mock_aws():
        client = boto3.client(
            "dynamodb", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
        )
        client.create_table(
            TableName="ledger",
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        )
        ledger = DynamoLedger(client, "ledger", 0)
        print(f"   bucket name {len(BUCKET)} chars, versioned, multipart ETag, history of 3 kept")
        print("   key bytes   item bytes  WRU/write   (previous layout: bytes  WRU/write)")
        worst = 0
        for n in KEY_BYTES:
            size = item_size(_largest_item(client, ledger, "k" * n))
            old = item_size(_previous_layout("k" * n))
            worst = max(worst, write_units(size))
            print(
                f"   {n:9d}   {size:10d}  {write_units(size):9d}   "
                f"({old:25d}  {write_units(old):9d})"
            )
        print(f"   write units per write up to 512-byte keys: {worst}  (target 1)")
        # A key S3 encodes (spaces, non-ASCII) arrives form-encoded: in S3's own form the item
        # stores it once (``rk`` only keeps another form: "%20" for a space, lower-case hex).
        for label, key, raw in (
            ("S3's form", ("a b/" * 128)[:512], event_key),
            ("'%20' form", ("b a/" * 128)[:512], lambda k: quote(k, safe="/")),
        ):
            size = item_size(_largest_item(client, ledger, key, raw(key)))
            print(
                f"   512-byte key with spaces, event in {label}: {size} bytes, "
                f"{write_units(size)} WRU/write"
            )
