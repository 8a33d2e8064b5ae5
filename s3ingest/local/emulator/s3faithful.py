"""S3 operations on the emulator that emit S3-faithful EventBridge events.

moto's own S3 notifications are not faithful (a constant sequencer, ``eTag`` instead of ``etag``,
no delete events through EventBridge; ``docs/payloads.md`` section 9), so this module does
the S3 operation on the emulator and builds the event S3 would send, as documented in
https://docs.aws.amazon.com/AmazonS3/latest/userguide/ev-events.html and docs/payloads.md section 5:

* ``detail-type`` ``Object Created`` (reason ``PutObject``, ``CopyObject`` or
  ``CompleteMultipartUpload``) or ``Object Deleted`` (reason ``DeleteObject``, or ``Lifecycle
  Expiration`` with requester ``s3.amazonaws.com``; ``deletion-type`` ``Permanently Deleted`` or
  ``Delete Marker Created``); ``Object Restore Initiated`` and ``Object Restore Completed``
  (no sequencer, no reason; ``source-storage-class``, and ``restore-expiry-time`` on completion;
  fixtures ``awsdocs-s3ug__eventbridge-ObjectRestoreCompleted.json`` and the LocalStack
  EventBridge snapshot);
* form-encoded keys (space ``+``, ``+`` as ``%2B``, ``/`` literal);
* per-key increasing sequencers in the real format: ``00`` + 8 hex digits of Unix seconds + a
  suffix of varying length, upper-case (docs/payloads.md section 3), ordered by right-padding;
* field presence: ``version-id`` only when the bucket is versioned (absent for the null version),
  no ``etag``/``size`` on deletes, the empty-content MD5 as ``etag`` of a delete marker;
* only while the bucket's notification configuration has EventBridge delivery on (with
  ``follow_notification``): S3 sends a bucket's events to EventBridge only then
  (https://docs.aws.amazon.com/AmazonS3/latest/userguide/EventBridge.html), so an existing
  bucket's objects written before onboarding emit nothing.
"""

from __future__ import annotations

import random
import re
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote_plus

from s3ingest.local.emulator.server import ACCOUNT, REGION

EMPTY_MD5 = "d41d8cd98f00b204e9800998ecf8427e"
#: The ``requester`` of what S3 does itself (lifecycle, restore completion).
S3_SERVICE = "s3.amazonaws.com"
#: S3's smallest part of a multipart upload but the last, bytes (``EntityTooSmall``;
#: https://docs.aws.amazon.com/AmazonS3/latest/userguide/qfacts.html).
MIN_PART_BYTES = 5 * 1024 * 1024


class SequencerClock:
    """Issues sequencers that increase across the whole bucket (hence per key).

    Format: ``00`` + 8 hex digits of Unix seconds + a 10-hex-digit counter + 0 to 6 random hex
    digits, so lengths vary from 20 to 26 characters. Right-padding orders them by (seconds,
    counter); left-padding would not (docs/payloads.md section 0).
    """

    def __init__(self, seed: int = 0, clock: Any = time.time) -> None:
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._counter = 0
        self._last_seconds = 0
        #: Epoch seconds the sequencers' time digits are read from (a scenario's clock moves it).
        self.clock = clock

    def next(self) -> str:
        """The next sequencer (strictly greater than every one issued before)."""
        with self._lock:
            self._counter += 1
            self._last_seconds = max(self._last_seconds, int(self.clock()))
            tail = "".join(
                self._rng.choice("0123456789ABCDEF") for _ in range(self._rng.randint(0, 6))
            )
            return f"00{self._last_seconds:08X}{self._counter:010X}{tail}"


def encode_key(key: str) -> str:
    """Form-encode a key as S3 does in event notifications (docs/payloads.md section 1.3)."""
    return quote_plus(key, safe="/")


@dataclass(frozen=True)
class Op:
    """One S3 operation and the EventBridge event it emitted."""

    kind: str  # "put" | "delete" | "restore" (metadata only: no ordering state)
    key: str
    version_id: str | None
    event: dict[str, Any]
    #: Whether S3 sent the event (EventBridge delivery was on); an unsent one is only logged.
    emitted: bool = True


