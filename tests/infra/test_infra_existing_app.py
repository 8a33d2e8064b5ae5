"""``examples/existing-app``: a team's own CDK app adds ``S3IngestPipeline`` to the stack that owns
its bucket. Synthesized once, in process, with the example's ``cdk.json`` context: one stack, the
pipeline inside it, no unacknowledged cdk-nag finding, cfn-lint clean. And once with an empty
context (``python app.py`` without the CDK CLI, or an app made before today's feature flags):
clean too, the same resources."""

from __future__ import annotations

import ast
import importlib.util
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from aws_cdk import App, CfnElement, Stack
from aws_cdk import aws_lambda as lambda_
from cdk_nag import AwsSolutionsChecks, ServerlessChecks
from cfnlint.api import ManualArgs, lint_file
from typer.testing import CliRunner

from s3ingest.cli import app as cli_app
from s3ingest.local.stack.daemon import outputs
from s3ingest.local.stack.runtime import LocalRuntime, local_settings
from s3ingest.outputs import LEDGER_TABLE_NAME, PIPELINE_STAGE, published_prefix
from s3ingest_cdk import S3IngestPipeline
from s3ingest_cdk.synth import PROJECT_ROOT

from .iam import iam_rendered

EXAMPLE = PROJECT_ROOT / "examples" / "existing-app"
INLINE = lambda_.Code.from_inline("def handler(event, context): pass")


def _example_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("existing_app", EXAMPLE / "app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _context() -> dict[str, Any]:
    context: dict[str, Any] = json.loads((EXAMPLE / "cdk.json").read_text())["context"]
    return context


@pytest.fixture(scope="module")
def team_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[App, Any, Path]]:
    """The example app as ``cdk synth`` runs it (its cdk.json context, its cdk-nag plugin: synth
    fails on an unacknowledged finding), synthesized once."""
    app = App(context=_context(), outdir=str(tmp_path_factory.mktemp("cdk-out-existing-app")))
    stack = _example_module().build(app)
    assembly = app.synth()
    assert [artifact.stack_name for artifact in assembly.stacks] == ["Uploads"]
    yield app, stack, Path(assembly.stacks[0].template_full_path)


def _logical_id(construct: Any) -> str:
    element = construct.node.default_child
    assert isinstance(element, CfnElement)
    logical_id: str = Stack.of(element).resolve(element.logical_id)
    return logical_id


def _resources(template_path: Path, resource_type: str) -> dict[str, Any]:
    template = json.loads(template_path.read_text())
    return {k: v for k, v in template["Resources"].items() if v["Type"] == resource_type}


def test_the_example_imports_the_documented_path_only() -> None:
    tree = ast.parse((EXAMPLE / "app.py").read_text())
    imported = {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    }
    assert "s3ingest_cdk" in imported
    assert not [m for m in imported if m.startswith("s3ingest_cdk.")]
    assert "sys.path" not in (EXAMPLE / "app.py").read_text()


def test_one_stack_holds_the_pipeline_and_the_teams_bucket(team_app: tuple[App, Any, Path]) -> None:
    _, stack, template_path = team_app
    # THEN the pipeline is a construct of the team's stack, not a stack of its own
    pipeline = stack.ingest
    assert isinstance(pipeline, S3IngestPipeline) and pipeline.node.scope is stack
    (table_id,) = _resources(template_path, "AWS::DynamoDB::Table")
    assert table_id == _logical_id(pipeline.table)
    # ... the rule matches the team's bucket, whose EventBridge delivery is on
    buckets = _resources(template_path, "AWS::S3::Bucket")
    uploads_id = _logical_id(pipeline.bucket)
    assert uploads_id.startswith("Uploads") and uploads_id in buckets
    notification = buckets[uploads_id]["Properties"]["NotificationConfiguration"]
    assert notification == {"EventBridgeConfiguration": {"EventBridgeEnabled": True}}
    (rule,) = [
        r
        for r in _resources(template_path, "AWS::Events::Rule").values()
        if "EventPattern" in r["Properties"]
        and "aws.s3" in r["Properties"]["EventPattern"]["source"]
    ]
    assert rule["Properties"]["EventPattern"]["detail"]["bucket"]["name"] == [{"Ref": uploads_id}]
    # ... and the pipeline's queues and functions are there too
    assert len(_resources(template_path, "AWS::SQS::Queue")) == 3
    assert len(_resources(template_path, "AWS::Lambda::Function")) == len(pipeline.functions)
    resources = json.loads(template_path.read_text())["Resources"]
    assert not [k for k, r in resources.items() if r["Type"].startswith("Custom::")]


