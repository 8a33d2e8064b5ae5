"""The columnar ``inventory`` reconciliation (:mod:`s3ingest_fn.services.reconcile_columnar`)
against the per-key pass (:func:`bucket_truth`, :func:`diff`): the same drift and counts on
random histories with hostile keys, forged sequencers and every effect state; the Scan pages
parsed straight to columns; the pages in flight bounded."""

from __future__ import annotations

import csv
import gzip
import io
import json
import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote_plus

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from s3ingest_fn.adapters.dynamo_ledger import item_of
from s3ingest_fn.adapters.dynamo_ledger.scan import (
    DynamoLedgerScanner,
    _columns_row,
    _scanned_row,
)
from s3ingest_fn.adapters.dynamo_ledger.scan_arrow import decode
from s3ingest_fn.core.diff import DiffStats, bucket_truth, diff
from s3ingest_fn.core.effects import EffectTarget
from s3ingest_fn.core.ledger_columns import LedgerColumns
from s3ingest_fn.core.row import DEFAULT_PROCESSOR, Effect, Hold, LedgerRow
from s3ingest_fn.core.scope import BucketScope
from s3ingest_fn.services import reconcile_columnar as rc
from s3ingest_fn.services.inventory import InventoryError, Manifest, read_rows
from s3ingest_fn.services.reconcile import SCAN_SEGMENTS, Reconciler, ReconcileReport
from s3ingest_fn.services.reconcile_run import held_ages
from tests.fakes import (
    FakeBucket,
    FakeBucketListing,
    FakeInventoryStore,
    FakeRepairQueue,
)

pytestmark = pytest.mark.contract("C12")

BUCKET = "bkt"
TAKEN = 1_800_000_000_000
SCHEMA = (
    "Bucket",
    "Key",
    "VersionId",
    "IsLatest",
    "IsDeleteMarker",
    "Size",
    "LastModifiedDate",
    "ETag",
)
PIECES = ["a", "b", "/", " ", "+", "%", "%2B", "é", "日本", "🙂", "\x01", "\n", "\t"]
SEQS = [
    None,
    "00643717F9F8B85354",
    "00" + "6B" * 15,  # 32 digits: the longest an event may carry
    "00" + "6B" * 16,  # 34: contradicted by its length
    "F" * 64,  # forged above every real one
    "00FFFFFFFF",  # from the future
    "6B00000000000000",  # the documentation layout
    "00643717f9f8b85354",  # lower case
]
EFFECTS: list[Effect | None] = [
    None,
    Effect("done", done_change_id="c1", version=1),
    Effect("done", done_change_id="c2", version=2),
    Effect("done", version=3),
    Effect("pending", lease_until_ms=TAKEN - 10),
    Effect("pending", lease_until_ms=TAKEN + 10),
    Effect("superseded", done_change_id="c0"),
    Effect("held", hold=Hold("c1", "too-big", TAKEN - 5000, "held", "", None)),
    Effect("rejected"),
]


def _iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}Z"


def world(seed: int, n: int = 40) -> tuple[list[list[str]], list[LedgerRow]]:
    """Inventory lines (several versions a key, delete markers, repeated latest rows) and the
    ledger's rows (matching, drifted, recent, tombstoned, absent, extra)."""
    rnd = random.Random(seed)
    keys = sorted({"".join(rnd.choice(PIECES) for _ in range(rnd.randint(1, 4))) for _ in range(n)})
    lines: list[list[str]] = []
    rows: list[LedgerRow] = []
    for key in keys:
        version, etag = f"v{rnd.randint(0, 3)}", f"{rnd.randint(0, 3):032x}"
        lm = TAKEN + rnd.choice([-100_000, -1, 0, 1, 50_000])
        dead = rnd.random() < 0.2
        shape = rnd.random()
        if shape < 0.85:
            raw = quote_plus(key, safe="/")
            if rnd.random() < 0.3:
                lines.append(
                    [BUCKET, raw, "old", "false", "false", "1", _iso(lm - 9), '"' + etag + '"']
                )
            lines.append(
                [
                    BUCKET,
                    raw,
                    "" if dead else rnd.choice([version, "null"]),
                    "true",
                    "true" if dead else "false",
                    "1",
                    rnd.choice([_iso(lm), _iso(lm), ""]),
                    "" if dead else etag,
                ]
            )
            if rnd.random() < 0.05:  # a report repeating a key's latest row
                lines.append([BUCKET, raw, "v9", "true", "false", "1", _iso(lm), etag])
        if rnd.random() < 0.8:
            effect = rnd.choice(EFFECTS)
            rows.append(
                LedgerRow(
                    BUCKET,
                    key,
                    rnd.random() < 0.8,
                    seq=None if (s := rnd.choice(SEQS)) is None else s.ljust(64, "0"),
                    version_id=rnd.choice([version, "v9", None]),
                    etag=rnd.choice([etag, etag, "f" * 32, None]),
                    updated_at=TAKEN + rnd.choice([-100_000, 0, 1]),
                    change_id=rnd.choice(["c1", "c2", None]),
                    effect=effect,
                    rev=1,
                )
            )
    rnd.shuffle(lines)
    rnd.shuffle(rows)
    return lines, rows


