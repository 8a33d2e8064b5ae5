"""``kmsKeyArn``: with it, every resource of the stack that can be encrypted is, with that key
(no AWS-owned or AWS-managed key); the key's policy holds each service to this account; each
role gets the key actions its policy needs; an adopted SSE-KMS bucket's own key goes to exactly
the roles that read the bucket. Without it, the template holds no trace of the key."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Environment, Stack
from aws_cdk import aws_kms as kms_
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3

from s3ingest.encryption import key_policy_statements
from s3ingest.settings import BucketSpec, SettingsError
from s3ingest_cdk import S3IngestPipeline, enable_event_bridge
from s3ingest_cdk.synth import Synth, synthesize

from .conftest import KMS_BUCKET, KMS_BUCKET_KEY_ARN
from .test_infra_cfn_lint import lint_problems
from .test_infra_nag import _findings

#: An imported key (``kmsKeyArn`` set to its ARN).
IMPORTED_KEY_ARN = "arn:aws:kms:us-east-1:123456789012:key/7e1f2a3b-4c5d-4e6f-9a0b-1c2d3e4f5a6b"


def _key_ref(synth: Synth) -> Any:
    """How the template names the pipeline's created key's ARN."""
    keys = [
        logical
        for logical, resource in synth.template["Resources"].items()
        if resource["Type"] == "AWS::KMS::Key"
    ]
    assert keys == [synth.logical_id(synth.pipeline.encryption_key)]
    return {"Fn::GetAtt": [keys[0], "Arn"]}


def _access_log_destinations(resources: dict[str, Any]) -> set[str]:
    """The buckets that receive server access logs."""
    return {
        resource["Properties"]["LoggingConfiguration"]["DestinationBucketName"]["Ref"]
        for resource in resources.values()
        if resource["Type"] == "AWS::S3::Bucket"
        and "LoggingConfiguration" in resource.get("Properties", {})
    }


def _bucket_ok(props: dict[str, Any], key: Any) -> bool:
    rules = props.get("BucketEncryption", {}).get("ServerSideEncryptionConfiguration", [])
    default = rules[0].get("ServerSideEncryptionByDefault", {}) if rules else {}
    return bool(
        default == {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": key}
        and rules[0].get("BucketKeyEnabled") is True
    )


def _table_ok(props: dict[str, Any], key: Any) -> bool:
    sse = props.get("SSESpecification", {})
    return bool(
        sse.get("SSEEnabled") is True
        and sse.get("SSEType") == "KMS"
        and sse.get("KMSMasterKeyId") == key
    )


def _machine_ok(props: dict[str, Any], key: Any) -> bool:
    config = props.get("EncryptionConfiguration", {})
    return bool(config.get("Type") == "CUSTOMER_MANAGED_KMS_KEY" and config.get("KmsKeyId") == key)


#: The property naming the key, by resource type (the checks of the other types above).
_KEY_PROPERTY = {
    "AWS::SQS::Queue": "KmsMasterKeyId",
    "AWS::Events::EventBus": "KmsKeyIdentifier",
    "AWS::Events::Archive": "KmsKeyIdentifier",
    "AWS::Logs::LogGroup": "KmsKeyId",
    "AWS::SNS::Topic": "KmsMasterKeyId",
    "AWS::SecretsManager::Secret": "KmsKeyId",
    "AWS::Lambda::Function": "KmsKeyArn",
}


def _unencrypted(resources: dict[str, Any], key: Any) -> list[str]:
    """Every resource that could be encrypted with ``key`` and is not (or is with an AWS-owned or
    AWS-managed key: SSE-SQS, no key named, another key)."""
    wrong: list[str] = []
    for logical, resource in resources.items():
        kind, props = resource["Type"], resource.get("Properties", {})
        if kind == "AWS::DynamoDB::Table":
            ok = _table_ok(props, key)
        elif kind == "AWS::S3::Bucket":
            ok = _bucket_ok(props, key)
        elif kind == "AWS::StepFunctions::StateMachine":
            ok = _machine_ok(props, key)
        elif kind == "AWS::Lambda::Function" and "Environment" not in props:
            ok = True  # nothing to encrypt
        elif kind in _KEY_PROPERTY:
            ok = props.get(_KEY_PROPERTY[kind]) == key and "SqsManagedSseEnabled" not in props
        else:
            continue
        if not ok:
            wrong.append(f"{logical} ({kind}) is not encrypted with the key")
    return wrong


def test_every_encryptable_resource_uses_the_created_key(kms_synth: Synth) -> None:
    resources = kms_synth.template["Resources"]
    key = _key_ref(kms_synth)
    assert _unencrypted(resources, key) == []
    kinds = {r["Type"] for r in resources.values()}
    # the walk covers every kind the issue names: each is in this template
    assert {
        "AWS::DynamoDB::Table",
        "AWS::SQS::Queue",
        "AWS::Events::EventBus",
        "AWS::Events::Archive",
        "AWS::Logs::LogGroup",
        "AWS::S3::Bucket",
        "AWS::SNS::Topic",
        "AWS::StepFunctions::StateMachine",
        "AWS::SecretsManager::Secret",
        "AWS::Lambda::Function",
    } <= kinds
    assert "alias/aws/" not in json.dumps(kms_synth.template)
    # the server access log destination too (the walk above covered it): S3's logging
    # principal may write under the key (AllowS3ServerAccessLogsOfThisAccount)
    (destination,) = _access_log_destinations(resources)
    assert destination == kms_synth.logical_id(kms_synth.pipeline.landings.shared.access_logs)
    assert _bucket_ok(resources[destination]["Properties"], key)


def test_the_default_template_has_no_trace_of_the_key(synth: Synth) -> None:
    resources = synth.template["Resources"]
    assert synth.pipeline.encryption_key is None
    # (the walk finds what is not under a key: every such resource here)
    assert len(_unencrypted(resources, {"Fn::GetAtt": ["NoSuchKey", "Arn"]})) > 10
    assert not any(r["Type"] == "AWS::KMS::Alias" for r in resources.values())
    queues = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::SQS::Queue"]
    assert queues and all(q.get("SqsManagedSseEnabled") is True for q in queues)
    assert all("KmsMasterKeyId" not in q for q in queues)
    functions = [r for r in resources.values() if r["Type"] == "AWS::Lambda::Function"]
    assert all("KmsKeyArn" not in f["Properties"] for f in functions)


def test_the_created_key_is_rotated_retained_and_aliased(kms_synth: Synth) -> None:
    key = kms_synth.resources("AWS::KMS::Key")
    (logical,) = key
    assert key[logical]["Properties"]["EnableKeyRotation"] is True
    assert key[logical]["DeletionPolicy"] == "Retain"
    aliases = kms_synth.resources("AWS::KMS::Alias")
    assert [a["Properties"]["AliasName"] for a in aliases.values()] == ["alias/s3ingest-kms"]


def _service_statements(synth: Synth) -> list[dict[str, Any]]:
    (key,) = synth.resources("AWS::KMS::Key").values()
    return [s for s in key["Properties"]["KeyPolicy"]["Statement"] if "Service" in s["Principal"]]


def test_every_service_statement_of_the_key_policy_is_held_to_this_account(
    kms_synth: Synth,
) -> None:
    statements = _service_statements(kms_synth)
    account = {"Ref": "AWS::AccountId"}
    assert len(statements) == len(key_policy_statements("1", "r"))
    for statement in statements:
        condition = statement["Condition"]
        keys = {k: v for operator in condition.values() for k, v in operator.items()}
        if "kms:EncryptionContext:aws:logs:arn" in keys:
            # CloudWatch Logs: held by the log group's ARN in the encryption context
            assert account in keys["kms:EncryptionContext:aws:logs:arn"]["Fn::Join"][1]
            continue
        assert condition["StringEquals"]["aws:SourceAccount"] == account, statement["Sid"]
        arns = condition["ArnLike"]["aws:SourceArn"]
        for arn in arns if isinstance(arns, list) else [arns]:
            joined = arn["Fn::Join"][1]
            # an ARN of this account (S3 bucket ARNs name no account: SourceAccount holds it)
            assert account in joined or ":s3:::*" in joined, statement["Sid"]
    # no statement a CDK construct would add unconditioned (a state machine's log delivery)
    assert all("Condition" in s for s in statements)


def _policies_by_role(synth: Synth) -> dict[str, list[dict[str, Any]]]:
    """Each role's logical id -> the Allow statements of its policies."""
    found: dict[str, list[dict[str, Any]]] = {}
    for policy in synth.resources("AWS::IAM::Policy").values():
        props = policy["Properties"]
        for role in props["Roles"]:
            found.setdefault(role["Ref"], []).extend(
                s for s in props["PolicyDocument"]["Statement"] if s["Effect"] == "Allow"
            )
    return found


