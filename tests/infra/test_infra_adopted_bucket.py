"""Adopting an existing bucket: the stack neither creates nor reconfigures it."""

from __future__ import annotations

import json

from s3ingest.settings import ingest_event_pattern
from s3ingest_cdk.synth import Synth

from .conftest import ADOPTED_BUCKET

PARTITION_ARN = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, f":s3:::{ADOPTED_BUCKET}"]]}


def test_no_bucket_is_created_or_reconfigured(adopted_synth: Synth) -> None:
    # GIVEN bucketName in the context
    types = {resource["Type"] for resource in adopted_synth.template["Resources"].values()}
    # THEN no bucket, bucket policy or notification change is in the template
    assert "AWS::S3::Bucket" not in types
    assert "AWS::S3::BucketPolicy" not in types
    assert not [t for t in types if t.startswith("Custom::")]
    assert "NotificationConfiguration" not in json.dumps(adopted_synth.template)
    assert adopted_synth.pipeline.landing.owned is False
    assert adopted_synth.pipeline.landing.inventory_bucket is None


def test_rule_archive_and_function_point_at_the_adopted_bucket(adopted_synth: Synth) -> None:
    pattern = ingest_event_pattern(ADOPTED_BUCKET)
    pipeline = adopted_synth.pipeline
    rule = adopted_synth.template["Resources"][adopted_synth.logical_id(pipeline.routing.rule)]
    _, archive = adopted_synth.one("AWS::Events::Archive")
    function = adopted_synth.template["Resources"][
        adopted_synth.logical_id(pipeline.ingest.function)
    ]
    assert rule["Properties"]["EventPattern"] == pattern
    assert archive["Properties"]["EventPattern"] == pattern
    assert function["Properties"]["Environment"]["Variables"]["BUCKET_NAME"] == ADOPTED_BUCKET
    assert adopted_synth.template["Outputs"]["BucketName"]["Value"] == ADOPTED_BUCKET


def test_function_reads_the_adopted_bucket_by_partition_aware_arn(adopted_synth: Synth) -> None:
    resources: dict[str, object] = {}
    role = {"Ref": adopted_synth.logical_id(adopted_synth.pipeline.ingest.role)}
    for policy in adopted_synth.resources("AWS::IAM::Policy").values():
        if policy["Properties"]["Roles"] != [role]:
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"]
            for action in [actions] if isinstance(actions, str) else actions:
                if action.startswith("s3:"):
                    resources[action] = statement["Resource"]
    objects = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, f":s3:::{ADOPTED_BUCKET}/*"]]}
    assert resources == {
        "s3:GetObject": objects,
        "s3:GetObjectVersion": objects,
        "s3:ListBucket": PARTITION_ARN,
    }
    assert "arn:aws:" not in json.dumps(adopted_synth.template)
