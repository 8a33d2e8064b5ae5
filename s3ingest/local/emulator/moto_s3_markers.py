"""Make the emulator's ListObjectVersions start *after* a ``KeyMarker`` given alone, as S3 does,
and answer a page without copying the whole bucket.

S3 lists the versions of the keys that sort after ``key-marker`` when no
``version-id-marker`` is given
(https://docs.aws.amazon.com/AmazonS3/latest/API/API_ListObjectVersions.html). moto instead
starts at the first version whose key is not below the marker and drops that one version
(``S3Backend.list_object_versions``, ``moto/s3/models.py``): the marker's own older versions are
listed and, when the marker is not a key, the first key after it is lost. The listing backfill
starts its shards at such markers (``s3ingest_fn.services.listing_backfill``).

moto also deep-copies every version of the bucket on every request: a page of a
100,000-object bucket cost seconds of CPU and left gigabytes of garbage, so a listing of the
bucket cost time quadratic in its size.

:func:`install` replaces the method, once per process. Without a delimiter (every listing this
project makes) a page is cut from the versions sorted as S3 lists them (key, then newest
first) by binary search, and only the page's versions are copied (``IsLatest`` set on the
copies). With a delimiter, moto's own method runs, with a ``key_marker`` alone turned into the
last version of the greatest key not above it.
"""

from __future__ import annotations

import bisect
import copy
import threading
from typing import Any

_LOCK = threading.Lock()
_installed = False


def install() -> None:
    """Patch ``S3Backend.list_object_versions`` (idempotent)."""
    global _installed
    with _LOCK:
        if _installed:
            return
        from moto.s3.models import S3Backend

        original = S3Backend.list_object_versions

        def list_object_versions(
            self: Any,
            bucket_name: str,
            delimiter: str | None = None,
            key_marker: str | None = None,
            max_keys: int | None = 1000,
            prefix: str = "",
            version_id_marker: str | None = None,
        ) -> Any:
            ordered = _ordered(self.get_bucket(bucket_name))
            if not delimiter:
                return _page(ordered, key_marker, version_id_marker, max_keys, prefix or "")
            if key_marker and not version_id_marker:
                below = [v for v in ordered if v.name <= key_marker]
                if below:
                    key_marker, version_id_marker = below[-1].name, below[-1].version_id
                else:
                    key_marker = None
            return original(
                self,
                bucket_name,
                delimiter=delimiter,
                key_marker=key_marker,
                max_keys=max_keys,
                prefix=prefix,
                version_id_marker=version_id_marker,
            )

        S3Backend.list_object_versions = list_object_versions  # type: ignore[method-assign]
        _installed = True


def _ordered(bucket: Any) -> list[Any]:
    """Every version of ``bucket``, as S3 lists them: by key, then newest first."""
    from moto.core.utils import unix_time_millis

    versions = [v for _, listed in bucket.keys.iterlists() for v in listed]
    versions.sort(key=lambda v: (v.name, -unix_time_millis(v.last_modified)))
    return versions


def _page(
    ordered: list[Any],
    key_marker: str | None,
    version_id_marker: str | None,
    max_keys: int | None,
    prefix: str,
) -> tuple[list[Any], list[str], list[Any], str | None, str | None]:
    """moto's answer ``(versions, common prefixes, delete markers, next key marker, next
    version id marker)`` for one page without a delimiter."""
    from moto.s3.models import FakeKey

    names = [v.name for v in ordered]
    start = bisect.bisect_left(names, prefix)
    if key_marker is not None:
        after = bisect.bisect_right(names, key_marker)  # a key marker alone: after that key
        if version_id_marker:
            first = bisect.bisect_left(names, key_marker)
            found = [
                i
                for i in range(first, after)
                if str(ordered[i].version_id) == str(version_id_marker)
            ]
            after = found[0] + 1 if found else after
        start = max(start, after)
    versions: list[Any] = []
    markers: list[Any] = []
    limit = 1000 if max_keys is None else max_keys
    next_key: str | None = None
    next_version: str | None = None
    last: Any = None
    for i in range(start, len(ordered)):
        version = ordered[i]
        if not version.name.startswith(prefix):
            break
        if len(versions) + len(markers) >= limit:
            if last is not None:
                next_key, next_version = last.name, last.version_id
            break
        listed = copy.copy(version)
        listed.is_latest = i == 0 or names[i - 1] != version.name
        (versions if isinstance(version, FakeKey) else markers).append(listed)
        last = version
    return versions, [], markers, next_key, next_version