def _actions(statement: dict[str, Any]) -> set[str]:
    actions = statement["Action"]
    return {actions} if isinstance(actions, str) else set(actions)


def _resources(statement: dict[str, Any]) -> list[Any]:
    resources = statement["Resource"]
    return resources if isinstance(resources, list) else [resources]


def test_each_role_has_only_key_actions_on_the_key(kms_synth: Synth) -> None:
    key = _key_ref(kms_synth)
    policies = _policies_by_role(kms_synth)
    for role, statements in policies.items():
        for statement in statements:
            kms = {a for a in _actions(statement) if a.startswith("kms:")}
            if kms:
                # never on "*": the pipeline's key or an adopted bucket's key
                assert all(r in (key, KMS_BUCKET_KEY_ARN) for r in _resources(statement)), role
    # the ingest function sends to its dead-letter queue and writes the ledger
    ingest = kms_synth.logical_id(kms_synth.pipeline.ingest_function.role)
    actions = set().union(*(_actions(s) for s in policies[ingest] if key in _resources(s)))
    assert {"kms:Decrypt", "kms:GenerateDataKey", "kms:Encrypt"} <= actions
    # the delivery check reads no data: only its environment
    check = kms_synth.logical_id(kms_synth.pipeline.functions["delivery-check"].role)
    actions = set().union(*(_actions(s) for s in policies[check] if key in _resources(s)))
    assert actions == {"kms:Decrypt"}