def columns_of(body: bytes, bucket: str, named: bool) -> tuple[LedgerColumns, Any]:
    return decode(body, bucket, named, _columns_row, _scanned_row)


#: What the scanner projects with the default processor configured.
PROJECTED = DynamoLedgerScanner(None, "ledger")._attributes  # type: ignore[arg-type]


def _csv(lines: list[list[str]]) -> bytes:
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(lines)
    return gzip.compress(out.getvalue().encode())


def _manifest(columns: tuple[str, ...] = SCHEMA) -> Manifest:
    return Manifest(BUCKET, "inv", TAKEN, "CSV", columns, ("data.csv.gz",))


def _pages(rows: list[LedgerRow], size: int) -> Iterator[LedgerColumns]:
    items = [{k: v for k, v in item_of(r).items() if k in PROJECTED} for r in rows]
    for i in range(0, len(items), size):
        yield columns_of(json.dumps({"Items": items[i : i + size]}).encode(), BUCKET, False)[0]


def _per_key_rows(rows: list[LedgerRow]) -> list[LedgerRow]:
    return [
        _scanned_row({k: v for k, v in item_of(r).items() if k in PROJECTED}, BUCKET) for r in rows
    ]


def _figures(found: Any, stats: DiffStats, rows_seen: list[LedgerRow], targets: Any) -> Any:
    held = sum(len(held_ages(r, TAKEN)) for r in rows_seen)
    behind = sum(t.behind(r, TAKEN) for r in rows_seen for t in targets)
    return (
        Counter((d.kind, d.key, repr(d.ledger), repr(d.bucket)) for d in found),
        (stats.ledger_rows, stats.skipped_recent, stats.skipped_after_snapshot),
        held,
        behind,
    )


