"""``attestationRetentionDays`` (issue 38): the attestations in a bucket of their own under S3
Object Lock, compliance mode, where the scheduled reconciliation writes them and the CLI finds
them (``AttestationBucketName``); without the setting, nothing of it in the template."""

from __future__ import annotations

import json
from typing import Any

from s3ingest.outputs import ATTESTATION_BUCKET_NAME
from s3ingest_cdk.synth import Synth

from .conftest import KMS_ATTESTATION_DAYS
from .iam import role_allowed


def _locked(synth: Synth) -> dict[str, dict[str, Any]]:
    return {
        logical_id: bucket
        for logical_id, bucket in synth.resources("AWS::S3::Bucket").items()
        if bucket["Properties"].get("ObjectLockEnabled")
    }


def test_the_attestations_bucket_keeps_each_version_under_compliance_mode(
    kms_synth: Synth,
) -> None:
    bucket = kms_synth.pipeline.reconciliation.attestation_bucket
    assert bucket is not None
    bucket_id = kms_synth.logical_id(bucket)
    # THEN it is the one bucket with Object Lock, versioned, retained, its default retention
    # the setting's days in compliance mode
    assert list(_locked(kms_synth)) == [bucket_id]
    resource = _locked(kms_synth)[bucket_id]
    props = resource["Properties"]
    assert props["ObjectLockConfiguration"] == {
        "ObjectLockEnabled": "Enabled",
        "Rule": {"DefaultRetention": {"Mode": "COMPLIANCE", "Days": KMS_ATTESTATION_DAYS}},
    }
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    assert resource["DeletionPolicy"] == "Retain"
    # AND under the stack's key, as every bucket of the stack
    (rule,) = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms"
    # AND the scheduled reconciliation writes its attestations there, and only there
    reconcile = kms_synth.pipeline.reconcile
    function = kms_synth.resources("AWS::Lambda::Function")[
        kms_synth.logical_id(reconcile.function)
    ]
    assert function["Properties"]["Environment"]["Variables"]["ATTESTATION_BUCKET_NAME"] == {
        "Ref": bucket_id
    }
    documents = {"Fn::Join": ["", [{"Fn::GetAtt": [bucket_id, "Arn"]}, "/attestations/*"]]}
    assert role_allowed(kms_synth, reconcile.role)["s3:PutObject"] == [
        json.dumps(documents, sort_keys=True)
    ]
    # AND the CLI finds it by its output
    assert kms_synth.template["Outputs"][ATTESTATION_BUCKET_NAME]["Value"] == {"Ref": bucket_id}


def test_without_the_setting_there_is_no_locked_bucket(synth: Synth) -> None:
    assert synth.pipeline.reconciliation.attestation_bucket is None
    assert _locked(synth) == {}
    assert ATTESTATION_BUCKET_NAME not in synth.template["Outputs"]
