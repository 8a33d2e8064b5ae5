"""Onboarding (``s3ingest onboard``, :mod:`s3ingest.onboard`) on the local runtime: an existing
bucket holding objects and another team's configurations onboards while live traffic flows,
converges, keeps the foreign configuration, and a re-run resumes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from s3ingest.cli import app
from s3ingest.deployed import DeployedStack, StackNotFoundError
from s3ingest.local.stack.provisioning import FOREIGN_INVENTORY_ID, FOREIGN_QUEUE_ID
from s3ingest.onboard import estimate_cost, price_class, run_id


def test_run_id_is_deterministic_per_stack_and_bucket() -> None:
    assert run_id("S3Ingest-prod", "b") == run_id("S3Ingest-prod", "b")
    assert run_id("S3Ingest-prod", "b") != run_id("S3Ingest-prod", "c")
    assert run_id("S3Ingest-prod", "b") != run_id("S3Ingest-dev", "b")
    assert run_id("S3Ingest-prod", "b").startswith("onboard-")


def test_cost_estimate_prices_requests_by_class() -> None:
    assert price_class("s3:ListObjectVersions") == "s3:list"
    assert price_class("s3:HeadObject") == "s3:get"
    assert price_class("dynamodb:PutItem") == "dynamodb:write"
    assert price_class("dynamodb:CreateTable") is None
    cost = estimate_cost(
        {"s3:ListObjectVersions": 2000, "s3:HeadObject": 1000, "dynamodb:PutItem": 1_000_000}
    )
    # 2 x $0.005 + 1 x $0.0004 + $0.625
    assert cost["usd"] == pytest.approx(0.01 + 0.0004 + 0.625)
    assert cost["region"] == "us-east-1" and cost["sources"]


def test_deployed_stack_names_its_buckets() -> None:
    stack = DeployedStack("S", {"BucketName": "a", "BucketNames": "a,b"})
    assert stack.bucket_names == ["a", "b"] and stack.bucket() == "a" and stack.bucket("b") == "b"
    with pytest.raises(StackNotFoundError, match="no landing bucket 'c'"):
        stack.bucket("c")
    assert DeployedStack("S", {"BucketName": "a"}).bucket_names == ["a"]


def _foreign_intact(config: dict[str, Any]) -> bool:
    queues = config["notification"].get("QueueConfigurations", [])
    return any(q["Id"] == FOREIGN_QUEUE_ID for q in queues) and any(
        c["Id"] == FOREIGN_INVENTORY_ID for c in config["inventory"]
    )


def test_example_existing_bucket_scenario_onboards_and_converges() -> None:
    """Done-when check of issue 15: an existing bucket holding objects, with a foreign
    notification configuration, onboards, converges and shows the foreign configuration
    intact."""
    from s3ingest.local.rehearsal.scenario import run_scenario

    result = run_scenario(Path("examples/scenarios/existing-bucket.jsonl"))
    assert result["error"] is None
    assert result["converged"] is True, result["differences"]
    assert result["effects_problems"] == []
    # nothing was delivered before onboarding: S3 sent no events for the existing bucket
    assert all(m["delivered_at"] > 10 for m in result["messages"])
    (onboarded,) = result["onboardings"]
    assert onboarded["status"] == "done" and onboarded["event_bridge"]["switched_on"]
    assert onboarded["objects"] >= 4
    config = result["bucket_config"]["team-archive"]
    assert "EventBridgeConfiguration" in config["notification"]
    assert _foreign_intact(config)
    keys = {r["key"]: r["state"] for r in result["ledger"]}
    assert keys["2024/report one.csv"] == "present" and keys["2025/new file.txt"] == "present"
    assert keys["2024/café/naïve résumé.pdf"] == "deleted"


def test_onboarding_with_live_traffic_converges_and_a_rerun_resumes() -> None:
    from s3ingest.local.rehearsal.demo import run_existing_demo

    report = run_existing_demo(objects=120, live_operations=20, seed=3, onboard_twice=True)
    assert report["converged"] is True, report["differences"]
    assert report["foreign_config_intact"] and report["event_bridge_on"]
    assert report["events_before_onboarding"] == 0
    first, again = report["onboard"], report["onboard_again"]
    assert first["status"] == "done" and first["objects"] >= 120
    assert first["requests"]["s3:ListObjectVersions"] >= 1
    assert first["cost"]["usd"] > 0
    # the re-run is the same run, a new attempt; it lists nothing again
    assert again["backfill"]["run"] == first["backfill"]["run"]
    assert again["backfill"]["attempt"] == 2 and again["backfill"]["resumed"] is True
    assert again["event_bridge"]["switched_on"] is False
    assert (
        again["requests"].get("s3:ListObjectVersions", 0)
        < first["requests"]["s3:ListObjectVersions"] + 2
    )


def test_cli_onboard_local_prints_one_json_document() -> None:
    result = CliRunner().invoke(app, ["onboard", "--local", "--json"])
    assert result.exit_code == 0, result.output
    # (the document is the last line: in a test process, a handler module first imported
    # inside a local Lambda invocation can log through the runner's captured output)
    doc = json.loads(result.stdout.splitlines()[-1])
    assert doc["converged"] is True and doc["foreign_config_intact"] is True
    onboarded = doc["onboard"]
    assert {"objects", "elapsed_s", "requests", "cost", "backfill"} <= set(onboarded)


def test_cli_local_demo_existing_renders_the_onboarding() -> None:
    result = CliRunner().invoke(app, ["local", "demo", "--existing"])
    assert result.exit_code == 0, result.output
    assert "onboarding team-archive-existing" in result.stdout
    assert "CONVERGED" in result.stdout and "other-team-queue" in result.stdout


class _Session:
    """A boto3 session stand-in whose clients reach the emulator (what ``connect`` returns for
    a deployed stack, here over the local deployment)."""

    def __init__(self, emulator: Any) -> None:
        self._emulator = emulator

    def client(self, service: str) -> Any:
        return self._emulator.client(service)


def _deployed(rt: Any) -> Any:
    from s3ingest.commands.context import Deployed
    from s3ingest.local.stack.runtime import BACKFILL_LISTING

    r = rt.resources
    outputs = {
        "BucketName": r.bucket,
        "BucketNames": ",".join(r.bucket_names),
        "LedgerTableName": r.table,
        "QueueUrl": r.queue_url,
        "InventoryBucketName": r.inventory_bucket,
        "ListingBackfillStateMachineArn": rt.machines.machine(BACKFILL_LISTING),
    }
    return Deployed(_Session(rt.emu), DeployedStack("S3Ingest-test", outputs))


def test_cli_onboard_against_a_stack_asks_first_then_resumes(
    emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The AWS path of ``s3ingest onboard --stack`` (outputs, confirmation, the execution, the
    reconciliation), with the stack's clients pointed at a local deployment."""
    from s3ingest import cli
    from s3ingest.cli import context as cli_context
    from s3ingest.local.stack.provisioning import LocalBucket
    from s3ingest.local.stack.runtime import LocalRuntime, local_settings
    from s3ingest.settings import BucketSpec

    rt = LocalRuntime(
        emulator,
        local_settings(),
        buckets=[
            LocalBucket(BucketSpec()),
            LocalBucket(BucketSpec(name="h4-cli-existing", existing=True), foreign_config=True),
        ],
    )
    with rt:
        for i in range(15):
            rt.bucket("h4-cli-existing").put(f"k{i:02d} é+", "old")
        monkeypatch.setattr(cli_context, "connect", lambda stack: _deployed(rt))
        runner = CliRunner()
        args = ["onboard", "--stack", "S3Ingest-test", "--bucket", "h4-cli-existing", "--json"]
        # WHEN it runs without --yes and nobody can answer: nothing changes
        declined = runner.invoke(cli.app, args)
        assert declined.exit_code == 1, declined.output
        assert json.loads(declined.stdout)["status"] == "declined"
        assert (
            "EventBridgeConfiguration" not in rt.bucket_config()["h4-cli-existing"]["notification"]
        )
        # WHEN it runs with --yes
        with rt.function_environment():
            done = runner.invoke(cli.app, [*args, "--yes"])
        assert done.exit_code == 0, done.output
        report = json.loads(done.stdout)
        assert report["status"] == "done" and report["event_bridge"]["switched_on"]
        assert report["objects"] == 15
        assert report["requests_source"].startswith("derived")
        assert _foreign_intact(report["configuration"])
        assert report["reconciliation"]["source"] == "listing"
        # and again: the same run resumes, EventBridge already on; no closing reconciliation
        with rt.function_environment():
            again = json.loads(runner.invoke(cli.app, [*args, "--no-reconcile"]).stdout)
        assert again["backfill"]["run"] == report["backfill"]["run"]
        assert again["backfill"]["attempt"] == 2 and not again["event_bridge"]["switched_on"]
        assert again["reconciliation"] == {"skipped": True, "reason": "--no-reconcile"}
        rt.drain()
        rt.machines.lambdas.quiesce()
        assert rt.compare().converged, rt.compare().differences


def test_cli_onboard_refuses_unknown_buckets_and_mixed_targets(
    emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = CliRunner()
    both = runner.invoke(app, ["onboard", "--stack", "S", "--local"])
    assert both.exit_code == 2
    local_bucket = runner.invoke(app, ["onboard", "--local", "--bucket", "b"])
    assert local_bucket.exit_code == 2 and "--bucket applies to --stack only" in local_bucket.output
    reconcile = runner.invoke(app, ["reconcile", "--local", "--bucket", "b"])
    assert reconcile.exit_code == 2
