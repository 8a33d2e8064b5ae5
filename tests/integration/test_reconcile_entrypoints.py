"""The reconcile Lambda handler and the CLI's ``reconcile`` command, on the emulator, and the
deployed-stack lookup with botocore Stubber (no AWS account)."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from typer.testing import CliRunner

from s3ingest.cli import app
from s3ingest.deployed import DeployedStack, StackNotFoundError
from s3ingest.local.emulator.chaos import Chaos
from s3ingest.local.stack.runtime import LocalRuntime


class Context:
    function_name = "reconcile"
    memory_limit_in_mb = 3008
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:reconcile"
    aws_request_id = "req-1"


def _lost_events(emulator: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[LocalRuntime, str]:
    """A deployment where two events were lost, the reconcile function's environment set for
    it; the runtime and its newest inventory manifest's key."""
    rt = LocalRuntime(emulator, versioning="Enabled")
    rt.faithful.put("kept", "1")
    rt.faithful.put("lost", "1")
    rt.faithful.delete("kept")
    rt.flush(Chaos(seed=0))  # all three delivered...
    rt.drain()
    rt.faithful.put("lost-too", "2")
    rt.faithful.take_pending()  # ...and this one lost
    manifest = rt.write_inventory()
    for name, value in {
        "AWS_ENDPOINT_URL": emulator.endpoint_url,
        "LEDGER_TABLE_NAME": rt.resources.table,
        "INGEST_QUEUE_URL": rt.resources.queue_url,
        "BUCKET_NAME": rt.resources.bucket,
        "INVENTORY_BUCKET_NAME": rt.resources.inventory_bucket,
        "INVENTORY_PREFIX": f"inventory/{rt.resources.bucket}/s3ingest-daily/",
        "POWERTOOLS_METRICS_DISABLED": "false",
    }.items():
        monkeypatch.setenv(name, value)
    from s3ingest_fn import wiring

    wiring.function_reconciler.cache_clear()  # built from this test's environment
    return rt, manifest


