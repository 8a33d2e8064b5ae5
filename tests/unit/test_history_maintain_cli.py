"""``s3ingest history maintain``: the history writer's maintenance
(s3ingest_fn.handlers.history.maintain) on the local table of the test's run directory, and by
invoking the stack's history writer; the handler's maintenance event; the setting's default."""

from __future__ import annotations

import io
import json
from collections import Counter
from typing import Any

import pytest
from typer.testing import CliRunner

from s3ingest.cli import app
from s3ingest.commands.history import HistoryQueryFailed, HistoryUnavailable, maintain_deployed
from s3ingest.local.stack.history import history_dir, local_env, local_table
from s3ingest.settings import Settings
from s3ingest_fn.handlers import history as handler
from s3ingest_fn.services import history_maintenance
from tests.cli_env import BARE
from tests.unit.test_history import DAY_MS, T0, change, sqs

runner = CliRunner()


def written(commits: int = 12) -> Any:
    """The run directory's local history table after ``commits`` batches on two closed days."""
    table = local_table(fresh=True)
    for c in range(commits):
        handler.write_batch(
            table.refresh(),
            sqs(*(change(f"c{c}-{d}", f"k{d}", at=T0 + d * DAY_MS + c) for d in range(2))),
        )
    return table


def test_maintain_local_compacts_and_prints_its_figures() -> None:
    table = written()
    result = runner.invoke(app, ["history", "maintain", "--local", "--json"], env=BARE)
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)
    assert (figures["files_before"], figures["files_after"], figures["rows"]) == (24, 2, 24)
    assert len(figures["days_compacted"]) == 2
    keys = Counter(r["change_key"] for r in table.refresh().scan().to_arrow().to_pylist())
    assert len(keys) == 24 and set(keys.values()) == {1}
    # a table again: nothing left to compact
    result = runner.invoke(app, ["history", "maintain", "--local"], env=BARE)
    assert result.exit_code == 0 and "days_compacted" in result.stdout


def test_maintain_errors_keep_the_commands_exit_codes(tmp_path: Any) -> None:
    result = runner.invoke(app, ["history", "maintain", "--local"], env=BARE)
    assert result.exit_code == 3 and "no local history table" in result.output
    written(1)
    result = runner.invoke(
        app, ["history", "maintain", "--local", "--retention-hours", "0"], env=BARE
    )
    assert result.exit_code == 2 and "at least 1" in result.output
    result = runner.invoke(app, ["history", "maintain"], env={**BARE, "S3INGEST_STACK": None})
    assert result.exit_code == 2


class FakeLambda:
    def __init__(self, payload: Any, error: str | None = None) -> None:
        self.payload, self.error, self.calls = payload, error, []  # type: ignore[var-annotated]

    def invoke(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        response: dict[str, Any] = {"Payload": io.BytesIO(json.dumps(self.payload).encode())}
        if self.error:
            response["FunctionError"] = self.error
        return response


def test_maintain_deployed_invokes_the_history_writer() -> None:
    client = FakeLambda({"files_before": 3, "files_after": 1})
    outputs = {"HistoryWriterFunctionName": "writer-fn"}
    assert maintain_deployed(client, outputs, 6) == {"files_before": 3, "files_after": 1}
    (call,) = client.calls
    assert call["FunctionName"] == "writer-fn" and call["InvocationType"] == "RequestResponse"
    assert json.loads(call["Payload"]) == {"maintenance": {"retentionHours": 6}}
    with pytest.raises(HistoryUnavailable, match="HistoryWriterFunctionName"):
        maintain_deployed(client, {}, 6)
    failing = FakeLambda({"errorMessage": "boom"}, error="Unhandled")
    with pytest.raises(HistoryQueryFailed, match="boom"):
        maintain_deployed(failing, outputs, 6)


def test_the_handler_maintains_on_a_maintenance_event() -> None:
    table = written()
    figures = handler.maintain(table, {"maintenance": {"retentionHours": 1}})
    assert figures["files_after"] == 2 and figures["rows"] == 24
    with pytest.raises(ValueError, match="retentionHours"):
        handler.maintain(table, {"maintenance": {"retentionHours": "6"}})


class Context:
    function_name = "history"
    memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:history"
    aws_request_id = "req-1"


def test_the_lambda_entry_point_takes_the_schedules_event(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    table = written()
    for name, value in local_env(history_dir()).items():
        monkeypatch.setenv(name, value)
    figures = handler.handler({"maintenance": {"retentionHours": 6}}, Context())
    assert figures["files_after"] == 2 and len(figures["days_compacted"]) == 2
    assert table.refresh().scan().to_arrow().num_rows == 24


def test_the_settings_default_is_the_maintenances_and_the_clis() -> None:
    from s3ingest.cli.history import RETENTION_HOURS

    assert Settings().history_snapshot_retention_hours == history_maintenance.RETENTION_HOURS
    assert RETENTION_HOURS == history_maintenance.RETENTION_HOURS