TARGETS = [(), (EffectTarget(DEFAULT_PROCESSOR, version=2),), (EffectTarget("thumbs"),)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32),
    prefix=st.sampled_from(["", "a", "%", "日本"]),
    scope=st.sampled_from([None, BucketScope(BUCKET, prefixes=("a", "+"), suffixes=("b",))]),
    margin=st.sampled_from([0, 5_000]),
    page=st.integers(1, 7),
    chunk=st.integers(1, 30),
    targets=st.sampled_from(TARGETS),
    versioned=st.booleans(),
)
def test_the_columnar_diff_finds_what_the_per_key_diff_finds(
    seed: int,
    prefix: str,
    scope: BucketScope | None,
    margin: int,
    page: int,
    chunk: int,
    targets: tuple[EffectTarget, ...],
    versioned: bool,
) -> None:
    # GIVEN a report and a ledger with hostile keys, forged sequencers and every effect state
    lines, rows = world(seed)
    columns = SCHEMA if versioned else tuple(c for c in SCHEMA if c != "VersionId")
    if not versioned:
        lines = [line[:2] + line[3:] for line in lines]
    manifest, data = _manifest(columns), _csv(lines)
    taken = TAKEN - margin
    contains = (scope or BucketScope(BUCKET)).contains
    # WHEN the per-key pass diffs them
    truth = bucket_truth(read_rows(manifest, data), prefix=prefix)
    truth = {k: t for k, t in truth.items() if contains(k)}
    keys = len(truth)  # the diff consumes the map
    scanned = [r for r in _per_key_rows(rows) if r.key.startswith(prefix) and contains(r.key)]
    expected_stats = DiffStats(snapshot_ms=TAKEN)
    expected = list(
        diff(
            truth,
            iter(scanned),
            taken_at_ms=taken,
            compare_versions=versioned,
            compare_etags=True,
            stats=expected_stats,
            prefix=prefix,
        )
    )
    # AND the columnar pass diffs them, chunk by chunk
    table = rc.truth_table(manifest, [data], prefix=prefix, scope=scope)
    stats = DiffStats(snapshot_ms=TAKEN)
    looked: list[LedgerRow] = []
    outside: list[str] = []
    found = list(
        rc.diff_columns(
            table,
            _pages(rows, page),
            taken_at_ms=taken,
            compare_versions=versioned,
            compare_etags=True,
            stats=stats,
            prefix=prefix,
            scope=scope,
            out_of_scope=outside.append,
            each_row=looked.append,
            target_version=rc._target_version(targets),
            chunk_rows=chunk,
        )
    )
    # THEN the report's table is the per-key truth, and the drift, the counts, the held
    # effects and the rows behind a processor are the same
    assert table.num_rows == keys
    assert _figures(found, stats, looked, targets) == _figures(
        expected, expected_stats, scanned, targets
    )
    assert sorted(outside) == sorted(
        r.key for r in rows if r.key.startswith(prefix) and not contains(r.key)
    )


@pytest.mark.parametrize(
    "bad",
    [
        ["bkt", "a%2", "v", "true", "false", "1", "2026-01-01T00:00:00.000Z", "e"],  # bad %
        ["bkt", "a%FF", "v", "true", "false", "1", "2026-01-01T00:00:00.000Z", "e"],  # not UTF-8
        ["bkt", "k", "v", "true", "false", "1", "2026-01-01T00:00:00.000Z", "zz"],  # ETag shape
        ["bkt", "k", "v", "true", "false"],  # short line
    ],
)
def test_a_file_the_bulk_reader_cannot_carry_fails_as_the_row_reader_does(bad: list[str]) -> None:
    # GIVEN a data file with one line the row reader refuses
    data = _csv([["bkt", "ok", "v", "true", "false", "1", "2026-01-01T00:00:00.000Z", "e"], bad])
    # WHEN both read it THEN both refuse it with the same error
    with pytest.raises(Exception) as row_error:
        list(read_rows(_manifest(), data))
    with pytest.raises(type(row_error.value)) as bulk_error:
        rc.truth_table(_manifest(), [data])
    assert str(bulk_error.value) == str(row_error.value)


def test_times_without_a_zone_and_multi_member_gzip_read_as_the_row_reader_reads_them() -> None:
    lines = [
        ["bkt", "a", "v", "true", "false", "1", "2026-01-01T00:00:00", "e"],
        ["bkt", "b", "v", "true", "false", "1", "2026-01-01T00:00:00.123+01:00", "e"],
    ]
    data = _csv(lines[:1]) + _csv(lines[1:])  # S3 may deliver concatenated gzip members
    truth = bucket_truth(read_rows(_manifest(), data))
    table = rc.truth_table(_manifest(), [data])
    assert dict(
        zip(table["key"].to_pylist(), table["last_modified_ms"].to_pylist(), strict=True)
    ) == {k: t.last_modified_ms for k, t in truth.items()}


def test_the_report_table_is_in_key_order_for_the_ledgers_binary_search() -> None:
    # GIVEN a report whose keys are out of order (as a bucket's inventory may be, one data
    # file after another), none repeated
    keys = ["m", "b", "z", "a b", "a"]
    data = _csv(
        [
            ["bkt", quote_plus(k), "v", "true", "false", "1", "2026-01-01T00:00:00.000Z", "e"]
            for k in keys
        ]
    )
    # WHEN it is read in columns
    table = rc.truth_table(_manifest(), [data])
    # THEN its keys come in order (what diff_columns' search_sorted needs), each row intact
    assert table["key"].to_pylist() == sorted(keys)
    assert table["version_id"].to_pylist() == ["v"] * len(keys)
    # AND a ledger chunk's keys are found at their positions, an absent one nowhere
    import pyarrow as pa

    found = rc._positions(table["key"].combine_chunks(), pa.array(["z", "c", "a"]))
    assert found.to_pylist() == [4, None, 0]


