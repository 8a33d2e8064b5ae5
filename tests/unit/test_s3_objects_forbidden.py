"""A HEAD answered 403 under a read role whose ``s3:ListBucket`` is held to ``s3:prefix`` (a
source stack's, ``docs/organisation.md``): S3 answers 403, not 404, for a missing key when the
role may not list the bucket for that request
(https://docs.aws.amazon.com/AmazonS3/latest/API/API_HeadObject.html), and the HEAD carries no
prefix. :meth:`S3Objects.current` asks the listing (ListObjectsV2 with the key as prefix,
https://docs.aws.amazon.com/AmazonS3/latest/API/API_ListObjectsV2.html): a key not listed is
missing, so its delete applies instead of being retried and dead-lettered.

botocore Stubber stands in for S3 (moto evaluates no IAM policy: every HEAD of a missing key is
a 404 there).
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from s3ingest_fn.adapters.s3_objects import S3Objects
from s3ingest_fn.core.model import ObjectState, TransientError

KEY = "incoming/a.csv"
LISTING = {"Bucket": "b", "Prefix": KEY, "MaxKeys": 1}


def _s3() -> Any:
    return boto3.client(
        "s3", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )


@pytest.mark.contract("C9", "C12")
def test_a_forbidden_head_of_a_key_the_listing_lacks_is_a_missing_key() -> None:
    s3 = _s3()
    with Stubber(s3) as stub:
        # GIVEN a HEAD refused (403) and a listing with no such key (only a longer one)
        stub.add_client_error("head_object", "403", http_status_code=403)
        stub.add_response(
            "list_objects_v2",
            {"Contents": [{"Key": f"{KEY}.bak"}], "KeyCount": 1},
            LISTING,
        )
        # THEN the key is missing, as a 404 would say
        assert S3Objects(s3).current("b", KEY) == ObjectState(visible=False)
        # AND an empty listing says the same
        stub.add_client_error("head_object", "AccessDenied", http_status_code=403)
        stub.add_response("list_objects_v2", {"KeyCount": 0}, LISTING)
        assert S3Objects(s3).current("b", KEY) == ObjectState(visible=False)
        stub.assert_no_pending_responses()


@pytest.mark.contract("C9")
def test_a_forbidden_head_of_a_listed_or_unlistable_key_stays_transient() -> None:
    s3 = _s3()
    with Stubber(s3) as stub:
        # GIVEN a HEAD refused though the listing shows the key (a real denial: a key policy,
        # a bucket policy), THEN it is transient (retried, then dead-lettered)
        stub.add_client_error("head_object", "403", http_status_code=403)
        stub.add_response("list_objects_v2", {"Contents": [{"Key": KEY}], "KeyCount": 1}, LISTING)
        with pytest.raises(TransientError, match="head_object: 403"):
            S3Objects(s3).current("b", KEY)
        # AND a listing refused too leaves the 403 unexplained: transient
        stub.add_client_error("head_object", "403", http_status_code=403)
        stub.add_client_error("list_objects_v2", "AccessDenied", http_status_code=403)
        with pytest.raises(TransientError, match="list_objects_v2: AccessDenied"):
            S3Objects(s3).current("b", KEY)
        # AND other errors are not listed for: throttling stays transient at once
        stub.add_client_error("head_object", "SlowDown", http_status_code=503)
        with pytest.raises(TransientError, match="SlowDown"):
            S3Objects(s3).current("b", KEY)
        stub.assert_no_pending_responses()
