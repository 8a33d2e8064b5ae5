"""``s3ingest reprocess`` (issue 27): arguments checked before any AWS call, the request it
starts, the report and ``--json`` keys, and its exit codes (0 done, 1 failed, 2 usage, 3 AWS).
The stack and the run are stand-ins: the machine itself runs in test_reprocess_machine.py."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from s3ingest.cli import app
from s3ingest.commands import reprocess as commands
from s3ingest.commands import reprocess as reprocess_ops
from s3ingest_fn.services.reprocess import ReprocessRequest, left_behind

CREDS = {
    "AWS_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "x",
    "AWS_SECRET_ACCESS_KEY": "x",
    "S3INGEST_STACK": None,
}
ARN = "arn:aws:states:us-east-1:123456789012:stateMachine:reprocess"
OUTPUTS = {
    "ReprocessStateMachineArn": ARN,
    "ProcessorNames": "default,thumbs",
    "BucketNames": "landing-a,landing-b",
}


def summary(request: dict[str, Any], failed: int = 0) -> dict[str, Any]:
    counts = dict.fromkeys(
        ("scanned", "behind", "run", "superseded", "held", "skipped", "busy", "failed"), 0
    )
    counts.update(scanned=10, behind=4, run=4 - failed, failed=failed, removed=0, pages=2)
    return {
        **request,
        "version": 2,
        "segments": 16,
        "done": 16,
        "counts": counts,
        "requests": {"scan": 2, "write": 8, "invoke": 4, "checkpoint": 2},
        "left_behind": left_behind(
            ReprocessRequest.of(request),
            failed,
            [
                {"bucket": "landing-a", "key": f"in/k {i}.csv", "error": "boom"}
                for i in range(failed)
            ],
        ),
        "estimated_cost_usd": 0.000123,
    }


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The stack's outputs, and the run: started and followed by stand-ins recording the
    request; ``state["status"]`` and ``state["failed"]`` choose how it ends."""
    from s3ingest import deployed

    monkeypatch.setattr(
        deployed.DeployedStack,
        "load",
        staticmethod(lambda cfn, name: deployed.DeployedStack(name=name, outputs=dict(OUTPUTS))),
    )
    state: dict[str, Any] = {"status": "SUCCEEDED", "failed": 0, "requests": []}

    def start(sfn: Any, arn: str, request: dict[str, Any]) -> str:
        assert arn == ARN
        state["requests"].append(request)
        return f"arn:aws:states:us-east-1:123456789012:execution:reprocess:{request['run']}-x"

    def follow(sfn: Any, execution: str, **kwargs: Any) -> dict[str, Any]:
        request = {"prefix": "", "bucket": None, "dry_run": False, "remove": False}
        request.update(state["requests"][-1])
        ok = state["status"] == "SUCCEEDED"
        status = {
            "execution": execution,
            "status": state["status"],
            "run": request["run"],
            "total": 16,
            "done": 16 if ok else 3,
            "output": summary(request, state["failed"]) if ok else None,
            "error": None if ok else "ValueError",
            "cause": None if ok else "reprocess: boom",
        }
        if kwargs.get("on_status"):
            kwargs["on_status"](status)
        return status

    monkeypatch.setattr(commands, "start_reprocess", start)
    monkeypatch.setattr(commands, "follow_reprocess", follow)
    return state


def run(*args: str) -> Any:
    return CliRunner().invoke(app, ["reprocess", *args], env=CREDS)


def test_json_prints_the_summary_and_exits_0(started: dict[str, Any]) -> None:
    result = run("--stack", "S", "--processor", "thumbs", "--dry-run", "--segments", "8", "--json")
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert set(body) >= {
        "run",
        "processor",
        "version",
        "segments",
        "done",
        "counts",
        "requests",
        "estimated_cost_usd",
    }
    (request,) = started["requests"]
    assert request["processor"] == "thumbs" and request["dry_run"] is True
    assert request["segments"] == 8 and "bucket" not in request and "rate" not in request
    assert "concurrency" not in request  # the service's default: the segments, at most 16
    # the run's default name: <processor>-<UTC timestamp>
    assert request["run"].startswith("thumbs-") and request["run"].endswith("Z")


def test_concurrency_is_passed_to_the_run(started: dict[str, Any]) -> None:
    result = run(
        "--stack",
        "S",
        "--processor",
        "thumbs",
        "--segments",
        "128",
        "--concurrency",
        "64",
        "--json",
    )
    assert result.exit_code == 0, result.output
    (request,) = started["requests"]
    assert (request["segments"], request["concurrency"]) == (128, 64)


