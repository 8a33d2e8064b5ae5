"""Owners, not names (``docs/organisation.md``): the central ingest rule and its archive match
each bucket's name with the account that owns it, the default bus admits each remote account
by a statement of its own, every function knows each bucket's owner (``BUCKET_OWNERS``) and
the CLI too (output ``BucketOwners``). A bucket of a configured name in another account
matches nothing. The patterns are judged with the emulator's own matcher on concrete events."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, cast

import pytest
from aws_cdk import aws_lambda as lambda_

from s3ingest_cdk.synth import Synth
from s3ingest_fn.config import BUCKET_OWNERS

from .conftest import CENTRAL_ACCOUNT, PRODUCER_ACCOUNT, PRODUCER_BUCKET, synthesize
from .policy_eval import Request, decide

STRANGER = "333333333333"
SECOND = "444444444444"
SECOND_BUCKET = "second-producer-drop"
#: Two buckets of two other accounts beside the stack's own.
TWO_REMOTE = {
    "stage": "owners",
    "buckets": [
        {},
        {"name": PRODUCER_BUCKET, "existing": True, "account": PRODUCER_ACCOUNT},
        {"name": SECOND_BUCKET, "existing": True, "account": SECOND, "prefixes": ["in/"]},
    ],
}
_INLINE = "def handler(event, context):\n    return None\n"


@pytest.fixture(scope="module")
def two_remote_synth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synth]:
    """The central stack with buckets of two other accounts (inline stand-in code)."""
    yield synthesize(
        tmp_path_factory.mktemp("cdk-out-owners"),
        TWO_REMOTE,
        code=lambda_.Code.from_inline(_INLINE),
    )


def _concrete(value: Any, names: dict[str, str]) -> Any:
    """A template value with each reference (``{"Ref": id}``) replaced by ``names[id]``."""
    if isinstance(value, dict):
        if set(value) == {"Ref"}:
            return names[value["Ref"]]
        return {k: _concrete(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_concrete(v, names) for v in value]
    return value


def _event(account: str, bucket: str, key: str = "in/a.csv") -> dict[str, Any]:
    return {
        "version": "0",
        "id": "1",
        "detail-type": "Object Created",
        "source": "aws.s3",
        "account": account,
        "time": "2026-12-01T00:00:00Z",
        "region": "us-east-1",
        "resources": [f"arn:aws:s3:::{bucket}"],
        "detail": {"bucket": {"name": bucket}, "object": {"key": key}},
    }


@pytest.mark.contract("C9")
def test_the_ingest_rule_matches_each_bucket_only_with_its_owner_s_account(
    two_remote_synth: Synth,
) -> None:
    # GIVEN the central rule and archive (the stack's account and created bucket concrete)
    from moto.events.models import EventPattern

    synth = two_remote_synth
    own_id = synth.logical_id(synth.pipeline.landing.bucket)
    names = {"AWS::AccountId": CENTRAL_ACCOUNT, own_id: "central-landing"}
    rule = synth.template["Resources"][synth.logical_id(synth.pipeline.routing.rule)]
    _, archive = synth.one("AWS::Events::Archive")
    raw = rule["Properties"]["EventPattern"]
    assert archive["Properties"]["EventPattern"] == raw
    # THEN one alternative per owner account, each naming that account's buckets only
    assert {json.dumps(a["account"]) for a in raw["$or"]} == {
        json.dumps([{"Ref": "AWS::AccountId"}]),
        json.dumps([PRODUCER_ACCOUNT]),
        json.dumps([SECOND]),
    }
    pattern = EventPattern.load(json.dumps(_concrete(raw, names)))

    def matches(account: str, bucket: str, key: str = "in/a.csv") -> bool:
        return bool(pattern.matches_event(cast(Any, _event(account, bucket, key))))

    # AND each bucket's events match from its owner
    assert matches(CENTRAL_ACCOUNT, "central-landing")
    assert matches(PRODUCER_ACCOUNT, PRODUCER_BUCKET)
    assert matches(SECOND, SECOND_BUCKET)
    assert not matches(SECOND, SECOND_BUCKET, "out/a.csv")  # the key filter still applies
    # AND a bucket of a configured name in any other account matches nothing, a stranger's or
    # another configured owner's
    for account in (STRANGER, CENTRAL_ACCOUNT, SECOND):
        assert not matches(account, PRODUCER_BUCKET), account
    for account in (STRANGER, PRODUCER_ACCOUNT):
        assert not matches(account, "central-landing"), account
        assert not matches(account, SECOND_BUCKET), account


def test_the_default_bus_admits_each_remote_account_by_a_statement_of_its_own(
    two_remote_synth: Synth,
) -> None:
    # GIVEN the central stack's statements on its default bus
    policies = [
        p["Properties"] for p in two_remote_synth.resources("AWS::Events::EventBusPolicy").values()
    ]
    by_sid = {p["StatementId"]: p for p in policies}
    # THEN one per remote account, named after it
    assert set(by_sid) == {f"s3ingest-owners-remote-{a}" for a in (PRODUCER_ACCOUNT, SECOND)}
    bus = "arn:aws:events:us-east-1:ref:AWS::AccountId:event-bus/default"
    for account in (PRODUCER_ACCOUNT, SECOND):
        props = by_sid[f"s3ingest-owners-remote-{account}"]
        assert props["EventBusName"] == "default"
        policy = {"Statement": [props["Statement"]]}

        def verdict(sender: str, policy: dict[str, Any] = policy) -> str:
            request = Request(
                {"AWS": f"arn:aws:iam::{sender}:root"},
                "events:PutEvents",
                bus,
                {
                    "aws:SourceAccount": sender,
                    "events:source": "aws.s3",
                    "events:detail-type": "Object Created",
                },
            )
            return decide(policy, request, identity_allows=False)

        # AND each statement admits its own account's rules only
        others = {PRODUCER_ACCOUNT, SECOND, STRANGER} - {account}
        assert verdict(account) == "allowed"
        assert all(verdict(other) == "implicit-deny" for other in others)


def test_every_function_and_the_cli_know_each_bucket_s_owner(two_remote_synth: Synth) -> None:
    # GIVEN the central stack's functions and outputs
    synth = two_remote_synth
    own = f"<{synth.logical_id(synth.pipeline.landing.bucket)}>"
    expected = {
        own: "<AWS::AccountId>",
        PRODUCER_BUCKET: PRODUCER_ACCOUNT,
        SECOND_BUCKET: SECOND,
    }

    def owners(value: Any) -> dict[str, str]:
        parts = value["Fn::Join"][1] if isinstance(value, dict) else [value]
        text = "".join(p if isinstance(p, str) else f"<{p['Ref']}>" for p in parts)
        return dict(json.loads(text))

    # THEN every function's BUCKET_OWNERS names each bucket's owner (the ExpectedBucketOwner of
    # its S3 calls, the account its events must carry)
    functions = synth.resources("AWS::Lambda::Function")
    for role, function in synth.pipeline.functions.items():
        variables = functions[synth.logical_id(function)]["Properties"]["Environment"]
        if role == "change-relay":  # reads no bucket
            assert BUCKET_OWNERS not in variables["Variables"]
            continue
        assert owners(variables["Variables"][BUCKET_OWNERS]) == expected
    # AND the operators' CLI reads the same from the outputs
    assert owners(synth.template["Outputs"]["BucketOwners"]["Value"]) == expected


def test_function_roles_reach_no_bucket_of_the_own_bucket_s_name_in_another_account(
    two_remote_synth: Synth,
) -> None:
    # GIVEN the ingest function's identity policy (the remote buckets are read through their
    # accounts' roles, test_infra_organisation)
    synth = two_remote_synth
    role = {"Ref": synth.logical_id(synth.pipeline.ingest.role)}
    inline = synth.template["Resources"][role["Ref"]]["Properties"]["Policies"]
    documents = [p["PolicyDocument"] for p in inline] + [
        policy["Properties"]["PolicyDocument"]
        for policy in synth.resources("AWS::IAM::Policy").values()
        if policy["Properties"]["Roles"] == [role]
    ]
    statements = [{**s, "Principal": "*"} for d in documents for s in d["Statement"]]
    policy = {"Statement": statements}
    own = f"arn:{synth.logical_id(synth.pipeline.landing.bucket)}"
    me = {"AWS": "ingest"}

    def verdict(action: str, resource: str, owner: str) -> str:
        request = Request(me, action, resource, {"s3:ResourceAccount": owner})
        return decide(policy, request, identity_allows=False)

    # AND every function's role holds the guard (one inline policy each)
    roles = synth.resources("AWS::IAM::Role")
    for name, function in synth.pipeline.functions.items():
        if name == "change-relay":  # reads no bucket
            continue
        assert function.role is not None
        policies = roles[synth.logical_id(function.role)]["Properties"]["Policies"]
        assert [p["PolicyName"] for p in policies] == ["s3ingest-own-buckets-only"]
    # THEN it reads its own bucket while the stack's account owns it
    assert verdict("s3:GetObject", f"{own}/k", "ref:AWS::AccountId") == "allowed"
    assert verdict("s3:ListBucket", own, "ref:AWS::AccountId") == "allowed"
    # AND is denied a bucket of that name another account owns
    assert verdict("s3:GetObject", f"{own}/k", STRANGER) == "denied"
    assert verdict("s3:ListBucket", own, STRANGER) == "denied"
