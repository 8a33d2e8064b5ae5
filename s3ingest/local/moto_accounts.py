"""Accounts on the emulator as AWS keeps them apart (patch bodies named in
:mod:`s3ingest.local.moto_patches`, written against moto 5.2.5).

moto keeps each account's state apart and picks the account of a request from its access key
(an ``sts:AssumeRole`` key belongs to the role's account). Two gaps for buckets of other
accounts:

* moto lets any account read a bucket of another one (``MOTO_S3_ALLOW_CROSSACCOUNT_ACCESS``,
  default true); S3 refuses a caller the bucket's policy does not admit (403), and this
  project reads another account's bucket only through that account's role, so the emulator
  refuses cross-account bucket access always (:func:`refuse_other_accounts_buckets`);
* moto reads the access key of a request from its ``Authorization`` header or a Signature
  Version 2 presigned URL's ``AWSAccessKeyId``, not from a Signature Version 4 presigned URL's
  ``X-Amz-Credential`` (https://docs.aws.amazon.com/AmazonS3/latest/API/sigv4-query-string-auth.html),
  so such a URL always acted as the default account (:func:`presigned_urls_name_their_account`).
"""

from __future__ import annotations

from typing import Any


def refuse_other_accounts_buckets() -> None:
    """A request on a bucket of another account answers 403 (moto's ``AccessDeniedByLock``)."""
    import moto.s3.models as s3_models

    if getattr(s3_models.s3_allow_crossdomain_access, "_s3ingest", False):
        return

    def refused() -> bool:
        return False

    refused._s3ingest = True  # type: ignore[attr-defined]
    s3_models.s3_allow_crossdomain_access = refused


def presigned_urls_name_their_account() -> None:
    """A Signature Version 4 presigned request acts as the account of its
    ``X-Amz-Credential``'s access key."""
    from moto.core.responses import BaseResponse

    original = BaseResponse.get_access_key
    if getattr(original, "_s3ingest", False):
        return

    def get_access_key(self: Any) -> str:
        credential = self.querystring.get("X-Amz-Credential")
        if "Authorization" not in self.headers and credential:
            return str(credential[0]).split("/", 1)[0]
        key: str = original(self)
        return key

    get_access_key._s3ingest = True  # type: ignore[attr-defined]
    BaseResponse.get_access_key = get_access_key  # type: ignore[method-assign]
