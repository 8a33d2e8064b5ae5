"""Confused deputy (issues 24 and 34, https://docs.aws.amazon.com/IAM/latest/UserGuide/confused-deputy.html):
every statement the stack writes that admits an AWS service principal (a role's trust policy, a
KMS key policy, a queue, topic, bucket or event-bus policy, a CloudWatch Logs resource policy,
a Lambda permission) carries both ``aws:SourceAccount`` and ``aws:SourceArn``. Walked over the
whole template of the default, encrypted (``kmsKeyArn``), organisation (central and source)
and team stacks, so a statement added later without them fails here.

Two principals are exempt, each for a documented reason (:data:`EXEMPT`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sqs as sqs

from s3ingest_cdk.deputy import hold_to_account

from .conftest import TEAM_VARIANTS, VARIANTS
from .policy_eval import symbol

#: Service principals whose statements name no source, and why:
#: - ``lambda.amazonaws.com`` in a function's execution-role trust: Lambda documents no
#:   ``aws:SourceArn``/``aws:SourceAccount`` for assuming the execution role (the trust policy of
#:   https://docs.aws.amazon.com/lambda/latest/dg/lambda-intro-execution-role.html has none); the
#:   role is given to a function only by ``iam:PassRole`` in this account, which another
#:   account's function cannot do.
#: - CloudWatch Logs (``logs.<region>.amazonaws.com``) on a key: held to this account's log
#:   groups by the encryption context CloudWatch Logs documents for its KMS calls,
#:   ``kms:EncryptionContext:aws:logs:arn``
#:   (https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html).
EXEMPT = {
    "lambda.amazonaws.com": None,
    "logs.<region>.amazonaws.com": "kms:EncryptionContext:aws:logs:arn",
}
BOTH = {"aws:SourceAccount", "aws:SourceArn"}
#: The organisation and encrypted synths, besides :data:`VARIANTS` and :data:`TEAM_VARIANTS`.
MORE = ["kms_synth", "remote_synth", "remote_kms_synth", "source_synth"]


def _document(raw: Any) -> dict[str, Any]:
    """A policy document, a JSON string (``Fn::Join`` around tokens: tokens as placeholders)
    parsed."""
    if isinstance(raw, dict) and "Fn::Join" in raw:
        delimiter, parts = raw["Fn::Join"]
        raw = delimiter.join(p if isinstance(p, str) else "<token>" for p in parts)
    return json.loads(raw) if isinstance(raw, str) else raw


def _statements(template: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """``(logical id, where, statement)`` for every statement of every policy a resource of
    the template holds (trust, key policy, resource policies), and every Lambda permission as
    a statement (its ``SourceAccount``/``SourceArn`` as the condition keys)."""
    for logical_id, resource in template["Resources"].items():
        props = resource.get("Properties", {})
        kind = resource["Type"]
        documents: list[tuple[str, Any]] = []
        if kind == "AWS::IAM::Role":
            documents.append(("trust", props["AssumeRolePolicyDocument"]))
        elif kind == "AWS::KMS::Key":
            documents.append(("key", props["KeyPolicy"]))
        elif kind == "AWS::Events::EventBusPolicy" and "Statement" in props:
            documents.append(("bus", {"Statement": [props["Statement"]]}))
        elif kind == "AWS::Lambda::Permission":
            keys = {f"aws:{k}": props[k] for k in ("SourceAccount", "SourceArn") if k in props}
            statement = {"Principal": {"Service": props["Principal"]}, "Effect": "Allow"}
            if isinstance(props["Principal"], str) and props["Principal"].endswith(".com"):
                yield logical_id, "permission", {**statement, "Condition": {"Keys": keys}}
            continue
        elif "PolicyDocument" in props and not kind.startswith("AWS::IAM::"):
            documents.append((kind, _document(props["PolicyDocument"])))
        for where, document in documents:
            for statement in document["Statement"]:
                yield logical_id, where, statement


def _service(statement: dict[str, Any]) -> list[str]:
    principal = statement.get("Principal")
    if not isinstance(principal, dict) or "Service" not in principal:
        return []
    names = principal["Service"]
    names = names if isinstance(names, list) else [names]
    return [symbol(n).replace("ref:AWS::Region", "<region>") for n in names]


@pytest.mark.parametrize("variant", VARIANTS + TEAM_VARIANTS + MORE)
def test_every_service_statement_names_the_source_account_and_arn(
    variant: str, request: pytest.FixtureRequest
) -> None:
    # GIVEN every statement of the synthesized template that admits a service principal
    template = request.getfixturevalue(variant).template
    checked = 0
    for logical_id, where, statement in _statements(template):
        services = _service(statement)
        if not services or statement.get("Effect") != "Allow":
            continue
        keys = {key for block in statement.get("Condition", {}).values() for key in block}
        for service in services:
            if service in EXEMPT:
                wanted = EXEMPT[service]
                # THEN an exempt principal holds exactly its documented scoping, if any
                assert wanted is None or wanted in keys, (logical_id, where, statement)
                continue
            checked += 1
            # THEN every other one names both the source account and the source ARN
            assert keys >= BOTH, (variant, logical_id, where, statement)
    assert checked


def test_the_walk_reaches_trusts_keys_queues_and_permissions(
    synth: Any, kms_synth: Any, source_synth: Any
) -> None:
    # GIVEN the default, encrypted and source templates THEN the walk meets a statement of
    # each kind the stack writes for a service (the check above is not vacuous for any)
    seen = {
        (where, service)
        for template in (synth.template, kms_synth.template, source_synth.template)
        for _, where, statement in _statements(template)
        for service in _service(statement)
    }
    for expected in (
        ("trust", "batchoperations.s3.amazonaws.com"),
        ("trust", "states.amazonaws.com"),
        ("trust", "events.amazonaws.com"),
        ("key", "cloudwatch.amazonaws.com"),
        ("key", "s3.amazonaws.com"),
        ("AWS::SQS::QueuePolicy", "events.amazonaws.com"),
        ("AWS::SNS::TopicPolicy", "cloudwatch.amazonaws.com"),
        ("AWS::S3::BucketPolicy", "s3.amazonaws.com"),
        ("permission", "events.amazonaws.com"),
    ):
        assert expected in seen, expected


def test_the_trusts_issue_34_named_are_held_to_this_account_s_sources(
    synth: Any, kms_synth: Any, source_synth: Any
) -> None:
    # GIVEN the Batch Operations role (default stack), the reconcile schedule's role (the
    # fan-out, encrypted stack) and the source stack's forwarding role
    # THEN each trust names this account and its jobs or rules
    # (https://docs.aws.amazon.com/AmazonS3/latest/userguide/batch-ops-iam-role-policies.html,
    # https://docs.aws.amazon.com/eventbridge/latest/userguide/cross-service-confused-deputy-prevention.html)
    wanted = {
        "batchoperations.s3.amazonaws.com": "arn:aws:s3:ref:AWS::Region:ref:AWS::AccountId:job/*",
        "events.amazonaws.com": "arn:aws:events:ref:AWS::Region:ref:AWS::AccountId:rule/*",
    }
    found = []
    for template in (synth.template, kms_synth.template, source_synth.template):
        for _, where, statement in _statements(template):
            for service in _service(statement):
                if where == "trust" and service in wanted:
                    condition = statement["Condition"]
                    assert symbol(condition["StringEquals"]["aws:SourceAccount"]) == (
                        "ref:AWS::AccountId"
                    )
                    assert symbol(condition["ArnLike"]["aws:SourceArn"]) == wanted[service]
                    found.append(service)
    assert sorted(set(found)) == sorted(wanted)
    # AND the default stack's alarm-topic key (its own key, no kmsKeyArn) admits CloudWatch
    # for this account's alarms only
    (key,) = [
        s
        for r in synth.template["Resources"].values()
        if r["Type"] == "AWS::KMS::Key"
        for s in r["Properties"]["KeyPolicy"]["Statement"]
        if _service(s) == ["cloudwatch.amazonaws.com"]
    ]
    assert symbol(key["Condition"]["StringEquals"]["aws:SourceAccount"]) == "ref:AWS::AccountId"
    assert symbol(key["Condition"]["ArnLike"]["aws:SourceArn"]) == (
        "arn:aws:cloudwatch:ref:AWS::Region:ref:AWS::AccountId:alarm:*"
    )


def test_cdk_s_source_arn_only_statements_gain_the_account(synth: Any) -> None:
    # GIVEN the ingest queue's statement for the rule (written by CDK with aws:SourceArn only)
    # THEN the pipeline added aws:SourceAccount, and reports what it held
    held = synth.pipeline.held_to_account
    assert any("/Ingest/Queue/Policy/" in h for h in held), held
    assert any(h.endswith("#permission") for h in held), held
    # AND the rendered statement carries it (the override merged into CDK's document)
    (policy,) = [
        r
        for logical_id, r in synth.template["Resources"].items()
        if r["Type"] == "AWS::SQS::QueuePolicy" and logical_id.startswith("IngestQueuePolicy")
    ]
    (allow,) = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if _service(s)]
    assert allow["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    assert "aws:SourceArn" in allow["Condition"]["ArnEquals"]
    # AND the scheduled rules' Lambda permissions name the account beside the rule
    permissions = [
        r["Properties"]
        for r in synth.template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Permission"
        and r["Properties"]["Principal"] == "events.amazonaws.com"
    ]
    assert permissions
    for permission in permissions:
        assert permission["SourceAccount"] == {"Ref": "AWS::AccountId"}
        assert "SourceArn" in permission


def test_holding_covers_statements_added_later_and_leaves_others_alone() -> None:
    # GIVEN a queue whose policy admits EventBridge for a rule (aws:SourceArn only), held
    app = App()
    stack = Stack(app, "Held")
    queue = sqs.Queue(stack, "Queue")
    rule_arn = "arn:aws:events:us-east-1:123456789012:rule/r"

    def admit(service: str) -> iam.PolicyStatement:
        return iam.PolicyStatement(
            principals=[iam.ServicePrincipal(service)],
            actions=["sqs:SendMessage"],
            resources=[queue.queue_arn],
            conditions={"ArnEquals": {"aws:SourceArn": rule_arn}},
        )

    queue.add_to_resource_policy(admit("events.amazonaws.com"))
    assert hold_to_account(stack) == ["Held/Queue/Policy/Resource#0"]
    # WHEN statements are added after: another service's, a Deny, one naming the account
    queue.add_to_resource_policy(admit("sns.amazonaws.com"))
    queue.add_to_resource_policy(
        iam.PolicyStatement(
            effect=iam.Effect.DENY,
            principals=[iam.AnyPrincipal()],
            actions=["sqs:*"],
            resources=[queue.queue_arn],
            conditions={"Bool": {"aws:SecureTransport": "false"}},
        )
    )
    named = admit("s3.amazonaws.com")
    named.add_condition("StringEquals", {"aws:SourceAccount": "123456789012"})
    queue.add_to_resource_policy(named)
    hold_to_account(stack)  # a second pass wraps nothing twice
    template = app.synth().get_stack_by_name("Held").template
    ((policy,),) = [
        [r["Properties"]["PolicyDocument"]]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::SQS::QueuePolicy"
    ]
    accounts = {
        json.dumps(s["Principal"]): s.get("Condition", {}).get("StringEquals")
        for s in policy["Statement"]
    }
    # THEN every service statement names an account: this stack's where none was named
    this = {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    assert accounts[json.dumps({"Service": "events.amazonaws.com"})] == this
    assert accounts[json.dumps({"Service": "sns.amazonaws.com"})] == this
    assert accounts[json.dumps({"Service": "s3.amazonaws.com"})] == {
        "aws:SourceAccount": "123456789012"
    }
    # AND the Deny is left as written
    assert accounts[json.dumps({"AWS": "*"})] is None
