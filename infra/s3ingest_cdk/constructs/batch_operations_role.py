"""The role S3 Batch Operations assumes to run a backfill job."""

from __future__ import annotations

from aws_cdk import Aws
from aws_cdk import aws_iam as iam
from constructs import Construct

#: The service principal of S3 Batch Operations.
BATCH_OPERATIONS_PRINCIPAL = "batchoperations.s3.amazonaws.com"


class BatchOperationsRole(Construct):
    """A role only S3 Batch Operations, on behalf of this account, may assume.

    The trust policy carries ``aws:SourceAccount`` and ``aws:SourceArn`` (this account's and
    Region's jobs) against the confused deputy
    (https://docs.aws.amazon.com/AmazonS3/latest/userguide/batch-ops-iam-role-policies.html,
    https://docs.aws.amazon.com/IAM/latest/UserGuide/confused-deputy.html). No
    permission is attached here: the backfill feature grants reading the inventory manifest,
    invoking the backfill function and writing the completion report, and nothing else.

    Attributes
    ----------
    role : aws_cdk.aws_iam.Role
        The role (passed to ``s3:CreateJob`` as the job's ``RoleArn``).
    """

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal(
                BATCH_OPERATIONS_PRINCIPAL,
                conditions={
                    "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
                    "ArnLike": {
                        "aws:SourceArn": (
                            f"arn:{Aws.PARTITION}:s3:{Aws.REGION}:{Aws.ACCOUNT_ID}:job/*"
                        )
                    },
                },
            ),
            description="s3ingest: S3 Batch Operations backfill jobs",
        )
