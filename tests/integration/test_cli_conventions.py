"""The CLI's habits (aws-cli and sam-cli): global --profile/--region, AWS_REGION honoured, the
stack from $S3INGEST_STACK, documented exit codes (0 ok, 1 unhealthy, 2 usage, 3 AWS), arguments
checked before any AWS call, whole help texts with plain metavars."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from s3ingest.cli import app
from tests.cli_env import BARE


def run(args: list[str], **env: str) -> Any:
    return CliRunner().invoke(app, args, env={**BARE, **env})


def test_aws_region_without_credentials_is_a_credentials_error_exit_3() -> None:
    result = run(["status", "--stack", "X"], AWS_REGION="us-east-1")
    assert result.exit_code == 3, result.output
    assert "no AWS credentials" in result.output


def test_no_region_is_an_aws_error_exit_3_that_names_the_ways_to_give_one() -> None:
    result = run(["status", "--stack", "X"])
    assert result.exit_code == 3
    assert "--region" in result.output and "AWS_REGION" in result.output


def test_an_unknown_profile_is_an_aws_error_exit_3() -> None:
    result = run(["--profile", "nope", "status", "--stack", "X"])
    assert result.exit_code == 3
    assert "nope" in result.output


class _Loaded(Exception):
    """Raised by the stand-in of DeployedStack.load: what the command asked for."""

    def __init__(self, region: str, name: str) -> None:
        super().__init__(region, name)
        self.region, self.name = region, name


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """DeployedStack.load replaced: records (the CloudFormation client's region, the stack
    name) and ends the command."""
    from s3ingest import deployed

    seen: list[tuple[str, str]] = []

    def load(cloudformation: Any, name: str) -> Any:
        seen.append((cloudformation.meta.region_name, name))
        raise deployed.StackNotFoundError(f"stack {name!r} (stand-in)")

    monkeypatch.setattr(deployed.DeployedStack, "load", staticmethod(load))
    return seen


def test_aws_region_is_honoured_as_the_aws_cli_does(captured: list[tuple[str, str]]) -> None:
    creds = {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"}
    run(["status", "--stack", "X"], AWS_REGION="eu-west-1", AWS_DEFAULT_REGION="us-east-1", **creds)
    run(["--region", "ap-south-1", "status", "--stack", "X"], AWS_REGION="eu-west-1", **creds)
    run(["status", "--stack", "X"], AWS_DEFAULT_REGION="us-west-2", **creds)
    assert [region for region, _ in captured] == ["eu-west-1", "ap-south-1", "us-west-2"]


def test_the_stack_comes_from_s3ingest_stack(captured: list[tuple[str, str]]) -> None:
    result = run(
        ["status"],
        S3INGEST_STACK="S3Ingest-prod",
        AWS_REGION="us-east-1",
        AWS_ACCESS_KEY_ID="x",
        AWS_SECRET_ACCESS_KEY="x",
    )
    assert result.exit_code == 3  # the stand-in found no stack: an AWS-side error
    assert captured == [("us-east-1", "S3Ingest-prod")]
    # and without either, it is a usage error
    assert run(["status"]).exit_code == 2


def test_a_reversed_replay_window_is_a_usage_error_before_any_aws_call() -> None:
    # no credentials and no region: any AWS call would end with exit code 3
    result = run(
        ["replay", "--stack", "X", "--from", "2026-11-30T10:00:00Z", "--to", "2026-11-30T09:00:00Z"]
    )
    assert result.exit_code == 2, result.output
    assert "must be after --from" in result.output


def test_status_exit_code_follows_health(monkeypatch: pytest.MonkeyPatch) -> None:
    from s3ingest import deployed
    from s3ingest.commands import status

    monkeypatch.setattr(
        deployed.DeployedStack,
        "load",
        staticmethod(
            lambda cfn, name: deployed.DeployedStack(
                name=name, outputs={"QueueUrl": "https://q", "DeadLetterQueueUrl": "https://d"}
            )
        ),
    )
    doc = {
        "healthy": False,
        "problems": ["dead letter queue holds 3 message(s)"],
        "queue": {"visible": 0, "in_flight": 0, "oldest_age_seconds": None},
        "dead_letter_queue": {"visible": 3, "in_flight": 0},
        "last_drift": None,
        "eventbridge_delivery": True,
        "last_backfill": None,
        "running_backfills": [],
        "running_replays": [],
    }
    monkeypatch.setattr(status, "status", lambda **kw: doc)
    creds = {"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"}
    sick = run(["status", "--stack", "X", "--json"], **creds)
    assert sick.exit_code == 1 and json.loads(sick.stdout)["problems"] == doc["problems"]
    assert "UNHEALTHY" in run(["status", "--stack", "X"], **creds).output
    doc.update(healthy=True, problems=[])
    assert run(["status", "--stack", "X", "--json"], **creds).exit_code == 0


COMMANDS = [
    [],
    ["local"],
    ["local", "demo"],
    ["local", "scenario"],
    ["local", "up"],
    ["local", "logs"],
    ["reconcile"],
    ["backfill"],
    ["backfill", "start"],
    ["backfill", "status"],
    ["replay"],
    ["redrive"],
    ["reprocess"],
    ["explain"],
    ["log-key"],
    ["repair"],
    ["status"],
    ["verify"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "s3ingest")
def test_help_is_whole_and_plain(command: list[str]) -> None:
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "100"})
    assert result.exit_code == 0
    text = result.output
    assert not re.search(r"\{[A-Za-z_]+\}|<(str|int|float|bool|int range|float range)>", text)
    cut = [
        line
        for line in text.splitlines()
        if line.rstrip().endswith("...") and not line.startswith("Usage:")
    ]
    assert cut == [], "a description was cut off"
    assert "../" not in text and "shared/" not in text


def test_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert re.fullmatch(r"s3ingest \d+\.\d+\.\d+\S*\n", result.output)


def test_verify_local_reports_each_hop_and_exits_0(tmp_path: Path) -> None:
    # (a stack name from the environment gives way to --local)
    result = CliRunner().invoke(
        app, ["verify", "--local", "--json"], env={"S3INGEST_STACK": "S3Ingest-prod"}
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["ok"] is True
    assert [h["name"] for h in doc["hops"]] == [
        "put -> ledger row",
        "put -> change event",
        "delete -> tombstone",
        "delete -> change event",
    ]
    assert all(isinstance(h["ms"], int) for h in doc["hops"])
