"""The attestation tests' shared world: an inventory report and a ledger of
:func:`tests.unit.test_reconcile_columnar.world`'s rows, behind the fakes a
:class:`~s3ingest_fn.services.reconcile.Reconciler` reads (every GetObject and Scan request
counted), for ``attest``, the reconciliation's pass and the fan-out alike."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

from s3ingest_fn.adapters.dynamo_ledger import item_of as _item_of
from s3ingest_fn.core.effects import EffectTarget
from s3ingest_fn.core.ledger_columns import LedgerColumns
from s3ingest_fn.core.row import LedgerRow
from s3ingest_fn.core.scope import BucketScope
from s3ingest_fn.services.reconcile import Reconciler
from tests.fakes import FakeBucket, FakeBucketListing, FakeInventoryStore, FakeRepairQueue
from tests.unit.test_reconcile_columnar import (
    BUCKET,
    PROJECTED,
    SCHEMA,
    TAKEN,
    _csv,
    _per_key_rows,
    columns_of,
    world,
)

INVENTORY = "inv"
PREFIX = f"inventory/{BUCKET}/s3ingest-daily/"
MANIFEST = f"{PREFIX}2027-01-15T01-00Z/manifest.json"


class Scanner:
    """A ledger's parallel Scan over fixed rows (segment ``i`` of ``n``: every ``n``-th row,
    ``page`` rows a page), as rows and, with ``in_columns``, as columns (the scanner pyarrow
    makes); every request counted."""

    def __init__(self, rows: list[LedgerRow], page: int, in_columns: bool) -> None:
        self.rows, self.page = rows, page
        self.decode: object | None = object() if in_columns else None
        self.requests = 0

    def _items(self, segment: int, total: int) -> Iterator[list[LedgerRow]]:
        mine = self.rows[segment::total]
        for i in range(0, max(len(mine), 1), self.page):
            self.requests += 1
            yield mine[i : i + self.page]

    def pages(self, bucket: str, segment: int, total: int) -> Iterator[list[LedgerRow]]:
        for chunk in self._items(segment, total):
            yield _per_key_rows(chunk)

    def column_pages(self, bucket: str, segment: int, total: int) -> Iterator[LedgerColumns]:
        for chunk in self._items(segment, total):
            items = [{k: v for k, v in _item_of(r).items() if k in PROJECTED} for r in chunk]
            yield columns_of(json.dumps({"Items": items}).encode(), BUCKET, False)[0]


class CountingStore(FakeInventoryStore):
    """The inventory bucket, counting each GetObject by key."""

    def __init__(self) -> None:
        super().__init__()
        self.gets: dict[str, int] = {}

    def read(self, bucket: str, key: str) -> bytes:
        self.gets[key] = self.gets.get(key, 0) + 1
        return super().read(bucket, key)


def reconciler(
    lines: list[list[str]],
    rows: list[LedgerRow],
    *,
    columns: tuple[str, ...] = SCHEMA,
    in_columns: bool,
    page: int = 3,
    scope: BucketScope | None = None,
    targets: tuple[EffectTarget, ...] = (),
) -> tuple[Reconciler, CountingStore, Scanner]:
    store = CountingStore()
    data_key = f"{PREFIX}data/one.csv.gz"
    manifest = json.dumps(
        {
            "sourceBucket": BUCKET,
            "destinationBucket": f"arn:aws:s3:::{INVENTORY}",
            "fileFormat": "CSV",
            "fileSchema": ", ".join(columns),
            "creationTimestamp": str(TAKEN),
            "files": [{"key": data_key}],
        }
    ).encode()
    store.put(INVENTORY, MANIFEST, manifest)
    store.put(
        INVENTORY,
        MANIFEST.replace("manifest.json", "manifest.checksum"),
        hashlib.md5(manifest).hexdigest().encode(),
    )
    store.put(INVENTORY, data_key, _csv(lines))
    scanner = Scanner(rows, page, in_columns)
    r = Reconciler(
        objects=FakeBucket(),
        listing=FakeBucketListing([]),
        inventory=store,
        repairs=FakeRepairQueue(),
        scanner=scanner,
        bucket=BUCKET,
        table="ledger",
        queue_url="q",
        inventory_bucket=INVENTORY,
        inventory_prefix=PREFIX,
        clock=lambda: TAKEN / 1000 + 7,
        scope=scope,
        targets=targets,
    )
    return r, store, scanner


def snapshot(
    seed: int,
    *,
    versioned: bool,
    page: int,
    scope: BucketScope | None,
    targets: tuple[EffectTarget, ...],
) -> tuple[list[list[str]], list[LedgerRow], dict[str, Any]]:
    """``world(seed)``'s report lines (without the VersionId column unless ``versioned``) and
    rows, and :func:`reconciler`'s keywords for them."""
    lines, rows = world(seed)
    columns = SCHEMA if versioned else tuple(c for c in SCHEMA if c != "VersionId")
    if not versioned:
        lines = [line[:2] + line[3:] for line in lines]
    return lines, rows, {"columns": columns, "page": page, "scope": scope, "targets": targets}