# -- the Scan pages -----------------------------------------------------------------------


def _scan_answer(items: list[dict[str, Any]], last: dict[str, Any] | None) -> bytes:
    body: dict[str, Any] = {"Items": items, "Count": len(items), "ScannedCount": len(items)}
    if last is not None:
        body["LastEvaluatedKey"] = last
    return json.dumps(body).encode()


class _Raw:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_: Any) -> Any:
        yield self.data


def _client(answers: list[bytes]) -> Any:
    client = boto3.client(
        "dynamodb", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )

    def send(request: Any, **_: Any) -> AWSResponse:
        headers = {"content-type": "application/x-amz-json-1.0"}
        return AWSResponse(request.url, 200, headers, _Raw(answers.pop(0)))  # type: ignore[arg-type]

    client.meta.events.register("before-send.dynamodb", send)  # type: ignore[arg-type]
    return client


def test_scan_pages_are_parsed_straight_to_the_fields_the_diff_reads() -> None:
    # GIVEN Scan answers holding compact items of every kind
    _, rows = world(7, n=60)
    items = [{k: v for k, v in item_of(r).items() if k in PROJECTED} for r in rows]
    half = len(items) // 2
    answers = [
        _scan_answer(items[:half], {"pk": {"S": f"{BUCKET}/x"}}),
        _scan_answer(items[half:], None),
    ]
    client = _client(list(answers))
    parsed_seen: list[list[str]] = []

    def after_call(parsed: dict[str, Any], **_: Any) -> None:
        parsed_seen.append(sorted(parsed))

    client.meta.events.register("after-call.dynamodb.Scan", after_call)
    scanner = DynamoLedgerScanner(client, "ledger", decode=decode)
    # WHEN the scanner reads them as columns
    pages = list(scanner.column_pages(BUCKET, 0, 1))
    # THEN each row is the per-key scan's row, and botocore's parser walked no item
    assert [len(p) for p in pages] == [half, len(items) - half]
    got = [p.row(i) for p in pages for i in range(len(p))]
    assert got == _per_key_rows(rows)
    assert all("Items" not in keys for keys in parsed_seen) and len(parsed_seen) == 2


def test_the_raw_body_is_kept_only_for_the_columnar_read() -> None:
    _, rows = world(8, n=10)
    items = [{k: v for k, v in item_of(r).items() if k in PROJECTED} for r in rows]
    answers = [_scan_answer(items, None)] * 2
    client = _client(list(answers))
    scanner = DynamoLedgerScanner(client, "ledger", decode=decode)
    list(scanner.column_pages(BUCKET, 0, 1))  # the handler is registered on the client now
    # WHEN the same client's per-key Scan runs THEN its items are parsed by botocore as ever
    assert [r for page in scanner.pages(BUCKET, 0, 1) for r in page] == _per_key_rows(rows)


class _SlowColumnsScanner:
    """A ledger of many pages per segment, counting the pages made and not yet consumed."""

    def __init__(self, pages: int, size: int) -> None:
        self.pages, self.size = pages, size
        self.lock = threading.Lock()

    def pages_of(self, bucket: str, segment: int, total: int) -> Iterator[list[LedgerRow]]:
        yield from ()

    def column_pages(self, bucket: str, segment: int, total: int) -> Iterator[LedgerColumns]:
        for p in range(self.pages):
            keys = [f"{segment}-{p}-{i}" for i in range(self.size)]
            items = [
                {"pk": {"S": f"{bucket}/{k}"}, "st": {"S": "p"}, "ut": {"N": "1"}} for k in keys
            ]
            yield columns_of(json.dumps({"Items": items}).encode(), bucket, False)[0]


