"""Buckets in other accounts (``docs/organisation.md``): the source stack a bucket's account
deploys (forwarding rule, bucket setup, read role), the central pipeline's side (the default
bus's statement, the remote inventory's delivery, no set-up of its own), the Region refusal,
and the StackSet example. Each synthesized once (session fixtures, inline stand-in code)."""

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
from cdk_nag import AwsSolutionsChecks

from s3ingest.settings import BucketSpec, SettingsError, ingest_event_pattern
from s3ingest_cdk import S3IngestPipeline, S3IngestSourceStack
from s3ingest_cdk.remote import remote_problems
from s3ingest_cdk.synth import PROJECT_ROOT, Synth
from s3ingest_fn.config import READ_ROLES

from .conftest import (
    CENTRAL_ACCOUNT,
    CENTRAL_INVENTORY_ARN,
    PRODUCER_ACCOUNT,
    PRODUCER_ARCHIVE,
    PRODUCER_BUCKET,
    SourceSynth,
)
from .policy_eval import Request, decide, symbol
from .test_infra_cfn_lint import lint_problems

EXAMPLE = PROJECT_ROOT / "examples" / "organisation"
STRANGER = "333333333333"
INLINE = lambda_.Code.from_inline("def handler(event, context):\n    return None\n")


def _nag(app: App) -> list[str]:
    report = AwsSolutionsChecks(verbose=True).validate_scope(app)
    return [
        f"{violation.rule_name} at {resource.construct_path}"
        for violation in report.violations
        for resource in violation.violating_resources
    ]


def _resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def _read_role(source: SourceSynth) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The read role's resource and its policy's statements."""
    roles = {
        k: v
        for k, v in _resources(source.template, "AWS::IAM::Role").items()
        if k.startswith("SourceReadRole")
    }
    ((role_id, role),) = roles.items()
    statements = [
        s
        for policy in _resources(source.template, "AWS::IAM::Policy").values()
        if policy["Properties"]["Roles"] == [{"Ref": role_id}]
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
    return role, statements


def test_source_stack_is_nag_and_cfn_lint_clean(source_synth: SourceSynth) -> None:
    # GIVEN the producer account's source stack
    # THEN cdk-nag finds nothing unacknowledged and cfn-lint no error or warning
    assert not _nag(source_synth.app)
    assert not lint_problems(source_synth.template_path)


def test_source_rule_forwards_the_ingest_pattern_to_the_central_bus(
    source_synth: SourceSynth,
) -> None:
    # GIVEN the source stack's one rule (on the default bus: no EventBusName)
    ((_, rule),) = _resources(source_synth.template, "AWS::Events::Rule").items()
    props = rule["Properties"]
    assert "EventBusName" not in props
    # THEN it matches what the central ingest rule matches for those buckets (same builder)
    # with the account that owns them: the source stack's own (owners, not names)
    own = {"Ref": "AWS::AccountId"}
    assert props["EventPattern"] == ingest_event_pattern(
        [
            {
                "name": PRODUCER_BUCKET,
                "prefixes": ["incoming/"],
                "suffixes": [".csv"],
                "account": own,
            },
            {"name": PRODUCER_ARCHIVE, "prefixes": [], "suffixes": [], "account": own},
        ]
    )
    assert props["EventPattern"]["account"] == [own]
    # AND it targets the central account's default bus with a role and a dead-letter queue
    (target,) = props["Targets"]
    arn = json.dumps(target["Arn"])
    assert f":events:us-east-1:{CENTRAL_ACCOUNT}:event-bus/default" in arn
    assert "RoleArn" in target and "DeadLetterConfig" in target


def test_source_sets_up_delivery_and_the_central_inventory(source_synth: SourceSynth) -> None:
    # GIVEN the bucket-setup resources (the pipeline's own custom resource, one per bucket)
    setups = {
        v["Properties"]["BucketName"]: v["Properties"]
        for v in _resources(source_synth.template, "Custom::S3IngestBucketSetup").values()
    }
    assert set(setups) == {PRODUCER_BUCKET, PRODUCER_ARCHIVE}
    assert {p["EventBridge"] for p in setups.values()} == {"true"}
    # THEN the inventoried bucket's inventory goes to the central bucket, owned by the central
    # account; the other bucket gets none
    destination = setups[PRODUCER_BUCKET]["Inventory"]["Destination"]["S3BucketDestination"]
    assert destination["AccountId"] == CENTRAL_ACCOUNT
    assert destination["Bucket"] == CENTRAL_INVENTORY_ARN
    assert "Inventory" not in setups[PRODUCER_ARCHIVE]


def _identity(statements: list[dict[str, Any]]) -> dict[str, Any]:
    """An identity policy's statements as resource-policy statements of any principal."""
    return {"Statement": [{**s, "Principal": "*"} for s in statements]}