def _reads_bucket(statement: dict[str, Any]) -> bool:
    if not _actions(statement) & {"s3:GetObject", "s3:GetObjectVersion"}:
        return False
    return any(f":s3:::{KMS_BUCKET}/" in json.dumps(r) for r in _resources(statement))


def test_an_adopted_buckets_key_goes_to_exactly_the_roles_that_read_it(kms_synth: Synth) -> None:
    policies = _policies_by_role(kms_synth)
    readers = {role for role, ss in policies.items() if any(_reads_bucket(s) for s in ss)}
    granted = {
        role for role, ss in policies.items() for s in ss if KMS_BUCKET_KEY_ARN in _resources(s)
    }
    functions = kms_synth.pipeline.functions
    expected = {
        kms_synth.logical_id(functions[name].role)
        for name in (
            "ingest",
            "reconcile",
            "reconcile-fan-out",
            "backfill-control",
            "listing-shard",
            "reprocess-segment",
        )
    }
    assert readers == granted == expected
    for role in granted:
        for statement in policies[role]:
            if KMS_BUCKET_KEY_ARN in _resources(statement):
                assert _actions(statement) == {"kms:Decrypt"}
                assert _resources(statement) == [KMS_BUCKET_KEY_ARN]


@pytest.fixture(scope="module")
def imported_synth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synth]:
    """The default app with an imported key (``kmsKeyArn`` an ARN), inline stand-in code."""
    yield synthesize(
        Path(tmp_path_factory.mktemp("cdk-out-kms-imported")),
        {"stage": "imported", "kmsKeyArn": IMPORTED_KEY_ARN},
        code=lambda_.Code.from_inline("def handler(event, context):\n    return None\n"),
    )


