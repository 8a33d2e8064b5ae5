#!/usr/bin/env python3
"""A team's own CDK app that adds s3ingest to the stack that owns its bucket.

Needs s3ingest with its ``cdk`` extra, the constructs (``s3ingest_cdk``) and the function
package they bundle: ``pip install "<checkout>[cdk]"`` (it is not on PyPI); ``npx cdk synth``
from this directory runs it. No Docker: the functions'
package is built with pip for the Lambda platform.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import App, RemovalPolicy, Stack, Validations
from aws_cdk import aws_s3 as s3
from cdk_nag import AwsSolutionsChecks
from constructs import Construct

from s3ingest_cdk import (
    ProcessorConfig,
    S3IngestPipeline,
    enable_event_bridge,
    server_access_logs,
)


class UploadsStack(Stack):
    """The team's stack: its uploads bucket, and the s3ingest ledger of it.

    Context ``existingBucketName`` imports a bucket of that name instead of creating one (its
    owner turns on its EventBridge delivery). Context ``auditFunctionArn`` names a Lambda
    function the team already deploys (any runtime): the pipeline invokes it under the claim for
    every upload under ``audit/``, effectively once (``docs/processor-api.md``).
    """

    def __init__(self, scope: Construct, construct_id: str, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        existing = self.node.try_get_context("existingBucketName")
        bucket: s3.IBucket
        if existing:
            bucket = s3.Bucket.from_bucket_name(self, "Uploads", existing)
        else:
            logs = s3.Bucket(
                self,
                "AccessLogs",
                encryption=s3.BucketEncryption.S3_MANAGED,
                enforce_ssl=True,
                block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
                object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
                removal_policy=RemovalPolicy.RETAIN,
            )
            uploads = s3.Bucket(
                self,
                "Uploads",
                versioned=True,
                encryption=s3.BucketEncryption.S3_MANAGED,
                enforce_ssl=True,
                block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
                object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
                removal_policy=RemovalPolicy.RETAIN,
            )
            # access logs under the logs bucket's policy: no ACL, whatever cdk.json's flags say
            # (server_access_logs_bucket= needs @aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy)
            server_access_logs(uploads, logs, "uploads/")
            enable_event_bridge(uploads)  # S3 -> EventBridge, without a custom resource
            bucket = uploads

        # The team's own processor function, if it has one: invoked synchronously for each
        # applied change of an audit/ key; the pipeline may invoke that function only.
        audit = self.node.try_get_context("auditFunctionArn")
        processors = (
            [ProcessorConfig("audit", function_arn=audit, prefixes=("audit/",), timeout_seconds=60)]
            if audit
            else []
        )

        # s3ingest: the ledger of the bucket, in this stack.
        self.ingest = S3IngestPipeline(
            self,
            "Ingest",
            bucket=bucket,
            stage="uploads",
            alarm_email="oncall@example.com",
            processors=processors,
        )


def build(app: App) -> UploadsStack:
    """The team's stack, and cdk-nag's AwsSolutions checks on the whole app: synth fails on any
    finding that is not acknowledged (s3ingest's constructs acknowledge theirs, each next to its
    grant; the team acknowledges its own with ``Validations.of(construct).acknowledge``)."""
    stack = UploadsStack(app, "Uploads")
    Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))
    return stack


def main() -> None:
    """Synthesize the app (``cdk synth`` runs this)."""
    app = App()
    build(app)
    app.synth()


if __name__ == "__main__":
    main()
