"""The CLI's output for scripts and logs (issue 36): with ``--json`` stdout is JSON, an error
included (``{"error": {"type", "message", "exit_code"}}``, the exit code unchanged, the error
line still on stderr); text output off a terminal is whole (no cell cut with "…", no line
wrapped) and shows values as text, never a Python repr."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import urllib3  # noqa: F401  (before sockets are disabled: it opens one at import, to probe IPv6)
from rich.console import Console
from rich.table import Table as RichTable
from typer.testing import CliRunner

from s3ingest.cli import app
from s3ingest.cli.render import Table, WholeConsole, emit_backfill, plain
from tests.cli_env import BARE, REPR

AWS = {"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"}


def run(args: list[str], **env: str) -> Any:
    return CliRunner().invoke(app, args, env={**BARE, **env})


def error_of(result: Any) -> dict[str, Any]:
    """The JSON error on stdout: one object, nothing else."""
    doc = json.loads(result.stdout)
    assert set(doc) == {"error"} and set(doc["error"]) == {"type", "message", "exit_code"}
    assert doc["error"]["exit_code"] == result.exit_code
    return dict(doc["error"])


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """DeployedStack.load replaced: stack ``X`` exists with the outputs of the returned dict
    (fill it in); any other stack does not."""
    from s3ingest import deployed

    outputs: dict[str, str] = {}

    def load(cloudformation: Any, name: str) -> Any:
        if name != "X":
            raise deployed.StackNotFoundError(f"stack {name!r} does not exist (stand-in)")
        return deployed.DeployedStack(name=name, outputs=outputs)

    monkeypatch.setattr(deployed.DeployedStack, "load", staticmethod(load))
    return outputs


# --json: errors as JSON on stdout


def test_a_stack_that_does_not_exist_is_a_json_error_exit_3(stack: dict[str, str]) -> None:
    result = run(["status", "--stack", "Nope", "--json"], **AWS)
    assert result.exit_code == 3
    error = error_of(result)
    assert error["type"] == "StackNotFoundError"
    assert "'Nope' does not exist" in error["message"]
    assert "error: stack 'Nope' does not exist" in result.stderr  # the line of text mode


def test_missing_outputs_are_a_json_error_exit_3_naming_them(stack: dict[str, str]) -> None:
    result = run(["log-key", "some/key", "--stack", "X", "--json"], **AWS)
    assert result.exit_code == 3
    error = error_of(result)
    assert error["type"] == "StackNotFoundError"
    assert "has no output(s) LogKeySecretArn;" in error["message"]  # a name, not a list repr


def test_no_region_is_a_json_error_exit_3() -> None:
    result = run(["held", "--stack", "X", "--json"])
    assert result.exit_code == 3
    assert error_of(result)["type"] == "NoRegionError"


def test_text_mode_keeps_the_error_on_stderr_and_stdout_empty(stack: dict[str, str]) -> None:
    result = run(["status", "--stack", "Nope"], **AWS)
    assert result.exit_code == 3
    assert result.stdout == ""
    assert result.stderr == "error: stack 'Nope' does not exist (stand-in)\n"


@pytest.mark.parametrize(
    "args",
    [
        ["reconcile", "--source", "bogus", "--local", "--json"],  # before --json is read
        ["reconcile", "--local", "--json", "--source", "bogus"],
        ["status", "--json", "--no-such-option"],
        ["status", "--json"],  # neither --stack nor --local: the command's own check
        ["approve", "--stack", "X", "--json"],  # neither BUCKET KEY nor --all-matching
    ],
    ids=lambda a: " ".join(a),
)
def test_a_usage_error_is_a_json_error_exit_2(args: list[str]) -> None:
    result = run(args)
    assert result.exit_code == 2, result.output
    error = error_of(result)
    assert error["message"] and error["type"] in {"BadParameter", "NoSuchOption", "UsageError"}
    assert "rror" in result.stderr  # click's "Error: ..." or the command's "error: ..."


def test_a_bad_choice_names_the_choices_in_the_json_error() -> None:
    result = run(["reconcile", "--local", "--source", "bogus", "--json"])
    assert "'inventory', 'listing'" in error_of(result)["message"]


def test_without_a_local_stack_local_is_a_json_error_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = run(["explain", "b", "k", "--local", "--json"])
    assert result.exit_code == 2
    assert error_of(result)["type"] == "LocalStackError"


def test_no_backfill_yet_is_a_json_error_exit_1(
    stack: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from s3ingest.commands import backfill

    stack["BackfillStateMachineArn"] = "arn:aws:states:us-east-1:1:stateMachine:b"
    monkeypatch.setattr(backfill, "latest_backfill", lambda sfn, arn: None)
    result = run(["backfill", "status", "--stack", "X", "--json"], **AWS)
    assert result.exit_code == 1
    assert error_of(result)["message"] == "no backfill has run yet"
    assert run(["backfill", "status", "--stack", "X"], **AWS).stderr == "no backfill has run yet\n"


# --json: results


STATUS = {
    "healthy": True,
    "problems": [],
    "queue": {"visible": 0, "in_flight": 0, "oldest_age_seconds": None},
    "dead_letter_queue": {"visible": 0, "in_flight": 0},
    "last_drift": {"drift_total": 0, "at": "2026-12-07T10:00:00+00:00"},
    "eventbridge_delivery": True,
    "last_backfill": {"arn": "arn:aws:states:us-east-1:1:execution:b:1", "status": "SUCCEEDED"},
    "running_backfills": ["arn:aws:states:us-east-1:1:execution:b:2"],
    "running_replays": [],
}


@pytest.fixture
def healthy(stack: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    from s3ingest.commands import status

    doc = json.loads(json.dumps(STATUS))
    monkeypatch.setattr(status, "stack_status", lambda deployed, max_age_seconds: doc)
    return doc


def test_status_json_parses_with_its_exit_code(healthy: dict[str, Any]) -> None:
    result = run(["status", "--stack", "X", "--json"], **AWS)
    assert result.exit_code == 0
    assert json.loads(result.stdout) == STATUS
    healthy.update(healthy=False, problems=["dead letter queue holds 3 message(s)"])
    result = run(["status", "--json", "--stack", "X"], **AWS)
    assert result.exit_code == 1
    assert json.loads(result.stdout)["problems"] == ["dead letter queue holds 3 message(s)"]


# text: values as text, never a repr


def test_status_text_shows_nested_values_as_text(healthy: dict[str, Any]) -> None:
    result = run(["status", "--stack", "X"], **AWS)
    assert result.exit_code == 0
    text = result.stdout
    assert not REPR.search(text), REPR.search(text)
    assert "last reconciliation drift: drift_total: 0, at: 2026-12-07T10:00:00+00:00" in text
    assert "newest backfill: arn: arn:aws:states:us-east-1:1:execution:b:1, status: SUCCEEDED" in (
        text
    )
    assert "running backfills: arn:aws:states:us-east-1:1:execution:b:2\n" in text
    assert "running replays: none\n" in text
    assert "oldest -\n" in text


def test_status_text_shows_each_buckets_last_attestation(healthy: dict[str, Any]) -> None:
    healthy["last_attestation"] = {
        "a": {"taken_at": "2026-12-07T10:00:00.000000Z", "equal": False, "differing": 2},
        "b": None,
    }
    text = run(["status", "--stack", "X"], **AWS).stdout
    assert "last attestation of a: differ at 2026-12-07T10:00:00.000000Z\n" in text
    assert "last attestation of b: none\n" in text


def test_replay_text_shows_nested_values_as_text(
    stack: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from s3ingest.commands import replay

    stack.update(ArchiveArn="arn:aws:events:us-east-1:1:archive/a", RuleArn="arn:r")
    monkeypatch.setattr(
        replay,
        "replay_window",
        lambda events, **kw: {"from": "2026-01-01T08:00:00+00:00", "replay": "r1"},
    )
    monkeypatch.setattr(
        replay,
        "follow_replay",
        lambda events, cloudwatch, **kw: {
            "state": "COMPLETED",
            "outcomes_so_far": {"applied": 2, "duplicate": 0},
            "last_event": None,
        },
    )
    args = ["replay", "--stack", "X", "--from", "2026-01-01T08:00:00Z"]
    result = run([*args, "--to", "2026-01-01T09:00:00Z"], **AWS)
    assert result.exit_code == 0, result.output
    assert not REPR.search(result.stdout), result.stdout
    assert "outcomes_so_far: applied: 2, duplicate: 0\n" in result.stdout
    assert "last_event: -\n" in result.stdout


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "-"),
        ({"a": 1, "b": None}, "a: 1, b: -"),
        (["x", ("y", 2)], "x, y, 2"),
        ([], "none"),
        ({"nested": {"k": [1, 2]}}, "nested: k: 1, 2"),
        (3, "3"),
        (True, "True"),
    ],
)
def test_plain(value: Any, text: str) -> None:
    assert plain(value) == text


# text: whole, never cut


ARN = "arn:aws:states:us-east-1:123456789012:execution:" + "backfill-" * 20 + "end"


def test_a_backfill_table_off_a_terminal_is_whole(capsys: pytest.CaptureFixture[str]) -> None:
    report = {
        "execution": ARN,
        "status": "RUNNING",
        "report": {"bucket": "reports", "prefix": "backfill/" + "x" * 80},
        "total": None,
    }
    emit_backfill(report, as_json=False)
    text = capsys.readouterr().out
    assert "…" not in text
    assert ARN in text  # on one line: nothing wrapped
    assert f"bucket: reports, prefix: backfill/{'x' * 80}" in text
    assert not REPR.search(text), text


def test_a_table_on_a_narrow_terminal_folds_instead_of_cutting() -> None:
    def render(table_class: type[RichTable], console: Console) -> str:
        table = table_class(title="t")
        table.add_column("figure")
        table.add_column("value", justify="right")
        table.add_row("execution arn", ARN)
        with console.capture() as captured:
            console.print(table)
        return captured.get()

    assert "…" in render(RichTable, Console(force_terminal=True, width=40))  # rich's default
    folded = render(Table, WholeConsole(force_terminal=True, width=40, color_system=None))
    assert "…" not in folded
    assert "".join(re.findall(r"[A-Za-z0-9:-]+", folded)).count("backfill-") == 20
