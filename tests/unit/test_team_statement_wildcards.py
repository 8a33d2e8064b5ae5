"""``processorPolicyStatements`` refuses whole services on every resource (issue 24)."""

from __future__ import annotations

from typing import Any

import pytest

from s3ingest.settings import Settings
from s3ingest.settings.processors import is_service_wildcard

MODULE = "s3ingest_examples.sidecar:process"
QUEUE = "arn:aws:sqs:eu-west-1:123456789012:team-queue"


def _problems(statement: dict[str, Any]) -> list[str]:
    settings = Settings(processor=MODULE, processor_policy_statements=(statement,))
    return [p for p in settings.problems() if p.startswith("processorPolicyStatements")]


@pytest.mark.parametrize(
    ("actions", "resources", "named"),
    [
        ("*", "*", "'*'"),
        (["s3:*"], ["*"], "'s3:*'"),
        (["sqs:SendMessage", "dynamodb:*", "iam:*"], [QUEUE, "*"], "'dynamodb:*', 'iam:*'"),
    ],
)
def test_whole_services_on_every_resource_are_refused(
    actions: Any, resources: Any, named: str
) -> None:
    statement = {"Effect": "Allow", "Action": actions, "Resource": resources}
    assert _problems(statement) == [
        f"processorPolicyStatements[0]: Action {named} with Resource '*' grants whole services "
        "on every resource to the roles that run the processors (the ingest, backfill and "
        "listing shard roles): name the actions the processor calls, and the ARNs it calls them "
        "on"
    ]


@pytest.mark.parametrize(
    ("effect", "actions", "resources"),
    [
        ("Allow", ["s3:*"], [f"{QUEUE}"]),  # a whole service on named resources
        ("Allow", ["s3:Get*"], ["*"]),  # a partial wildcard: cdk-nag reports it, unacknowledged
        ("Allow", ["sqs:SendMessage"], ["*"]),
        ("Deny", ["*"], ["*"]),  # a Deny narrows
    ],
)
def test_narrower_statements_pass(effect: str, actions: list[str], resources: list[str]) -> None:
    assert _problems({"Effect": effect, "Action": actions, "Resource": resources}) == []


def test_service_wildcard() -> None:
    assert [is_service_wildcard(a) for a in ("*", "s3:*", "s3:**", "s3:Get*", "s3:GetObject")] == [
        True,
        True,
        True,
        False,
        False,
    ]
