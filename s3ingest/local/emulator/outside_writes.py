"""S3-faithful events for writes any client makes to a watched landing bucket (the AWS CLI,
boto3 against ``s3ingest local up``'s endpoint), not only those made through
:class:`~s3ingest.local.emulator.s3faithful.FaithfulS3`.

:func:`install` (a moto patch, registered in :mod:`s3ingest.local.emulator.moto_patches`) wraps
moto's ``S3Backend.put_object`` (PutObject, CopyObject, CompleteMultipartUpload all end there) and
``S3Backend.delete_object`` (DeleteObject; DeleteObjects calls it per key): after a write to a
bucket :func:`watch` named, the bucket's FaithfulS3 records the event S3 would send
(:meth:`~s3ingest.local.emulator.s3faithful.FaithfulS3.record_put`,
:meth:`~s3ingest.local.emulator.s3faithful.FaithfulS3.record_delete`), in write order: a write and
its sequencer are taken under one lock. Unwatched buckets are untouched.
"""

from __future__ import annotations

import functools
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from s3ingest.local.emulator.s3faithful import FaithfulS3

_LOCK = threading.RLock()
#: bucket name -> the FaithfulS3 recording its events.
_WATCHED: dict[str, FaithfulS3] = {}


def watch(faithful: FaithfulS3) -> None:
    """Record the events of every write to ``faithful.bucket`` made by any client (its own
    :meth:`~s3ingest.local.emulator.s3faithful.FaithfulS3.put` included: use one or the other)."""
    _ = faithful.event_bridge  # read the notification configuration now, outside moto's calls
    with _LOCK:
        _WATCHED[faithful.bucket] = faithful


def unwatch(bucket: str) -> None:
    """Stop recording ``bucket``'s writes."""
    with _LOCK:
        _WATCHED.pop(bucket, None)


def install() -> None:
    """Wrap moto's ``S3Backend.put_object`` and ``delete_object`` (idempotent)."""
    from moto.s3.models import S3Backend

    put = S3Backend.put_object
    if getattr(put, "_s3ingest_patched", False):
        return
    delete = S3Backend.delete_object

    @functools.wraps(put)
    def put_object(self: Any, bucket_name: str, key_name: str, *args: Any, **kwargs: Any) -> Any:
        faithful = _WATCHED.get(bucket_name)
        if faithful is None:
            return put(self, bucket_name, key_name, *args, **kwargs)
        with _LOCK:
            key = put(self, bucket_name, key_name, *args, **kwargs)
            if kwargs.get("disable_notification"):
                reason = "CopyObject"  # moto's copy_object writes without notifications
            elif kwargs.get("multipart") is not None:
                reason = "CompleteMultipartUpload"
            else:
                reason = "PutObject"
            faithful.record_put(key_name, int(key.size), str(key.etag), key.version_id, reason)
            return key

    @functools.wraps(delete)
    def delete_object(
        self: Any,
        bucket_name: str,
        key_name: str,
        version_id: str | None = None,
        bypass: bool = False,
    ) -> Any:
        faithful = _WATCHED.get(bucket_name)
        if faithful is None:
            return delete(self, bucket_name, key_name, version_id, bypass)
        with _LOCK:
            done, meta = delete(self, bucket_name, key_name, version_id, bypass)
            if done:
                marker = None if version_id else meta.get("version-id")
                faithful.record_delete(key_name, version_id, marker)
            return done, meta

    put_object._s3ingest_patched = True  # type: ignore[attr-defined]
    S3Backend.put_object = put_object  # type: ignore[method-assign]
    S3Backend.delete_object = delete_object  # type: ignore[method-assign]
