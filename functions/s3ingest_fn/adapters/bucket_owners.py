"""Every S3 call on a landing bucket names the account that owns it (``ExpectedBucketOwner``).

A bucket is trusted by its owner, not by its name: a name is global, and when a configured
bucket's name is free (not created yet, or deleted) any account can create a bucket of that
name. S3 answers ``403 Access Denied`` to a request whose ``ExpectedBucketOwner`` is not the
bucket's owner (https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucket-owner-condition.html),
so the pipeline never reads, lists or configures another account's bucket of a configured name.

:func:`expect_owners` registers a botocore ``before-parameter-build`` handler on a client
(a boto3 S3 client, or each client of a
:class:`~s3ingest_fn.adapters.bucket_routes.BucketRoutedS3`) that adds the owner of the call's
``Bucket`` (``owners``: ``BUCKET_OWNERS``,
:attr:`s3ingest_fn.config.ClientConfig.bucket_owners`) to every operation whose input has the
parameter, unless the caller set one. A presigned URL gets none: the header would have to be
sent by whoever follows the URL (a processor's plain GET); the URL is signed by a role whose
policy holds ``s3:ResourceAccount`` (``docs/organisation.md``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from s3ingest_fn.owners import parse_owners

#: The parameter S3 checks against the bucket's owner.
PARAMETER = "ExpectedBucketOwner"


def add_expected_owner(owners: Mapping[str, str]) -> Any:
    """The ``before-parameter-build.s3`` handler: ``params["ExpectedBucketOwner"]`` set to the
    owner of ``params["Bucket"]`` when ``owners`` names the bucket, the operation takes the
    parameter, the caller gave none and the call is not a presigned URL."""
    known = dict(owners)

    def handler(params: dict[str, Any], model: Any, context: Any = None, **_: Any) -> None:
        owner = known.get(str(params.get("Bucket") or ""))
        if owner is None or PARAMETER in params:
            return
        if context is not None and context.get("is_presign_request"):
            return
        shape = model.input_shape
        if shape is not None and PARAMETER in shape.members:
            params[PARAMETER] = owner

    return handler


def expect_owners(client: Any, owners: Mapping[str, str]) -> Any:
    """``client`` (a boto3 S3 client or a ``BucketRoutedS3``), every call on a bucket of
    ``owners`` sending ``ExpectedBucketOwner``; returned as is when ``owners`` is empty."""
    if not owners:
        return client
    handler = add_expected_owner(owners)

    def register(made: Any) -> None:
        # per operation (the most specific name runs first, before any other hook: botocore
        # calls handlers of a longer event name before a shorter one's)
        model = made.meta.service_model
        for name in model.operation_names:
            shape = model.operation_model(name).input_shape
            if shape is not None and PARAMETER in shape.members:
                made.meta.events.register_first(f"before-parameter-build.s3.{name}", handler)

    each = getattr(client, "each_client", None)
    if each is not None:
        each(register)
    else:
        register(client)
    return client


__all__ = ["PARAMETER", "add_expected_owner", "expect_owners", "parse_owners"]
