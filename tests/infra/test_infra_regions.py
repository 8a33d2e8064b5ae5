"""Several Regions, one change stream (``docs/organisation.md``): ``examples/regions``'s two
regional pipelines with their :class:`ChangeStreamForwarder` and the hub stack, synthesized
once for the module (inline stand-in code)."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from aws_cdk import App, Environment, Stack
from aws_cdk import aws_lambda as lambda_

from s3ingest.settings import BucketSpec, SettingsError
from s3ingest_cdk import ChangeStreamForwarder, ChangeStreamHub, ForwardedRegion, S3IngestPipeline
from s3ingest_cdk.constructs.change_bus import ONLY_THE_RELAY_SID
from s3ingest_cdk.forwarding import FORWARD_RULE_NAME
from s3ingest_cdk.synth import PROJECT_ROOT

from .policy_eval import Request, decide, symbol
from .test_infra_cfn_lint import lint_problems
from .test_infra_organisation import _nag

EXAMPLE = PROJECT_ROOT / "examples" / "regions"
INLINE = lambda_.Code.from_inline("def handler(event, context):\n    return None\n")
HUB_ACCOUNT = "111111111111"
US_ACCOUNT = "222222222222"
STRANGER = "333333333333"
HUB_BUS = "arn:aws:events:eu-west-1:111111111111:event-bus/s3ingest-changes-hub"


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("regions_app", EXAMPLE / "app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[App, Any]]:
    """``examples/regions``: its three stacks, synthesized once (inline code)."""
    app = App(outdir=str(tmp_path_factory.mktemp("cdk-out-regions")))
    _example().build(app, code=INLINE)
    yield app, app.synth()


def _resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def _template(example: tuple[App, Any], name: str) -> dict[str, Any]:
    return dict(example[1].get_stack_by_name(name).template)


def test_example_synthesizes_nag_and_cfn_lint_clean(example: tuple[App, Any]) -> None:
    # GIVEN the example's three stacks THEN cdk-nag and cfn-lint find nothing
    app, assembly = example
    assert sorted(a.stack_name for a in assembly.stacks) == [
        "S3Ingest-eu",
        "S3Ingest-us",
        "S3IngestHub",
    ]
    assert not _nag(app)
    for artifact in assembly.stacks:
        assert not lint_problems(Path(artifact.template_full_path)), artifact.stack_name


@pytest.mark.parametrize("stack", ["S3Ingest-eu", "S3Ingest-us"])
def test_forwarder_sends_every_change_to_the_hub_with_a_put_events_only_role(
    example: tuple[App, Any], stack: str
) -> None:
    # GIVEN a regional stack's forwarding rule
    template = _template(example, stack)
    ((_, rule),) = (
        (k, v)
        for k, v in _resources(template, "AWS::Events::Rule").items()
        if v["Properties"].get("Name") == FORWARD_RULE_NAME
    )
    props = rule["Properties"]
    buses = _resources(template, "AWS::Events::EventBus")
    (change_bus,) = buses
    # THEN it reads the pipeline's change bus, matches every change, sends it unchanged
    assert props["EventBusName"] == {"Ref": change_bus}
    assert props["EventPattern"] == {"source": ["s3ingest"]}
    (target,) = props["Targets"]
    assert not {"Input", "InputPath", "InputTransformer"} & set(target)
    # AND its target is the hub bus, with a dead-letter queue (retained) and a role
    assert symbol(target["Arn"]) == HUB_BUS
    queue_id = target["DeadLetterConfig"]["Arn"]["Fn::GetAtt"][0]
    queue = template["Resources"][queue_id]
    assert queue["DeletionPolicy"] == "Retain"
    assert queue["Properties"]["SqsManagedSseEnabled"] is True
    role_id = target["RoleArn"]["Fn::GetAtt"][0]
    role = template["Resources"][role_id]["Properties"]
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "events.amazonaws.com"}
    assert symbol(trust["Condition"]["ArnEquals"]["aws:SourceArn"]).endswith(
        f":rule/s3ingest-changes-prod/{FORWARD_RULE_NAME}"
    )
    # AND the rule and role are the ones the hub's policy names (fixed names, no reference)
    account, region = {
        "S3Ingest-eu": (HUB_ACCOUNT, "eu-west-1"),
        "S3Ingest-us": (US_ACCOUNT, "us-east-1"),
    }[stack]

    def resolved(value: Any) -> str:
        text = symbol(value).replace("ref:AWS::Region", region)
        return text.replace("ref:AWS::AccountId", account)

    hub_statements = {s["Sid"]: s for s in _hub_policy(example)[0]["Statement"]}
    admits = hub_statements["cdk-AdmitTheRegionalForwarders"]["Condition"]["ArnEquals"]
    assert resolved(trust["Condition"]["ArnEquals"]["aws:SourceArn"]) in {
        symbol(a) for a in admits["aws:SourceArn"]
    }
    role_arn = f"arn:aws:iam::{account}:role/{resolved(role['RoleName'])}"
    assert role_arn in {symbol(a) for a in admits["aws:PrincipalArn"]}
    # AND the role may only put events on the hub bus
    statements = [
        s
        for policy in _resources(template, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in policy["Properties"]["Roles"]
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
    assert [(s["Effect"], s["Action"], symbol(s["Resource"])) for s in statements] == [
        ("Allow", "events:PutEvents", HUB_BUS)
    ]


@pytest.mark.parametrize("stack", ["S3Ingest-eu", "S3Ingest-us"])
def test_regional_change_bus_still_admits_only_the_relay(
    example: tuple[App, Any], stack: str
) -> None:
    # GIVEN a regional stack's change bus policy: one statement, the relay's
    template = _template(example, stack)
    policies = list(_resources(template, "AWS::Events::EventBusPolicy").values())
    assert len(policies) == 1
    statement = policies[0]["Properties"]["Statement"]
    assert statement["Sid"].endswith(ONLY_THE_RELAY_SID)
    admitted = statement["Condition"]["StringNotEquals"]["aws:PrincipalArn"]
    relay_roles = [r for r in _resources(template, "AWS::IAM::Role") if "ChangeRelay" in r]
    # ... and the scheduled reconcile function's, which publishes attestations (issue 38)
    reconcile_roles = [
        r for r in _resources(template, "AWS::IAM::Role") if "ReconcileFunctionRole" in r
    ]
    assert len(relay_roles) == len(reconcile_roles) == 1
    assert sorted(symbol(a) for a in admitted) == sorted(
        f"arn:{r}" for r in relay_roles + reconcile_roles
    )
    # THEN the forwarder's role is refused PutEvents on the change bus (it needs none)
    forwarder_role = next(r for r in _resources(template, "AWS::IAM::Role") if "Forwarder" in r)
    bus = symbol(statement["Resource"])
    request = Request(
        {"AWS": f"arn:{forwarder_role}"},
        "events:PutEvents",
        bus,
        {"aws:PrincipalArn": f"arn:{forwarder_role}", "aws:PrincipalIsAWSService": "false"},
    )
    assert decide({"Statement": [statement]}, request, identity_allows=True) == "denied"


def _hub_policy(example: tuple[App, Any]) -> tuple[dict[str, Any], str]:
    template = _template(example, "S3IngestHub")
    statements = [
        p["Properties"]["Statement"]
        for p in _resources(template, "AWS::Events::EventBusPolicy").values()
    ]
    ((bus_id, _),) = _resources(template, "AWS::Events::EventBus").items()
    return {"Statement": statements}, f"arn:{bus_id}"


def _forwarder(account: str, region: str) -> dict[str, str]:
    return {
        "role": f"arn:aws:iam::{account}:role/s3ingest-fwd-prod-{region}",
        "rule": f"arn:aws:events:{region}:{account}:rule/s3ingest-changes-prod/{FORWARD_RULE_NAME}",
    }


def test_hub_admits_only_the_named_forwarders_s3ingest_changes(example: tuple[App, Any]) -> None:
    # GIVEN the hub bus's policy
    policy, bus = _hub_policy(example)

    def verdict(
        account: str, region: str, source: str = "s3ingest", *, same_account: bool = False
    ) -> str:
        sender = _forwarder(account, region)
        request = Request(
            {"AWS": f"arn:aws:iam::{account}:root"},
            "events:PutEvents",
            bus,
            {
                "aws:PrincipalArn": sender["role"],
                "aws:SourceArn": sender["rule"],
                "aws:PrincipalIsAWSService": "false",
                "events:source": source,
            },
        )
        return decide(policy, request, identity_allows=same_account)

    # THEN the us-east-1 forwarder (another account) and the eu-west-1 one (the hub's account,
    # its role's identity policy) deliver s3ingest changes
    assert verdict(US_ACCOUNT, "us-east-1") == "allowed"
    assert verdict(HUB_ACCOUNT, "eu-west-1", same_account=True) == "allowed"
    # AND a stranger account's rule with a role of the same name is refused
    assert verdict(STRANGER, "us-east-1") != "allowed"
    # AND another Region of a named account (no forwarder named there) is refused
    assert verdict(US_ACCOUNT, "ap-south-1") != "allowed"
    # AND a named forwarder's events of another source are refused, same account too
    assert verdict(US_ACCOUNT, "us-east-1", "my.app") != "allowed"
    assert verdict(HUB_ACCOUNT, "eu-west-1", "my.app", same_account=True) == "denied"


def test_hub_denies_the_hub_account_s_other_callers(example: tuple[App, Any]) -> None:
    # GIVEN the hub bus's policy and an administrator of the hub's account
    policy, bus = _hub_policy(example)
    admin = f"arn:aws:iam::{HUB_ACCOUNT}:role/admin"
    context = {"aws:PrincipalArn": admin, "aws:PrincipalIsAWSService": "false"}
    # THEN even with an identity policy allowing it, PutEvents of s3ingest events is denied
    request = Request(
        {"AWS": admin}, "events:PutEvents", bus, {**context, "events:source": "s3ingest"}
    )
    assert decide(policy, request, identity_allows=True) == "denied"
    # AND the archive's replay (EventBridge itself) of s3ingest events is not
    replay = Request(
        {"Service": "events.amazonaws.com"},
        "events:PutEvents",
        bus,
        {"aws:PrincipalIsAWSService": "true", "events:source": "s3ingest"},
    )
    assert decide(policy, replay, identity_allows=True) == "allowed"


def test_hub_archives_every_change(example: tuple[App, Any]) -> None:
    # GIVEN the hub stack THEN its archive keeps every s3ingest change of the hub bus
    template = _template(example, "S3IngestHub")
    ((_, archive),) = _resources(template, "AWS::Events::Archive").items()
    assert archive["Properties"]["EventPattern"] == {"source": ["s3ingest"]}
    assert archive["Properties"]["RetentionDays"] == 365
    (bus_id,) = _resources(template, "AWS::Events::EventBus")
    assert json.dumps(archive["Properties"]["SourceArn"]) == json.dumps(
        {"Fn::GetAtt": [bus_id, "Arn"]}
    )


def test_forwarder_refuses_a_pipeline_without_change_stream_and_a_non_bus_arn() -> None:
    # GIVEN a pipeline with the change stream off
    stack = Stack(App(), "Regional", env=Environment(account=US_ACCOUNT, region="us-east-1"))
    pipeline = S3IngestPipeline(stack, "Pipeline", buckets=[BucketSpec()], code=INLINE)
    # WHEN a forwarder is added THEN synth stops, saying why
    with pytest.raises(SettingsError, match="changeStream on"):
        ChangeStreamForwarder(stack, "Forwarder", pipeline=pipeline, hub_bus_arn=HUB_BUS)
    with pytest.raises(SettingsError, match="not an event bus ARN"):
        ChangeStreamForwarder(
            stack, "Forwarder2", pipeline=pipeline, hub_bus_arn="arn:aws:sqs:eu-west-1:1:q"
        )


def test_forwarder_refuses_a_second_forwarder_of_one_pipeline() -> None:
    # GIVEN a pipeline with a forwarder
    stack = Stack(App(), "Twice", env=Environment(account=US_ACCOUNT, region="us-east-1"))
    pipeline = S3IngestPipeline(
        stack, "Pipeline", buckets=[BucketSpec()], change_stream=True, code=INLINE
    )
    ChangeStreamForwarder(stack, "Forwarder", pipeline=pipeline, hub_bus_arn=HUB_BUS)
    # WHEN a second one is added THEN synth stops (the rule's name is fixed)
    with pytest.raises(SettingsError, match="forwarder already"):
        ChangeStreamForwarder(stack, "Again", pipeline=pipeline, hub_bus_arn=HUB_BUS)


def test_hub_refuses_no_forwarders_and_a_bad_account() -> None:
    stack = Stack(App(), "HubOnly", env=Environment(account=HUB_ACCOUNT, region="eu-west-1"))
    with pytest.raises(SettingsError, match="at least one"):
        ChangeStreamHub(stack, "Empty", forwarded=[])
    with pytest.raises(SettingsError, match="not an account id"):
        ChangeStreamHub(stack, "Bad", forwarded=[ForwardedRegion("12", "us-east-1", "prod")])


@pytest.mark.parametrize("stack", ["S3Ingest-eu", "S3Ingest-us"])
def test_forwarder_dead_letters_alarm_the_pipeline_s_topic(
    example: tuple[App, Any], stack: str
) -> None:
    # GIVEN a regional stack's forwarder alarm
    template = _template(example, stack)
    ((_, alarm),) = (
        (k, v)
        for k, v in _resources(template, "AWS::CloudWatch::Alarm").items()
        if k.startswith("ForwarderDeadLetterAlarm")
    )
    props = alarm["Properties"]
    # THEN it fires on the first message of the forwarder's dead-letter queue
    assert props["AlarmName"] == "s3ingest-prod-change-forward-dlq-depth"
    assert props["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert props["Threshold"] == 0
    (dimension,) = props["Dimensions"]
    assert dimension["Value"]["Fn::GetAtt"][0].startswith("ForwarderDeadLetterQueue")
    # AND notifies the pipeline's alarm topic, linking a runbook section that exists
    (topic,) = _resources(template, "AWS::SNS::Topic")
    assert props["AlarmActions"] == [{"Ref": topic}] == props["OKActions"]
    assert props["AlarmDescription"].endswith("#change-forward-dlq")
    runbook = (PROJECT_ROOT / "docs" / "runbook.md").read_text()
    assert '<a id="change-forward-dlq"></a>' in runbook


def test_forwarder_dead_letter_queue_takes_the_pipeline_s_key() -> None:
    # GIVEN a regional pipeline with its own key (kmsKeyArn "create") and a forwarder
    app = App(analytics_reporting=False)
    stack = Stack(app, "Keyed", env=Environment(account=US_ACCOUNT, region="us-east-1"))
    pipeline = S3IngestPipeline(
        stack,
        "Pipeline",
        buckets=[BucketSpec()],
        change_stream=True,
        kms_key_arn="create",
        code=INLINE,
    )
    ChangeStreamForwarder(stack, "Forwarder", pipeline=pipeline, hub_bus_arn=HUB_BUS)
    template = app.synth().get_stack_by_name("Keyed").template
    # THEN its dead-letter queue is encrypted with that key, not SSE-SQS
    ((_, queue),) = (
        (k, v)
        for k, v in _resources(template, "AWS::SQS::Queue").items()
        if k.startswith("ForwarderDeadLetterQueue")
    )
    (key_id,) = _resources(template, "AWS::KMS::Key")
    assert queue["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    assert "SqsManagedSseEnabled" not in queue["Properties"]
