"""Owners, not names: an event whose ``account`` is not its bucket's owner is ``invalid``
(``wrong-account``) and dead-lettered with its reason (CONTRACT C9), per shape as
``docs/payloads.md`` says; every S3 call on a landing bucket names its owner
(``ExpectedBucketOwner``), and the functions read the owners from ``BUCKET_OWNERS``."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

import boto3
import pytest

from s3ingest_fn.adapters.bucket_owners import expect_owners, parse_owners
from s3ingest_fn.adapters.bucket_routes import BucketRoutedS3
from s3ingest_fn.config import BUCKET_OWNERS, ClientConfig, ConfigError
from s3ingest_fn.core.decide import IngestService
from s3ingest_fn.core.model import Change, Outcome, Result
from s3ingest_fn.services.ingest import WRONG_ACCOUNT, MessageProcessor
from tests.samples import load_sample

OWNER = "111122223333"  # the account of the documentation's EventBridge sample
STRANGER = "444455556666"
EVENTBRIDGE = "awsdocs-s3ug__eventbridge-ObjectCreated.json"
NOTIFICATION = "awsdocs-s3ug__notification-ObjectCreatedPut.json"


@dataclass
class Recorded:
    """A stand-in ingest service and dead-letter queue: what reached each."""

    handled: list[Change] = field(default_factory=list)
    dead: list[tuple[str, str, str]] = field(default_factory=list)

    def handle(self, change: Change) -> Result:
        self.handled.append(change)
        return Result(outcome=Outcome.APPLIED, reason="stand-in")

    def send(self, body: str, reason: str, detail: str, message_id: str) -> None:
        self.dead.append((body, reason, detail))


def _processor(owners: dict[str, str]) -> tuple[MessageProcessor, Recorded]:
    seen = Recorded()
    processor = MessageProcessor(
        service=cast(IngestService, seen),
        dead_letter=seen,
        clock=lambda: 2_000_000_000.0,
        owners=owners,
    )
    return processor, seen


def _eventbridge(account: str | None) -> dict[str, Any]:
    event = copy.deepcopy(load_sample(EVENTBRIDGE))
    assert isinstance(event, dict)
    if account is None:
        del event["account"]
    else:
        event["account"] = account
    return event


def _bucket(event: dict[str, Any]) -> str:
    return str(event["detail"]["bucket"]["name"])


@pytest.mark.contract("C9")
@pytest.mark.parametrize("account", [STRANGER, None, ""], ids=["other", "missing", "empty"])
def test_an_eventbridge_event_of_another_account_is_wrong_account_and_dead_lettered(
    account: str | None,
) -> None:
    # GIVEN the ingest function knowing the bucket's owner
    event = _eventbridge(account)
    processor, seen = _processor({_bucket(event): OWNER})
    # WHEN an event of the bucket's name comes from another account (or names none)
    body = json.dumps(event)
    (result,) = processor.process(body, "m-1")
    # THEN it is invalid, wrong-account, dead-lettered with its reason and the owner named,
    # and nothing reaches the ledger
    assert (result.outcome, result.reason) == (Outcome.INVALID, WRONG_ACCOUNT)
    assert seen.handled == []
    ((dead_body, reason, detail),) = seen.dead
    assert (dead_body, reason) == (body, WRONG_ACCOUNT)
    assert f"belongs to {OWNER}" in detail


@pytest.mark.contract("C9")
def test_an_sns_wrapped_eventbridge_event_is_judged_by_its_inner_account() -> None:
    # GIVEN an EventBridge event of another account inside an SNS envelope (the envelope's
    # TopicArn is the topic's account, not the bucket's)
    event = _eventbridge(STRANGER)
    processor, seen = _processor({_bucket(event): OWNER})
    envelope = {
        "Type": "Notification",
        "MessageId": "1",
        "TopicArn": f"arn:aws:sns:us-east-1:{OWNER}:topic",
        "Message": json.dumps(event),
    }
    # WHEN it arrives
    (result,) = processor.process(json.dumps(envelope), "m-2")
    # THEN the inner event's account decides: wrong-account
    assert (result.outcome, result.reason) == (Outcome.INVALID, WRONG_ACCOUNT)
    assert seen.handled == []


def test_the_owner_s_events_and_shapes_without_an_owner_s_account_go_on() -> None:
    # GIVEN the owner of each sample's bucket
    event = _eventbridge(OWNER)
    notification = load_sample(NOTIFICATION)
    assert isinstance(notification, dict)
    record_bucket = notification["Records"][0]["s3"]["bucket"]["name"]
    processor, seen = _processor({_bucket(event): OWNER, record_bucket: OWNER})
    # WHEN the owner's EventBridge event and an S3 notification record (no account field:
    # ownerIdentity is a canonical user id) arrive, and an event of a bucket not in BUCKET_OWNERS
    other = _eventbridge(STRANGER)
    other["detail"]["bucket"]["name"] = "not-a-landing-bucket"
    outcomes = [
        r.outcome
        for body in (event, notification, other)
        for r in processor.process(json.dumps(body), "m")
    ]
    # THEN each reaches the ingest service (scope decides the last: not judged here)
    assert outcomes == [Outcome.APPLIED] * 3
    assert [c.account for c in seen.handled] == [OWNER, None, STRANGER]
    assert seen.dead == []


def test_without_owners_nothing_is_checked() -> None:
    processor, seen = _processor({})
    (result,) = processor.process(json.dumps(_eventbridge(STRANGER)), "m")
    assert result.outcome is Outcome.APPLIED and seen.dead == []


def _s3() -> Any:
    return boto3.client(
        "s3",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


class _Sent(Exception):
    """Raised by :func:`_capture` instead of sending: the request went as far as the wire."""


def _capture(client: Any) -> list[str | None]:
    """The ``x-amz-expected-bucket-owner`` header of each request ``client`` sends (none
    leaves the process: each call raises :class:`_Sent`)."""
    sent: list[str | None] = []

    def before_send(request: Any, **_: Any) -> None:
        value = request.headers.get("x-amz-expected-bucket-owner")
        sent.append(value.decode() if isinstance(value, bytes) else value)
        raise _Sent

    client.meta.events.register("before-send.s3", before_send)
    return sent


def test_every_s3_call_on_a_landing_bucket_names_its_owner() -> None:
    # GIVEN a client expecting each landing bucket's owner
    s3 = expect_owners(_s3(), {"landing": OWNER})
    sent = _capture(s3)
    # WHEN it heads, gets, lists (a paginator's page) and reads a configuration of the landing
    # bucket, then heads an object of another bucket
    calls = [
        lambda: s3.head_object(Bucket="landing", Key="k"),
        lambda: s3.get_object(Bucket="landing", Key="k", VersionId="v"),
        lambda: next(iter(s3.get_paginator("list_object_versions").paginate(Bucket="landing"))),
        lambda: s3.get_bucket_notification_configuration(Bucket="landing"),
        lambda: s3.head_object(Bucket="landing", Key="k", ExpectedBucketOwner=STRANGER),
        lambda: s3.head_object(Bucket="output", Key="k"),
    ]
    for call in calls:
        with pytest.raises(_Sent):
            call()
    # THEN each request on the landing bucket sends its owner (a caller's own value kept),
    # and the other bucket's none
    assert sent == [OWNER, OWNER, OWNER, OWNER, STRANGER, None]


def test_a_presigned_url_carries_no_expected_owner() -> None:
    # a processor follows the URL with a plain GET: a header it must send would break it
    s3 = expect_owners(_s3(), {"landing": OWNER})
    url = s3.generate_presigned_url("get_object", Params={"Bucket": "landing", "Key": "k"})
    assert "expected-bucket-owner" not in url.lower()


def test_a_routed_client_names_the_owner_on_every_role_s_client() -> None:
    # GIVEN a remote bucket read through its account's role (BucketRoutedS3)
    made: list[Any] = []

    def remote(role_arn: str) -> Any:
        made.append(_s3())
        return made[-1]

    routed = BucketRoutedS3(_s3(), {"remote": "arn:aws:iam::222233334444:role/r"}, remote)
    expect_owners(routed, {"remote": "222233334444"})
    # WHEN a call on it makes the role's client, after the owners were set
    sent = _capture(routed.for_bucket("remote"))
    with pytest.raises(_Sent):
        routed.head_object(Bucket="remote", Key="k")
    # THEN that client sends the bucket's owner too
    assert sent == ["222233334444"]


def test_the_functions_read_the_owners_from_their_environment() -> None:
    owners = {"landing": OWNER}
    config = ClientConfig.from_env({BUCKET_OWNERS: json.dumps(owners)})
    assert parse_owners(config.bucket_owners_json) == owners
    assert ClientConfig.from_env(config.to_env()) == config
    for raw in ('{"landing": "1234"}', '["landing"]', "{"):
        with pytest.raises(ConfigError, match=BUCKET_OWNERS):
            ClientConfig.from_env({BUCKET_OWNERS: raw})


def test_the_bucket_setup_resource_names_its_own_account(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN the bucket-setup function of a stack in account OWNER (its ARN's account)
    from s3ingest_fn import wiring
    from s3ingest_fn.handlers import bucket_setup

    s3 = _s3()
    sent = _capture(s3)
    monkeypatch.setattr(wiring, "function_clients", lambda: None)
    monkeypatch.setattr(wiring, "client", lambda clients, service: s3)
    context = SimpleNamespace(
        invoked_function_arn=f"arn:aws:lambda:us-east-1:{OWNER}:function:setup"
    )
    event = {
        "RequestType": "Create",
        "ResourceProperties": {"BucketName": "existing-landing", "EventBridge": "true"},
    }
    # WHEN it sets a bucket up
    with pytest.raises(_Sent):
        bucket_setup.on_event(event, context)
    # THEN its first call on the bucket names the stack's account as the owner
    assert sent == [OWNER]


def test_the_ingest_pattern_matches_each_bucket_s_name_with_its_owner() -> None:
    from s3ingest.settings import ingest_event_pattern

    # one owner: its account beside the names
    one = ingest_event_pattern([{"name": "a", "account": OWNER}, {"name": "b", "account": OWNER}])
    assert one["account"] == [OWNER] and one["detail"] == {"bucket": {"name": ["a", "b"]}}
    # several: one alternative per owner with that owner's names only (key filters kept)
    several = ingest_event_pattern(
        [
            {"name": "a", "account": OWNER},
            {"name": "r", "account": STRANGER, "prefixes": ["in/"]},
        ]
    )
    assert "account" not in several and "detail" not in several
    assert several["$or"] == [
        {"account": [OWNER], "detail": {"bucket": {"name": ["a"]}}},
        {
            "account": [STRANGER],
            "detail": {"bucket": {"name": ["r"]}, "object": {"key": [{"prefix": "in/"}]}},
        },
    ]
    # every entry names its owner, or none does (the names alone: callers without owners)
    with pytest.raises(ValueError, match="every bucket entry names its account"):
        ingest_event_pattern([{"name": "a", "account": OWNER}, {"name": "b"}])
