"""``kmsKeyArn`` in the local runtime: a scenario runs and converges with the stack's resources
under the emulator's key (moto stores the key settings; it does not enforce them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from s3ingest.local.rehearsal.scenario import run_scenario
from s3ingest.local.stack.runtime import local_settings

SCENARIO = Path(__file__).parents[2] / "examples" / "scenarios" / "existing-bucket.jsonl"


def test_a_scenario_with_a_created_key_converges_under_the_key(emulator: Any) -> None:
    # GIVEN the settings with kmsKeyArn "create", hashed log keys (the secret) and the stream
    settings = local_settings(kms_key_arn="create", log_keys="hashed")
    kms = emulator.client("kms")
    before = {a["AliasName"] for a in kms.list_aliases()["Aliases"]}
    # WHEN the example scenario of an adopted bucket runs
    result = run_scenario(SCENARIO, settings=settings, emulator=emulator)
    # THEN it converges as without the key
    assert result["converged"] is True, result["differences"]
    # AND the stack's queues, table and own buckets name the emulator's key, rotated, aliased
    (alias,) = [a for a in kms.list_aliases()["Aliases"] if a["AliasName"] not in before]
    assert alias["AliasName"].startswith("alias/s3ingest-dev-")
    suffix = alias["AliasName"].rsplit("-", 1)[1]
    key_arn = kms.describe_key(KeyId=alias["TargetKeyId"])["KeyMetadata"]["Arn"]
    assert kms.get_key_rotation_status(KeyId=key_arn)["KeyRotationEnabled"] is True
    sqs = emulator.client("sqs")
    urls = sqs.list_queues()["QueueUrls"]
    stack_queues = [u for u in urls if u.endswith(suffix) and "other-team" not in u]
    assert len(stack_queues) == 4  # ingest, its DLQ, the change subscriber and the relay's DLQ
    for url in stack_queues:
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        assert attributes.get("KmsMasterKeyId") == key_arn, url
    ddb = emulator.client("dynamodb")
    sse = ddb.describe_table(TableName=f"ledger-{suffix}")["Table"]["SSEDescription"]
    assert sse["SSEType"] == "KMS" and sse["KMSMasterKeyArn"] == key_arn
    s3 = emulator.client("s3")
    inventory = f"s3ingest-inventory-{suffix}"
    rule = s3.get_bucket_encryption(Bucket=inventory)["ServerSideEncryptionConfiguration"]
    default = rule["Rules"][0]["ApplyServerSideEncryptionByDefault"]
    assert default == {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": key_arn}
