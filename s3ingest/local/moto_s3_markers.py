"""Make the emulator's ListObjectVersions start *after* a ``KeyMarker`` given alone, as S3 does.

S3 lists the versions of the keys that sort after ``key-marker`` when no
``version-id-marker`` is given
(https://docs.aws.amazon.com/AmazonS3/latest/API/API_ListObjectVersions.html). moto instead
starts at the first version whose key is not below the marker and drops that one version
(``S3Backend.list_object_versions``, ``moto/s3/models.py``): the marker's own older versions are
listed and, when the marker is not a key, the first key after it is lost. The listing backfill
starts its shards at such markers (``s3ingest_fn.services.listing_backfill``).

:func:`install` wraps the method, once per process: a ``key_marker`` without
``version_id_marker`` becomes the last version (in moto's order: key, then newest first) of the
greatest key not above the marker, passed as both markers, which moto's own branch lists after;
no such version: no marker. Every other request is passed through unchanged.
"""

from __future__ import annotations

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
        from moto.core.utils import unix_time_millis
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
            if key_marker and not version_id_marker:
                bucket = self.get_bucket(bucket_name)
                below = [
                    v
                    for _, versions in bucket.keys.iterlists()
                    for v in versions
                    if v.name <= key_marker
                ]
                below.sort(key=lambda v: (v.name, -unix_time_millis(v.last_modified)))
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
