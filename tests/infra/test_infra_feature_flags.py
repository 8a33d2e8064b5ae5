"""Feature-flag independence: ``S3IngestPipeline`` in a team's app synthesizes, cdk-nag and
cfn-lint clean, with no context at all and with the flags ``cdk init`` writes today, to the same
resources; ``app.py``'s stack is the same template byte for byte without ``cdk.json``.

A team's app without ``@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy`` used to fail inside the
pipeline (``objectOwnership must be set to "ObjectWriter" when accessControl is
"LogDeliveryWrite"``): the flags the pipeline's resources read are pinned on its node
(:mod:`s3ingest_cdk.flags`) and its buckets' access logs are delivered under a bucket policy set
explicitly (:func:`s3ingest_cdk.server_access_logs`).

A team's own bucket the pipeline does not set up (the ``bucket`` prop, or a
``LandingBucketSource`` with ``event_bridge=False``) must send its events to EventBridge: synth
fails naming the fix; a ``LandingBucketSource`` gets delivery from the set-up resource.
"""

from __future__ import annotations

import json
from typing import Any

import jsii
import pytest
from aws_cdk import App, IStableAnyProducer, Lazy, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3

from s3ingest.settings import BucketSpec
from s3ingest_cdk import LandingBucketSource, S3IngestPipeline, enable_event_bridge
from s3ingest_cdk.constructs.landing_bucket import event_bridge_delivery
from s3ingest_cdk.flags import PINNED_FLAGS, STACK_FLAGS
from s3ingest_cdk.synth import Synth, cdk_json_context, recommended_flags

from .conftest import TEAM_PARTNER_BUCKET, TEAM_VARIANTS, TeamSynth
from .iam import iam_rendered
from .test_infra_cfn_lint import lint_problems
from .test_infra_nag import _findings


def test_the_app_without_any_context_is_the_same_stack(synth: Synth, bare_synth: Synth) -> None:
    # GIVEN app.py's composition with no context at all (python app.py, no CDK CLI)
    # THEN its template is cdk.json's, byte for byte (same settings: the defaults are cdk.json's)
    assert bare_synth.settings == synth.settings
    assert json.dumps(bare_synth.template, sort_keys=True) == json.dumps(
        synth.template, sort_keys=True
    )
    # ... and cdk-nag and cfn-lint have nothing to say
    findings = _findings(bare_synth.app)
    assert not findings, "unacknowledged cdk-nag findings:\n" + "\n".join(findings)
    problems = lint_problems(bare_synth.template_path)
    assert not problems, "cfn-lint:\n" + "\n".join(problems)


@pytest.mark.parametrize("variant", TEAM_VARIANTS)
def test_the_pipeline_in_a_team_app_is_nag_and_lint_clean(
    variant: str, request: pytest.FixtureRequest
) -> None:
    team: TeamSynth = request.getfixturevalue(variant)
    findings = _findings(team.app)
    assert not findings, "unacknowledged cdk-nag findings:\n" + "\n".join(findings)
    problems = lint_problems(team.template_path)
    assert not problems, "cfn-lint:\n" + "\n".join(problems)


def test_the_pipeline_is_the_same_under_any_flags(
    team_bare_synth: TeamSynth, team_recommended_synth: TeamSynth
) -> None:
    bare, recommended = team_bare_synth.template, team_recommended_synth.template
    # THEN the same resources, each with the same properties, but for the order of a policy
    # statement's actions and resources, which the team's stack renders (iam_rendered)
    assert sorted(bare["Resources"]) == sorted(recommended["Resources"])
    differing = [
        logical_id
        for logical_id, resource in bare["Resources"].items()
        if iam_rendered(resource) != iam_rendered(recommended["Resources"][logical_id])
    ]
    assert not differing
    assert iam_rendered(bare) == iam_rendered(recommended)
    # ... the synths cover what the flags touch: a bucket set-up, a Distributed Map, processors
    types = {resource["Type"] for resource in bare["Resources"].values()}
    assert {"Custom::S3IngestBucketSetup", "AWS::StepFunctions::StateMachine"} <= types
    assert team_bare_synth.pipeline.processor_output is not None