@pytest.mark.contract("C12")
def test_reconcile_handler_returns_summary_and_emits_drift_metrics(
    emulator: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a deployment where two events were lost
    rt, manifest = _lost_events(emulator, monkeypatch)
    from s3ingest_fn.handlers import reconcile

    # WHEN the scheduled event runs
    summary = reconcile.handler({"source": "inventory", "marginSeconds": 0}, Context())
    # THEN the summary names the newest report and the drift, and metrics were emitted
    assert summary["manifest"] == manifest
    assert summary["drift"] == {
        "missing": 1,
        "deleted_but_live": 0,
        "content_mismatch": 0,
        "sequencer_contradicted": 0,
    }
    assert summary["repairs_queued"] == 1
    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    metrics = {
        m["Name"] for doc in emf for d in doc["_aws"]["CloudWatchMetrics"] for m in d["Metrics"]
    }
    assert {"drift_total", "drift_missing", "repairs_queued"} <= metrics
    assert any(doc.get("drift_total") in (1, [1], 1.0) for doc in emf), emf
    rt.drain()
    assert rt.compare().converged


def test_the_reconcile_handler_runs_in_columns_where_pyarrow_imports(
    emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN pyarrow importable (the reconcile function's asset holds it:
    # tests/infra/test_infra_role_packages.py) and the per-key diff made to fail
    pytest.importorskip("pyarrow")
    rt, manifest = _lost_events(emulator, monkeypatch)
    from s3ingest_fn.handlers import reconcile
    from s3ingest_fn.services import reconcile as service
    from s3ingest_fn.services import reconcile_columnar

    ran: list[str] = []
    columnar = reconcile_columnar.run_columnar

    def recorded(*args: Any, **kwargs: Any) -> None:
        ran.append("columns")
        columnar(*args, **kwargs)

    def per_key(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the inventory reconciliation fell back to the per-key diff")

    monkeypatch.setattr(reconcile_columnar, "run_columnar", recorded)
    monkeypatch.setattr(service, "diff", per_key)
    monkeypatch.setattr(service, "bucket_truth", per_key)
    # WHEN the scheduled event runs
    summary = reconcile.handler({"source": "inventory", "marginSeconds": 0}, Context())
    # THEN it ran in columns and found what the per-key pass finds
    assert ran == ["columns"]
    assert summary["manifest"] == manifest
    assert summary["drift"]["missing"] == 1 and summary["repairs_queued"] == 1
    rt.drain()
    assert rt.compare().converged


@pytest.mark.contract("C12")
def test_reconcile_cli_local_json() -> None:
    result = CliRunner().invoke(app, ["reconcile", "--local", "--source", "listing", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["source"] == "listing"
    assert report["repairs_queued"] == (
        report["drift_total"] - report["resolved_on_head"] + report["pending_effects"]
    )


def test_reconcile_cli_needs_exactly_one_target() -> None:
    result = CliRunner().invoke(app, ["reconcile"])
    assert result.exit_code == 2
    assert "exactly one of --stack NAME or --local" in " ".join(result.output.split())


def test_deployed_stack_outputs_build_the_reconciler() -> None:
    cfn = boto3.client("cloudformation", region_name="us-east-1")
    outputs = {
        "BucketName": "landing",
        "LedgerTableName": "ledger",
        "QueueUrl": "https://q",
        "InventoryBucketName": "inv",
    }
    with Stubber(cfn) as stub:
        stub.add_response(
            "describe_stacks",
            {
                "Stacks": [
                    {
                        "StackName": "S3Ingest-prod",
                        "CreationTime": "2026-01-01T00:00:00Z",
                        "StackStatus": "CREATE_COMPLETE",
                        "Outputs": [{"OutputKey": k, "OutputValue": v} for k, v in outputs.items()],
                    }
                ]
            },
            {"StackName": "S3Ingest-prod"},
        )
        stack = DeployedStack.load(cfn, "S3Ingest-prod")
    reconciler = stack.reconciler(boto3.session.Session(region_name="us-east-1"))
    assert (reconciler.bucket, reconciler.table, reconciler.queue_url) == (
        "landing",
        "ledger",
        "https://q",
    )
    assert (reconciler.inventory_bucket, reconciler.inventory_prefix) == (
        "inv",
        "inventory/landing/s3ingest-daily/",
    )


def test_deployed_stack_missing_outputs_are_named() -> None:
    cfn = boto3.client("cloudformation", region_name="us-east-1")
    with Stubber(cfn) as stub:
        stub.add_response(
            "describe_stacks",
            {
                "Stacks": [
                    {
                        "StackName": "other",
                        "CreationTime": "2026-01-01T00:00:00Z",
                        "StackStatus": "CREATE_COMPLETE",
                        "Outputs": [],
                    }
                ]
            },
        )
        stack = DeployedStack.load(cfn, "other")
        with pytest.raises(StackNotFoundError, match="BucketName"):
            stack.reconciler(boto3.session.Session(region_name="us-east-1"))
        stub.add_client_error(
            "describe_stacks", "ValidationError", "Stack with id x does not exist"
        )
        with pytest.raises(StackNotFoundError, match="does not exist"):
            DeployedStack.load(cfn, "x")


def test_a_stack_given_by_arn_is_named_by_its_stack_name() -> None:
    # (its metrics carry the stack's name as their dimension, never the ARN)
    cfn = boto3.client("cloudformation", region_name="us-east-1")
    arn = "arn:aws:cloudformation:us-east-1:123456789012:stack/S3Ingest-prod/0a1b2c3d"
    with Stubber(cfn) as stub:
        stub.add_response(
            "describe_stacks",
            {
                "Stacks": [
                    {
                        "StackName": "S3Ingest-prod",
                        "CreationTime": "2026-01-01T00:00:00Z",
                        "StackStatus": "CREATE_COMPLETE",
                        "Outputs": [],
                    }
                ]
            },
            {"StackName": arn},
        )
        assert DeployedStack.load(cfn, arn).name == "S3Ingest-prod"
