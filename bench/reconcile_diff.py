"""The reconciliation diff at scale: N inventory rows against N ledger rows with 1% drift.

Ours: the real inventory reader (stdlib csv over the gzip data file), :func:`bucket_truth`, the
real parallel Scan (:meth:`Reconciler.scan_ledger`, 8 segments) and :func:`diff`.
Baseline: the standard-library csv module with one GetItem per key.

Both talk to DynamoDB through a real botocore client: requests are serialised, signed and their
responses parsed by botocore; only the HTTP exchange is answered in-process (a ``before-send``
handler returns the response), so no network latency is counted for either side: the baseline's
one-request-per-key cost is its botocore CPU alone, a lower bound. Targets: at least 5 times
faster than the baseline, under 1.5 GiB peak memory, under 0.01 ledger requests per key.

Each side runs in a forked child so its peak RSS (``ru_maxrss``) is its own; the synthetic data
(the gzip CSV, about 30 MB for 10^6 rows) is built in the child and counted in the peak, as a
Lambda would hold it too. The ledger side is generated on the fly from the key's index, so the
fixture holds no million-item table.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import multiprocessing
import resource
import time
from typing import Any
from urllib.parse import quote_plus, unquote_plus

import boto3
from botocore.awsrequest import AWSResponse

from s3ingest_fn import wiring
from s3ingest_fn.adapters.dynamo_ledger import item_of, item_size, row_from_item
from s3ingest_fn.core import sequencer
from s3ingest_fn.core.diff import bucket_truth, diff
from s3ingest_fn.core.row import Decision, LedgerRow
from s3ingest_fn.services.inventory import Manifest, read_rows
from s3ingest_fn.services.reconcile import ReconcileReport

SCHEMA = "Bucket, Key, VersionId, IsLatest, IsDeleteMarker, Size, LastModifiedDate, ETag"
BUCKET = "bench-bucket"
PAGE_BYTES = 1_000_000  # DynamoDB returns at most 1 MB per Scan page


def key_of(i: int) -> str:
    return f"data/{i % 997:03d}/object {i:07d}+v.csv"


def index_of(key: str) -> int:
    return int(key.rsplit(" ", 1)[1].split("+", 1)[0])


def etag_of(i: int, drifted: bool = False) -> str:
    return hashlib.md5(f"{i}{'x' if drifted else ''}".encode()).hexdigest()


def drift_kind(i: int) -> str | None:
    """1% drift: a third each missing from the ledger, deleted in the bucket, other ETag."""
    return {0: "missing", 100: "deleted_but_live", 200: "content_mismatch"}.get(i % 300)


def inventory(n: int) -> tuple[Manifest, bytes]:
    out = io.StringIO()
    w = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    for i in range(n):
        k = quote_plus(key_of(i), safe="/")
        if drift_kind(i) == "deleted_but_live":
            w.writerow([BUCKET, k, f"m{i}", "true", "true", "", "2026-01-01T00:00:00.000Z", ""])
            w.writerow(
                [BUCKET, k, f"v{i}", "false", "false", "5", "2025-12-31T00:00:00.000Z", etag_of(i)]
            )
        else:
            w.writerow(
                [BUCKET, k, f"v{i}", "true", "false", "5", "2025-12-31T00:00:00.000Z", etag_of(i)]
            )
    data = gzip.compress(out.getvalue().encode(), compresslevel=1)
    manifest = Manifest(
        BUCKET,
        "inv",
        1_800_000_000_000,
        "CSV",
        tuple(c.strip() for c in SCHEMA.split(",")),
        ("data.csv.gz",),
    )
    return manifest, data


def _template() -> tuple[dict[str, Any], str, str, str]:
    """One ledger item as the adapter writes it (:func:`item_of`), and the names of the
    attributes holding its partition key, version id and ETag (found by their values, so the
    fixture follows the adapter's layout)."""
    row = LedgerRow(
        bucket=BUCKET,
        key="@key",
        present=True,
        seq=sequencer.normalize("00"),
        raw_seq="00",
        version_id="@version",
        etag="@etag",
        rev=1,
        updated_at=1700000000000,
        history=(
            Decision(
                seq="00",
                event="ObjectCreated:Put",
                reason="newer-sequencer",
                source="live",
                at=1700000000000,
                state="present",
            ),
        ),
        op="apply",
        change_id="0" * 32,
        change_seq="00",
    )
    item = item_of(row)
    by_value = {str(next(iter(av.values()))): name for name, av in item.items()}
    return item, by_value[f"{BUCKET}/@key"], by_value["@version"], by_value["@etag"]


_ITEM, _PK, _VERSION, _ETAG = _template()
#: Size DynamoDB counts for a ledger item of this fixture (its attribute names and values), bytes:
#: what fills a 1 MB Scan page (before the projection).
ITEM_BYTES = item_size(_ITEM)


def ledger_item(i: int) -> dict[str, Any] | None:
    kind = drift_kind(i)
    if kind == "missing":
        return None
    item = dict(_ITEM)
    item[_PK] = {"S": f"{BUCKET}/{key_of(i)}"}
    item[_VERSION] = {"S": f"v{i}"}
    item[_ETAG] = {"S": etag_of(i, kind == "content_mismatch")}
    return item


class FakeDynamoHttp:
    """Answers DynamoDB Scan and GetItem at the HTTP layer, from a generated ledger of n rows."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.requests: dict[str, int] = {}

    def __call__(self, request: Any, **_: Any) -> AWSResponse:
        op = request.headers["X-Amz-Target"].decode().split(".")[-1]
        self.requests[op] = self.requests.get(op, 0) + 1
        body = json.loads(request.body)
        payload = self._scan(body) if op == "Scan" else self._get(body)
        raw = _Raw(json.dumps(payload).encode())
        headers = {"content-type": "application/x-amz-json-1.0"}
        # AWSResponse wraps any mapping in a HeadersDict; botocore-stubs asks for HTTPHeaders
        return AWSResponse(request.url, 200, headers, raw)  # type: ignore[arg-type]

    def _get(self, body: dict[str, Any]) -> dict[str, Any]:
        item = ledger_item(index_of(body["Key"]["pk"]["S"].split("/", 1)[1]))
        return {"Item": item} if item else {}

    def _scan(self, body: dict[str, Any]) -> dict[str, Any]:
        seg, total = body["Segment"], body["TotalSegments"]
        start = body.get("ExclusiveStartKey")
        i = index_of(start["pk"]["S"].split("/", 1)[1]) + total if start else seg
        names = body.get("ExpressionAttributeNames", {})
        wanted = [names.get(p.strip(), p.strip()) for p in body["ProjectionExpression"].split(",")]
        items, size = [], 0
        limit = int(body.get("Limit", self.n))  # items evaluated per page, at most
        evaluated = 0
        while i < self.n and size < PAGE_BYTES and evaluated < limit:
            evaluated += 1
            item = ledger_item(i)
            if item is not None:
                items.append({k: item[k] for k in wanted if k in item})
                size += ITEM_BYTES
            last = i
            i += total
        out: dict[str, Any] = {"Items": items, "Count": len(items), "ScannedCount": len(items)}
        if i < self.n:
            out["LastEvaluatedKey"] = {"pk": {"S": f"{BUCKET}/{key_of(last)}"}}
        return out


class _Raw:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_: Any) -> Any:
        yield self.data


def _client(fake: FakeDynamoHttp) -> Any:
    client = boto3.client(
        "dynamodb", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    # a before-send handler that returns a response short-circuits the HTTP send (botocore's
    # event system); botocore-stubs types every handler as returning None
    client.meta.events.register("before-send.dynamodb", fake)  # type: ignore[arg-type]
    return client


def ours(n: int) -> dict[str, Any]:
    manifest, data = inventory(n)
    fake = FakeDynamoHttp(n)
    reconciler = wiring.reconciler(
        s3=None, dynamodb=_client(fake), sqs=None, bucket=BUCKET, table="ledger", queue_url="unused"
    )
    report = ReconcileReport(source="inventory", bucket=BUCKET, prefix="", dry_run=True)
    started = time.perf_counter()
    truth = bucket_truth(read_rows(manifest, data))
    drifts = list(
        diff(
            truth,
            reconciler.scan_ledger(report, lambda p, c: None),
            taken_at_ms=manifest.created_ms,
            compare_versions=True,
            compare_etags=True,
        )
    )
    elapsed = time.perf_counter() - started
    kinds: dict[str, int] = {}
    for d in drifts:
        kinds[d.kind] = kinds.get(d.kind, 0) + 1
    return {"seconds": elapsed, "requests": fake.requests, "drift": kinds}


def baseline(n: int) -> dict[str, Any]:
    _, data = inventory(n)
    fake = FakeDynamoHttp(n)
    client = _client(fake)
    started = time.perf_counter()
    kinds: dict[str, int] = {}
    text = gzip.decompress(data).decode()
    for row in csv.reader(io.StringIO(text)):
        if row[3] != "true":
            continue
        key = unquote_plus(row[1])
        item = client.get_item(
            TableName="ledger", Key={"pk": {"S": f"{BUCKET}/{key}"}}, ConsistentRead=True
        ).get("Item")
        visible = row[4] != "true"
        kind = None
        ledger = row_from_item(item) if item else None
        if ledger is None or not ledger.present:
            kind = "missing" if visible else None
        elif not visible:
            kind = "deleted_but_live"
        elif ledger.etag != row[7] or ledger.version_id != row[2]:
            kind = "content_mismatch"
        if kind:
            kinds[kind] = kinds.get(kind, 0) + 1
    return {"seconds": time.perf_counter() - started, "requests": fake.requests, "drift": kinds}


def _child(name: str, n: int, conn: Any) -> None:
    result = {"ours": ours, "baseline": baseline}[name](n)
    result["peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    conn.send(result)


def _run_child(name: str, n: int) -> dict[str, Any]:
    parent, child = multiprocessing.get_context("fork").Pipe()
    proc = multiprocessing.get_context("fork").Process(target=_child, args=(name, n, child))
    proc.start()
    result: dict[str, Any] = parent.recv()
    proc.join()
    return result


def run(rows: int = 1_000_000, baseline_rows: int | None = None) -> None:
    """Print the figures. ``baseline_rows`` runs the baseline on fewer rows and scales its time
    linearly (one GetItem per key is linear by construction); by default it runs on all."""
    mine = _run_child("ours", rows)
    base_n = min(baseline_rows, rows) if baseline_rows else rows
    base = _run_child("baseline", base_n)
    base_seconds = base["seconds"] * rows / base_n
    mine_requests = sum(mine["requests"].values())
    print(
        f"   rows {rows:,} (1% drift); ours: {mine['seconds']:.1f} s, peak "
        f"{mine['peak_mib']:.0f} MiB, ledger requests {mine['requests']} = "
        f"{mine_requests / rows:.5f} per key"
    )
    print(f"   ours found {json.dumps(mine['drift'], sort_keys=True)}")
    scaled = "" if base_n == rows else f" (measured on {base_n:,} rows, scaled)"
    print(
        f"   baseline (csv + GetItem per key): {base_seconds:.1f} s{scaled}, peak "
        f"{base['peak_mib']:.0f} MiB, {sum(base['requests'].values()) / base_n:.3f} "
        f"requests per key; found {json.dumps(base['drift'], sort_keys=True)}"
    )
    print(
        f"   speed-up {base_seconds / mine['seconds']:.1f}x  (target >= 5); peak "
        f"{mine['peak_mib'] / 1024:.2f} GiB (target < 1.5); requests per key "
        f"{mine_requests / rows:.5f} (target < 0.01)"
    )
