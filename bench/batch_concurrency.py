"""Wall time of one 100-record SQS batch with 10 ms injected per DynamoDB call: the handler's
bounded concurrent processing against the same batch processed sequentially.

Target: at most 0.15 of the sequential time. The real handler, processor, parser, decision logic
and ledger adapter run; the DynamoDB client is a stand-in that answers UpdateItem after 10 ms
(``time.sleep``, as network I/O releases the GIL). The emulator is not used here: its server runs
in this process and its CPU time would be measured instead of the handler's concurrency.
"""

from __future__ import annotations

import json
import time
from typing import Any

from s3ingest.local.emulator.s3faithful import SequencerClock, encode_key
from s3ingest.settings import Settings
from s3ingest_fn.adapters.dynamo_ledger import DynamoLedger
from s3ingest_fn.adapters.sqs import DeadLetter
from s3ingest_fn.core.decide import IngestService
from s3ingest_fn.core.model import ObjectState
from s3ingest_fn.handlers.ingest import make_handler
from s3ingest_fn.services.ingest import MessageProcessor

RECORDS = 100
INJECTED_S = 0.010


class SlowDynamo:
    """Answers every UpdateItem (the only call a new key's create makes) after 10 ms."""

    def __init__(self) -> None:
        self.calls = 0

    def update_item(self, **_: Any) -> dict[str, Any]:
        self.calls += 1
        time.sleep(INJECTED_S)
        return {}


class NoBucket:
    def current(self, bucket: str, key: str) -> ObjectState:
        raise AssertionError("creates never read the bucket")


def _event(tag: str) -> dict[str, Any]:
    clock = SequencerClock(seed=1)
    records = []
    for i in range(RECORDS):
        body = {
            "version": "0",
            "detail-type": "Object Created",
            "source": "aws.s3",
            "detail": {
                "bucket": {"name": "bench-bucket"},
                "reason": "PutObject",
                "object": {
                    "key": encode_key(f"{tag}/object {i}"),
                    "size": 3,
                    "etag": "0123456789abcdef0123456789abcdef",
                    "sequencer": clock.next(),
                },
            },
        }
        records.append(
            {
                "messageId": f"{tag}-{i}",
                "receiptHandle": "rh",
                "body": json.dumps(body),
                "attributes": {},
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:ingest",
                "awsRegion": "us-east-1",
            }
        )
    return {"Records": records}


def _timed(concurrency: int, tag: str) -> tuple[float, int]:
    ddb = SlowDynamo()
    service = IngestService(DynamoLedger(ddb, "ledger", 0), NoBucket())  # type: ignore[arg-type]
    processor = MessageProcessor(service, DeadLetter(None, "unused"))  # type: ignore[arg-type]
    handler = make_handler(processor, concurrency, emit=lambda r, m: None)
    event = _event(tag)
    started = time.perf_counter()
    response = handler(event, None)
    elapsed = time.perf_counter() - started
    if response["batchItemFailures"]:
        raise RuntimeError(f"unexpected failures: {response}")
    return elapsed, ddb.calls


def run() -> None:
    concurrency = Settings().record_concurrency
    _timed(concurrency, "warmup")
    seq, seq_calls = _timed(1, "sequential")
    conc, conc_calls = _timed(concurrency, "concurrent")
    print(
        f"   {RECORDS} records, {INJECTED_S * 1000:.0f} ms injected per DynamoDB call "
        f"({seq_calls} and {conc_calls} calls)"
    )
    print(f"   sequential (1 at a time)           {seq * 1000:8.1f} ms")
    print(f"   concurrent ({concurrency} at a time)          {conc * 1000:8.1f} ms")
    print(f"   ratio                              {conc / seq:8.3f}  (target <= 0.15)")
