"""The S3 adapter of the :class:`~s3ingest_fn.core.ports.InventoryStore` port: S3 Inventory
reports (``manifest.json``, ``manifest.checksum``, data files), Batch Operations completion
reports, and the fan-out reconciliation's work shards, all plain S3 objects."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from s3ingest_fn.core.model import TransientError

if TYPE_CHECKING:
    from mypy_boto3_s3.client import S3Client  # pragma: no cover
else:
    S3Client = Any


def _failed(call: str, exc: Exception) -> TransientError:
    return TransientError(f"s3 {call}: {exc}")


class S3InventoryStore:
    """The :class:`~s3ingest_fn.core.ports.InventoryStore` port over an S3 client.

    Parameters
    ----------
    client : S3Client
        Needs ``s3:GetObject`` and ``s3:ListBucket`` on the inventory (and report) bucket, and
        ``s3:PutObject`` on its work prefix for the fan-out's shards.
    """

    def __init__(self, client: S3Client) -> None:
        self._s3 = client

    def read(self, bucket: str, key: str) -> bytes:
        """GetObject's whole body.

        Raises
        ------
        TransientError
            For any refusal or failure (a missing key included).
        """
        try:
            body = self._s3.get_object(Bucket=bucket, Key=key)["Body"]
            return bytes(body.read())
        except (ClientError, BotoCoreError) as exc:
            raise _failed("get_object", exc) from exc

    def read_if_exists(self, bucket: str, key: str) -> bytes | None:
        """GetObject's whole body, or None when S3 answers ``NoSuchKey``.

        Raises
        ------
        TransientError
            For any other refusal or failure.
        """
        try:
            body = self._s3.get_object(Bucket=bucket, Key=key)["Body"]
            return bytes(body.read())
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "NoSuchKey":
                return None
            raise _failed("get_object", exc) from exc
        except BotoCoreError as exc:
            raise _failed("get_object", exc) from exc

    def exists(self, bucket: str, key: str) -> bool:
        """Whether HeadObject answers 200: False for any error answer (404, 403, a report still
        being written).

        Raises
        ------
        TransientError
            When S3 does not answer (``BotoCoreError``).
        """
        try:
            self._s3.head_object(Bucket=bucket, Key=key)
        except ClientError:
            return False
        except BotoCoreError as exc:
            raise _failed("head_object", exc) from exc
        return True

    def etag(self, bucket: str, key: str) -> str:
        """HeadObject's ETag without its quotes (what S3 Batch Operations' ``CreateJob`` takes
        as the manifest's ETag).

        Raises
        ------
        TransientError
        """
        try:
            head = self._s3.head_object(Bucket=bucket, Key=key)
        except (ClientError, BotoCoreError) as exc:
            raise _failed("head_object", exc) from exc
        return str(head["ETag"]).strip('"')

    def folders(self, bucket: str, prefix: str) -> list[str]:
        """ListObjectsV2's ``CommonPrefixes`` with delimiter ``/``: the folders directly under
        ``prefix``, each ending in ``/``.

        Raises
        ------
        TransientError
        """
        folders: list[str] = []
        try:
            for page in self._s3.get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=prefix, Delimiter="/"
            ):
                folders.extend(p["Prefix"] for p in page.get("CommonPrefixes", []))
        except (ClientError, BotoCoreError) as exc:
            raise _failed("list_objects_v2", exc) from exc
        return folders

    def keys(self, bucket: str, prefix: str) -> Iterator[str]:
        """ListObjectsV2's keys under ``prefix``, page by page.

        Raises
        ------
        TransientError
        """
        try:
            for page in self._s3.get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=prefix
            ):
                for obj in page.get("Contents", []):
                    yield obj["Key"]
        except (ClientError, BotoCoreError) as exc:
            raise _failed("list_objects_v2", exc) from exc

    def put(self, bucket: str, key: str, body: bytes) -> None:
        """PutObject.

        Raises
        ------
        TransientError
        """
        try:
            self._s3.put_object(Bucket=bucket, Key=key, Body=body)
        except (ClientError, BotoCoreError) as exc:
            raise _failed("put_object", exc) from exc
