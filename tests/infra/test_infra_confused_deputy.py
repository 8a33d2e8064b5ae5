"""Confused deputy (issue 24, https://docs.aws.amazon.com/IAM/latest/UserGuide/confused-deputy.html):
every service-principal statement of a KMS key policy or a CloudWatch Logs resource policy the
stack writes is scoped to this account by a condition the service documents, walked over the
template so a policy added later without one fails here."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .conftest import TEAM_VARIANTS, VARIANTS

#: Statements left without a condition, with the reason: CloudWatch's documented key policy for
#: an encrypted alarm topic has none, and no AWS page says which context keys its KMS calls carry
#: (a guessed one would silence every alarm notification).
UNSCOPED = {"AllowCloudWatchAlarmsToPublishToTheEncryptedTopic"}
#: The conditions that scope a service's use to this account: the global keys, or (CloudWatch
#: Logs on a key, https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html)
#: the encryption context naming this account's log groups.
SCOPING_KEYS = {"aws:SourceAccount", "aws:SourceArn", "kms:EncryptionContext:aws:logs:arn"}


def _statements(template: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    found: list[tuple[str, dict[str, Any]]] = []
    for logical_id, resource in template["Resources"].items():
        props = resource.get("Properties", {})
        if resource["Type"] == "AWS::KMS::Key":
            document = props["KeyPolicy"]
        elif resource["Type"] == "AWS::Logs::ResourcePolicy":
            raw = props["PolicyDocument"]
            if isinstance(raw, dict):  # Fn::Join around tokens: tokens as placeholders
                delimiter, parts = raw["Fn::Join"]
                raw = delimiter.join(p if isinstance(p, str) else "<token>" for p in parts)
            document = json.loads(raw)
        else:
            continue
        found.extend((logical_id, statement) for statement in document["Statement"])
    return found


@pytest.mark.parametrize("variant", VARIANTS + TEAM_VARIANTS)
def test_service_statements_are_scoped_to_this_account(
    variant: str, request: pytest.FixtureRequest
) -> None:
    template = request.getfixturevalue(variant).template
    service_statements = [
        (logical_id, s)
        for logical_id, s in _statements(template)
        if isinstance(s.get("Principal"), dict) and "Service" in s["Principal"]
    ]
    assert service_statements
    for logical_id, statement in service_statements:
        if statement.get("Sid") in UNSCOPED:
            continue
        keys = {key for block in statement.get("Condition", {}).values() for key in block}
        assert keys & SCOPING_KEYS, (logical_id, statement)
