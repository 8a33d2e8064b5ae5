"""What a function that applies the ledger rules is granted, shared by the features that build
the ingest service (the ingest function, the backfill function, the distributed-map backfill
control function) and, for the landing objects, by reconciliation."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3

from s3ingest_cdk.nag import acknowledge, wildcard_resource_finding


def grant_read_objects(function: lambda_.IFunction, bucket: s3.IBucket) -> str:
    """s3:GetObject and s3:GetObjectVersion (GET, and HEAD: HeadObject needs s3:GetObject) on
    ``bucket``'s objects; returns the objects' ARN pattern (for the acknowledgement of its
    wildcard, which the caller words)."""
    objects_arn = bucket.arn_for_objects("*")
    iam.Grant.add_to_principal(
        grantee=function,
        actions=["s3:GetObject", "s3:GetObjectVersion"],
        resource_arns=[objects_arn],
    )
    return objects_arn


def grant_ingest_service(
    function: lambda_.Function,
    *,
    ledger_table: dynamodb.ITable,
    buckets: Sequence[s3.IBucket],
    processor: str | None,
    output_bucket: s3.IBucket | None,
    objects_reason: str,
) -> None:
    """What a function that builds the ingest service (``wiring.ingest_service``) takes: the
    ledger rules and, with a processor, the processor; each wildcard acknowledged here.

    Ledger: one conditional UpdateItem per event (C5); GetItem/PutItem for observations (C7).
    Bucket: HEAD/GET pinned to a version or ETag (C7, C8). ListBucket makes a HEAD of a missing
    key answer 404 rather than 403
    (https://docs.aws.amazon.com/AmazonS3/latest/API/API_HeadObject.html#API_HeadObject_RequestSyntax).

    The processor reads the bytes of the change pinned by version or ETag (CONTRACT C8:
    GetObject with ``VersionId`` or ``If-Match``), which the ledger rules' grants already cover.
    Its output: ``PROCESSOR`` and ``OUTPUT_BUCKET``, and read, write and delete of the output
    bucket's objects (ListBucket on the bucket, so a missing output reads as 404 rather than 403).

    Parameters
    ----------
    function : aws_cdk.aws_lambda.Function
        The function (its role gets the grants and the acknowledgements).
    ledger_table : aws_cdk.aws_dynamodb.ITable
        The ledger.
    buckets : sequence of aws_cdk.aws_s3.IBucket
        The landing buckets (the grants are per bucket).
    processor : str or None
        ``"package.module:function"``; ``None``: no effects.
    output_bucket : aws_cdk.aws_s3.IBucket or None
        The processor's output bucket (with ``processor`` only).
    objects_reason : str
        Why this function reads the landing objects by wildcard (the AwsSolutions-IAM5 reason).
    """
    role = function.role
    if role is None:  # pragma: no cover - python_function gives every function a role
        raise TypeError("an s3ingest function has its own role")
    ledger_table.grant(function, "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem")
    for bucket in buckets:
        objects_arn = grant_read_objects(function, bucket)
        iam.Grant.add_to_principal(
            grantee=function, actions=["s3:ListBucket"], resource_arns=[bucket.bucket_arn]
        )
        acknowledge(role, wildcard_resource_finding(function, objects_arn), objects_reason)
    if output_bucket is None or processor is None:
        return
    function.add_environment("PROCESSOR", processor)
    function.add_environment("OUTPUT_BUCKET", output_bucket.bucket_name)
    outputs_arn = output_bucket.arn_for_objects("*")
    iam.Grant.add_to_principal(
        grantee=function,
        actions=["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
        resource_arns=[outputs_arn],
    )
    iam.Grant.add_to_principal(
        grantee=function, actions=["s3:ListBucket"], resource_arns=[output_bucket.bucket_arn]
    )
    acknowledge(
        role,
        wildcard_resource_finding(function, outputs_arn),
        "The processor writes (and deletes) one output per object whose change it ran for: "
        "s3:GetObject, s3:PutObject and s3:DeleteObject on the processor output bucket's objects "
        "only (keys made from the landing keys at run time).",
    )
