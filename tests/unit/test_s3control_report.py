"""The emulated Batch Operations completion report and the backfill Report step agree: rows as
the documented examples show them are read with their error code (CONTRACT C13)."""

from __future__ import annotations

import json

import pytest

from s3ingest.local.emulator.batch_ops import TaskResult
from s3ingest.local.emulator.s3control_jobs import REPORT_SCHEMA, _report_csv
from s3ingest_fn.services.backfill_control import read_report
from tests.fakes import FakeInventoryStore

pytestmark = pytest.mark.contract("C13")


def _result(key: str, code: str, text: str) -> TaskResult:
    task = {"taskId": "t", "s3Bucket": "landing", "s3Key": key, "s3VersionId": None}
    return TaskResult(task=task, code=code, text=text, temporary_retries=0)


def _store_with(rows: bytes) -> FakeInventoryStore:
    store = FakeInventoryStore()
    manifest = {
        "Format": "Report_CSV_20180820",
        "Results": [{"TaskExecutionStatus": "failed", "Bucket": "reports", "Key": "f.csv"}],
        "ReportSchema": REPORT_SCHEMA,
    }
    store.put("reports", "backfill-reports/job-j/manifest.json", json.dumps(manifest).encode())
    store.put("reports", "f.csv", rows)
    return store


def test_the_rows_the_emulator_writes_are_read_with_their_error_code() -> None:
    text = _report_csv(
        "failed",
        [
            _result("a+b", "PermanentFailure", 'Lambda returned function error: {"x": "y, z"}'),
            _result("%C3%A9", "TemporaryFailure", "throttled"),
        ],
    )
    assert text.splitlines()[0] == (
        'landing,a+b,,failed,200,PermanentFailure,"Lambda returned function error: '
        '{""x"": ""y, z""}"'
    )
    report = read_report(_store_with(text.encode()), "reports", "j")
    assert report["failed"] == 2
    assert report["errors"] == {"PermanentFailure": 1, "TemporaryFailure": 1}
    first = report["samples"][0]
    assert (first["Key"], first["HTTPStatusCode"]) == ("a+b", "200")
    assert first["ResultMessage"] == 'Lambda returned function error: {"x": "y, z"}'


def test_the_documented_example_row_is_read_with_its_error_code() -> None:
    # the failed Lambda task row of the completion report examples (batch-ops-examples-reports)
    row = (
        b'awsexamplebucket1,image_14975,,failed,200,PermanentFailure,"Lambda returned function '
        b'error: {""errorMessage"":""Task timed out after 3.00 seconds""}"\n'
    )
    report = read_report(_store_with(row), "reports", "j")
    assert report["errors"] == {"PermanentFailure": 1}
    assert report["samples"][0]["HTTPStatusCode"] == "200"
