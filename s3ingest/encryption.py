"""The key policy a customer-managed KMS key needs to encrypt a stack (``kmsKeyArn``,
``docs/encryption.md``): the statements that let the AWS services that encrypt on the stack's
behalf use the key, each held to this account and region by a confused-deputy condition
(``aws:SourceAccount`` with ``aws:SourceArn``, or the CloudWatch Logs encryption context).

Plain data (no CDK import): the stack adds :func:`key_policy_statements` to the key it creates,
and ``docs/encryption.md`` prints :func:`key_policy` for the owner of an imported key to review.
https://docs.aws.amazon.com/IAM/latest/UserGuide/confused-deputy.html
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

#: The ``Sid`` of each service statement, by what it is for.
LOGS_SID = "AllowCloudWatchLogsOfThisAccountAndRegion"
EVENTS_TARGETS_SID = "AllowEventBridgeRulesToSendToEncryptedQueues"
EVENTS_STORE_SID = "AllowEventBridgeBusesAndArchivesOfThisAccount"
ALARMS_SID = "AllowCloudWatchAlarmsToPublishToTheEncryptedTopic"
INVENTORY_SID = "AllowS3InventoryReportsOfThisAccount"
#: The statement admitting one other account's buckets' inventory reports: ``<prefix><account>``.
REMOTE_INVENTORY_SID_PREFIX = "AllowS3InventoryReportsOf"
LOG_DELIVERY_SID = "AllowStateMachineLogDeliveryOfThisAccount"
ACCESS_LOGS_SID = "AllowS3ServerAccessLogsOfThisAccount"
#: The statement that lets the account's IAM policies grant the key (every key policy needs it
#: for the stack's roles' grants to count:
#: https://docs.aws.amazon.com/kms/latest/developerguide/key-policy-default.html).
ACCOUNT_SID = "EnableIamPoliciesOfTheAccount"


def remote_inventories(specs: Iterable[Any]) -> dict[str, list[str]]:
    """The buckets of other accounts (``BucketSpec.account``) that send the stack's own
    inventory to its inventory bucket (``inventory`` true), by account: what
    :func:`key_policy_statements` admits as ``remote_inventories``."""
    found: dict[str, list[str]] = {}
    for spec in specs:
        if spec.account is not None and spec.inventory is True and spec.name is not None:
            found.setdefault(str(spec.account), []).append(str(spec.name))
    return found


def key_policy_statements(
    account: str,
    region: str,
    partition: str = "aws",
    remote_inventories: Mapping[str, Sequence[str]] | None = None,
) -> list[dict[str, Any]]:
    """The service statements of the key's policy (IAM JSON, ``Resource: "*"`` as a key policy
    writes it), for a stack in ``account`` and ``region`` of ``partition`` (CDK tokens work).

    ``remote_inventories``: the buckets of other accounts whose inventory reports S3 writes to
    the stack's inventory bucket (account -> bucket names). S3 encrypts such a report under the
    destination's default key on the source bucket's behalf (``aws:SourceAccount`` is the
    bucket's account, ``aws:SourceArn`` its ARN), so each account gets a statement of its own
    naming its buckets (``AllowS3InventoryReportsOf<account>``); without it the reports are
    refused (https://docs.aws.amazon.com/AmazonS3/latest/userguide/configure-inventory.html,
    "grant Amazon S3 permission to use your KMS key for encryption").

    - CloudWatch Logs (log groups encrypted with the key), held to this account's and region's
      log groups by ``kms:EncryptionContext:aws:logs:arn``
      (https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html);
    - EventBridge delivering to the encrypted queues (rule targets and their dead-letter
      queues,
      https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-troubleshooting.html#eb-sqs-encrypted);
    - EventBridge storing events on the change bus and in the archives
      (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-encryption-event-bus-cmkey.html,
      https://docs.aws.amazon.com/eventbridge/latest/userguide/encryption-archives.html);
    - CloudWatch alarms publishing to the encrypted alarm topic
      (https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html);
    - S3 writing inventory reports to the encrypted inventory bucket
      (https://docs.aws.amazon.com/AmazonS3/latest/userguide/configure-inventory.html);
    - S3 server access logging writing to the encrypted access-logs bucket (the logging service
      principal needs ``kms:GenerateDataKey`` on a destination under SSE-KMS,
      https://docs.aws.amazon.com/AmazonS3/latest/userguide/enable-server-access-logging.html);
    - log delivery of the state machines' execution logs (encrypted state machines,
      https://docs.aws.amazon.com/step-functions/latest/dg/encryption-at-rest.html).
    """
    arn = f"arn:{partition}"
    source_account = {"aws:SourceAccount": account}

    def service(sid: str, principal: str, actions: list[str], condition: dict[str, Any]) -> dict:
        return {
            "Sid": sid,
            "Effect": "Allow",
            "Principal": {"Service": principal},
            "Action": actions,
            "Resource": "*",
            "Condition": condition,
        }

    remote = [
        service(
            f"{REMOTE_INVENTORY_SID_PREFIX}{other}",
            "s3.amazonaws.com",
            ["kms:GenerateDataKey"],
            {
                "StringEquals": {"aws:SourceAccount": other},
                "ArnLike": {
                    "aws:SourceArn": [f"{arn}:s3:::{name}" for name in sorted(names)]
                    if len(names) > 1
                    else f"{arn}:s3:::{names[0]}"
                },
            },
        )
        for other, names in sorted((remote_inventories or {}).items())
        if names
    ]
    return [
        service(
            LOGS_SID,
            f"logs.{region}.amazonaws.com",
            [
                "kms:Encrypt*",
                "kms:Decrypt*",
                "kms:ReEncrypt*",
                "kms:GenerateDataKey*",
                "kms:Describe*",
            ],
            {
                "ArnLike": {
                    "kms:EncryptionContext:aws:logs:arn": (
                        f"{arn}:logs:{region}:{account}:log-group:*"
                    )
                }
            },
        ),
        service(
            EVENTS_TARGETS_SID,
            "events.amazonaws.com",
            ["kms:Decrypt", "kms:GenerateDataKey"],
            {
                "StringEquals": source_account,
                "ArnLike": {"aws:SourceArn": f"{arn}:events:{region}:{account}:rule/*"},
            },
        ),
        service(
            EVENTS_STORE_SID,
            "events.amazonaws.com",
            ["kms:Decrypt", "kms:GenerateDataKey", "kms:ReEncryptFrom", "kms:ReEncryptTo"],
            {
                "StringEquals": source_account,
                "ArnLike": {
                    "aws:SourceArn": [
                        f"{arn}:events:{region}:{account}:event-bus/*",
                        f"{arn}:events:{region}:{account}:archive/*",
                    ]
                },
            },
        ),
        service(
            ALARMS_SID,
            "cloudwatch.amazonaws.com",
            ["kms:Decrypt", "kms:GenerateDataKey"],
            {
                "StringEquals": source_account,
                "ArnLike": {"aws:SourceArn": f"{arn}:cloudwatch:{region}:{account}:alarm:*"},
            },
        ),
        service(
            INVENTORY_SID,
            "s3.amazonaws.com",
            ["kms:GenerateDataKey"],
            {"StringEquals": source_account, "ArnLike": {"aws:SourceArn": f"{arn}:s3:::*"}},
        ),
        service(
            ACCESS_LOGS_SID,
            "logging.s3.amazonaws.com",
            ["kms:GenerateDataKey"],
            {"StringEquals": source_account, "ArnLike": {"aws:SourceArn": f"{arn}:s3:::*"}},
        ),
        service(
            LOG_DELIVERY_SID,
            "delivery.logs.amazonaws.com",
            ["kms:Decrypt"],
            {
                "StringEquals": source_account,
                "ArnLike": {"aws:SourceArn": f"{arn}:logs:{region}:{account}:*"},
            },
        ),
        *remote,
    ]


def key_policy(
    account: str,
    region: str,
    partition: str = "aws",
    remote_inventories: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, Any]:
    """A whole key policy for an imported key (``kmsKeyArn`` set to its ARN): the statement that
    lets the account's IAM policies grant the key (the stack grants each role exactly what it
    needs), then :func:`key_policy_statements` (``remote_inventories`` as there). Review it,
    and merge it into the key's own policy (``aws kms put-key-policy``) before deploying."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": ACCOUNT_SID,
                "Effect": "Allow",
                "Principal": {"AWS": f"arn:{partition}:iam::{account}:root"},
                "Action": "kms:*",
                "Resource": "*",
            },
            *key_policy_statements(account, region, partition, remote_inventories),
        ],
    }
