#!/usr/bin/env python3
"""s3ingest across an organisation: one central pipeline, buckets in other accounts.

Three stacks, one Region (``docs/organisation.md``):

- ``Central`` (central account): the pipeline, with one bucket of another account
  (``buckets`` entry with ``account``): the default bus admits that account's S3 events.
- ``ProducerSource`` (the producer account, deployed directly): :class:`S3IngestSourceStack`
  forwarding the bucket's events, setting up its delivery and inventory, and the read role.
- ``OrgSources`` (the organisation's management account or a StackSets delegated
  administrator): a service-managed StackSet, auto-deployed, putting the same source stack into
  every account of an organisational unit, including accounts added later. Its template is the
  source stack synthesized in process (``TemplateBody``): no CDK CLI, no Docker, no bootstrap in
  the target accounts; its function code is read from ``assetsBucket`` (one per Region, readable
  by the organisation), where ``publish_assets`` uploads it.

Context (``-c key=value``): ``centralAccount``, ``producerAccount``, ``region``,
``producerBucket``, ``organizationId``, ``organizationalUnitId``, ``inventoryBucketArn`` (the
central stack's ``InventoryBucketName`` output, as an ARN), ``assetsBucket``.
"""

from __future__ import annotations

import json
import os
import sys
import zipfile
from pathlib import Path
from typing import Any

from aws_cdk import App, DefaultStackSynthesizer, Environment, Stack
from aws_cdk import aws_cloudformation as cloudformation
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from s3ingest.settings import BucketSpec
from s3ingest_cdk import S3IngestPipeline, S3IngestSourceStack

#: Placeholders for the context values (documentation accounts).
DEFAULTS = {
    "centralAccount": "111111111111",
    "producerAccount": "222222222222",
    "region": "eu-west-1",
    "producerBucket": "producer-drop-bucket",
    "organizationId": "o-exampleorgid",
    "organizationalUnitId": "ou-exam-ple12345",
    "inventoryBucketArn": "arn:aws:s3:::central-inventory-bucket",
    "assetsBucket": "org-s3ingest-assets",
}
#: The central stack's name: its roles' names start with it (CloudFormation names a role
#: ``<stack>-<logical id>-<suffix>``), which is what the read roles trust.
CENTRAL_STACK = "S3Ingest-org"
#: Where ``python app.py`` writes the cloud assembly (relative to the working directory), and
#: so the StackSet template's assets (``<OUTDIR>/stackset``) that ``publish`` uploads.
OUTDIR = "cdk.out"
#: The StackSet's TemplateBody limit (CloudFormation quota), bytes.
TEMPLATE_BODY_LIMIT = 51_200


def _context(app: App) -> dict[str, str]:
    return {key: str(app.node.try_get_context(key) or value) for key, value in DEFAULTS.items()}


def _source_props(ctx: dict[str, str], code: lambda_.Code | None) -> dict[str, Any]:
    """The source stack's props, the same for the direct deployment and the StackSet."""
    return {
        "central_account": ctx["centralAccount"],
        "central_region": ctx["region"],
        "buckets": [BucketSpec(name=ctx["producerBucket"], prefixes=("incoming/",))],
        "reader_role_arns": [f"arn:aws:iam::{ctx['centralAccount']}:role/{CENTRAL_STACK}-*"],
        "organization_id": ctx["organizationId"],
        "inventory_destination_arn": ctx["inventoryBucketArn"],
        "code": code,
    }