def test_an_imported_key_encrypts_everything_and_gets_no_policy_of_ours(
    imported_synth: Synth,
) -> None:
    resources = imported_synth.template["Resources"]
    assert not any(r["Type"] in ("AWS::KMS::Key", "AWS::KMS::Alias") for r in resources.values())
    assert _unencrypted(resources, IMPORTED_KEY_ARN) == []
    # the Batch Operations job's role reads the manifest and writes its report under the key
    batch = imported_synth.pipeline.batch_operations
    assert batch is not None
    assert imported_synth.pipeline.key_grants[batch.role.node.path] == [
        "kms:Decrypt",
        "kms:GenerateDataKey",
    ]


def test_the_encrypted_stacks_are_nag_and_cfn_lint_clean(
    kms_synth: Synth, imported_synth: Synth
) -> None:
    for synth in (kms_synth, imported_synth):
        findings = _findings(synth.app)
        assert not findings, "unacknowledged cdk-nag findings:\n" + "\n".join(findings)
        problems = lint_problems(synth.template_path)
        assert not problems, "cfn-lint:\n" + "\n".join(problems)


def test_a_bucket_of_the_app_brings_its_own_key_to_its_readers(tmp_path: Path) -> None:
    # GIVEN a team's app whose landing bucket is SSE-KMS under the app's own key
    app = App(outdir=str(tmp_path))
    stack = Stack(app, "Team")
    key = kms_.Key(stack, "TeamKey", enable_key_rotation=True)
    bucket = s3.Bucket(
        stack, "Landing", encryption=s3.BucketEncryption.KMS, encryption_key=key, enforce_ssl=True
    )
    enable_event_bridge(bucket)
    # WHEN the pipeline uses it as it is (no kmsKeyArn of its own)
    pipeline = S3IngestPipeline(
        stack,
        "Ingest",
        bucket=bucket,
        code=lambda_.Code.from_inline("def handler(event, context):\n    return None\n"),
    )
    template = app.synth().get_stack_by_name("Team").template

    def logical(construct: Any) -> str:
        return str(stack.resolve(construct.node.default_child.logical_id))

    # THEN kms:Decrypt on the app's key goes to exactly the roles that read the bucket
    key_arn = {"Fn::GetAtt": [logical(key), "Arn"]}
    granted = set()
    readers = set()
    for policy in (r for r in template["Resources"].values() if r["Type"] == "AWS::IAM::Policy"):
        props = policy["Properties"]
        for statement in props["PolicyDocument"]["Statement"]:
            roles = {r["Ref"] for r in props["Roles"]}
            if key_arn in _resources(statement):
                assert _actions(statement) == {"kms:Decrypt"}
                granted |= roles
            bucket_arn = {"Fn::GetAtt": [logical(bucket), "Arn"]}
            if _actions(statement) & {"s3:GetObject"} and any(
                bucket_arn in r.get("Fn::Join", [None, []])[1]
                for r in _resources(statement)
                if isinstance(r, dict)
            ):
                readers |= roles
    assert pipeline.encryption_key is None
    assert granted == readers
    assert logical(pipeline.ingest_function.role) in granted


def test_a_key_of_another_region_is_refused_at_synth() -> None:
    stack = Stack(App(), "Team", env=Environment(region="eu-west-1"))
    with pytest.raises(SettingsError) as caught:
        S3IngestPipeline(
            stack,
            "Ingest",
            kms_key_arn=IMPORTED_KEY_ARN,
            buckets=[
                BucketSpec(),
                BucketSpec(name=KMS_BUCKET, existing=True, kms_key_arn=KMS_BUCKET_KEY_ARN),
            ],
        )
    assert caught.value.problems == [
        f"{where}: the key is in us-east-1, the stack in eu-west-1: a KMS key serves its own "
        "region only (use a key of the stack's region, or a multi-Region replica there)"
        for where in ("kmsKeyArn", "buckets[1].kmsKeyArn")
    ]
