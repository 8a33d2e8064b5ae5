"""The S3 adapter: what the bucket holds for a key now (the bucket is the truth, CONTRACT C12),
the bucket's listing (reconciliation's ``listing`` source), whether the bucket still sends its
events to EventBridge, and the pinned reads of a change's bytes (CONTRACT C8)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from s3ingest_fn.core.effects import SupersededError
from s3ingest_fn.core.events import normalize_etag, normalize_version
from s3ingest_fn.core.model import InventoryRow, ObjectState, TransientError
from s3ingest_fn.core.ports import ListingPage, Pin, PresignedGet, VersionPage

if TYPE_CHECKING:
    from mypy_boto3_s3.client import S3Client  # pragma: no cover
else:
    S3Client = Any

_NOT_FOUND = frozenset({"404", "NoSuchKey", "NotFound"})
#: HeadObject's answer for a key it may not say is missing (no body: the code is the status).
_FORBIDDEN = frozenset({"403", "Forbidden", "AccessDenied"})

#: ListObjectVersions and ListObjectsV2 return at most 1,000 entries per request
#: (https://docs.aws.amazon.com/AmazonS3/latest/API/API_ListObjectsV2.html).
LIST_PAGE_MAX = 1000


class S3Objects:
    """Reads object state with HeadObject.

    Parameters
    ----------
    client : S3Client
        A boto3 S3 client (injected). The role needs ``s3:GetObject`` and ``s3:ListBucket``:
        without ListBucket a missing key answers 403, not 404
        (https://docs.aws.amazon.com/AmazonS3/latest/API/API_HeadObject.html). A ListBucket
        held to the key filters' prefixes (``s3:prefix``, a source stack's read role) does not
        cover a HEAD, which carries no prefix: :meth:`current` then asks the listing.
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

        A 403 is told apart by one ListObjectsV2 of the key as prefix (:meth:`_listed`): a
        role whose ``s3:ListBucket`` is held to ``s3:prefix`` may list the key though S3 does
        not count that grant for the HEAD; the key not listed is missing (or under a delete
        marker), as a 404 would say.

        Raises
        ------
        TransientError
            On any other error (throttling, 5xx, a 403 for a key the listing shows or that
            cannot be listed): retried, then dead-lettered by SQS.
        """
        self.requests += 1
        try:
            resp = self._s3.head_object(Bucket=bucket, Key=key)
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in _NOT_FOUND:
                return ObjectState(visible=False)
            if code in _FORBIDDEN and not self._listed(bucket, key):
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

    def _listed(self, bucket: str, key: str) -> bool:
        """Whether the bucket's listing holds ``key`` (ListObjectsV2 with the key as prefix, one
        entry: the key itself sorts first among the keys it prefixes,
        https://docs.aws.amazon.com/AmazonS3/latest/API/API_ListObjectsV2.html; a key under a
        delete marker is not listed). The request carries ``s3:prefix`` = the key, which a
        prefix-held ListBucket admits for a key under its prefixes.

        Raises
        ------
        TransientError
            When the listing is refused or fails too (the 403 stays unexplained).
        """
        try:
            page = self._s3.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1)
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            raise TransientError(f"s3 head_object: 403; list_objects_v2: {code}") from exc
        except BotoCoreError as exc:
            raise TransientError(f"s3 list_objects_v2: {exc.__class__.__name__}") from exc
        return any(entry.get("Key") == key for entry in page.get("Contents", []))


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


class S3EventDelivery:
    """The :class:`~s3ingest_fn.core.ports.EventDelivery` port:
    :func:`eventbridge_delivery_enabled` over one client.

    Parameters
    ----------
    client : S3Client
        Needs ``s3:GetBucketNotification``.
    """

    def __init__(self, client: S3Client) -> None:
        self._s3 = client

    def enabled(self, bucket: str) -> bool:
        """See :func:`eventbridge_delivery_enabled`."""
        return eventbridge_delivery_enabled(self._s3, bucket)


class S3Listing:
    """The :class:`~s3ingest_fn.core.ports.BucketListing` port: ListObjectVersions when the
    bucket has a versioning status (``Enabled`` or ``Suspended``: older versions and delete
    markers may exist), else ListObjectsV2
    (https://docs.aws.amazon.com/AmazonS3/latest/API/API_ListObjectVersions.html).

    Parameters
    ----------
    client : S3Client
        Needs ``s3:GetBucketVersioning``, ``s3:ListBucket`` and ``s3:ListBucketVersions``.
    """

    def __init__(self, client: S3Client) -> None:
        self._s3 = client

    def rows(self, bucket: str, prefix: str) -> Iterator[InventoryRow]:
        """Every version and delete marker (versioned bucket) or every object under
        ``prefix``, page by page.

        Raises
        ------
        TransientError
            When S3 refuses or does not answer (the run fails; nothing is repaired).
        """
        try:
            yield from self._rows(bucket, prefix)
        except (ClientError, BotoCoreError) as exc:
            raise TransientError(f"s3 listing of {bucket}: {exc}") from exc

    def _rows(self, bucket: str, prefix: str) -> Iterator[InventoryRow]:
        for page in self._pages(bucket, prefix, None, LIST_PAGE_MAX):
            yield from page.rows

    def pages(
        self,
        bucket: str,
        prefix: str,
        marker: dict[str, Any] | None = None,
        page_size: int = LIST_PAGE_MAX,
    ) -> Iterator[ListingPage]:
        """The listing of :meth:`rows`, one request per page (``MaxKeys=page_size``), from
        ``marker``: ``{"key", "version"}`` (ListObjectVersions' ``NextKeyMarker`` and
        ``NextVersionIdMarker``) or ``{"key", "token"?}`` (ListObjectsV2: ``StartAfter``, or
        the ``ContinuationToken`` while it is known); S3 lists keys in UTF-8 binary order.

        Raises
        ------
        TransientError
            When S3 refuses or does not answer.
        """
        try:
            yield from self._pages(bucket, prefix, marker, page_size)
        except (ClientError, BotoCoreError) as exc:
            raise TransientError(f"s3 listing of {bucket}: {exc}") from exc

    def _pages(
        self, bucket: str, prefix: str, marker: dict[str, Any] | None, page_size: int
    ) -> Iterator[ListingPage]:
        versioned = bool(self._s3.get_bucket_versioning(Bucket=bucket).get("Status"))
        at = dict(marker or {})
        while True:
            args: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "MaxKeys": page_size}
            nxt: dict[str, Any] | None = None
            if versioned:
                if at.get("key"):
                    args["KeyMarker"] = at["key"]
                    if at.get("version"):
                        args["VersionIdMarker"] = at["version"]
                page = self._s3.list_object_versions(**args)
                rows = [_listed(bucket, v, delete_marker=False) for v in page.get("Versions", [])]
                rows += [
                    _listed(bucket, m, delete_marker=True) for m in page.get("DeleteMarkers", [])
                ]
                if page.get("IsTruncated"):
                    nxt = {
                        "key": page.get("NextKeyMarker", ""),
                        "version": page.get("NextVersionIdMarker", ""),
                    }
            else:
                if at.get("token"):
                    args["ContinuationToken"] = at["token"]
                elif at.get("key"):
                    args["StartAfter"] = at["key"]
                listed = self._s3.list_objects_v2(**args)
                rows = [_current(bucket, o) for o in listed.get("Contents", [])]
                if listed.get("IsTruncated"):
                    nxt = {
                        "key": rows[-1].key if rows else at.get("key", ""),
                        "token": listed.get("NextContinuationToken", ""),
                    }
            yield ListingPage(rows, nxt)
            if nxt is None:
                return
            at = nxt


def _current(bucket: str, o: Any) -> InventoryRow:
    """An inventory row of one ListObjectsV2 ``Contents`` entry (an unversioned bucket)."""
    return InventoryRow(
        bucket=bucket,
        key=o["Key"],
        version_id=None,
        is_latest=True,
        is_delete_marker=False,
        etag=str(o.get("ETag", "")).strip('"') or None,
        size=o.get("Size"),
        last_modified_ms=_ms(o.get("LastModified")),
    )


class S3ShardListing:
    """The :class:`~s3ingest_fn.core.ports.ShardListing` port: one ListObjectVersions or
    ListObjectsV2 request per call. Keys come decoded: botocore asks for
    ``EncodingType=url`` and decodes the keys and markers of the answer, so control characters
    and other keys XML 1.0 cannot carry list as they are
    (https://docs.aws.amazon.com/AmazonS3/latest/API/API_ListObjectVersions.html).

    Parameters
    ----------
    client : S3Client
        Needs ``s3:ListBucket`` and ``s3:ListBucketVersions``.
    """

    def __init__(self, client: S3Client) -> None:
        self._s3 = client

    def versions(
        self,
        bucket: str,
        prefix: str,
        key_marker: str | None,
        version_marker: str | None,
        max_keys: int,
    ) -> VersionPage:
        """See :meth:`~s3ingest_fn.core.ports.ShardListing.versions`. Entries are merged back
        into the listing's order (S3 answers versions and delete markers apart).

        Raises
        ------
        TransientError
            When S3 refuses or does not answer.
        """
        args: dict[str, Any] = {"Bucket": bucket, "MaxKeys": max_keys}
        if prefix:
            args["Prefix"] = prefix
        if key_marker:
            args["KeyMarker"] = key_marker
            if version_marker:
                args["VersionIdMarker"] = version_marker
        try:
            page = self._s3.list_object_versions(**args)
        except (ClientError, BotoCoreError) as exc:
            raise TransientError(f"s3 list_object_versions of {bucket}: {exc}") from exc
        entries: list[tuple[Any, bool]] = [(v, False) for v in page.get("Versions", [])]
        entries += [(m, True) for m in page.get("DeleteMarkers", [])]
        # S3's order: key ascending, then newest first (LastModified descending); the latest
        # entry of a key is the first of that key either way, and IsLatest marks it
        entries.sort(key=lambda e: (e[0]["Key"], not e[0].get("IsLatest")))
        rows = [_listed(bucket, v, delete_marker=marker) for v, marker in entries]
        truncated = bool(page.get("IsTruncated"))
        return VersionPage(
            rows=rows,
            next_key_marker=page.get("NextKeyMarker") if truncated else None,
            next_version_marker=page.get("NextVersionIdMarker") if truncated else None,
        )

    def keys_after(
        self, bucket: str, prefix: str, start_after: str | None, max_keys: int
    ) -> tuple[list[str], bool]:
        """See :meth:`~s3ingest_fn.core.ports.ShardListing.keys_after`.

        Raises
        ------
        TransientError
            When S3 refuses or does not answer.
        """
        args: dict[str, Any] = {"Bucket": bucket, "MaxKeys": max_keys}
        if prefix:
            args["Prefix"] = prefix
        if start_after:
            args["StartAfter"] = start_after
        try:
            page = self._s3.list_objects_v2(**args)
        except (ClientError, BotoCoreError) as exc:
            raise TransientError(f"s3 list_objects_v2 of {bucket}: {exc}") from exc
        return [o["Key"] for o in page.get("Contents", [])], bool(page.get("IsTruncated"))


def _listed(bucket: str, v: Any, *, delete_marker: bool) -> InventoryRow:
    """An inventory row of one ``Versions`` or ``DeleteMarkers`` entry (the null version's id,
    ``"null"``, as None)."""
    version = v.get("VersionId")
    return InventoryRow(
        bucket=bucket,
        key=v["Key"],
        version_id=None if version in (None, "null") else version,
        is_latest=bool(v.get("IsLatest")),
        is_delete_marker=delete_marker,
        etag=None if delete_marker else str(v.get("ETag", "")).strip('"') or None,
        size=v.get("Size"),
        last_modified_ms=_ms(v.get("LastModified")),
    )


def _ms(value: Any) -> int | None:
    return int(value.timestamp() * 1000) if value is not None else None


def _presign_sigv4_regional(client: S3Client) -> None:
    """Make ``client``'s presigned GetObject URLs Signature Version 4 on the regional endpoint;
    its API calls are unchanged.

    botocore presigns S3 URLs with Signature Version 2 by default where the region still takes
    it, and SigV2 leaves the conditional headers (``If-Match``) out of the signature; S3 refuses
    SigV2 for buckets created since June 2020
    (https://docs.aws.amazon.com/AmazonS3/latest/userguide/UsingAWSSDK.html#UsingAWSSDK-sig2-deprecation).
    It also names the global endpoint (``<bucket>.s3.amazonaws.com``), which redirects for a
    bucket of another region until its DNS name propagates, while the URL is signed for the
    host it names. Two event handlers on the client, for presigned requests only: the
    ``choose-signer`` of GetObject answers ``s3v4-query``, and the endpoint resolution keeps
    the client's region. Registered once per client (``unique_id``).
    """
    from botocore.regions import EndpointResolverBuiltins as Builtins

    region = client.meta.region_name

    def sigv4(signature_version: str, **_: Any) -> str | None:
        return "s3v4-query" if signature_version.endswith("-query") else None

    def regional(builtins: dict[Any, Any], context: dict[str, Any], **_: Any) -> None:
        if context.get("is_presign_request") and builtins.get(Builtins.AWS_S3_USE_GLOBAL_ENDPOINT):
            builtins[Builtins.AWS_REGION] = region
            builtins[Builtins.AWS_S3_USE_GLOBAL_ENDPOINT] = False

    events: Any = client.meta.events
    events.register("choose-signer.s3.GetObject", sigv4, unique_id="s3ingest-presign-sigv4")
    events.register("before-endpoint-resolution.s3", regional, unique_id="s3ingest-presign-region")


#: GetObject answers for a pin that no longer holds: a newer write (412) or a gone version (404).
_PIN_LOST = frozenset({"PreconditionFailed", "412", "NoSuchKey", "NoSuchVersion", "404"})


class S3ContentReader:
    """The :class:`~s3ingest_fn.core.ports.ContentReader` port over GetObject.

    GetObject with ``VersionId`` returns that version even when newer ones exist; with
    ``IfMatch`` it answers 412 when the current ETag differs
    (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html).

    Parameters
    ----------
    client : S3Client
        Needs ``s3:GetObject`` (and ``s3:GetObjectVersion`` for versioned reads).
    """

    def __init__(self, client: S3Client) -> None:
        self._s3 = client
        each_client = getattr(client, "each_client", None)  # a BucketRoutedS3's clients
        if each_client is not None:
            each_client(_presign_sigv4_regional)
        else:
            _presign_sigv4_regional(client)

    def presign(self, pin: Pin, seconds: int) -> PresignedGet:
        """A presigned GetObject of the pinned bytes, valid ``seconds`` from now, signed with
        Signature Version 4 on the bucket's regional endpoint (:func:`_presign_sigv4_regional`).

        A version pin puts ``versionId`` in the URL (the version's bytes whatever came after;
        404 when it is gone). An ETag pin signs the ``If-Match`` header into the URL
        (``X-Amz-SignedHeaders`` holds ``if-match``): the reader must send exactly
        :attr:`PresignedGet.headers`, and S3 answers 412 when the object changed
        (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html,
        https://docs.aws.amazon.com/AmazonS3/latest/userguide/ShareObjectPreSignedURL.html). The
        URL carries this client's credentials (and expires with them when they are temporary, as
        a Lambda role's are): the reader needs no permission of its own.

        Raises
        ------
        TransientError
            When the URL cannot be signed (no credentials).
        """
        params: dict[str, Any] = {"Bucket": pin.bucket, "Key": pin.key}
        headers: dict[str, str] = {}
        if pin.version_id:
            params["VersionId"] = pin.version_id
        else:
            params["IfMatch"] = headers["If-Match"] = f'"{pin.etag}"'
        now_ms = int(time.time() * 1000)
        try:
            url = self._s3.generate_presigned_url(
                "get_object", Params=params, ExpiresIn=int(seconds)
            )
        except (ClientError, BotoCoreError) as exc:
            raise TransientError(f"s3 presign get_object: {exc.__class__.__name__}") from exc
        return PresignedGet(url=url, headers=headers, expires_at_ms=now_ms + int(seconds) * 1000)

    def _get(self, pin: Pin) -> Any:
        args: dict[str, Any] = {"Bucket": pin.bucket, "Key": pin.key}
        if pin.version_id:
            args["VersionId"] = pin.version_id
        else:
            args["IfMatch"] = f'"{pin.etag}"'
        try:
            return self._s3.get_object(**args)["Body"]
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in _PIN_LOST or status in (404, 412):
                raise SupersededError(f"{pin.key!r}: {code or status}") from exc
            raise TransientError(f"s3 get_object: {code}") from exc
        except BotoCoreError as exc:
            raise TransientError(f"s3 get_object: {exc.__class__.__name__}") from exc

    def read(self, pin: Pin) -> bytes:
        """The whole object.

        Raises
        ------
        SupersededError
            A newer write replaced it (412), or the version/key is gone (404).
        TransientError
            Any other S3 failure (the record is retried).
        """
        body = self._get(pin)
        try:
            return bytes(body.read())
        except BotoCoreError as exc:  # the connection broke while streaming the body
            raise TransientError(f"s3 get_object body: {exc.__class__.__name__}") from exc
        finally:
            body.close()

    def stream(self, pin: Pin, chunk_size: int) -> Iterator[bytes]:
        """The object in chunks of ``chunk_size`` bytes.

        Raises
        ------
        SupersededError, TransientError
            As :meth:`read`.
        """
        body = self._get(pin)
        try:
            yield from body.iter_chunks(chunk_size)
        except BotoCoreError as exc:
            raise TransientError(f"s3 get_object body: {exc.__class__.__name__}") from exc
        finally:
            body.close()
