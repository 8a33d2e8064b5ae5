"""``kmsKeyArn``: the setting (a key ARN or ``create``), the adopted bucket's own key, and the
key policy an imported key needs (generated, and the same in docs/encryption.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from s3ingest.encryption import (
    ACCOUNT_SID,
    key_policy,
    key_policy_statements,
    remote_inventories,
)
from s3ingest.settings import BucketSpec, Settings, SettingsError

KEY = "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
DOC = Path(__file__).parents[2] / "docs" / "encryption.md"


def test_unset_by_default() -> None:
    assert Settings().kms_key_arn is None
    assert Settings.from_context({}).kms_key_arn is None


@pytest.mark.parametrize(
    "value",
    [
        "create",
        KEY,
        "arn:aws-cn:kms:cn-north-1:111122223333:key/mrk-1234abcd",
        "arn:aws-us-gov:kms:us-gov-west-1:111122223333:key/1234abcd",
    ],
)
def test_a_key_arn_or_create_is_accepted(value: str) -> None:
    assert Settings.from_context({"kmsKeyArn": value}).kms_key_arn == value


@pytest.mark.parametrize(
    "value",
    [
        "alias/aws/s3",  # an AWS-managed key, by alias
        "arn:aws:kms:eu-west-1:111122223333:alias/mine",  # an alias, not the key
        "arn:aws:kms:eu-west-1:1111:key/abcd",  # not a 12-digit account
        "arn:aws:s3:::bucket",
        "Create",
    ],
)
def test_anything_else_is_refused(value: str) -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_context({"kmsKeyArn": value})
    assert caught.value.problems == [
        f"kmsKeyArn: {value!r} is not a KMS key ARN (arn:aws:kms:<region>:<account>:key/<id>) "
        'or "create"'
    ]


def test_an_adopted_buckets_key_round_trips_through_the_context() -> None:
    entry = {"name": "partner-drop", "existing": True, "kmsKeyArn": KEY}
    settings = Settings.from_context({"buckets": [entry]})
    assert settings.buckets == (BucketSpec(name="partner-drop", existing=True, kms_key_arn=KEY),)
    assert settings.to_context()["buckets"] == [entry]


def test_a_bucket_key_is_refused_on_a_created_bucket_and_create_is_not_a_bucket_key() -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_context(
            {
                "buckets": [
                    {"kmsKeyArn": KEY},
                    {"name": "partner-drop", "existing": True, "kmsKeyArn": "create"},
                ]
            }
        )
    assert caught.value.problems == [
        "buckets[0].kmsKeyArn: only an existing bucket names its key: mark a bucket the stack "
        'does not create existing ("existing": true; BucketSpec(existing=True), as every '
        "bucket of an S3IngestSourceStack); a bucket the stack creates is encrypted with the "
        "stack's kmsKeyArn",
        "buckets[1].kmsKeyArn: 'create' is not a KMS key ARN "
        "(arn:aws:kms:<region>:<account>:key/<id>)",
    ]


def test_every_service_statement_is_held_to_the_account() -> None:
    for statement in key_policy_statements("111122223333", "eu-west-1"):
        condition = json.dumps(statement["Condition"])
        assert "111122223333" in condition, statement["Sid"]
        assert "aws:SourceArn" in condition or "kms:EncryptionContext:aws:logs:arn" in condition
        if "aws:SourceArn" in condition:
            assert statement["Condition"]["StringEquals"]["aws:SourceAccount"] == "111122223333"
    policy = key_policy("111122223333", "eu-west-1", "aws-cn")
    assert policy["Statement"][0]["Sid"] == ACCOUNT_SID
    assert policy["Statement"][0]["Principal"] == {"AWS": "arn:aws-cn:iam::111122223333:root"}


def test_the_docs_show_the_generated_policy() -> None:
    generated = json.dumps(key_policy("111122223333", "eu-west-1"), indent=2)
    assert f"```json\n{generated}\n```" in DOC.read_text(encoding="utf-8")


def test_the_key_admits_each_remote_account_s_inventory_reports_by_bucket() -> None:
    # GIVEN buckets of two other accounts (one without the stack's inventory) and a local one
    specs = [
        BucketSpec(),
        BucketSpec(name="drop", existing=True, account="222233334444"),
        BucketSpec(name="archive", existing=True, account="222233334444"),
        BucketSpec(name="quiet", existing=True, account="555566667777", inventory=False),
        BucketSpec(name="other", existing=True, account="888899990000"),
    ]
    remote = remote_inventories(specs)
    assert remote == {"222233334444": ["drop", "archive"], "888899990000": ["other"]}
    # THEN one statement per account, naming that account and its buckets only
    # (https://docs.aws.amazon.com/AmazonS3/latest/userguide/configure-inventory.html)
    statements = {
        s["Sid"]: s for s in key_policy_statements("111122223333", "eu-west-1", "aws", remote)
    }
    drop = statements["AllowS3InventoryReportsOf222233334444"]
    assert drop["Principal"] == {"Service": "s3.amazonaws.com"}
    assert drop["Action"] == ["kms:GenerateDataKey"]
    assert drop["Condition"] == {
        "StringEquals": {"aws:SourceAccount": "222233334444"},
        "ArnLike": {"aws:SourceArn": ["arn:aws:s3:::archive", "arn:aws:s3:::drop"]},
    }
    assert statements["AllowS3InventoryReportsOf888899990000"]["Condition"]["ArnLike"] == {
        "aws:SourceArn": "arn:aws:s3:::other"
    }
    assert "AllowS3InventoryReportsOf555566667777" not in statements
    # AND the printed policy for an imported key holds them too; without remote buckets, none
    printed = key_policy("111122223333", "eu-west-1", remote_inventories=remote)
    assert drop in printed["Statement"]
    assert not [
        s for s in key_policy_statements("111122223333", "eu-west-1") if "Of2222" in s["Sid"]
    ]