def test_cdk_nag_finds_nothing_unacknowledged(team_app: tuple[App, Any, Path]) -> None:
    app, _, _ = team_app
    report = AwsSolutionsChecks(verbose=True).validate_scope(app)
    findings = [
        f"{violation.rule_name} at {resource.construct_path}"
        for violation in report.violations
        for resource in violation.violating_resources
    ]
    assert not findings, "\n".join(findings)


def test_cdk_nag_serverless_finds_nothing_unacknowledged(team_app: tuple[App, Any, Path]) -> None:
    # GIVEN a team that runs cdk-nag's Serverless pack in CI as well
    app, _, _ = team_app
    report = ServerlessChecks(verbose=True).validate_scope(app)
    findings = [
        f"{violation.rule_name} at {resource.construct_path}"
        for violation in report.violations
        for resource in violation.violating_resources
    ]
    # THEN the pipeline inside its stack has nothing unacknowledged either
    assert not findings, "\n".join(findings)


def test_cfn_lint_is_clean(team_app: tuple[App, Any, Path]) -> None:
    _, _, template_path = team_app
    matches = lint_file(template_path, config=ManualArgs(regions=["us-east-1", "eu-west-1"]))
    problems = [f"{m.rule.id}: {m.message}" for m in matches if m.rule.id[0] in "EW"]
    assert not problems, "\n".join(problems)


#: The team's own processor function the example may name (context ``auditFunctionArn``).
AUDIT_FUNCTION_ARN = "arn:aws:lambda:us-east-1:123456789012:function:uploads-audit"


def test_the_teams_processor_function_is_invoked_and_nothing_else(tmp_path: Path) -> None:
    # GIVEN the example with the team's processor function
    app = App(context={**_context(), "auditFunctionArn": AUDIT_FUNCTION_ARN}, outdir=str(tmp_path))
    stack = _example_module().build(app)
    template_path = Path(app.synth().stacks[0].template_full_path)
    pipeline = stack.ingest
    role_ref = {"Ref": _logical_id(pipeline.ingest.role)}
    invoked = [
        statement["Resource"]
        for policy in _resources(template_path, "AWS::IAM::Policy").values()
        if role_ref in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if statement["Action"] == "lambda:InvokeFunction"
    ]
    # THEN the ingest function may invoke that function (no version or alias wildcard) ...
    assert invoked == [AUDIT_FUNCTION_ARN]
    function = _resources(template_path, "AWS::Lambda::Function")[
        _logical_id(pipeline.ingest_function)
    ]["Properties"]
    (entry,) = json.loads(function["Environment"]["Variables"]["PROCESSORS"])
    assert entry["functionArn"] == AUDIT_FUNCTION_ARN and entry["prefixes"] == ["audit/"]
    # ... with time for it (60 s and the margin), and cdk-nag has nothing to say
    assert function["Timeout"] == 75
    report = AwsSolutionsChecks(verbose=True).validate_scope(app)
    assert not report.violations


@pytest.fixture(scope="module")
def bare_team_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[App, Any, Path]]:
    """The example app with an empty context (no feature flag), synthesized once."""
    app = App(context={}, outdir=str(tmp_path_factory.mktemp("cdk-out-existing-app-bare")))
    stack = _example_module().build(app)
    assembly = app.synth()
    yield app, stack, Path(assembly.stacks[0].template_full_path)


def test_the_example_synthesizes_clean_with_an_empty_context(
    team_app: tuple[App, Any, Path], bare_team_app: tuple[App, Any, Path]
) -> None:
    app, _, template_path = bare_team_app
    report = AwsSolutionsChecks(verbose=True).validate_scope(app)
    assert not report.violations
    matches = lint_file(template_path, config=ManualArgs(regions=["us-east-1", "eu-west-1"]))
    assert not [f"{m.rule.id}: {m.message}" for m in matches if m.rule.id[0] in "EW"]
    # THEN the same resources as with the example's cdk.json, each with the same properties
    # (but for the order of a policy statement's elements, the team's stack's flag: iam_rendered)
    bare = json.loads(template_path.read_text())["Resources"]
    flagged = json.loads(team_app[2].read_text())["Resources"]
    assert sorted(bare) == sorted(flagged)
    assert [k for k in bare if iam_rendered(bare[k]) != iam_rendered(flagged[k])] == []
    # ... the team's buckets log under the logs bucket's policy (no ACL)
    buckets = [r["Properties"] for r in bare.values() if r["Type"] == "AWS::S3::Bucket"]
    assert buckets and not [b for b in buckets if "AccessControl" in b]


