"""The ingest handler's partial batch response is Powertools' (issue 37): the same response,
the same errors, on the same events, without Powertools' batch package at the cold start."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)

from s3ingest_fn.handlers import ingest
from tests.cold_start import ingest_cold_start_modules


def _handler(record: Any) -> str:
    if record.body.startswith("fail"):
        raise RuntimeError(record.body)
    return record.message_id


def _powertools(event: Any) -> Any:
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    return process_partial_response(
        event=event, record_handler=_handler, processor=processor, context=None
    )


def _ours(event: Any) -> Any:
    with ThreadPoolExecutor(max_workers=1) as pool:
        return ingest.partial_batch_response(event, _handler, pool)


def _record(i: int, body: str) -> dict[str, Any]:
    return {"messageId": f"m{i}", "body": body, "eventSource": "aws:sqs"}


@pytest.mark.parametrize(
    "event",
    [
        {"Records": [_record(1, "ok"), _record(2, "ok")]},
        {"Records": [_record(1, "fail a"), _record(2, "ok"), _record(3, "fail b")]},
        {"Records": [_record(1, "fail"), _record(2, "fail")]},
        {"Records": [{"messageId": "m1"}, _record(2, "ok")]},  # no body: a failure
    ],
)
def test_the_response_is_powertools(event: dict[str, Any]) -> None:
    assert _ours(event) == _powertools(event)


@pytest.mark.parametrize(
    "event",
    [
        {"Records": []},
        {},
        {"Records": {"a": 1}},
        ["not", "a", "mapping"],
        {"Records": [{"body": "fail"}]},  # a failure without a message id
    ],
)
def test_an_event_powertools_refuses_is_refused_alike(event: Any) -> None:
    with pytest.raises(Exception) as theirs:
        _powertools(event)
    with pytest.raises(Exception) as ours:
        _ours(event)
    assert type(ours.value) is type(theirs.value)
    assert str(ours.value) == str(theirs.value)


def test_the_cold_start_imports_no_powertools_batch_package(tmp_path: Path) -> None:
    loaded = ingest_cold_start_modules(tmp_path)
    assert "s3ingest_fn.handlers.ingest" in loaded  # the check ran
    assert [m for m in loaded if m.startswith("aws_lambda_powertools.utilities.batch")] == []
    assert "aws_lambda_powertools.utilities.data_classes" not in loaded
