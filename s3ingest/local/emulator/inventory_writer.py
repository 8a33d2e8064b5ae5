"""Writes S3 Inventory reports of an emulated bucket, in the real format (moto has none).

Layout and format as S3 delivers them
(https://docs.aws.amazon.com/AmazonS3/latest/userguide/storage-inventory-location.html,
``docs/payloads.md`` section 8): ``<prefix>/<source bucket>/<config id>/<YYYY-MM-DDTHH-MMZ>/``
holds ``manifest.json`` (pretty-printed, ``creationTimestamp`` a string of epoch milliseconds,
``destinationBucket`` an ARN, ``fileSchema`` comma-and-space separated), ``manifest.checksum``
(MD5 hex of the manifest and a newline) and ``data/<uuid>.csv.gz``: gzip, no header row, every
field double-quoted, form-encoded keys, one row per version with delete markers, the null
version's ``VersionId`` empty.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import time
import uuid
from typing import Any

from s3ingest.local.emulator.s3faithful import encode_key
from s3ingest.settings import inventory_report_prefix

SCHEMA = (
    "Bucket",
    "Key",
    "VersionId",
    "IsLatest",
    "IsDeleteMarker",
    "Size",
    "LastModifiedDate",
    "ETag",
    "StorageClass",
    "IsMultipartUploaded",
)


def write_inventory(
    s3: Any,
    *,
    source_bucket: str,
    destination_bucket: str,
    rows_per_file: int = 1000,
    clock: Any = time.time,
) -> str:
    """List ``source_bucket``'s versions and write one inventory report of them.

    Returns
    -------
    str
        The key of the report's ``manifest.json`` in ``destination_bucket``.
    """
    now = clock()
    folder = inventory_report_prefix(source_bucket) + time.strftime(
        "%Y-%m-%dT%H-%MZ", time.gmtime(now)
    )
    rows = list(_rows(s3, source_bucket))
    files = []
    for i in range(0, max(len(rows), 1), rows_per_file):
        data = _csv_gz(rows[i : i + rows_per_file])
        key = f"{folder}/data/{uuid.uuid4()}.csv.gz"
        s3.put_object(Bucket=destination_bucket, Key=key, Body=data)
        files.append({"key": key, "size": len(data), "MD5checksum": hashlib.md5(data).hexdigest()})
    manifest = json.dumps(
        {
            "sourceBucket": source_bucket,
            "destinationBucket": f"arn:aws:s3:::{destination_bucket}",
            "version": "2016-11-30",
            "creationTimestamp": str(int(now * 1000)),
            "fileFormat": "CSV",
            "fileSchema": ", ".join(SCHEMA),
            "files": files,
        },
        indent=2,
        separators=(",", " : "),
    ).encode()
    s3.put_object(Bucket=destination_bucket, Key=f"{folder}/manifest.json", Body=manifest)
    s3.put_object(
        Bucket=destination_bucket,
        Key=f"{folder}/manifest.checksum",
        Body=(hashlib.md5(manifest).hexdigest() + "\n").encode(),
    )
    return f"{folder}/manifest.json"


def _rows(s3: Any, bucket: str) -> Any:
    status = s3.get_bucket_versioning(Bucket=bucket).get("Status")
    if not status:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for o in page.get("Contents", []):
                yield [
                    bucket,
                    encode_key(o["Key"]),
                    "",
                    "true",
                    "false",
                    str(o["Size"]),
                    _iso(o["LastModified"]),
                    o["ETag"].strip('"'),
                    "STANDARD",
                    "false",
                ]
        return
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
        for v in page.get("Versions", []):
            version = "" if v.get("VersionId") in (None, "null") else v["VersionId"]
            yield [
                bucket,
                encode_key(v["Key"]),
                version,
                _bool(v["IsLatest"]),
                "false",
                str(v["Size"]),
                _iso(v["LastModified"]),
                v["ETag"].strip('"'),
                "STANDARD",
                "false",
            ]
        for m in page.get("DeleteMarkers", []):
            version = "" if m.get("VersionId") in (None, "null") else m["VersionId"]
            yield [
                bucket,
                encode_key(m["Key"]),
                version,
                _bool(m["IsLatest"]),
                "true",
                "",
                _iso(m["LastModified"]),
                "",
                "",
                "",
            ]


def _csv_gz(rows: list[list[str]]) -> bytes:
    text = io.StringIO()
    csv.writer(text, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    return gzip.compress(text.getvalue().encode("utf-8"))


def _bool(value: Any) -> str:
    return "true" if value else "false"


def _iso(value: Any) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%S.000Z")
