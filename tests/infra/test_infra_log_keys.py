"""``logKeys`` in the template (issue 24): the functions' ``LOG_KEYS``, the hash key's secret,
the change audit log's input transformer and the state machines' execution data."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk import App, Duration, Stack
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks

from s3ingest_cdk.constructs import ChangeBus
from s3ingest_cdk.synth import Synth
from s3ingest_fn.config import LOG_KEY_SECRET_ARN, LOG_KEYS

from .test_infra_cfn_lint import lint_problems


def _of_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == kind}


def _audit_target(template: dict[str, Any]) -> dict[str, Any]:
    """The change-stream rule's one target (the change audit log group)."""
    (rule,) = [
        r
        for r in _of_type(template, "AWS::Events::Rule").values()
        if "change audit log" in r["Properties"].get("Description", "")
    ]
    (target,) = rule["Properties"]["Targets"]
    return dict(target)


def test_plain_logs_keys_as_before(fanout_synth: Synth) -> None:
    """The default: no LOG_KEYS, no secret, the whole event in the audit log, the machines'
    execution data logged."""
    template = fanout_synth.template
    for function in _of_type(template, "AWS::Lambda::Function").values():
        assert LOG_KEYS not in function["Properties"].get("Environment", {}).get("Variables", {})
    assert _of_type(template, "AWS::SecretsManager::Secret") == {}
    assert "InputTransformer" not in _audit_target(template)
    machines = _of_type(template, "AWS::StepFunctions::StateMachine")
    assert machines and all(
        m["Properties"]["LoggingConfiguration"]["IncludeExecutionData"] is True
        for m in machines.values()
    )
    # the mode is an output: `s3ingest log-key` says there is no hash to look up
    assert template["Outputs"]["LogKeys"]["Value"] == "plain"
    assert "LogKeySecretArn" not in template["Outputs"]


def test_hashed_gives_every_function_the_mode_and_the_secret_it_may_read(
    log_keys_synth: Synth,
) -> None:
    template = log_keys_synth.template
    (secret_id,) = _of_type(template, "AWS::SecretsManager::Secret")
    secret = template["Resources"][secret_id]
    assert secret["Properties"]["GenerateSecretString"]["PasswordLength"] >= 32
    assert secret["DeletionPolicy"] == "Retain"
    functions = {
        log_keys_synth.logical_id(f): f for f in log_keys_synth.pipeline.functions.values()
    }
    assert len(functions) >= 8
    policies = _of_type(template, "AWS::IAM::Policy").values()
    for logical_id in functions:
        variables = template["Resources"][logical_id]["Properties"]["Environment"]["Variables"]
        assert variables[LOG_KEYS] == "hashed"
        assert variables[LOG_KEY_SECRET_ARN] == {"Ref": secret_id}
        role = template["Resources"][logical_id]["Properties"]["Role"]["Fn::GetAtt"][0]
        reads = [
            s
            for p in policies
            if {"Ref": role} in p["Properties"]["Roles"]
            for s in p["Properties"]["PolicyDocument"]["Statement"]
            if "secretsmanager:GetSecretValue" in s["Action"]
        ]
        assert [s["Resource"] for s in reads] == [{"Ref": secret_id}], logical_id
    assert template["Outputs"]["LogKeySecretArn"]["Value"] == {"Ref": secret_id}
    assert template["Outputs"]["LogKeys"]["Value"] == "hashed"


def test_hashed_machines_log_no_execution_data(log_keys_synth: Synth) -> None:
    machines = _of_type(log_keys_synth.template, "AWS::StepFunctions::StateMachine")
    # reconcile fan-out, Distributed Map backfill, listing backfill, reprocess
    assert len(machines) == 4
    for machine in machines.values():
        logging = machine["Properties"]["LoggingConfiguration"]
        assert logging["IncludeExecutionData"] is False
        assert logging["Level"] == "ALL"


def test_hashed_audit_log_keeps_the_key_hash_not_the_key(log_keys_synth: Synth) -> None:
    transformer = _audit_target(log_keys_synth.template)["InputTransformer"]
    paths = transformer["InputPathsMap"]
    assert "$.detail.keyHash" in paths.values()
    assert not any(p == "$.detail.key" or p in ("$", "$.detail") for p in paths.values())
    template = transformer["InputTemplate"]
    assert template.startswith('{"timestamp":<time>,"message":"')
    assert "keyHash=<" in template and "key=<" not in template.replace("keyHash=<", "")


def test_hashed_stack_has_no_unacknowledged_nag_finding(log_keys_synth: Synth) -> None:
    report = AwsSolutionsChecks(verbose=True).validate_scope(log_keys_synth.app)
    findings = [
        f"{v.rule_name} at {r.construct_path}"
        for v in report.violations
        for r in v.violating_resources
    ]
    assert findings == []


def test_hashed_template_is_cfn_lint_clean(log_keys_synth: Synth) -> None:
    assert lint_problems(log_keys_synth.template_path) == []


def _bus_template(log_keys: str) -> dict[str, Any]:
    stack = Stack(App(), "Bus")
    ChangeBus(
        stack,
        "ChangeBus",
        bus_name="s3ingest-changes-test",
        archive_retention=Duration.days(1),
        log_retention_days=7,
        log_keys=log_keys,
    )
    return dict(Template.from_stack(stack).to_json())


def test_none_audit_log_keeps_neither_key_nor_hash() -> None:
    transformer = _audit_target(_bus_template("none"))["InputTransformer"]
    text = json.dumps(transformer)
    assert "$.detail.key" not in text  # neither the key nor its hash (keyHash)
    assert "$.detail.id" in transformer["InputPathsMap"].values()
    assert "InputTransformer" not in _audit_target(_bus_template("plain"))
