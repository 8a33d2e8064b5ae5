"""The ingest Lambda handler: SQS batch in, partial batch response out (CONTRACT C9, C10)."""

from __future__ import annotations

import copy
import hashlib
import json
import threading
from typing import Any, cast

import pytest

from s3ingest_fn.core.model import Outcome, Result
from s3ingest_fn.handlers.ingest import make_handler
from s3ingest_fn.services.ingest import MessageProcessor
from tests.samples import load_sample


def eventbridge_body(key: str) -> str:
    doc = copy.deepcopy(load_sample("awsdocs-s3ug__eventbridge-ObjectCreated.json"))
    assert isinstance(doc, dict)
    doc["detail"]["object"]["key"] = key
    return json.dumps(doc)


def sqs_event(count: int) -> dict[str, Any]:
    """A Lambda SQS event shaped like the AWS doc sample, one EventBridge S3 event per record:
    record ``i`` has messageId ``msg-i`` and object key ``key-i``."""
    sample = load_sample("awsdocs-lambda__sqs-event-standard.json")
    assert isinstance(sample, dict)
    records = []
    for i in range(count):
        record = copy.deepcopy(sample["Records"][i % len(sample["Records"])])
        record["messageId"] = f"msg-{i}"
        record["body"] = eventbridge_body(f"key-{i}")
        record["md5OfBody"] = hashlib.md5(record["body"].encode()).hexdigest()
        records.append(record)
    return {"Records": records}


class FakeProcessor:
    """MessageProcessor-like: returns RETRIED for ``retry_ids``, APPLIED otherwise; inside
    process() waits at ``together`` (a barrier: the calls that must run at once) and records
    the most calls seen running at once."""

    def __init__(
        self, retry_ids: frozenset[str] = frozenset(), together: threading.Barrier | None = None
    ) -> None:
        self.retry_ids = retry_ids
        self.together = together
        self.calls: list[tuple[str, str]] = []
        self.max_active = 0
        self._active = 0
        self._lock = threading.Lock()

    def process(self, body: Any, message_id: str = "") -> list[Result]:
        with self._lock:
            self.calls.append((body, message_id))
            self._active += 1
            self.max_active = max(self.max_active, self._active)
        try:
            if self.together is not None:
                self.together.wait(timeout=30)  # BrokenBarrierError: fewer ran at once
        finally:
            with self._lock:
                self._active -= 1
        key = json.loads(body)["detail"]["object"]["key"]
        if message_id in self.retry_ids:
            return [
                Result(outcome=Outcome.RETRIED, reason="dynamodb: ThrottlingException", key=key)
            ]
        return [Result(outcome=Outcome.APPLIED, reason="newer-sequencer", key=key)]


class Emitted:
    def __init__(self) -> None:
        self.calls: list[tuple[Result, str]] = []

    def __call__(self, result: Result, message_id: str) -> None:
        self.calls.append((result, message_id))


def _handler(processor: FakeProcessor, emit: Emitted, concurrency: int = 4) -> Any:
    return make_handler(
        cast(MessageProcessor, processor), record_concurrency=concurrency, emit=emit
    )


@pytest.mark.contract("C9")
def test_only_the_retried_record_is_reported() -> None:
    # GIVEN a batch of three whose middle record needs a retry
    processor, emit = FakeProcessor(retry_ids=frozenset({"msg-1"})), Emitted()
    event = sqs_event(3)

    # WHEN the handler runs
    response = _handler(processor, emit)(event, None)

    # THEN exactly that record is a batch item failure
    assert response == {"batchItemFailures": [{"itemIdentifier": "msg-1"}]}
    assert sorted(processor.calls) == sorted((r["body"], r["messageId"]) for r in event["Records"])


@pytest.mark.contract("C9")
def test_all_records_succeed() -> None:
    processor, emit = FakeProcessor(), Emitted()

    response = _handler(processor, emit)(sqs_event(3), None)

    assert response == {"batchItemFailures": []}


@pytest.mark.contract("C9")
def test_all_records_retried_lists_every_id_without_raising() -> None:
    ids = frozenset(f"msg-{i}" for i in range(5))
    processor, emit = FakeProcessor(retry_ids=ids), Emitted()

    response = _handler(processor, emit)(sqs_event(5), None)

    assert set(response) == {"batchItemFailures"}
    failures = response["batchItemFailures"]
    assert sorted(f["itemIdentifier"] for f in failures) == sorted(ids)
    assert len(failures) == len(ids)


@pytest.mark.contract("C10")
def test_records_of_a_batch_run_concurrently_up_to_the_bound() -> None:
    # GIVEN eight records, each of which waits until four run at once, and a bound of four
    processor, emit = FakeProcessor(together=threading.Barrier(4)), Emitted()

    # WHEN the batch is handled
    response = _handler(processor, emit, concurrency=4)(sqs_event(8), None)

    # THEN four ran at once, never more
    assert response == {"batchItemFailures": []}
    assert len(processor.calls) == 8
    assert processor.max_active == 4


@pytest.mark.contract("C9")
@pytest.mark.parametrize("retry_ids", [frozenset(), frozenset({"msg-0", "msg-3"})])
def test_emit_is_called_once_per_result_with_its_message_id(retry_ids: frozenset[str]) -> None:
    processor, emit = FakeProcessor(retry_ids=retry_ids), Emitted()

    _handler(processor, emit)(sqs_event(4), None)

    assert sorted(
        (message_id, result.key, result.outcome) for result, message_id in emit.calls
    ) == [
        (f"msg-{i}", f"key-{i}", Outcome.RETRIED if f"msg-{i}" in retry_ids else Outcome.APPLIED)
        for i in range(4)
    ]