def test_read_role_allows_exactly_the_readers_actions_on_the_filtered_keys(
    source_synth: SourceSynth,
) -> None:
    # GIVEN the read role's policy
    _, statements = _read_role(source_synth)
    policy = _identity(statements)
    actions = {
        a
        for s in statements
        for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
    # THEN it has the readers' actions only (no versions listing on the unversioned bucket)
    assert actions == {
        "s3:GetObject",
        "s3:GetObjectVersion",
        "s3:ListBucket",
        "s3:ListBucketVersions",
        "s3:GetBucketVersioning",
        "s3:GetBucketNotification",
        "s3:GetInventoryConfiguration",
    }
    drop = f"arn:aws:s3:::{PRODUCER_BUCKET}"
    archive = f"arn:aws:s3:::{PRODUCER_ARCHIVE}"
    me = {"AWS": "anyone"}
    # the buckets' owner: the source stack's own account (s3:ResourceAccount)
    owned = {"s3:ResourceAccount": "ref:AWS::AccountId"}

    def verdict(action: str, resource: str, **context: str) -> str:
        request = Request(me, action, resource, {**owned, **context})
        return decide(policy, request, identity_allows=False)

    # AND nothing of a bucket of these names another account owns (owners, not names)
    for action, resource in (
        ("s3:GetObject", f"{drop}/incoming/a/b.csv"),
        ("s3:GetObject", f"{archive}/any/key"),
        ("s3:GetBucketVersioning", archive),
        ("s3:GetBucketNotification", drop),
    ):
        assert verdict(action, resource, **{"s3:ResourceAccount": STRANGER}) == "implicit-deny"
    assert (
        verdict("s3:ListBucket", archive, **{"s3:prefix": "", "s3:ResourceAccount": STRANGER})
        == "implicit-deny"
    )
    # AND reads only the keys under the key filters
    assert verdict("s3:GetObject", f"{drop}/incoming/a/b.csv") == "allowed"
    assert verdict("s3:GetObjectVersion", f"{drop}/incoming/b.csv") == "allowed"
    assert verdict("s3:GetObject", f"{drop}/incoming/b.json") == "implicit-deny"
    assert verdict("s3:GetObject", f"{drop}/outgoing/b.csv") == "implicit-deny"
    assert verdict("s3:GetObject", f"{archive}/any/key") == "allowed"
    # AND lists only under the prefixes
    assert verdict("s3:ListBucket", drop, **{"s3:prefix": "incoming/2026/"}) == "allowed"
    assert verdict("s3:ListBucket", drop, **{"s3:prefix": ""}) == "implicit-deny"
    assert verdict("s3:ListBucketVersions", drop, **{"s3:prefix": "incoming/"}) == "allowed"
    assert verdict("s3:ListBucketVersions", archive, **{"s3:prefix": ""}) == "implicit-deny"
    assert verdict("s3:ListBucket", archive, **{"s3:prefix": ""}) == "allowed"
    # AND reads the bucket's versioning and notification configuration (listing, delivery check)
    assert verdict("s3:GetBucketVersioning", archive) == "allowed"
    assert verdict("s3:GetBucketNotification", drop) == "allowed"
    # AND its inventory configurations (``s3ingest onboard`` shows them), changing none
    assert verdict("s3:GetInventoryConfiguration", drop) == "allowed"
    assert verdict("s3:PutInventoryConfiguration", drop) == "implicit-deny"
    # AND writes nothing
    for action in ("s3:PutObject", "s3:DeleteObject", "s3:PutBucketPolicy"):
        assert verdict(action, f"{drop}/incoming/b.csv") == "implicit-deny"
    assert verdict("s3:PutBucketNotification", drop) == "implicit-deny"


def test_read_role_lists_the_key_a_forbidden_head_asks_about(source_synth: SourceSynth) -> None:
    # GIVEN the read role's policy, its ListBucket held to the key filters' prefixes
    _, statements = _read_role(source_synth)
    policy = _identity(statements)
    drop = f"arn:aws:s3:::{PRODUCER_BUCKET}"
    me = {"AWS": "anyone"}
    # (the bucket is the source stack's own account's: s3:ResourceAccount)
    owned = {"s3:ResourceAccount": "ref:AWS::AccountId"}
    # THEN the ListBucket check of a HEAD, which carries no s3:prefix, fails: S3 answers a HEAD
    # of a missing key 403, not 404
    # (https://docs.aws.amazon.com/AmazonS3/latest/API/API_HeadObject.html)
    head = Request(me, "s3:ListBucket", drop, dict(owned))
    assert decide(policy, head, identity_allows=False) == "implicit-deny"
    # AND the listing S3Objects.current makes on that 403 (ListObjectsV2, the key as prefix,
    # tests/unit/test_s3_objects_forbidden.py) is allowed for every key under the filters, so
    # a missing key reads as missing, not as a transient error
    for key in ("incoming/a.csv", "incoming/deep/b.csv"):
        listing = Request(me, "s3:ListBucket", drop, {**owned, "s3:prefix": key})
        assert decide(policy, listing, identity_allows=False) == "allowed", key


def test_read_role_trust_admits_only_the_named_central_roles(source_synth: SourceSynth) -> None:
    # GIVEN the read role's trust policy (AssumeRole on the role itself)
    role, _ = _read_role(source_synth)
    trust = role["Properties"]["AssumeRolePolicyDocument"]
    policy = {"Statement": [{**s, "Resource": "*"} for s in trust["Statement"]]}

    def verdict(account: str, role_path: str) -> str:
        request = Request(
            {"AWS": f"arn:aws:iam::{account}:root"},
            "sts:AssumeRole",
            "role",
            {"aws:PrincipalArn": f"arn:aws:iam::{account}:role/{role_path}"},
        )
        return decide(policy, request, identity_allows=False)

    # THEN the central stack's roles may assume it, no other role of that account, and no
    # role of another account even with the same name
    assert verdict(CENTRAL_ACCOUNT, "S3Ingest-org-IngestFunctionRole-ABC") == "allowed"
    assert verdict(CENTRAL_ACCOUNT, "admin") == "implicit-deny"
    assert verdict(STRANGER, "S3Ingest-org-IngestFunctionRole-ABC") == "implicit-deny"
    # AND the role has the name the central side assumes by default
    assert "s3ingest-source-read-" in json.dumps(role["Properties"]["RoleName"])


def test_central_bus_admits_only_the_named_account_s_s3_events(remote_synth: Synth) -> None:
    # GIVEN the central stack's statement on its default bus (the stack's account a reference)
    ((_, resource),) = remote_synth.resources("AWS::Events::EventBusPolicy").items()
    props = resource["Properties"]
    assert props["EventBusName"] == "default"
    policy = {"Statement": [props["Statement"]]}
    bus = "arn:aws:events:us-east-1:ref:AWS::AccountId:event-bus/default"

    def verdict(account: str, source: str, detail_type: str = "Object Created") -> str:
        request = Request(
            {"AWS": f"arn:aws:iam::{account}:root"},
            "events:PutEvents",
            bus,
            {
                "aws:SourceAccount": account,
                "events:source": source,
                "events:detail-type": detail_type,
            },
        )
        return decide(policy, request, identity_allows=False)

    # THEN the producer's rule may forward S3's ingest events
    assert verdict(PRODUCER_ACCOUNT, "aws.s3") == "allowed"
    assert verdict(PRODUCER_ACCOUNT, "aws.s3", "Object Deleted") == "allowed"
    # AND nothing else: another account, another source, another S3 detail type
    assert verdict(STRANGER, "aws.s3") == "implicit-deny"
    assert verdict(PRODUCER_ACCOUNT, "my.app") == "implicit-deny"
    assert verdict(PRODUCER_ACCOUNT, "aws.s3", "Object Restore Completed") == "implicit-deny"


def test_central_side_sets_up_no_remote_bucket_and_admits_its_inventory(
    remote_synth: Synth,
) -> None:
    # GIVEN the central stack with a created bucket and the producer's bucket
    # THEN no bucket-setup resource (the producer's source stack sets its bucket up)
    assert not remote_synth.resources("Custom::S3IngestBucketSetup")
    # AND the inventory bucket admits S3's delivery of that bucket's inventory, from its
    # account only
    statements = [
        s
        for policy in remote_synth.resources("AWS::S3::BucketPolicy").values()
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
        if s.get("Sid") == f"AllowS3InventoryDelivery{PRODUCER_ACCOUNT}"
    ]
    (statement,) = statements
    assert statement["Condition"]["StringEquals"]["aws:SourceAccount"] == PRODUCER_ACCOUNT
    assert PRODUCER_BUCKET in json.dumps(statement["Condition"]["ArnLike"]["aws:SourceArn"])
    # AND the operators read the read role of the bucket's account from the outputs, and every
    # function that reads the bucket from its environment (READ_ROLES)
    role = f"arn:aws:iam::{PRODUCER_ACCOUNT}:role/s3ingest-source-read-us-east-1"
    output = remote_synth.template["Outputs"]["RemoteReadRoleArns"]["Value"]
    assert json.loads(symbol(output)) == {PRODUCER_BUCKET: role}
    functions = remote_synth.resources("AWS::Lambda::Function")
    readers = {n: f for n, f in remote_synth.pipeline.functions.items() if n in READERS}
    assert sorted(readers) == sorted(READERS)
    for logical_id in (remote_synth.logical_id(f) for f in readers.values()):
        variables = functions[logical_id]["Properties"]["Environment"]["Variables"]
        assert json.loads(symbol(variables[READ_ROLES])) == {PRODUCER_BUCKET: role}, logical_id
    # AND only those functions' roles may assume that role, and no other
    assumed = {
        symbol(r)
        for policy in remote_synth.resources("AWS::IAM::Policy").values()
        for st in policy["Properties"]["PolicyDocument"]["Statement"]
        if st["Action"] == "sts:AssumeRole"
        for r in (st["Resource"] if isinstance(st["Resource"], list) else [st["Resource"]])
    }
    assert assumed == {role}
    granted = {
        r["Ref"]
        for policy in remote_synth.resources("AWS::IAM::Policy").values()
        if any(
            st["Action"] == "sts:AssumeRole"
            for st in policy["Properties"]["PolicyDocument"]["Statement"]
        )
        for r in policy["Properties"]["Roles"]
    }
    roles_of_functions = {
        functions[remote_synth.logical_id(f)]["Properties"]["Role"]["Fn::GetAtt"][0]
        for f in readers.values()
    }
    assert granted == roles_of_functions


#: The central functions that call S3 on a bucket (their roles name it): the only ones that may
#: assume a bucket's read role (the delivery check reads its notification configuration; the
#: backfill's control function reads the inventory bucket only).
READERS = (
    "ingest",
    "reconcile",
    "backfill",
    "delivery-check",
    "listing-plan",
    "listing-shard",
    "reprocess-segment",
)


def test_only_functions_that_read_buckets_may_assume_their_read_roles(
    remote_kms_synth: Synth,
) -> None:
    # GIVEN the central stack with the change stream and a bucket of another account
    pipeline = remote_kms_synth.pipeline
    functions = remote_kms_synth.resources("AWS::Lambda::Function")
    assuming = {
        r["Ref"]
        for policy in remote_kms_synth.resources("AWS::IAM::Policy").values()
        if "sts:AssumeRole" in json.dumps(policy["Properties"]["PolicyDocument"])
        for r in policy["Properties"]["Roles"]
    }
    for name, function in pipeline.functions.items():
        logical_id = remote_kms_synth.logical_id(function)
        role = functions[logical_id]["Properties"]["Role"]["Fn::GetAtt"][0]
        variables = functions[logical_id]["Properties"]["Environment"]["Variables"]
        reads = name in READERS
        # THEN a function may assume the read role, and knows it, exactly when it reads the
        # bucket: the change relay, the planners and the summaries may not
        # (https://docs.aws.amazon.com/IAM/latest/UserGuide/best-practices.html#grant-least-privilege)
        assert (role in assuming) == reads, name
        assert (READ_ROLES in variables) == reads, name
    assert "change-relay" in pipeline.functions
    assert sorted(pipeline.bucket_readers) == sorted(n for n in READERS if n in pipeline.functions)


def test_the_encrypted_inventory_admits_the_producer_s_reports(
    remote_kms_synth: Synth, kms_synth: Synth
) -> None:
    # GIVEN the central stack's key (kmsKeyArn: create) encrypting the inventory bucket that
    # receives the producer bucket's inventory
    def key_policy(synth: Synth) -> dict[str, Any]:
        (key,) = [
            k
            for logical_id, k in synth.resources("AWS::KMS::Key").items()
            if logical_id.startswith("Key")
        ]
        return dict(key["Properties"]["KeyPolicy"])

    s3 = {"Service": "s3.amazonaws.com"}

    def report(policy: dict[str, Any], account: str, bucket: str) -> str:
        # S3 writing a report under the destination's default key, on the source bucket's
        # behalf (https://docs.aws.amazon.com/AmazonS3/latest/userguide/configure-inventory.html)
        context = {"aws:SourceAccount": account, "aws:SourceArn": f"arn:aws:s3:::{bucket}"}
        request = Request(s3, "kms:GenerateDataKey", "*", context)
        return decide(policy, request, identity_allows=False)

    policy = key_policy(remote_kms_synth)
    # THEN the producer's bucket may have its report encrypted
    assert report(policy, PRODUCER_ACCOUNT, PRODUCER_BUCKET) == "allowed"
    # AND no other bucket of that account, nor a stranger naming the same bucket
    assert report(policy, PRODUCER_ACCOUNT, PRODUCER_ARCHIVE) == "implicit-deny"
    assert report(policy, STRANGER, PRODUCER_BUCKET) == "implicit-deny"
    # AND without buckets of other accounts the key admits no other account's reports
    assert report(key_policy(kms_synth), PRODUCER_ACCOUNT, PRODUCER_BUCKET) == "implicit-deny"


def test_central_pipeline_refuses_a_bucket_of_another_region() -> None:
    # GIVEN a stack in us-east-1 and a bucket of another account in eu-west-1
    app = App()
    stack = Stack(app, "Central", env=Environment(account=CENTRAL_ACCOUNT, region="us-east-1"))
    bucket = BucketSpec(
        name=PRODUCER_BUCKET, existing=True, account=PRODUCER_ACCOUNT, region="eu-west-1"
    )
    # WHEN the pipeline is composed THEN synth stops, saying to deploy a pipeline there
    with pytest.raises(SettingsError, match="deploy an s3ingest pipeline in eu-west-1"):
        S3IngestPipeline(stack, "Pipeline", buckets=[BucketSpec(), bucket], code=INLINE)


def test_region_and_account_problems_without_a_known_region() -> None:
    # GIVEN an environment-agnostic stack: the Region is not known at synth
    stack = Stack(App(), "Agnostic")
    specs = [
        BucketSpec(name="a-bucket", existing=True, account=PRODUCER_ACCOUNT, region="eu-west-1"),
        BucketSpec(name="b-bucket", existing=True, account=PRODUCER_ACCOUNT, region="us-east-1"),
    ]
    # THEN two Regions are refused; one alone is the template's rule to check at deploy
    assert any("several Regions" in p for p in remote_problems(stack, specs))
    assert not remote_problems(stack, specs[:1])
    # AND a stack of a known account refuses its own account named as another's
    own = Stack(App(), "Own", env=Environment(account=PRODUCER_ACCOUNT, region="eu-west-1"))
    assert any("stack's own account" in p for p in remote_problems(own, specs[:1]))


def test_source_stack_refuses_another_region_than_the_pipeline_s() -> None:
    # GIVEN a source stack in eu-west-1 for a pipeline in us-east-1
    app = App()
    with pytest.raises(SettingsError, match="deploy an s3ingest pipeline in"):
        S3IngestSourceStack(
            app,
            "Source",
            env=Environment(account=PRODUCER_ACCOUNT, region="eu-west-1"),
            central_account=CENTRAL_ACCOUNT,
            central_region="us-east-1",
            buckets=[BucketSpec(name=PRODUCER_BUCKET)],
            reader_role_arns=[f"arn:aws:iam::{CENTRAL_ACCOUNT}:role/x"],
            code=INLINE,
        )


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("organisation_app", EXAMPLE / "app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[App, Any, Path]]:
    """``examples/organisation``: its three stacks, synthesized once (inline code)."""
    app = App(outdir=str(tmp_path_factory.mktemp("cdk-out-organisation")))
    module = _example()
    module.build(app, code=INLINE)
    yield app, app.synth(), Path(app.outdir)


def test_example_synthesizes_nag_and_cfn_lint_clean(example: tuple[App, Any, Path]) -> None:
    # GIVEN the example app's three stacks THEN cdk-nag and cfn-lint find nothing
    app, assembly, _ = example
    assert sorted(a.stack_name for a in assembly.stacks) == [
        "OrgSources",
        "ProducerSource",
        "S3Ingest-org",
    ]
    assert not _nag(app)
    for artifact in assembly.stacks:
        assert not lint_problems(Path(artifact.template_full_path)), artifact.stack_name


def test_example_stackset_deploys_the_source_stack_to_the_ou(
    example: tuple[App, Any, Path],
) -> None:
    # GIVEN the StackSet of the example's management stack
    _, assembly, outdir = example
    template = assembly.get_stack_by_name("OrgSources").template
    ((_, stack_set),) = _resources(template, "AWS::CloudFormation::StackSet").items()
    props = stack_set["Properties"]
    # THEN service-managed, auto-deployed to the organisational unit, named IAM allowed
    assert props["PermissionModel"] == "SERVICE_MANAGED"
    assert props["AutoDeployment"]["Enabled"] is True
    (group,) = props["StackInstancesGroup"]
    assert group["DeploymentTargets"]["OrganizationalUnitIds"]
    assert "CAPABILITY_NAMED_IAM" in props["Capabilities"]
    # AND its body is the source stack, within TemplateBody's limit, with no bootstrap rule
    # and the Region rule of an environment-agnostic template
    body = json.loads(props["TemplateBody"])
    assert len(props["TemplateBody"].encode()) <= 51_200
    assert "CheckBootstrapVersion" not in body.get("Rules", {})
    assert any(k.startswith("SourceSameRegion") for k in body["Rules"])
    assert _resources(body, "Custom::S3IngestBucketSetup")
    assert (outdir / "stackset" / "Source.assets.json").exists()


def test_central_stack_with_a_remote_bucket_is_nag_and_cfn_lint_clean(
    remote_synth: Synth,
) -> None:
    # GIVEN the central app with the producer's bucket THEN cdk-nag and cfn-lint find nothing
    assert not _nag(remote_synth.app)
    assert not lint_problems(remote_synth.template_path)


PRODUCER_KEY = f"arn:aws:kms:us-east-1:{PRODUCER_ACCOUNT}:key/0c5f5f6e-1d2e-4b7a-9f00-2a2f8d1c3b4a"


def test_a_remote_sse_kms_buckets_key_goes_to_its_read_role_only() -> None:
    # GIVEN a producer's SSE-KMS bucket, named with its key on both sides
    spec = BucketSpec(
        name=PRODUCER_BUCKET, existing=True, kms_key_arn=PRODUCER_KEY, account=PRODUCER_ACCOUNT
    )
    app = App(analytics_reporting=False)
    S3IngestSourceStack(
        app,
        "KeyedSource",
        env=Environment(account=PRODUCER_ACCOUNT, region="us-east-1"),
        central_account=CENTRAL_ACCOUNT,
        central_region="us-east-1",
        buckets=[
            BucketSpec(
                name=PRODUCER_BUCKET, existing=True, inventory=False, kms_key_arn=PRODUCER_KEY
            )
        ],
        reader_role_arns=[f"arn:aws:iam::{CENTRAL_ACCOUNT}:role/S3Ingest-*"],
        code=INLINE,
    )
    central = Stack(
        app, "KeyedCentral", env=Environment(account=CENTRAL_ACCOUNT, region="us-east-1")
    )
    S3IngestPipeline(central, "Pipeline", buckets=[BucketSpec(), spec], code=INLINE)
    assembly = app.synth()
    # THEN the read role decrypts with that key, through S3 only
    policies = _resources(
        assembly.get_stack_by_name("KeyedSource").template, "AWS::IAM::Policy"
    ).values()
    kms = [
        s
        for p in policies
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if "kms" in json.dumps(s.get("Action"))
    ]
    assert [(s["Action"], s["Resource"]) for s in kms] == [("kms:Decrypt", PRODUCER_KEY)]
    assert symbol(kms[0]["Condition"]["StringEquals"]["kms:ViaService"]) == (
        "s3.ref:AWS::Region.amazonaws.com"
    )
    # AND no central role is granted the producer's key (its reads assume the read role)
    assert PRODUCER_KEY not in json.dumps(assembly.get_stack_by_name("KeyedCentral").template)


def test_a_source_buckets_key_without_existing_says_what_to_do() -> None:
    # GIVEN the producer's SSE-KMS bucket in the source stack, its key named but not existing=True
    app = App(analytics_reporting=False)
    with pytest.raises(SettingsError) as caught:
        S3IngestSourceStack(
            app,
            "KeyedSource",
            env=Environment(account=PRODUCER_ACCOUNT, region="us-east-1"),
            central_account=CENTRAL_ACCOUNT,
            central_region="us-east-1",
            buckets=[BucketSpec(name=PRODUCER_BUCKET, inventory=False, kms_key_arn=PRODUCER_KEY)],
            reader_role_arns=[f"arn:aws:iam::{CENTRAL_ACCOUNT}:role/S3Ingest-*"],
            code=INLINE,
        )
    # THEN the refusal names the fix, as docs/organisation.md does
    (problem,) = caught.value.problems
    assert "BucketSpec(existing=True)" in problem
    doc = (PROJECT_ROOT / "docs" / "organisation.md").read_text()
    assert "BucketSpec(name=..., existing=True, kms_key_arn=...)" in doc
