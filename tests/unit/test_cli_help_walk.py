"""The CLI's aws-cli habits over its whole command tree (issue 36): every command's and group's
``--help`` and ``-h`` whole and plain, the global options (``--profile``, ``--region``,
``--debug``, ``--version``) taken after the command too, and options with fixed choices."""

from __future__ import annotations

import re
from typing import Any

import pytest
import typer
import urllib3  # noqa: F401  (before sockets are disabled: it opens one at import, to probe IPv6)
from typer.core import TyperGroup
from typer.testing import CliRunner

from s3ingest.cli import app
from s3ingest.cli.context import aws_options
from tests.cli_env import BARE, REPR

CREDS = {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"}


def run(args: list[str], **env: str) -> Any:
    return CliRunner().invoke(app, args, env={**BARE, **env})


def _paths(command: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [path]
    if isinstance(command, TyperGroup):
        for name, sub in command.commands.items():
            found += _paths(sub, (*path, name))
    return found


#: Every command and group, by its words: () is s3ingest itself.
TREE = _paths(typer.main.get_command(app))


def test_the_walk_sees_the_whole_tree() -> None:
    assert {("status",), ("backfill", "status"), ("local", "up"), ("log-key",)} <= set(TREE)
    assert len(TREE) >= 20


@pytest.mark.parametrize("flag", ["--help", "-h"])
@pytest.mark.parametrize("path", TREE, ids=lambda p: " ".join(p) or "s3ingest")
def test_every_help_is_whole_and_plain(path: tuple[str, ...], flag: str) -> None:
    result = CliRunner().invoke(app, [*path, flag], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert text.startswith("Usage: s3ingest")
    assert "…" not in text
    cut = [
        line
        for line in text.splitlines()
        if line.rstrip().endswith("...") and not line.startswith("Usage:")
    ]
    assert cut == [], "a description was cut off"
    assert not REPR.search(text), REPR.search(text)
    assert "-h, --help" in text
    if path:  # the global options, on every command and group
        for option in ("--profile NAME", "--region REGION", "--debug", "--version"):
            assert option in text, option


def test_help_after_global_options_after_the_command() -> None:
    result = run(["status", "--local", "--profile", "default", "-h"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("Usage: s3ingest status")


class _Loaded(Exception):
    pass


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """DeployedStack.load replaced: records (the CloudFormation client's region, the stack
    name) and ends the command as a missing stack does (exit code 3)."""
    from s3ingest import deployed

    seen: list[tuple[str, str]] = []

    def load(cloudformation: Any, name: str) -> Any:
        seen.append((cloudformation.meta.region_name, name))
        raise deployed.StackNotFoundError(f"stack {name!r} does not exist (stand-in)")

    monkeypatch.setattr(deployed.DeployedStack, "load", staticmethod(load))
    return seen


def test_region_after_the_command_wins_over_the_one_before(loads: list[tuple[str, str]]) -> None:
    run(["status", "--stack", "X", "--region", "ap-south-1"], **CREDS)
    run(["--region", "eu-west-1", "status", "--stack", "X", "--region", "us-west-2"], **CREDS)
    run(["backfill", "status", "--region", "eu-north-1", "--stack", "X"], **CREDS)
    run(["backfill", "--region", "ca-central-1", "status", "--stack", "X"], **CREDS)
    run(["--region", "eu-west-3", "status", "--stack", "X"], **CREDS)
    assert [region for region, _ in loads] == [
        "ap-south-1",
        "us-west-2",
        "eu-north-1",
        "ca-central-1",
        "eu-west-3",
    ]


def test_profile_after_the_command_is_used_and_not_kept_for_the_next_run() -> None:
    result = run(["status", "--stack", "X", "--profile", "nope"])
    assert result.exit_code == 3, result.output
    assert "nope" in result.output
    run(["status", "--stack", "X"])
    assert aws_options.profile is None


def test_debug_after_the_command_turns_the_wire_log_on(monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3

    seen: list[str] = []
    monkeypatch.setattr(boto3, "set_stream_logger", lambda name, level: seen.append(name))
    result = run(["status", "--stack", "X", "--debug"])
    assert result.exit_code == 3  # no region: after the option was applied
    assert seen == ["botocore"]


def test_version_after_the_command() -> None:
    result = run(["local", "status", "--version"])
    assert result.exit_code == 0
    assert re.fullmatch(r"s3ingest \S+\n", result.stdout)


CHOICES = [
    (["reconcile", "--local", "--source"], "--source", ("inventory", "listing")),
    (["local", "demo", "--reconcile"], "--reconcile", ("inventory", "listing", "none")),
    (
        ["backfill", "start", "--local", "--engine"],
        "--engine",
        ("batch-operations", "distributed-map"),
    ),
]


@pytest.mark.parametrize(
    ("args", "option", "choices"), CHOICES, ids=["reconcile", "local demo", "backfill start"]
)
def test_a_bad_choice_is_a_usage_error_naming_the_choices(
    args: list[str], option: str, choices: tuple[str, ...]
) -> None:
    result = run([*args, "bogus"])
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{option}'" in result.stderr
    for choice in choices:
        assert repr(choice) in result.stderr
    command = [a for a in args if not a.startswith("-")]
    help_text = run([*command, "--help"]).stdout
    assert f"{option} [{'|'.join(choices)}]" in help_text


def test_the_engines_are_the_local_engines() -> None:
    from typing import get_args

    from s3ingest.commands.backfill import LOCAL_ENGINES, LocalEngine

    assert get_args(LocalEngine) == LOCAL_ENGINES == ("batch-operations", "distributed-map")
