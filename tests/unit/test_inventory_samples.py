"""The real S3 Inventory fixtures (OrcaBus filemanager, ``tests/events/``), read with hand-written
expected rows (docs/payloads.md section 8): CSV with and without version columns, ORC, Parquet."""

from __future__ import annotations

import gzip
import hashlib
import json

import pytest

from s3ingest_fn.core.diff import Truth, bucket_truth
from s3ingest_fn.services.inventory import (
    InventoryError,
    InventoryRow,
    Manifest,
    parse_schema,
    read_rows,
)
from tests.samples import load_sample, read_sample_bytes

B = "filemanager-inventory-test"
EMPTY = "d41d8cd98f00b204e9800998ecf8427e"
FIVE = "d8e8fca2dc0f896fd7cb4cb0031ba249"
V1 = "tpinzcbxOfWpZsmjvVgdHEvSohsY4TA0"
MARKER = "gdN1exfZmD7m713patv8dlQ7fTNwle3v"
V2 = "zl_C7NLxrkBsMFD5HQUdybrmuV9VpvkN"

# 2024-05-06T22:37:48Z etc., written out by hand from the CSV's LastModifiedDate strings.
VERSIONED = [
    InventoryRow(B, "inventory-test/", None, True, False, EMPTY, 0, 1715035068000),
    InventoryRow(B, "inventory-test/key1", None, False, False, EMPTY, 0, 1715035080000),
    InventoryRow(B, "inventory-test/key1", V1, True, False, FIVE, 5, 1715035462000),
    InventoryRow(B, "inventory-test/key2", MARKER, True, True, None, None, 1715035574000),
    InventoryRow(B, "inventory-test/key2", V2, False, False, FIVE, 5, 1715035534000),
]
CURRENT_ONLY = [
    InventoryRow(B, "inventory-test/", None, True, False, EMPTY, 0, 1715035068000),
    InventoryRow(B, "inventory-test/key1", None, True, False, FIVE, 5, 1715035462000),
]


def read(name: str) -> bytes:
    return read_sample_bytes(f"orcabus-filemanager__{name}")


@pytest.mark.contract("C1", "C12")
@pytest.mark.parametrize(
    ("manifest", "data", "fmt", "expected"),
    [
        ("csv_inventory_manifest", "csv_inventory.csv.gz", "CSV", VERSIONED),
        (
            "csv_inventory_no_version_manifest",
            "csv_inventory_no_version.csv.gz",
            "CSV",
            CURRENT_ONLY,
        ),
        ("orc_inventory_manifest", "orc_inventory.orc", "ORC", VERSIONED),
        ("parquet_inventory_manifest", "parquet_inventory.parquet", "Parquet", VERSIONED),
    ],
)
def test_real_inventory_reports_read_as_written(
    manifest: str, data: str, fmt: str, expected: list[InventoryRow]
) -> None:
    m = Manifest.parse(read(f"{manifest}.json"), read(f"{manifest}.checksum"))
    assert (m.source_bucket, m.destination_bucket, m.created_ms, m.file_format) == (
        B,
        B,
        1715043600000,
        fmt,
    )
    assert m.files == (data,)
    assert list(read_rows(m, read(data))) == expected


@pytest.mark.contract("C12")
def test_versioned_report_reduces_to_current_state() -> None:
    truth = bucket_truth(VERSIONED)
    assert truth == {
        "inventory-test/": Truth(True, None, EMPTY, 1715035068000),
        "inventory-test/key1": Truth(True, V1, FIVE, 1715035462000),
        "inventory-test/key2": Truth(False, None, None, 1715035574000),
    }


@pytest.mark.contract("C12")
def test_checksum_mismatch_is_refused() -> None:
    raw = read("csv_inventory_manifest.json")
    with pytest.raises(InventoryError, match="does not match"):
        Manifest.parse(raw + b" ", read("csv_inventory_manifest.checksum"))


@pytest.mark.contract("C12")
def test_doc_manifests_give_their_columns() -> None:
    for fmt, first, etag in (
        ("CSV", "Bucket", "ETag"),
        ("ORC", "bucket", "e_tag"),
        ("Parquet", "bucket", "e_tag"),
    ):
        doc = load_sample(f"awsdocs-s3ug__inventory-manifest-{fmt}.json")
        assert isinstance(doc, dict)
        columns = parse_schema(doc["fileFormat"], doc["fileSchema"])
        assert columns[0] == first and columns[1] in ("Key", "key") and etag in columns


@pytest.mark.contract("C1", "C3")
def test_csv_keys_are_form_decoded_once_and_fields_may_be_empty() -> None:
    # GIVEN a report row as S3 writes it: every field quoted, key form-encoded
    line = f'"{B}","a+b%2Bc/caf%C3%A9+%2525.txt","","true","false","","","","STANDARD","false"\n'
    data = gzip.compress(line.encode()) + gzip.compress(b"\n\n")  # multi-member, trailing blanks
    manifest_raw = json.dumps(
        {
            "sourceBucket": B,
            "destinationBucket": "arn:aws:s3:::dest",
            "version": "2016-11-30",
            "creationTimestamp": "1",
            "fileFormat": "CSV",
            "files": [{"key": "d.csv.gz"}],
            "fileSchema": "Bucket, Key, VersionId, IsLatest, IsDeleteMarker, Size, "
            "LastModifiedDate, ETag, StorageClass, IsMultipartUploaded",
        }
    ).encode()
    m = Manifest.parse(manifest_raw, (hashlib.md5(manifest_raw).hexdigest() + "\n").encode())
    (row,) = read_rows(m, data)
    assert row.key == "a b+c/café %25.txt"
    assert (row.version_id, row.size, row.etag, row.last_modified_ms) == (None, None, None, None)


@pytest.mark.contract("C1")
def test_bad_csv_key_names_the_line() -> None:
    manifest = Manifest(B, "d", 1, "CSV", ("Bucket", "Key"), ("x",))
    with pytest.raises(InventoryError, match="line 2"):
        list(read_rows(manifest, gzip.compress(f'"{B}","ok"\n"{B}","bad%ZZ"\n'.encode())))
