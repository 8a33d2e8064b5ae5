"""The SNS topic the operational alarms notify, encrypted with its own key, TLS only."""

from __future__ import annotations

from typing import Any

from aws_cdk import Aws, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from s3ingest_cdk.encryption import pipeline_key

#: The service principal CloudWatch alarms publish as.
CLOUDWATCH_PRINCIPAL = "cloudwatch.amazonaws.com"


def _this_account_s_alarms() -> dict[str, Any]:
    """The confused-deputy conditions of CloudWatch's use of the topic and its key: this
    account's and Region's alarms only (``aws:SourceAccount``, ``aws:SourceArn``;
    https://docs.aws.amazon.com/IAM/latest/UserGuide/confused-deputy.html, as the pipeline key's
    statement, :mod:`s3ingest.encryption`)."""
    return {
        "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
        "ArnLike": {
            "aws:SourceArn": f"arn:{Aws.PARTITION}:cloudwatch:{Aws.REGION}:{Aws.ACCOUNT_ID}:alarm:*"
        },
    }


class AlarmTopic(Construct):
    """An SNS topic for alarm and OK actions, with an optional e-mail subscription.

    The topic is encrypted with a customer-managed, rotated KMS key whose policy lets
    ``cloudwatch.amazonaws.com`` use it (``kms:Decrypt``, ``kms:GenerateDataKey*``): alarms cannot
    publish to a topic encrypted with the AWS-managed ``alias/aws/sns`` key, whose policy cannot be
    changed (https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html#compatibility-with-aws-services,
    https://repost.aws/knowledge-center/cloudwatch-receive-sns-for-alarm-trigger); that grant is
    held to this account's and Region's alarms (``aws:SourceAccount``, ``aws:SourceArn``).
    ``enforce_ssl`` gives the topic a policy that denies ``sns:Publish`` without TLS
    (https://docs.aws.amazon.com/sns/latest/dg/sns-security-best-practices.html#enforce-encryption-data-in-transit);
    because that policy replaces the topic's default one, it also allows CloudWatch to publish,
    for this account's and region's alarms only.

    Parameters
    ----------
    email : str, optional
        An address to subscribe (SNS mails it a confirmation link first); none when omitted.

    Attributes
    ----------
    key : aws_cdk.aws_kms.IKey
        The key that encrypts it (the pipeline's, with ``kmsKeyArn``: its policy lets
        CloudWatch alarms of this account use it, :mod:`s3ingest.encryption`).
    """

    def __init__(self, scope: Construct, construct_id: str, *, email: str | None = None) -> None:
        super().__init__(scope, construct_id)
        shared = pipeline_key(self)
        self.key: kms.IKey = shared if shared is not None else self._own_key()
        self.topic = sns.Topic(
            self,
            "Topic",
            display_name="s3ingest alarms",
            master_key=self.key,
            enforce_ssl=True,
        )
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowCloudWatchAlarmsOfThisAccountAndRegion",
                principals=[iam.ServicePrincipal(CLOUDWATCH_PRINCIPAL)],
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
                conditions=_this_account_s_alarms(),
            )
        )
        self.subscription: sns.Subscription | None = None
        if email is not None:
            self.subscription = self.topic.add_subscription(subscriptions.EmailSubscription(email))

    def _own_key(self) -> kms.Key:
        """The topic's own key (no ``kmsKeyArn``)."""
        # The key only encrypts notifications in flight: nothing to keep once the stack is gone
        # (KMS still waits its pending window before deleting it).
        key = kms.Key(
            self,
            "Key",
            description="s3ingest: encrypts the alarm topic",
            enable_key_rotation=True,
            removal_policy=RemovalPolicy.DESTROY,
        )
        key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowCloudWatchAlarmsToPublishToTheEncryptedTopic",
                principals=[iam.ServicePrincipal(CLOUDWATCH_PRINCIPAL)],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],
                conditions=_this_account_s_alarms(),
            )
        )
        return key
