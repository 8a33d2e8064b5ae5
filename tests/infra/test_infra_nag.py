"""cdk-nag AwsSolutions: no unacknowledged finding; acknowledgements per resource, with reasons."""

from __future__ import annotations

import re
from typing import Any

import pytest
from aws_cdk import App, Stack, Validations
from cdk_nag import AwsSolutionsChecks

from infra.synth import Synth


def _findings(app: App) -> list[str]:
    report = AwsSolutionsChecks(verbose=True).validate_scope(app)
    return [
        f"{violation.rule_name} at {resource.construct_path}: {violation.description}"
        for violation in report.violations
        for resource in violation.violating_resources
    ]


def _acknowledgements(app: App) -> dict[str, dict[str, Any]]:
    """Construct path -> {rule id: reason} of every acknowledgement in the tree.

    aws-cdk-lib records a cdk-nag id under an ``Annotation::`` prefix; cdk-nag strips it.
    """
    found: dict[str, dict[str, Any]] = {}
    for construct in app.node.find_all():
        for entry in construct.node.metadata:
            if entry.type == Validations.ACKNOWLEDGED_RULES_METADATA_KEY:
                rules = {re.sub(r"(?i)^annotation::", "", k): v for k, v in entry.data.items()}
                found.setdefault(construct.node.path, {}).update(rules)
    return found


@pytest.mark.parametrize("variant", ["synth", "adopted_synth"])
def test_no_unacknowledged_nag_finding(variant: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(variant)
    findings = _findings(synth.app)
    assert not findings, "unacknowledged cdk-nag findings:\n" + "\n".join(findings)


def test_acknowledgements_are_on_resources_with_reasons(synth: Synth) -> None:
    acknowledgements = _acknowledgements(synth.app)
    stack_path = synth.stack.node.path
    bucket_id = synth.logical_id(synth.stack.landing.bucket)
    # Each acknowledgement is on the one construct it is about, never on the stack or the app.
    assert acknowledgements.keys() == {
        f"{stack_path}/IngestFunction/Role",
        f"{stack_path}/IngestFunction/Function",
        f"{stack_path}/Routing/TargetDeadLetterQueue",
    }
    assert {rule for rules in acknowledgements.values() for rule in rules} == {
        "AwsSolutions-IAM5[Resource::*]",
        f"AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/*]",
        "AwsSolutions-L1",
        "AwsSolutions-SQS3",
    }
    for path, rules in acknowledgements.items():
        for rule, reason in rules.items():
            assert isinstance(reason, str) and len(reason) >= 60, (path, rule)


def test_no_acknowledgement_on_stack_or_app(synth: Synth) -> None:
    for construct in (synth.app, synth.stack):
        assert isinstance(construct, (App, Stack))
        assert not [
            entry
            for entry in construct.node.metadata
            if entry.type == Validations.ACKNOWLEDGED_RULES_METADATA_KEY
        ]
