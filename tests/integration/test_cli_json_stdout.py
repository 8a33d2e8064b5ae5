"""A CLI ``--json`` run over the local runtime prints one JSON document and nothing else: what
the in-process functions emit (EMF metric lines, logs) is theirs, not the caller's stdout."""

from __future__ import annotations

import json

from aws_lambda_powertools import Metrics
from typer.testing import CliRunner

from s3ingest.cli import app


def test_a_json_run_over_the_local_runtime_prints_pure_json() -> None:
    # GIVEN Powertools' process-wide metric set one value short of its automatic flush (100
    # values of a name), as a long test session left it when a relayed batch once printed
    # its EMF document on the CLI's stdout
    shared = Metrics(namespace="S3Ingest", service="s3ingest")
    for _ in range(99):
        shared.add_metric(name="changes_published", unit="Count", value=1)
    try:
        # WHEN a --json command runs the whole pipeline locally
        result = CliRunner().invoke(app, ["verify", "--local", "--json"])
    finally:
        shared.clear_metrics()
    # THEN its stdout is exactly one JSON document
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["ok"] is True
    assert '"_aws"' not in result.stdout
