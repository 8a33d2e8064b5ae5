"""S3 Inventory reports: the manifest, its checksum, and the rows of its data files.

Formats and quirks from https://docs.aws.amazon.com/AmazonS3/latest/userguide/storage-inventory-location.html
and ``docs/payloads.md`` section 8:

* ``manifest.json`` names the data files (``files[].key``, never a hard-coded ``data/``), the
  format (``CSV``, ``ORC`` or ``Parquet``), the column list (``fileSchema``) and the creation time
  (``creationTimestamp``, a *string* of epoch milliseconds). ``manifest.checksum`` is the MD5 hex
  of ``manifest.json``, possibly followed by a newline.
* CSV data is gzip (possibly multi-member), has no header row, quotes every field, and its keys
  are form-encoded (decoded with :func:`~s3ingest_fn.core.events.decode_form_key`, CONTRACT C1). One
  row per version, delete markers included; an empty ``VersionId`` is the null version.
* ORC and Parquet columns are snake_case and their keys are raw. Reading them needs ``pyarrow``
  (installed with the CLI and the local runtime, not in the Lambda package, whose inventory
  configuration is CSV).
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC
from typing import Any

from s3ingest_fn.core.events import decode_form_key, normalize_etag, normalize_version
from s3ingest_fn.core.model import InvalidMessageError, InventoryRow


class InventoryError(ValueError):
    """A manifest or data file that cannot be trusted or read (bad checksum, unknown format)."""


@dataclass(frozen=True)
class Manifest:
    """A parsed ``manifest.json``.

    Attributes
    ----------
    source_bucket : str
    destination_bucket : str
        The bucket *name* (the manifest gives an ARN).
    created_ms : int
        ``creationTimestamp``: when the report's listing was taken, epoch milliseconds.
    file_format : str
        ``CSV``, ``ORC`` or ``Parquet``.
    columns : tuple[str, ...]
        Column names as the data files hold them (CSV: PascalCase; ORC/Parquet: snake_case).
    files : tuple[str, ...]
        Object keys of the data files, in the destination bucket.
    """

    source_bucket: str
    destination_bucket: str
    created_ms: int
    file_format: str
    columns: tuple[str, ...]
    files: tuple[str, ...]

    @classmethod
    def parse(cls, raw: bytes, checksum: bytes | None = None) -> Manifest:
        """Parse ``manifest.json``; with ``checksum`` (the ``manifest.checksum`` file) verify it.

        Raises
        ------
        InventoryError
            Checksum mismatch, invalid JSON, missing fields, or an unknown format.
        """
        if checksum is not None:
            expected = checksum.decode("ascii", "replace").strip().lower()
            actual = hashlib.md5(raw).hexdigest()
            if expected != actual:
                raise InventoryError(
                    f"manifest.checksum {expected!r} does not match the manifest's MD5 {actual!r}"
                )
        try:
            doc = json.loads(raw)
            fmt = str(doc["fileFormat"])
            schema = str(doc["fileSchema"])
            files = tuple(str(f["key"]) for f in doc["files"])
            created = int(doc["creationTimestamp"])
            source = str(doc["sourceBucket"])
            destination = str(doc["destinationBucket"]).rsplit(":", 1)[-1]
        except (ValueError, KeyError, TypeError) as exc:
            raise InventoryError(f"not an S3 Inventory manifest: {exc}") from exc
        if fmt.upper() not in ("CSV", "ORC", "PARQUET"):
            raise InventoryError(f"unknown inventory format {fmt!r}")
        return cls(
            source_bucket=source,
            destination_bucket=destination,
            created_ms=created,
            file_format=fmt,
            columns=parse_schema(fmt, schema),
            files=files,
        )


def parse_schema(fmt: str, schema: str) -> tuple[str, ...]:
    """Column names from ``fileSchema``.

    CSV: ``"Bucket, Key, VersionId, ..."``. ORC: ``struct<bucket:string,key:string,...>``.
    Parquet: ``message s3.inventory {  required binary bucket (STRING); ...}``.
    """
    if fmt.upper() == "CSV":
        return tuple(c.strip() for c in schema.split(","))
    if fmt.upper() == "ORC":
        inner = schema.strip().removeprefix("struct<").removesuffix(">")
        return tuple(part.split(":", 1)[0].strip() for part in inner.split(","))
    body = schema[schema.find("{") + 1 : schema.rfind("}")]
    names = []
    for field in body.split(";"):
        words = field.split("(")[0].split()
        if words:
            names.append(words[-1])
    return tuple(names)


# CSV column name -> ORC/Parquet column name.
_SNAKE = {
    "Bucket": "bucket",
    "Key": "key",
    "VersionId": "version_id",
    "IsLatest": "is_latest",
    "IsDeleteMarker": "is_delete_marker",
    "Size": "size",
    "LastModifiedDate": "last_modified_date",
    "ETag": "e_tag",
}


def read_rows(manifest: Manifest, data: bytes) -> Iterator[InventoryRow]:
    """Rows of one data file of ``manifest``'s report.

    Parameters
    ----------
    manifest : Manifest
    data : bytes
        The data file's bytes as stored (gzip for CSV).

    Raises
    ------
    InventoryError
        When the file cannot be read, or a CSV key is not valid form-encoding.
    """
    fmt = manifest.file_format.upper()
    if fmt == "CSV":
        return _csv_rows(manifest.columns, data)
    return _arrow_rows(fmt, data)


def _csv_rows(columns: tuple[str, ...], data: bytes) -> Iterator[InventoryRow]:
    index = {name: i for i, name in enumerate(columns)}
    if "Bucket" not in index or "Key" not in index:
        raise InventoryError(f"CSV schema without Bucket and Key: {columns}")
    # Stream the (possibly multi-member) gzip: no copy of the whole decompressed text.
    text = io.TextIOWrapper(gzip.GzipFile(fileobj=io.BytesIO(data)), encoding="utf-8", newline="")
    b, k = index["Bucket"], index["Key"]
    v, lat, dm = index.get("VersionId"), index.get("IsLatest"), index.get("IsDeleteMarker")
    e, s, m = index.get("ETag"), index.get("Size"), index.get("LastModifiedDate")
    reader = csv.reader(text)
    lineno = 0
    while True:
        try:
            fields = next(reader, None)
        except (OSError, EOFError, UnicodeDecodeError, csv.Error) as exc:
            raise InventoryError(f"CSV data file is not gzip UTF-8 CSV: {exc}") from exc
        if fields is None:
            return
        lineno += 1
        if not fields or fields == [""] * len(fields):  # AWS adds blank lines at the end
            continue
        if len(fields) < len(columns):
            raise InventoryError(
                f"CSV line {lineno}: {len(fields)} fields, expected {len(columns)}"
            )
        try:
            key = decode_form_key(fields[k])
        except InvalidMessageError as exc:
            raise InventoryError(f"CSV line {lineno}: {exc}") from exc
        yield InventoryRow(
            bucket=fields[b],
            key=key,
            version_id=normalize_version(fields[v]) if v is not None else None,
            is_latest=fields[lat] == "true" if lat is not None else True,
            is_delete_marker=fields[dm] == "true" if dm is not None else False,
            etag=normalize_etag(fields[e]) if e is not None else None,
            size=int(fields[s]) if s is not None and fields[s].isdigit() else None,
            last_modified_ms=_iso_ms(fields[m]) if m is not None else None,
        )


def _arrow_rows(fmt: str, data: bytes) -> Iterator[InventoryRow]:
    from s3ingest_fn import arrow_memory

    try:
        pa = arrow_memory.prepare()
        if fmt == "ORC":
            import pyarrow.orc as orc

            table = orc.read_table(pa.BufferReader(data))
        else:
            import pyarrow.parquet as pq

            table = pq.read_table(pa.BufferReader(data))
    except ImportError as exc:
        raise InventoryError(
            f"reading {fmt} inventories needs pyarrow, which is not installed (for the s3ingest "
            "CLI: pip install 's3ingest[arrow]')"
        ) from exc
    except Exception as exc:  # pyarrow raises its own ArrowInvalid and friends
        raise InventoryError(f"{fmt} data file unreadable: {exc}") from exc
    names = set(table.column_names)
    for rec in table.to_pylist():
        modified = rec.get(_SNAKE["LastModifiedDate"])
        yield InventoryRow(
            bucket=str(rec["bucket"]),
            key=str(rec["key"]),  # raw keys in ORC/Parquet
            version_id=normalize_version(rec.get("version_id")),
            is_latest=bool(rec["is_latest"]) if "is_latest" in names else True,
            is_delete_marker=bool(rec.get("is_delete_marker") or False),
            etag=normalize_etag(rec.get("e_tag")),
            size=rec.get("size"),
            last_modified_ms=_datetime_ms(modified),
        )


def _iso_ms(text: str) -> int | None:
    from datetime import datetime

    if not text:
        return None
    try:
        return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


def _datetime_ms(value: Any) -> int | None:
    if value is None:
        return None

    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return int(value.timestamp() * 1000)
