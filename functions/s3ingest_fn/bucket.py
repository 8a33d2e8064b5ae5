"""The S3 adapter: what the bucket holds for a key now (the bucket is the truth, CONTRACT C12)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from s3ingest_fn.events import normalize_etag, normalize_version
from s3ingest_fn.model import ObjectState, TransientError

if TYPE_CHECKING:
    from mypy_boto3_s3.client import S3Client  # pragma: no cover

_NOT_FOUND = frozenset({"404", "NoSuchKey", "NotFound"})


class S3Objects:
    """Reads object state with HeadObject.

    Parameters
    ----------
    client : S3Client
        A boto3 S3 client (injected). The role needs ``s3:GetObject`` and ``s3:ListBucket``:
        without ListBucket a missing key answers 403, not 404
        (https://docs.aws.amazon.com/AmazonS3/latest/API/API_HeadObject.html).
    """

    def __init__(self, client: S3Client) -> None:
        self._s3 = client
        #: HeadObject requests made (for the benchmarks and the tests).
        self.requests = 0

    def current(self, bucket: str, key: str) -> ObjectState:
        """The key's current state.

        Returns
        -------
        ObjectState
            ``visible=False`` when the key does not exist or its current version is a delete
            marker (HeadObject answers 404 for both). ETag without quotes; the null version's id
            (``"null"``) as None.

        Raises
        ------
        TransientError
            On any other error (throttling, 5xx, 403): retried, then dead-lettered by SQS.
        """
        self.requests += 1
        try:
            resp = self._s3.head_object(Bucket=bucket, Key=key)
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in _NOT_FOUND:
                return ObjectState(visible=False)
            raise TransientError(f"s3 head_object: {code}") from exc
        except BotoCoreError as exc:
            raise TransientError(f"s3 head_object: {exc.__class__.__name__}") from exc
        return ObjectState(
            visible=True,
            version_id=normalize_version(resp.get("VersionId")),
            etag=normalize_etag(resp.get("ETag")),
            size=resp.get("ContentLength"),
        )


def eventbridge_delivery_enabled(client: S3Client, bucket: str) -> bool:
    """Whether the bucket sends its events to EventBridge: its notification configuration holds
    ``EventBridgeConfiguration``
    (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetBucketNotificationConfiguration.html).
    Needs ``s3:GetBucketNotification``.

    Raises
    ------
    TransientError
        When S3 does not answer (the check runs again on its schedule).
    """
    try:
        config = client.get_bucket_notification_configuration(Bucket=bucket)
    except (ClientError, BotoCoreError) as exc:
        raise TransientError(f"s3 get_bucket_notification_configuration: {exc}") from exc
    return "EventBridgeConfiguration" in config