class Central(Stack):
    """The central account's stack: the pipeline with one bucket of the producer account."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        ctx: dict[str, str],
        code: lambda_.Code | None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.pipeline = S3IngestPipeline(
            self,
            "Pipeline",
            stage="org",
            buckets=[
                BucketSpec(),  # the central account's own landing bucket
                BucketSpec(
                    name=ctx["producerBucket"],
                    existing=True,
                    account=ctx["producerAccount"],
                    region=ctx["region"],
                    prefixes=("incoming/",),
                ),
            ],
            code=code,
        )


def stackset_template(ctx: dict[str, str], outdir: Path, code: lambda_.Code | None) -> str:
    """The source stack's template for the StackSet, synthesized in process: environment
    agnostic (each target account's own account and Region), no bootstrap version rule, file
    assets in ``<assetsBucket>-<region>`` under ``s3ingest/`` (:func:`publish_assets`)."""
    app = App(outdir=str(outdir), analytics_reporting=False)
    synthesizer = DefaultStackSynthesizer(
        file_assets_bucket_name=f"{ctx['assetsBucket']}-${{AWS::Region}}",
        bucket_prefix="s3ingest/",
        generate_bootstrap_version_rule=False,
    )
    S3IngestSourceStack(app, "Source", synthesizer=synthesizer, **_source_props(ctx, code))
    body = json.dumps(app.synth().get_stack_by_name("Source").template, separators=(",", ":"))
    if len(body.encode()) > TEMPLATE_BODY_LIMIT:
        raise ValueError(f"the source template is {len(body)} bytes: over TemplateBody's limit")
    return body


class OrgSources(Stack):
    """The management (or delegated administrator) account's stack: the service-managed
    StackSet of the source stack, auto-deployed to an organisational unit.
    https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/stacksets-orgs-manage-auto-deployment.html
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        ctx: dict[str, str],
        template_body: str,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.stack_set = cloudformation.CfnStackSet(
            self,
            "SourceStackSet",
            stack_set_name="s3ingest-source",
            description="s3ingest source: forwards each account's bucket events to the pipeline",
            permission_model="SERVICE_MANAGED",
            auto_deployment=cloudformation.CfnStackSet.AutoDeploymentProperty(
                enabled=True, retain_stacks_on_account_removal=False
            ),
            capabilities=["CAPABILITY_NAMED_IAM"],
            managed_execution={"Active": True},
            operation_preferences=cloudformation.CfnStackSet.OperationPreferencesProperty(
                failure_tolerance_count=0, max_concurrent_count=5
            ),
            stack_instances_group=[
                cloudformation.CfnStackSet.StackInstancesProperty(
                    deployment_targets=cloudformation.CfnStackSet.DeploymentTargetsProperty(
                        organizational_unit_ids=[ctx["organizationalUnitId"]]
                    ),
                    regions=[ctx["region"]],
                )
            ],
            template_body=template_body,
        )


def build(app: App, code: lambda_.Code | None = None) -> dict[str, Stack]:
    """The three stacks in ``app`` (``code``: the functions' code, the bundle by default)."""
    ctx = _context(app)
    central_env = Environment(account=ctx["centralAccount"], region=ctx["region"])
    producer_env = Environment(account=ctx["producerAccount"], region=ctx["region"])
    central = Central(app, "Central", ctx=ctx, code=code, env=central_env, stack_name=CENTRAL_STACK)
    producer = S3IngestSourceStack(
        app, "ProducerSource", env=producer_env, **_source_props(ctx, code)
    )
    body = stackset_template(ctx, Path(app.outdir) / "stackset", code)
    org = OrgSources(app, "OrgSources", ctx=ctx, template_body=body, env=central_env)
    return {"central": central, "producer": producer, "org": org}


def publish_assets(outdir: Path, bucket: str) -> None:
    """Upload the StackSet template's file assets (``<outdir>/stackset``) to ``bucket`` (one
    Region's ``<assetsBucket>-<region>``), zipped as CloudFormation reads Lambda code."""
    import boto3

    stackset = outdir / "stackset"
    manifest = json.loads((stackset / "Source.assets.json").read_text())
    s3 = boto3.client("s3")
    for asset in manifest["files"].values():
        source = stackset / asset["source"]["path"]
        for destination in asset["destinations"].values():
            upload = source
            if asset["source"].get("packaging") == "zip":  # a directory, zipped
                upload = stackset / destination["objectKey"].replace("/", "_")
                with zipfile.ZipFile(upload, "w", zipfile.ZIP_DEFLATED) as zipped:
                    for path in sorted(p for p in source.rglob("*") if p.is_file()):
                        zipped.write(path, path.relative_to(source))
            s3.upload_file(str(upload), bucket, destination["objectKey"])


if __name__ == "__main__":
    if sys.argv[1:2] == ["publish"]:  # python app.py publish <cdk.out> <bucket>
        publish_assets(Path(sys.argv[2]), sys.argv[3])
    else:
        # cdk.out, as the CDK CLI would (it names its own in CDK_OUTDIR): `publish` reads it
        main_app = App() if os.environ.get("CDK_OUTDIR") else App(outdir=OUTDIR)
        build(main_app)
        main_app.synth()