@pytest.mark.parametrize("variant", TEAM_VARIANTS)
def test_access_logs_are_delivered_under_a_bucket_policy(
    variant: str, request: pytest.FixtureRequest
) -> None:
    team: TeamSynth = request.getfixturevalue(variant)
    resources = team.template["Resources"]
    buckets = {k: r for k, r in resources.items() if r["Type"] == "AWS::S3::Bucket"}
    # THEN no bucket has an ACL: ownership enforced, no AccessControl
    for properties in (b["Properties"] for b in buckets.values()):
        assert "AccessControl" not in properties
        rules = properties["OwnershipControls"]["Rules"]
        assert rules == [{"ObjectOwnership": "BucketOwnerEnforced"}]
    # ... every logged bucket's logs go to the access-logs bucket, which allows the logging
    # service to put them under the bucket's prefix, for that bucket of this account only
    access_logs = team.pipeline.landings.shared.access_logs.node.default_child
    logs = team.stack.resolve(access_logs.logical_id)  # type: ignore[union-attr]
    (policy,) = [
        r["Properties"]["PolicyDocument"]["Statement"]
        for r in resources.values()
        if r["Type"] == "AWS::S3::BucketPolicy" and r["Properties"]["Bucket"] == {"Ref": logs}
    ]
    delivery = {
        json.dumps(s["Condition"]["ArnLike"]["aws:SourceArn"], sort_keys=True): s
        for s in policy
        if s.get("Principal") == {"Service": "logging.s3.amazonaws.com"}
    }
    logged = {
        logical_id: b["Properties"]["LoggingConfiguration"]
        for logical_id, b in buckets.items()
        if "LoggingConfiguration" in b["Properties"]
    }
    assert len(logged) == 3  # the landing, inventory and processor output buckets
    for logical_id, logging in logged.items():
        assert logging["DestinationBucketName"] == {"Ref": logs}
        statement = delivery.pop(json.dumps({"Fn::GetAtt": [logical_id, "Arn"]}, sort_keys=True))
        assert statement["Action"] == "s3:PutObject" and statement["Effect"] == "Allow"
        account = {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
        assert statement["Condition"]["StringEquals"] == account
        prefix = logging["LogFilePrefix"]
        assert statement["Resource"] == {
            "Fn::Join": ["", [{"Fn::GetAtt": [logs, "Arn"]}, f"/{prefix}*"]]
        }
    assert not delivery
    # ... and the existing bucket is not logged by the stack (it is not the stack's)
    assert TEAM_PARTNER_BUCKET not in json.dumps(logged)


def test_pinned_flags_are_the_recommended_ones_and_cdk_json_s() -> None:
    # The pipeline pins what cdk init writes today; the stack keeps cdk.json's values (its
    # partition stays AWS::Partition, as the templates always had it).
    recommended = recommended_flags()
    context = cdk_json_context()
    assert {flag: recommended[flag] for flag in PINNED_FLAGS} == PINNED_FLAGS
    assert {flag: context[flag] for flag in {**PINNED_FLAGS, **STACK_FLAGS}} == {
        **PINNED_FLAGS,
        **STACK_FLAGS,
    }


# --- a team's own bucket: EventBridge delivery switched on, or a synth error naming the fix ---

INLINE = lambda_.Code.from_inline("def handler(event, context): pass")


def _team_stack() -> Stack:
    return Stack(App(context={}), "Team")


def _delivery_problems(pipeline: S3IngestPipeline) -> list[str]:
    """The problems the landing buckets' validations report (what synth fails with)."""
    return [problem for entry in pipeline.landings.entries for problem in entry.node.validate()]


def test_a_bucket_of_the_app_without_delivery_fails_synth_naming_the_fix() -> None:
    # GIVEN a bucket of the team's app, without EventBridge delivery, as `bucket`
    stack = _team_stack()
    uploads = s3.Bucket(stack, "Uploads")
    pipeline = S3IngestPipeline(stack, "Ingest", bucket=uploads, code=INLINE)
    # THEN synth fails, naming the bucket and every fix
    (problem,) = _delivery_problems(pipeline)
    assert "Team/Uploads does not send its events to EventBridge" in problem
    assert "s3ingest_cdk.enable_event_bridge(bucket)" in problem
    assert "event_bridge_enabled=True" in problem
    assert "buckets=[LandingBucketSource(BucketSpec(existing=True), bucket)]" in problem
    with pytest.raises(RuntimeError, match="does not send its events to EventBridge"):
        stack.node.root.synth()  # type: ignore[attr-defined]


@pytest.mark.parametrize("how", ["enable_event_bridge", "event_bridge_enabled", "later"])
def test_a_bucket_of_the_app_with_delivery_passes(how: str) -> None:
    stack = _team_stack()
    uploads = s3.Bucket(stack, "Uploads", event_bridge_enabled=how == "event_bridge_enabled")
    if how == "enable_event_bridge":
        enable_event_bridge(uploads)
    pipeline = S3IngestPipeline(stack, "Ingest", bucket=uploads, code=INLINE)
    if how == "later":  # switched on after the pipeline is built: checked at synth
        uploads.enable_event_bridge_notification()
    assert _delivery_problems(pipeline) == []


def test_an_imported_bucket_is_its_owners_to_configure() -> None:
    stack = _team_stack()
    uploads = s3.Bucket.from_bucket_name(stack, "Uploads", "team-uploads")
    pipeline = S3IngestPipeline(stack, "Ingest", bucket=uploads, code=INLINE)
    assert _delivery_problems(pipeline) == []


def test_a_bucket_source_without_delivery_gets_it_from_the_set_up_resource() -> None:
    # GIVEN a bucket of the app without delivery, as a LandingBucketSource (the default spec)
    stack = _team_stack()
    uploads = s3.Bucket(stack, "Uploads")
    pipeline = S3IngestPipeline(
        stack,
        "Ingest",
        code=INLINE,
        buckets=[LandingBucketSource(BucketSpec(existing=True), uploads)],
    )
    # THEN no problem: the pipeline's set-up resource switches delivery on for that bucket
    assert _delivery_problems(pipeline) == []
    setup = pipeline.landing.setup
    assert setup is not None
    properties = stack.resolve(setup.node.default_child._cfn_properties)  # type: ignore[union-attr]
    assert properties["BucketName"] == stack.resolve(uploads.bucket_name)
    assert properties["EventBridge"] == "true"


def test_a_bucket_source_that_opts_out_of_delivery_fails_synth_naming_the_fix() -> None:
    stack = _team_stack()
    uploads = s3.Bucket(stack, "Uploads")
    pipeline = S3IngestPipeline(
        stack,
        "Ingest",
        code=INLINE,
        buckets=[LandingBucketSource(BucketSpec(existing=True, event_bridge=False), uploads)],
    )
    (problem,) = _delivery_problems(pipeline)
    assert "Team/Uploads does not send its events to EventBridge" in problem
    assert "event_bridge=True in its LandingBucketSource's BucketSpec" in problem


@jsii.implements(IStableAnyProducer)
class _Produce:
    def __init__(self, value: Any) -> None:
        self.value = value

    def produce(self) -> Any:
        return self.value


def test_delivery_set_as_a_token_is_the_apps_to_know() -> None:
    # GIVEN a bucket whose notification configuration is a token (jsii cannot hand it back)
    stack = _team_stack()
    uploads = s3.Bucket(stack, "Uploads")
    cfn_bucket = uploads.node.default_child
    assert isinstance(cfn_bucket, s3.CfnBucket)
    cfn_bucket.notification_configuration = Lazy.any(
        _Produce({"EventBridgeConfiguration": {"EventBridgeEnabled": True}})
    )
    # THEN it is not checked (None), as an imported bucket is not; no synth error
    assert event_bridge_delivery(uploads) is None
    pipeline = S3IngestPipeline(stack, "Ingest", bucket=uploads, code=INLINE)
    assert _delivery_problems(pipeline) == []
