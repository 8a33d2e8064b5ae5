"""The ingest queue's policy: only the stack's rule, its own sending roles and the operator roles
the settings name can send to it (issue 24), evaluated by :mod:`tests.infra.policy_eval`."""

from __future__ import annotations

from typing import Any

import pytest

from s3ingest_cdk.constructs.ingest_queue import ONLY_STACK_SENDS_SID
from s3ingest_cdk.synth import Synth

from .conftest import OPERATOR_ROLE_ARN
from .policy_eval import Request, decide, symbol

SEND = "sqs:SendMessage"
ROOT = "arn:aws:iam::123456789012:root"
STRANGER = "arn:aws:iam::123456789012:role/someone-else"


def _queue(synth: Synth) -> tuple[str, dict[str, Any]]:
    """The ingest queue's ARN symbol and its policy document."""
    queue_id = synth.logical_id(synth.pipeline.queue)
    for policy in synth.resources("AWS::SQS::QueuePolicy").values():
        if policy["Properties"]["Queues"] == [{"Ref": queue_id}]:
            return f"arn:{queue_id}", policy["Properties"]["PolicyDocument"]
    raise AssertionError("the ingest queue has no policy")


def _role_request(arn: str, resource: str, *, tls: bool = True) -> Request:
    return Request(
        principal={"AWS": arn},
        action=SEND,
        resource=resource,
        context={"aws:PrincipalArn": arn, "aws:SecureTransport": str(tls).lower()},
    )


def _senders(synth: Synth, queue_arn: str) -> set[str]:
    """Every role whose identity policies allow sqs:SendMessage on the ingest queue."""
    found: set[str] = set()
    for policy in synth.resources("AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"]
            resources = statement["Resource"]
            resources = resources if isinstance(resources, list) else [resources]
            if statement["Effect"] != "Allow" or not any(
                a in (SEND, "sqs:*", "*")
                for a in ([actions] if isinstance(actions, str) else actions)
            ):
                continue
            if any(isinstance(r, dict) and symbol(r) == queue_arn for r in resources):
                found.update(
                    symbol({"Fn::GetAtt": [r["Ref"], "Arn"]}) for r in policy["Properties"]["Roles"]
                )
    return found


@pytest.mark.parametrize("variant", ["synth", "fanout_synth", "two_bucket_synth"])
def test_only_the_stack_and_operators_send_to_the_ingest_queue(
    variant: str, request: pytest.FixtureRequest
) -> None:
    synth: Synth = request.getfixturevalue(variant)
    queue_arn, policy = _queue(synth)
    assert ONLY_STACK_SENDS_SID in [s.get("Sid") for s in policy["Statement"]]
    rule_arn = f"arn:{synth.logical_id(synth.pipeline.routing.rule)}"

    def event_bridge(source_arn: str, source_account: str = "ref:AWS::AccountId") -> str:
        # EventBridge delivering for a rule: aws:SourceArn the rule, aws:SourceAccount its
        # account (https://docs.aws.amazon.com/IAM/latest/UserGuide/confused-deputy.html)
        context = {
            "aws:SourceArn": source_arn,
            "aws:SourceAccount": source_account,
            "aws:SecureTransport": "true",
        }
        return decide(
            policy,
            Request(
                principal={"Service": "events.amazonaws.com"},
                action=SEND,
                resource=queue_arn,
                context=context,
            ),
            identity_allows=False,
        )

    assert event_bridge(rule_arn) == "allowed"
    # the rule's ARN from another account's request (issue 34: the account is named too)
    assert event_bridge(rule_arn, "210987654321") != "allowed"
    # another rule of the account (an attacker's), even with the policy's own Allow shape
    assert event_bridge("arn:aws:events:us-east-1:123456789012:rule/forged") != "allowed"

    senders = _senders(synth, queue_arn)
    expected = {f"arn:{synth.logical_id(synth.pipeline.reconcile.role)}"}
    if synth.pipeline.reconcile_fan_out is not None:
        expected.add(f"arn:{synth.logical_id(synth.pipeline.reconcile_fan_out.role)}")
    assert senders == expected  # every role granted SendMessage on the queue, and only those
    for role in senders:
        assert decide(policy, _role_request(role, queue_arn), identity_allows=True) == "allowed"
        # TLS only, for the stack's roles too
        assert (
            decide(policy, _role_request(role, queue_arn, tls=False), identity_allows=True)
            == "denied"
        )
    # Anyone else in the account, even with sqs:* on * in its own policies: denied.
    for arn in (STRANGER, ROOT):
        assert decide(policy, _role_request(arn, queue_arn), identity_allows=True) == "denied"
    operator = decide(policy, _role_request(OPERATOR_ROLE_ARN, queue_arn), identity_allows=True)
    listed = OPERATOR_ROLE_ARN in synth.settings.operator_role_arns
    assert operator == ("allowed" if listed else "denied")
    assert listed == (variant == "two_bucket_synth")


def test_the_deny_never_touches_the_dead_letter_queue(synth: Synth) -> None:
    """The ingest function forwards invalid messages to its DLQ: that queue's policy is TLS only."""
    dlq_id = synth.logical_id(synth.pipeline.dead_letter_queue)
    for policy in synth.resources("AWS::SQS::QueuePolicy").values():
        if policy["Properties"]["Queues"] == [{"Ref": dlq_id}]:
            sids = [s.get("Sid") for s in policy["Properties"]["PolicyDocument"]["Statement"]]
            assert ONLY_STACK_SENDS_SID not in sids
            ingest = f"arn:{synth.logical_id(synth.pipeline.ingest.role)}"
            assert (
                decide(
                    policy["Properties"]["PolicyDocument"],
                    _role_request(ingest, f"arn:{dlq_id}"),
                    identity_allows=True,
                )
                == "allowed"
            )
            return
    raise AssertionError("the DLQ has no policy")