class FaithfulS3:
    """Performs S3 operations on the emulator and records the events S3 would emit.

    Parameters
    ----------
    s3 : S3Client
        Bound to the emulator.
    bucket : str
    versioning : {"Enabled", "Suspended", None}
        The bucket's versioning status.
    clock : SequencerClock
    follow_notification : bool
        Emit events only while the bucket's notification configuration has EventBridge
        delivery on (read with GetBucketNotificationConfiguration on first use and cached:
        :meth:`refresh_notification` after changing it). False: always emit.
    """

    def __init__(
        self,
        s3: Any,
        bucket: str,
        versioning: str | None,
        clock: SequencerClock,
        *,
        follow_notification: bool = False,
        account: str = ACCOUNT,
    ) -> None:
        self._s3 = s3
        #: The bucket owner's account: its events' ``account`` (and ``requester``).
        self.account = account
        self.bucket = bucket
        self.versioning = versioning
        self._clock = clock
        self.pending: list[dict[str, Any]] = []
        self.log: list[Op] = []
        self._pending_lock = threading.Lock()
        self._follow = follow_notification
        self._event_bridge: bool | None = None

    @property
    def event_bridge(self) -> bool:
        """Whether S3 sends this bucket's events to EventBridge now (always True without
        ``follow_notification``)."""
        if not self._follow:
            return True
        if self._event_bridge is None:
            config = self._s3.get_bucket_notification_configuration(Bucket=self.bucket)
            self._event_bridge = "EventBridgeConfiguration" in config
        return self._event_bridge

    def refresh_notification(self) -> None:
        """Forget the cached notification configuration (after onboarding changed it)."""
        self._event_bridge = None

    def put(self, key: str, body: bytes | str, storage_class: str | None = None) -> Op:
        """PutObject (in ``storage_class``: S3's default ``STANDARD`` when None), and an
        ``Object Created`` event.

        Raises
        ------
        ValueError
            For a key S3 refuses (:func:`check_key`).
        """
        check_key(key)
        data = body.encode() if isinstance(body, str) else body
        storage = {"StorageClass": storage_class} if storage_class else {}
        resp = self._s3.put_object(Bucket=self.bucket, Key=key, Body=data, **storage)
        return self.record_put(key, len(data), resp["ETag"], resp.get("VersionId"))

    def copy(self, key: str, source: str) -> Op:
        """CopyObject of the current version of ``source`` (a key of this bucket) to ``key``, and
        its ``Object Created`` event (reason ``CopyObject``).

        Raises
        ------
        ValueError
            For a key S3 refuses (:func:`check_key`).
        botocore.exceptions.ClientError
            When ``source`` has no current version (S3's NoSuchKey).
        """
        check_key(key)
        resp = self._s3.copy_object(
            Bucket=self.bucket, Key=key, CopySource={"Bucket": self.bucket, "Key": source}
        )
        size = self._s3.head_object(Bucket=self.bucket, Key=key, **_version(resp))["ContentLength"]
        etag = resp["CopyObjectResult"]["ETag"]
        return self.record_put(key, size, etag, resp.get("VersionId"), reason="CopyObject")

    def multipart(self, key: str, parts: list[bytes]) -> Op:
        """CreateMultipartUpload, one UploadPart per part (every one but the last at least
        :data:`MIN_PART_BYTES`, as S3 requires), CompleteMultipartUpload; its ``Object Created``
        event (reason ``CompleteMultipartUpload``, the multipart ETag ``<md5>-<parts>``).

        Raises
        ------
        ValueError
            For a key S3 refuses (:func:`check_key`), no part, or a part too small.
        """
        check_key(key)
        if not parts or any(len(p) < MIN_PART_BYTES for p in parts[:-1]):
            raise ValueError(
                f"a multipart upload needs parts of at least {MIN_PART_BYTES} bytes but the "
                "last (EntityTooSmall)"
            )
        upload = self._s3.create_multipart_upload(Bucket=self.bucket, Key=key)["UploadId"]
        done = []
        for number, data in enumerate(parts, start=1):
            part = self._s3.upload_part(
                Bucket=self.bucket, Key=key, UploadId=upload, PartNumber=number, Body=data
            )
            done.append({"PartNumber": number, "ETag": part["ETag"]})
        resp = self._s3.complete_multipart_upload(
            Bucket=self.bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": done}
        )
        size = sum(len(p) for p in parts)
        version = resp.get("VersionId")
        return self.record_put(key, size, resp["ETag"], version, reason="CompleteMultipartUpload")

    def expire(self, key: str, version_id: str | None = None) -> Op:
        """What an S3 Lifecycle expiration of ``key`` does, and its ``Object Deleted`` event
        (reason ``Lifecycle Expiration``, requester ``s3.amazonaws.com``): the current version
        expired (a delete marker in a versioned bucket, else the object removed), or, with
        ``version_id``, a noncurrent version permanently removed (NoncurrentVersionExpiration).
        The emulator runs no lifecycle rules: the runtime makes the same change with
        DeleteObject (https://docs.aws.amazon.com/AmazonS3/latest/userguide/lifecycle-expire-general-considerations.html).

        Raises
        ------
        ValueError
            When the key has no current version (nothing for the current-version rule to
            expire) or not that version.
        """
        check_key(key)
        if version_id is None:
            if self.current_version(key) is None:
                raise ValueError(f"{key!r} has no current version to expire")
        elif version_id not in self.versions_of(key):
            raise ValueError(f"{key!r} has no version {version_id!r}")
        kwargs = {"VersionId": version_id} if version_id else {}
        resp = self._s3.delete_object(Bucket=self.bucket, Key=key, **kwargs)
        return self.record_delete(
            key, version_id, resp.get("VersionId"), reason="Lifecycle Expiration"
        )

    def restore(self, key: str, days: int = 1) -> list[Op]:
        """RestoreObject of ``key``'s current version (an archived one: ``GLACIER`` or
        ``DEEP_ARCHIVE``) for ``days`` days; the two events S3 sends, ``Object Restore
        Initiated`` (requester the caller) and ``Object Restore Completed`` (requester
        ``s3.amazonaws.com``, ``restore-expiry-time``), neither with a sequencer or a reason
        (metadata only). The emulator completes a restore at once.

        Raises
        ------
        ValueError
            When the key has no current version.
        botocore.exceptions.ClientError
            When the object is not archived (S3's InvalidObjectState).
        """
        check_key(key)
        head = self.current_version(key)
        if head is None:
            raise ValueError(f"{key!r} has no current version to restore")
        self._s3.restore_object(Bucket=self.bucket, Key=key, RestoreRequest={"Days": days})
        obj: dict[str, Any] = {
            "key": encode_key(key),
            "size": head["ContentLength"],
            "etag": head["ETag"].strip('"'),
        }
        version = _real_version(head.get("VersionId"), self.versioning)
        if version:
            obj["version-id"] = version
        storage = {"source-storage-class": head.get("StorageClass", "GLACIER")}
        expiry = time.strftime("%Y-%m-%dT00:00:00Z", time.gmtime(time.time() + (days + 1) * 86400))
        return [
            self._record(
                "restore",
                key,
                version,
                "Object Restore Initiated",
                dict(obj),
                None,
                None,
                extra=storage,
            ),
            self._record(
                "restore",
                key,
                version,
                "Object Restore Completed",
                dict(obj),
                None,
                None,
                requester=S3_SERVICE,
                extra={"restore-expiry-time": expiry, **storage},
            ),
        ]

    def current_version(self, key: str) -> dict[str, Any] | None:
        """HeadObject of ``key``'s current version; None when it has none (a delete marker)."""
        from botocore.exceptions import ClientError

        try:
            head: dict[str, Any] = self._s3.head_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "405"):
                return None
            raise
        return head

    def record_put(
        self, key: str, size: int, etag: str, version_id: str | None, reason: str = "PutObject"
    ) -> Op:
        """The ``Object Created`` event of a write already made (by this class, or by another
        client of the emulator: :mod:`s3ingest.local.emulator.outside_writes`): ``etag`` quoted or
        not, ``version_id`` as S3 answered it (``"null"`` or None for no version), ``reason`` as
        S3's (``PutObject``, ``CopyObject``, ``CompleteMultipartUpload``)."""
        version = _real_version(version_id, self.versioning)
        obj: dict[str, Any] = {"key": encode_key(key), "size": size, "etag": etag.strip('"')}
        if version:
            obj["version-id"] = version
        obj["sequencer"] = self._clock.next()
        return self._record("put", key, version, "Object Created", obj, reason, None)

    def delete(self, key: str, version_id: str | None = None) -> Op:
        """DeleteObject (of the key, or of one version), and an ``Object Deleted`` event.

        Raises
        ------
        ValueError
            For a version id on an unversioned bucket (S3 answers InvalidArgument) or a version
            the key does not have (nothing to delete, so S3 would emit no event).
        """
        check_key(key)
        if version_id and version_id != "null":
            if not self.versioning:
                raise ValueError(
                    f"{self.bucket} is not versioned: S3 refuses a version id "
                    "other than 'null' (InvalidArgument)"
                )
            if version_id not in self.versions_of(key):
                raise ValueError(f"{key!r} has no version {version_id!r}")
        kwargs = {"VersionId": version_id} if version_id else {}
        resp = self._s3.delete_object(Bucket=self.bucket, Key=key, **kwargs)
        return self.record_delete(key, version_id, resp.get("VersionId"))

    def record_delete(
        self,
        key: str,
        version_id: str | None,
        marker_version: str | None,
        reason: str = "DeleteObject",
    ) -> Op:
        """The ``Object Deleted`` event of a delete already made: of version ``version_id``
        (a permanent delete), or of the key (``marker_version``: the delete marker's version
        id S3 answered, on a versioned bucket); ``reason`` ``DeleteObject`` or ``Lifecycle
        Expiration`` (S3 itself the requester, no source IP)."""
        obj: dict[str, Any] = {"key": encode_key(key)}
        if version_id:
            deletion = "Permanently Deleted"
            real = _real_version(version_id, self.versioning)
            if real:  # the null version is named by no version-id field
                obj["version-id"] = real
        elif self.versioning:
            deletion = "Delete Marker Created"
            obj["etag"] = EMPTY_MD5
            marker = _real_version(marker_version, self.versioning)
            if marker:
                obj["version-id"] = marker
        else:
            deletion = "Permanently Deleted"
        obj["sequencer"] = self._clock.next()
        if reason == "DeleteObject":
            return self._record("delete", key, version_id, "Object Deleted", obj, reason, deletion)
        return self._record(
            "delete", key, version_id, "Object Deleted", obj, reason, deletion, requester=S3_SERVICE
        )

    def versions_of(self, key: str) -> set[str]:
        """Version ids (delete markers included) the key has now."""
        found: set[str] = set()
        pages = self._s3.get_paginator("list_object_versions").paginate(
            Bucket=self.bucket, Prefix=key
        )
        for page in pages:
            for v in (*page.get("Versions", []), *page.get("DeleteMarkers", [])):
                if v["Key"] == key:
                    found.add(v["VersionId"])
        return found

    def _record(
        self,
        kind: str,
        key: str,
        version: str | None,
        detail_type: str,
        obj: dict[str, Any],
        reason: str | None,
        deletion: str | None,
        *,
        requester: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> Op:
        """Record the event; ``requester`` S3 itself (``s3.amazonaws.com``: no source IP),
        else the bucket owner; ``reason`` None for a restore; ``extra`` more detail fields."""
        detail: dict[str, Any] = {
            "version": "0",
            "bucket": {"name": self.bucket},
            "object": obj,
            "request-id": uuid.uuid4().hex[:16].upper(),
            "requester": requester or self.account,
        }
        if requester is None:
            detail["source-ip-address"] = "127.0.0.1"
        if reason is not None:
            detail["reason"] = reason
        detail.update(extra or {})
        if deletion:
            detail["deletion-type"] = deletion
        event = {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": detail_type,
            "source": "aws.s3",
            "account": self.account,
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "region": REGION,
            "resources": [f"arn:aws:s3:::{self.bucket}"],
            "detail": detail,
        }
        op = Op(kind=kind, key=key, version_id=version, event=event, emitted=self.event_bridge)
        with self._pending_lock:  # writes of other clients are recorded from moto's threads
            if op.emitted:
                self.pending.append(event)
            self.log.append(op)
        return op

    def take_pending(self) -> list[dict[str, Any]]:
        """Events emitted since the last call, in emission order."""
        with self._pending_lock:
            out, self.pending = self.pending, []
        return out


#: S3's limit on a key's length, in UTF-8 bytes (the emulator accepts longer ones).
MAX_KEY_BYTES = 1024


#: Control characters the emulator's XML listings cannot carry (a tab can: it is allowed).
_UNLISTABLE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def check_key(key: str) -> None:
    """Refuse a key the local runtime cannot stand for faithfully, the same way in the demo and
    in scenarios: an empty key, one over :data:`MAX_KEY_BYTES` UTF-8 bytes (S3 answers
    ``KeyTooLongError``, the emulator accepts it;
    https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-keys.html), or one holding a
    control character other than tab (S3 allows it, the emulator cannot list it).

    Raises
    ------
    ValueError
        Naming the limit.
    """
    size = len(key.encode("utf-8"))
    if size == 0:
        raise ValueError("S3 refuses an empty key")
    if size > MAX_KEY_BYTES:
        raise ValueError(
            f"key is {size} bytes; S3 refuses keys over {MAX_KEY_BYTES} bytes (KeyTooLongError)"
        )
    if _UNLISTABLE.search(key):
        raise ValueError(
            "key holds a control character other than tab; S3 allows it, but the "
            "local emulator cannot list such keys"
        )


def _version(resp: dict[str, Any]) -> dict[str, str]:
    """``{"VersionId": ...}`` of a write's response, when it names a version."""
    return {"VersionId": resp["VersionId"]} if resp.get("VersionId") else {}


def _real_version(version: str | None, versioning: str | None) -> str | None:
    """The version id an event carries: none for unversioned buckets and the null version."""
    if not versioning or not version or version == "null":
        return None
    return version