def _published_outputs(template_path: Path) -> dict[str, Any]:
    outputs: dict[str, Any] = json.loads(template_path.read_text())["Outputs"]
    return {k: v for k, v in outputs.items() if k.startswith(published_prefix("uploads"))}


def test_the_pipeline_publishes_the_outputs_the_cli_reads_with_its_stage(
    team_app: tuple[App, Any, Path],
) -> None:
    _, stack, template_path = team_app
    published = _published_outputs(template_path)
    prefix = published_prefix("uploads")
    assert published.pop(prefix + PIPELINE_STAGE)["Value"] == "uploads"
    assert {k.removeprefix(prefix) for k in published} == set(stack.ingest.outputs())
    assert published[prefix + LEDGER_TABLE_NAME]["Value"] == {
        "Ref": _logical_id(stack.ingest.table)
    }


def test_two_pipelines_of_one_stage_in_one_stack_are_refused() -> None:
    stack = Stack(App(), "Team")
    S3IngestPipeline(stack, "One", stage="uploads", code=INLINE)
    S3IngestPipeline(stack, "Two", stage="reports", code=INLINE)
    with pytest.raises(ValueError, match="give each pipeline of a stack its own stage"):
        S3IngestPipeline(stack, "Three", stage="uploads", code=INLINE)


def test_the_cli_operates_the_pipeline_the_example_stack_publishes(
    team_app: tuple[App, Any, Path], emulator: Any
) -> None:
    # GIVEN the example's stack on the emulator: its published outputs as synthesized, each
    # valued with the local runtime's resource of that output name
    _, _, template_path = team_app
    rt = LocalRuntime(emulator, local_settings(stage="uploads"))
    local = outputs(rt)
    prefix = published_prefix("uploads")
    values = {
        key: local.get(key.removeprefix(prefix), output["Value"])
        for key, output in _published_outputs(template_path).items()
        if key.removeprefix(prefix) in local or key == prefix + PIPELINE_STAGE
    }
    assert LEDGER_TABLE_NAME in {k.removeprefix(prefix) for k in values}
    stack_name = f"Uploads-{uuid.uuid4().hex[:8]}"
    emulator.client("cloudformation").create_stack(
        StackName=stack_name,
        TemplateBody=json.dumps(
            {
                "Resources": {"TeamQueue": {"Type": "AWS::SQS::Queue"}},
                "Outputs": {key: {"Value": value} for key, value in values.items()},
            }
        ),
    )
    rt.faithful.put("audit/a.csv", "1")
    rt.flush()
    rt.drain()
    # WHEN the CLI is pointed at the stack (no --pipeline: it holds one; --stack given before
    # the command or after it)
    env = emulator.function_environment()
    found = CliRunner().invoke(
        cli_app,
        ["explain", rt.resources.bucket, "audit/a.csv", "--stack", stack_name, "--json"],
        env=env,
    )
    status = CliRunner().invoke(cli_app, ["--stack", stack_name, "status", "--json"], env=env)
    # THEN it reads that pipeline's ledger and health
    assert found.exit_code == 0, found.output
    assert json.loads(found.stdout)["ledger"]["state"] == "present"
    assert status.exit_code in (0, 1), status.output
    health = json.loads(status.stdout)
    assert health["queue"]["visible"] == 0 and health["dead_letter_queue"]["visible"] == 0
    assert health["eventbridge_delivery"] is True
    # ... and --pipeline names the one to act on, refusing a stage the stack does not publish
    other = CliRunner().invoke(
        cli_app, ["--pipeline", "reports", "status", "--stack", stack_name], env=env
    )
    assert other.exit_code == 3
    assert "no pipeline 'reports'; the pipelines it publishes: uploads" in other.output