def test_the_pages_in_flight_are_bounded() -> None:
    # GIVEN a ledger of 8 segments of 30 pages each, and a consumer slower than the scan
    scanner = _SlowColumnsScanner(pages=30, size=5)
    r = Reconciler(
        objects=FakeBucket(),
        listing=FakeBucketListing([]),
        inventory=FakeInventoryStore(),
        repairs=FakeRepairQueue(),
        scanner=scanner,  # type: ignore[arg-type]
        bucket=BUCKET,
        table="ledger",
        queue_url="q",
    )
    report = ReconcileReport(source="inventory", bucket=BUCKET, prefix="", dry_run=True)

    def pages_of(segment: int, total: int) -> Iterator[LedgerColumns]:
        return scanner.column_pages(BUCKET, segment, total)

    seen = 0
    for page in r.pump_pages(pages_of, report, lambda p, n: None):
        seen += len(page)
        time.sleep(0.001)
    # THEN every row came, and at most the queue plus one page a thread was held at once
    assert seen == SCAN_SEGMENTS * 30 * 5
    assert r.held.peak <= (2 * SCAN_SEGMENTS + SCAN_SEGMENTS + 1) * 5
    assert r.held.now == 0
    assert report.ledger_requests == SCAN_SEGMENTS * 30


def test_the_bulk_reader_and_the_row_reader_refuse_a_bad_data_file_alike() -> None:
    with pytest.raises(InventoryError):
        rc.truth_table(_manifest(), [b"not gzip"])


@pytest.mark.parametrize("seq", [None, "00", "00643717F9F8B85354", "0064371700000000000000"])
@pytest.mark.parametrize("effect", [None, Effect("done", done_change_id="c1", version=2)])
def test_rows_that_match_the_report_are_not_compared_row_by_row(
    seq: str | None, effect: Effect | None
) -> None:
    # GIVEN a ledger that matches the report, sequencers stored trimmed of their padding
    lines = [
        [BUCKET, f"k{i}", f"v{i}", "true", "false", "1", _iso(TAKEN - 9), f"{i:032x}"]
        for i in range(50)
    ]
    rows = [
        LedgerRow(
            BUCKET,
            f"k{i}",
            True,
            seq=None if seq is None else seq.ljust(64, "0"),
            version_id=f"v{i}",
            etag=f"{i:032x}",
            updated_at=TAKEN - 9,
            change_id="c1",
            effect=effect,
            rev=1,
        )
        for i in range(50)
    ]
    looked: list[LedgerRow] = []
    # WHEN the columnar pass diffs them (the default processor configured at version 2)
    found = list(
        rc.diff_columns(
            rc.truth_table(_manifest(), [_csv(lines)]),
            _pages(rows, 7),
            taken_at_ms=TAKEN,
            compare_versions=True,
            compare_etags=True,
            stats=DiffStats(),
            each_row=looked.append,
            target_version=None if effect is None else 2,
        )
    )
    # THEN nothing differs and no row went through Python
    assert found == [] and looked == []


def test_the_diff_searches_the_reports_own_keys_not_a_copy() -> None:
    import pyarrow as pa

    # GIVEN a report of 20,000 keys in columns (one array each)
    lines = [
        [BUCKET, f"key-{i:06d}", "v", "true", "false", "1", _iso(TAKEN - 9), "e"]
        for i in range(20_000)
    ]
    truth = rc.truth_table(_manifest(), [_csv(lines)])
    before = pa.total_allocated_bytes()
    held: list[int] = []

    def pages() -> Iterator[LedgerColumns]:
        held.append(pa.total_allocated_bytes() - before)
        yield from ()

    # WHEN the diff runs against an empty ledger
    found = list(
        rc.diff_columns(
            truth,
            pages(),
            taken_at_ms=TAKEN,
            compare_versions=True,
            compare_etags=True,
            stats=DiffStats(),
        )
    )
    # THEN every key is unrecorded, and what the diff held before its first page is not a
    # second copy of the report's keys (the largest column: at 10^6 keys, 31 MiB)
    assert len(found) == 20_000
    assert held[0] < truth["key"].nbytes // 10
