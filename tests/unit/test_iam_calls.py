"""The IAM requests a recorded AWS call makes (:mod:`tests.iam_calls`), after the Service
Authorization Reference (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3.html,
.../list_amazonsqs.html, .../list_amazondynamodb.html)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.iam_calls import Call, Request, requests

QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012/ingest-1"
QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:ingest-1"
TABLE_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/ledger-1"


@pytest.mark.parametrize(
    ("service", "operation", "params", "expected"),
    [
        ("s3", "HeadObject", {"Bucket": "b", "Key": "k"}, [("s3:GetObject", "arn:aws:s3:::b/k")]),
        (
            "s3",
            "HeadObject",
            {"Bucket": "b", "Key": "k", "VersionId": "v"},
            [("s3:GetObjectVersion", "arn:aws:s3:::b/k")],
        ),
        (
            "s3",
            "ListObjectVersions",
            {"Bucket": "b"},
            [("s3:ListBucketVersions", "arn:aws:s3:::b")],
        ),
        ("s3", "ListObjectsV2", {"Bucket": "b"}, [("s3:ListBucket", "arn:aws:s3:::b")]),
        (
            "s3",
            "GetBucketNotificationConfiguration",
            {"Bucket": "b"},
            [("s3:GetBucketNotification", "arn:aws:s3:::b")],
        ),
        (
            "s3",
            "DeleteObject",
            {"Bucket": "b", "Key": "a b", "VersionId": "v"},
            [("s3:DeleteObjectVersion", "arn:aws:s3:::b/a b")],
        ),
        (
            "s3",
            "DeleteObjects",
            {"Bucket": "b", "Delete": {"Objects": [{"Key": "x"}, {"Key": "y", "VersionId": "v"}]}},
            [
                ("s3:DeleteObject", "arn:aws:s3:::b/x"),
                ("s3:DeleteObjectVersion", "arn:aws:s3:::b/y"),
            ],
        ),
        (
            "s3",
            "CopyObject",
            {"Bucket": "out", "Key": "k", "CopySource": {"Bucket": "in", "Key": "s"}},
            [("s3:PutObject", "arn:aws:s3:::out/k"), ("s3:GetObject", "arn:aws:s3:::in/s")],
        ),
        (
            "sqs",
            "SendMessageBatch",
            {"QueueUrl": QUEUE, "Entries": []},
            [("sqs:SendMessage", QUEUE_ARN)],
        ),
        ("sqs", "DeleteMessageBatch", {"QueueUrl": QUEUE}, [("sqs:DeleteMessage", QUEUE_ARN)]),
        ("dynamodb", "UpdateItem", {"TableName": "ledger-1"}, [("dynamodb:UpdateItem", TABLE_ARN)]),
        (
            "dynamodb",
            "Query",
            {"TableName": "ledger-1", "IndexName": "held"},
            [("dynamodb:Query", f"{TABLE_ARN}/index/held")],
        ),
        (
            "stepfunctions",
            "StartExecution",
            {"stateMachineArn": "arn:aws:states:us-east-1:1:stateMachine:m"},
            [("states:StartExecution", "arn:aws:states:us-east-1:1:stateMachine:m")],
        ),
        (
            "events",
            "PutEvents",
            {"Entries": [{"EventBusName": "changes"}, {}]},
            [
                ("events:PutEvents", "arn:aws:events:us-east-1:123456789012:event-bus/changes"),
                ("events:PutEvents", "arn:aws:events:us-east-1:123456789012:event-bus/default"),
            ],
        ),
        ("cloudwatch", "GetMetricData", {}, [("cloudwatch:GetMetricData", "*")]),
        ("sts", "GetCallerIdentity", {}, []),
    ],
)
def test_a_call_becomes_the_iam_requests_aws_authorizes(
    service: str, operation: str, params: dict[str, Any], expected: list[tuple[str, str]]
) -> None:
    found = requests(Call(service, operation, params, None))
    assert found == [Request(action, resource) for action, resource in expected]