def test_the_report_names_every_count_and_the_cost(started: dict[str, Any]) -> None:
    result = CliRunner().invoke(
        app,
        ["reprocess", "--stack", "S", "--processor", "default", "--run", "again"],
        env={**CREDS, "COLUMNS": "120"},
    )
    assert result.exit_code == 0, result.output
    for figure in ("scanned", "behind", "run", "superseded", "held", "skipped", "busy"):
        assert f"keys {figure}" in result.stdout
    assert "keys failed" in result.stdout and "keys removed" in result.stdout
    assert "estimated cost (USD)" in result.stdout and "requests: scan" in result.stdout
    assert started["requests"][0]["run"] == "again"


def test_a_failed_effect_or_execution_exits_1(started: dict[str, Any]) -> None:
    started["failed"] = 2
    assert run("--stack", "S", "--processor", "default").exit_code == 1
    started.update(failed=0, status="FAILED")
    result = run("--stack", "S", "--processor", "default", "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout)["cause"] == "reprocess: boom"


def test_the_keys_left_behind_are_named_with_the_command_that_finishes_them(
    started: dict[str, Any],
) -> None:
    # GIVEN a run over a bucket's prefix that left two keys behind
    started["failed"] = 2
    args = ("--stack", "S", "--processor", "thumbs", "--bucket", "landing-a", "--prefix", "in/")
    # WHEN it is followed to its end, as a report and as JSON
    text = CliRunner().invoke(app, ["reprocess", *args], env={**CREDS, "COLUMNS": "200"})
    result = run(*args, "--json")
    # THEN both name the keys and the exact command, for the same stack; the exit code is 1
    command = "s3ingest reprocess --processor thumbs --bucket landing-a --prefix in/ --stack S"
    assert text.exit_code == result.exit_code == 1
    assert "2 keys left behind" in text.output and "landing-a/in/k 1.csv" in text.output
    assert command in text.output
    assert json.loads(result.stdout)["left_behind"] == {
        "count": 2,
        "samples": [{"bucket": "landing-a", "key": f"in/k {i}.csv"} for i in range(2)],
        "command": command,
    }


def test_no_wait_prints_the_run_and_execution(started: dict[str, Any]) -> None:
    result = run("--stack", "S", "--processor", "default", "--no-wait", "--json", "--run", "r1")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {
        "run": "r1",
        "execution": "arn:aws:states:us-east-1:123456789012:execution:reprocess:r1-x",
    }


@pytest.mark.parametrize(
    "args",
    [
        ["--processor", "nope"],  # not one of the stack's
        ["--processor", "default", "--remove"],  # still configured
        ["--processor", "default", "--bucket", "other"],  # not one of the stack's buckets
        ["--processor", "default", "--prefix", "a/"],  # a prefix needs a bucket
        ["--processor", "default", "--run", "no spaces"],  # not a run name
        ["--processor", "default", "--segments", "0"],
    ],
)
def test_usage_errors_exit_2_before_starting(started: dict[str, Any], args: list[str]) -> None:
    result = run("--stack", "S", *args)
    assert result.exit_code == 2, result.output
    assert started["requests"] == []


def test_a_stack_without_the_machine_is_an_aws_error_exit_3(
    started: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    del OUTPUTS["ReprocessStateMachineArn"]
    try:
        assert run("--stack", "S", "--processor", "default").exit_code == 3
    finally:
        OUTPUTS["ReprocessStateMachineArn"] = ARN


def test_default_run_names_are_run_names() -> None:
    name = reprocess_ops.default_run("my processor/v2", now=0)
    assert name == "my-processor-v2-19700101T000000Z"
    assert reprocess_ops.RUN_NAME.match(name)


@pytest.mark.parametrize(
    ("size", "segments", "says"),
    [
        ((50_000_000, 40_000), 83, None),  # warm to the quota: the segments to reach it
        ((50_000_000, None), None, "the ramp binds"),  # a cold table: the ramp, and what helps
        ((10_000, 40_000), None, None),  # small: the default
    ],
)
def test_a_new_run_reaches_a_warm_ledger_and_says_when_the_ramp_binds(
    started: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    size: tuple[int, int | None],
    segments: int | None,
    says: str | None,
) -> None:
    from s3ingest.cli import floor_notice

    monkeypatch.setattr(floor_notice, "ledger", lambda deployed: size)
    result = run("--stack", "S", "--processor", "thumbs", "--json")
    assert result.exit_code == 0, result.output
    (request,) = started["requests"]
    assert request.get("segments") == segments and request.get("concurrency") == segments
    if says:
        assert says in result.stderr
        assert "ledgerWarmWriteUnits=40000" in result.stderr
        assert "5,500 GET/s" in result.stderr
    else:
        assert "ramp binds" not in result.stderr
    # an operator's own choice, or a run resumed by name, is left alone
    result = run("--stack", "S", "--processor", "thumbs", "--segments", "8", "--json")
    assert started["requests"][-1]["segments"] == 8 and "concurrency" not in started["requests"][-1]
    result = run("--stack", "S", "--processor", "thumbs", "--run", "r1", "--json")
    assert "segments" not in started["requests"][-1]
