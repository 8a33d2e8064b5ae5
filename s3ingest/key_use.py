"""The KMS actions a resource action needs when its resource is encrypted with the stack's
customer-managed key (``kmsKeyArn``, ``docs/encryption.md``).

Plain data (no CDK import): the stack grants its roles these on the key
(:func:`s3ingest_cdk.encryption.grant_key_use`), and ``docs/iam.md``'s per-command table
gives an operator command the same for the same actions (``tests/iam_commands.py``).
"""

from __future__ import annotations

#: The KMS actions a resource action needs when its resource is encrypted with the key
#: (SQS: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-key-management.html;
#: S3: https://docs.aws.amazon.com/AmazonS3/latest/userguide/UsingKMSEncryption.html;
#: DynamoDB and its stream, Secrets Manager, EventBridge PutEvents: as CDK's own grants).
READ = ("kms:Decrypt",)
WRITE = ("kms:Decrypt", "kms:GenerateDataKey")
KMS_ACTIONS: dict[str, tuple[str, ...]] = {
    "sqs:SendMessage": WRITE,
    "sqs:ReceiveMessage": READ,
    "dynamodb:GetItem": READ,
    "dynamodb:Query": READ,
    "dynamodb:Scan": READ,
    "dynamodb:BatchGetItem": READ,
    "dynamodb:GetRecords": READ,
    "dynamodb:PutItem": (*WRITE, "kms:Encrypt"),
    "dynamodb:UpdateItem": (*WRITE, "kms:Encrypt"),
    "dynamodb:DeleteItem": (*WRITE, "kms:Encrypt"),
    "dynamodb:BatchWriteItem": (*WRITE, "kms:Encrypt"),
    "s3:GetObject": READ,
    "s3:GetObjectVersion": READ,
    "s3:PutObject": WRITE,
    "events:PutEvents": ("kms:GenerateDataKey",),
    "secretsmanager:GetSecretValue": READ,
}
