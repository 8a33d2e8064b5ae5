"""The scheduled delivery check tells a bucket whose EventBridge delivery was switched off.

botocore Stubber stands in for S3: moto stores ``EventBridgeConfiguration`` but leaves it out of
its GetBucketNotificationConfiguration answer. The stubbed answers are the parsed shapes of
https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetBucketNotificationConfiguration.html
(``<EventBridgeConfiguration/>`` parses as an empty dict).
"""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber

from s3ingest_fn.adapters.s3_objects import S3EventDelivery
from s3ingest_fn.core.model import TransientError
from s3ingest_fn.handlers.delivery_check import check


def test_the_check_tells_delivery_on_from_off() -> None:
    # GIVEN one bucket sending to EventBridge, and one whose configuration another deploy
    # rewrote with only its own queue notification
    s3 = boto3.client(
        "s3", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    with Stubber(s3) as stub:
        stub.add_response(
            "get_bucket_notification_configuration",
            {"EventBridgeConfiguration": {}, "QueueConfigurations": []},
            {"Bucket": "on-bkt"},
        )
        stub.add_response(
            "get_bucket_notification_configuration",
            {
                "QueueConfigurations": [
                    {
                        "QueueArn": "arn:aws:sqs:us-east-1:123456789012:theirs",
                        "Events": ["s3:ObjectCreated:*"],
                    }
                ]
            },
            {"Bucket": "off-bkt"},
        )
        # WHEN the check runs / THEN it reports each
        assert check(S3EventDelivery(s3), ["on-bkt", "off-bkt"]) == {
            "on-bkt": True,
            "off-bkt": False,
        }
        stub.add_client_error(
            "get_bucket_notification_configuration", "AccessDenied", http_status_code=403
        )
        with pytest.raises(TransientError, match="AccessDenied"):
            check(S3EventDelivery(s3), ["denied-bkt"])
