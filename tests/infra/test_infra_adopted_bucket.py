"""Adopting an existing bucket: the stack neither creates nor replaces it; one custom resource
switches its EventBridge delivery on and adds the stack's inventory configuration, keeping the
rest (docs/existing-buckets.md)."""

from __future__ import annotations

import json

from s3ingest.settings import INVENTORY_ID, INVENTORY_PREFIX, ingest_event_pattern
from s3ingest_cdk.constructs.bucket_setup import RESOURCE_TYPE, SETUP_ACTIONS
from s3ingest_cdk.constructs.landing_bucket import INVENTORY_OPTIONAL_FIELDS
from s3ingest_cdk.synth import Synth

from .conftest import ADOPTED_BUCKET

PARTITION_ARN = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, f":s3:::{ADOPTED_BUCKET}"]]}


def test_the_bucket_is_not_created_and_is_set_up_by_one_custom_resource(
    adopted_synth: Synth,
) -> None:
    # GIVEN bucketName in the context
    synth = adopted_synth
    pipeline = synth.pipeline
    types = {resource["Type"] for resource in synth.template["Resources"].values()}
    # THEN the only buckets created are the stack's own (access logs; inventory and checkpoints)
    shared = pipeline.landings.shared
    assert set(synth.resources("AWS::S3::Bucket")) == {
        synth.logical_id(shared.access_logs),
        synth.logical_id(shared.inventory),
    }
    # ... no CloudFormation notification configuration replaces the bucket's own ...
    assert "NotificationConfiguration" not in json.dumps(synth.template)
    assert pipeline.landing.owned is False
    assert pipeline.landing.inventory_bucket is shared.inventory
    # ... and one resource of ours (no CDK notifications resource) sets it up
    assert [t for t in types if t.startswith("Custom::")] == [RESOURCE_TYPE]
    ((_, setup),) = synth.resources(RESOURCE_TYPE).items()
    props = setup["Properties"]
    inventory_arn = {"Fn::GetAtt": [synth.logical_id(shared.inventory), "Arn"]}
    assert props["BucketName"] == ADOPTED_BUCKET
    assert props["EventBridge"] == "true"
    assert props["Inventory"] == {
        "Id": INVENTORY_ID,
        "IsEnabled": True,
        "Destination": {
            "S3BucketDestination": {
                "AccountId": {"Ref": "AWS::AccountId"},
                "Bucket": inventory_arn,
                "Format": "CSV",
                "Prefix": INVENTORY_PREFIX,
            }
        },
        "IncludedObjectVersions": "All",
        "OptionalFields": list(INVENTORY_OPTIONAL_FIELDS),
        "Schedule": {"Frequency": "Daily"},
    }
    # ... whose handler may change that bucket's notification and inventory configuration only
    setup_provider = pipeline.bucket_setup
    assert setup_provider is not None
    granted: dict[str, object] = {}
    role = {"Ref": synth.logical_id(setup_provider.role)}
    for policy in synth.resources("AWS::IAM::Policy").values():
        if policy["Properties"]["Roles"] == [role]:
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                actions = statement["Action"]
                for action in [actions] if isinstance(actions, str) else actions:
                    if action.startswith("s3:"):
                        granted[action] = statement["Resource"]
    assert granted == {action: PARTITION_ARN for action in SETUP_ACTIONS}
    # AND the inventory bucket accepts the adopted bucket's reports
    inventory_policy = next(
        p
        for p in synth.resources("AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == {"Ref": synth.logical_id(shared.inventory)}
    )
    (delivery,) = [
        s
        for s in inventory_policy["Properties"]["PolicyDocument"]["Statement"]
        if s.get("Sid") == "AllowS3InventoryDelivery"
    ]
    assert delivery["Condition"]["ArnLike"] == {"aws:SourceArn": PARTITION_ARN}


def test_rule_archive_and_function_point_at_the_adopted_bucket(adopted_synth: Synth) -> None:
    pattern = ingest_event_pattern([{"name": ADOPTED_BUCKET, "account": {"Ref": "AWS::AccountId"}}])
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
    # AND the adopted bucket only while the stack's account owns it: a bucket of that name
    # created in another account (the name free, deleted) is denied (s3:ResourceAccount)
    (guard,) = adopted_synth.template["Resources"][role["Ref"]]["Properties"]["Policies"]
    assert guard["PolicyDocument"]["Statement"] == [
        {
            "Sid": "OwnBucketsOnly",
            "Effect": "Deny",
            "Action": "s3:*",
            "Resource": [PARTITION_ARN, objects],
            "Condition": {"StringNotEquals": {"s3:ResourceAccount": {"Ref": "AWS::AccountId"}}},
        }
    ]
    assert "arn:aws:" not in json.dumps(adopted_synth.template)
