"""The team's ``processorPolicyStatements`` (issue 24): whole services on every resource refused,
what was merged named on each role at synth time, wildcard actions never acknowledged to cdk-nag."""

from __future__ import annotations

from pathlib import Path

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from cdk_nag import AwsSolutionsChecks

from s3ingest.settings import SettingsError
from s3ingest_cdk import ProcessorConfig, S3IngestPipeline
from s3ingest_cdk.synth import Synth, cdk_json_context

from .conftest import TEAM_QUEUE_ARN

INLINE = "def handler(event, context):\n    return None\n"
MODULE = "s3ingest_examples.sidecar:process"


def _infos(construct: object) -> list[str]:
    return [
        str(entry.data)
        for entry in construct.node.metadata  # type: ignore[attr-defined]
        if entry.type == "aws:cdk:info"
    ]


def test_each_role_names_what_was_merged_into_it(processors_synth: Synth) -> None:
    pipeline = processors_synth.pipeline
    roles = [f.role for f in pipeline.ingest_service_functions]
    assert len(roles) == 4  # ingest, backfill, listing shard, reprocess segment
    for function in pipeline.ingest_service_functions:
        (info,) = [i for i in _infos(function.role) if "processorPolicyStatements" in i]
        assert function.node.path in info
        assert f"[0] Allow sqs:SendMessage on {TEAM_QUEUE_ARN}" in info
    # the roles that run no in-process processor get nothing, and no note
    assert not any("processorPolicyStatements" in i for i in _infos(pipeline.reconcile.role))


def _pipeline(tmp_path: Path, statements: list[iam.PolicyStatement]) -> tuple[App, Stack]:
    app = App(context=cdk_json_context(), outdir=str(tmp_path))
    stack = Stack(app, "Team")
    S3IngestPipeline(
        stack,
        "Ingest",
        stage="team",
        inventory_enabled=False,
        processors=[ProcessorConfig("thumbs", module=MODULE)],
        processor_policy_statements=statements,
        code=lambda_.Code.from_inline(INLINE),
    )
    return app, stack


@pytest.mark.parametrize(
    ("actions", "resources", "refused"),
    [
        (["*"], ["*"], "'*'"),
        (["sqs:SendMessage", "dynamodb:*"], [TEAM_QUEUE_ARN, "*"], "'dynamodb:*'"),
    ],
)
def test_props_refuse_whole_services_on_every_resource(
    tmp_path: Path, actions: list[str], resources: list[str], refused: str
) -> None:
    with pytest.raises(SettingsError) as caught:
        _pipeline(tmp_path, [iam.PolicyStatement(actions=actions, resources=resources)])
    assert caught.value.problems == [
        f"processorPolicyStatements[0]: Action {refused} with Resource '*' grants whole services "
        "on every resource to the roles that run the processors (the ingest, backfill and "
        "listing shard roles): name the actions the processor calls, and the ARNs it calls them "
        "on"
    ]


def test_wildcard_actions_are_left_to_the_team_to_acknowledge(tmp_path: Path) -> None:
    app, _stack = _pipeline(
        tmp_path,
        [
            # explicit actions on the team's objects: acknowledged (keys known at run time)
            iam.PolicyStatement(actions=["s3:GetObject"], resources=["arn:aws:s3:::team/*"]),
            # a wildcard action: reported, and so is its statement's resource wildcard
            iam.PolicyStatement(actions=["s3:Get*"], resources=["arn:aws:s3:::other/*"]),
            iam.PolicyStatement(actions=["sqs:Send*"], resources=[TEAM_QUEUE_ARN]),
        ],
    )
    app.synth()
    report = AwsSolutionsChecks(verbose=True).validate_scope(app)
    text = "\n".join(
        f"{resource.construct_path} {violation.rule_name} {violation.description} "
        f"{resource.locations}"
        for violation in report.violations
        for resource in violation.violating_resources
    )
    assert "IAM5" in text, text
    for wildcard in ("s3:Get*", "sqs:Send*", "arn:aws:s3:::other/*"):
        assert wildcard in text, wildcard
    assert "arn:aws:s3:::team/*" not in text
