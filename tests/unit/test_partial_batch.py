"""The ingest handler's partial batch response is Powertools' (issue 37): the same response,
the same errors, on the same events, without Powertools' batch package at the cold start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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

FUNCTIONS = Path(ingest.__file__).resolve().parents[2]


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
    code = (
        "import json, sys\n"
        "import s3ingest_fn.handlers.ingest as h\n"
        "h._build_from_env()\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(FUNCTIONS),
        "LEDGER_TABLE_NAME": "ledger",
        "DEAD_LETTER_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/dlq",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "secret",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_METRICS_DISABLED": "true",
    }
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.splitlines()[-1])
    assert "s3ingest_fn.handlers.ingest" in loaded  # the check ran
    assert [m for m in loaded if m.startswith("aws_lambda_powertools.utilities.batch")] == []
    assert "aws_lambda_powertools.utilities.data_classes" not in loaded
