"""``kmsKeyArn`` in the local runtime: a KMS key in the emulator (moto), named on the resources
the stack would encrypt with it, so a local run with the setting provisions and runs as the
stack does.

Not enforced locally: moto stores the key settings but neither encrypts with the key nor checks
a caller's or a service's KMS permissions or the key policy (``docs/encryption.md``); an imported
key's ARN (another account's key) cannot exist in the emulator, so a key of the emulator's own
account stands for it.
"""

from __future__ import annotations

import json
from typing import Any

from s3ingest.encryption import key_policy, remote_inventories
from s3ingest.settings import CREATE_KEY, Settings


def local_key(emu: Any, settings: Settings, suffix: str) -> str | None:
    """The ARN of the emulator's key for ``settings.kms_key_arn`` (None: unset): created with
    rotation on, the alias ``alias/s3ingest-<stage>-<suffix>`` and the policy
    :func:`s3ingest.encryption.key_policy` gives an imported key."""
    if settings.kms_key_arn is None:
        return None
    kms = emu.client("kms")
    account = emu.client("sts").get_caller_identity()["Account"]
    region = kms.meta.region_name
    description = (
        "s3ingest local: the stack's own key"
        if settings.kms_key_arn == CREATE_KEY
        else f"s3ingest local: stands for {settings.kms_key_arn}"
    )
    # the policy a deployed key has: the inventory reports of buckets of other accounts too
    policy = key_policy(account, region, remote_inventories=remote_inventories(settings.buckets))
    key = kms.create_key(Description=description, Policy=json.dumps(policy))["KeyMetadata"]
    kms.enable_key_rotation(KeyId=key["KeyId"])
    kms.create_alias(
        AliasName=f"alias/s3ingest-{settings.stage}-{suffix}", TargetKeyId=key["KeyId"]
    )
    return str(key["Arn"])


def encrypt_bucket(s3: Any, bucket: str, key_arn: str | None) -> None:
    """SSE-KMS with ``key_arn`` and a bucket key as ``bucket``'s default (None: left as is)."""
    if key_arn is None:
        return
    s3.put_bucket_encryption(
        Bucket=bucket,
        ServerSideEncryptionConfiguration={
            "Rules": [
                {
                    "ApplyServerSideEncryptionByDefault": {
                        "SSEAlgorithm": "aws:kms",
                        "KMSMasterKeyID": key_arn,
                    },
                    "BucketKeyEnabled": True,
                }
            ]
        },
    )


def queue_attributes(key_arn: str | None) -> dict[str, str]:
    """The SQS attributes of a queue encrypted with ``key_arn`` (empty: SQS's own)."""
    return {} if key_arn is None else {"KmsMasterKeyId": key_arn}


def table_encryption(key_arn: str | None) -> dict[str, Any]:
    """CreateTable's ``SSESpecification`` for ``key_arn`` (empty: DynamoDB's own key)."""
    if key_arn is None:
        return {}
    return {"SSESpecification": {"Enabled": True, "SSEType": "KMS", "KMSMasterKeyId": key_arn}}


def key_id_argument(name: str, key_arn: str | None) -> dict[str, str]:
    """``{name: key_arn}`` for a create call that takes the key (empty when None)."""
    return {} if key_arn is None else {name: key_arn}
