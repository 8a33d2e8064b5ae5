"""The reconciliation diff at scale: N inventory rows against N ledger rows with 1% drift, side
by side in one run, repeated.

Three sides, each in its own spawned child process (:func:`bench.memory.in_child`: a fresh
interpreter, its peak RSS the kernel's ``VmHWM`` since its ``exec``, its own; its
``ru_maxrss`` would start at the parent's peak); it holds the interpreter, the imports, the
report's bytes and what the side builds):

- **columnar** (what ships where pyarrow is importable: the reconcile function, the CLI, the
  local runtime):
  :func:`~s3ingest_fn.services.reconcile_columnar.truth_table` over the gzip CSV, the real
  parallel Scan (:meth:`Reconciler.pump_pages`, 8 segments, pages read by ``json.loads`` of the
  raw body into columns) and :func:`~s3ingest_fn.services.reconcile_columnar.diff_columns`;
- **per-key** (the pass before it, still the fallback without pyarrow): the stdlib-csv inventory
  reader, :func:`bucket_truth`, the same Scan parsed by botocore into rows, :func:`diff`;
- **baseline**: the standard-library csv module with one GetItem per key.

All talk to DynamoDB through a real botocore client (requests serialised and signed, answers
parsed as each side parses them); only the HTTP exchange is answered in-process by a
``before-send`` handler that reads the answer's bytes from a file the parent wrote BEFORE any
timer starts (one ``pread`` per request: the fixture is in the page cache, not in the side's
RSS, and costs the side a copy of the bytes, as a socket read would). No network latency is
counted, so the baseline's one-request-per-key cost is its botocore CPU alone, a lower bound.

Figures: CPU (the child's user + system time over the timed window, every thread) and wall
time, the ratio of each side to the baseline per repeat (min/median/max), peak RSS, requests per
key. The baseline runs on ``baseline_rows`` keys and is scaled linearly (one GetItem per key is
linear by construction). Targets (issue 37): the columnar side >= 50x the baseline by CPU and
wall, <= 300 MiB peak, no more requests per key than before.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import os
import resource
import statistics
import tempfile
import time
from typing import Any
from urllib.parse import quote_plus, unquote_plus

from bench.memory import in_child, peak_mib

SCHEMA = "Bucket, Key, VersionId, IsLatest, IsDeleteMarker, Size, LastModifiedDate, ETag"
BUCKET = "bench-bucket"
PAGE_BYTES = 1_000_000  # DynamoDB returns at most 1 MB per Scan page
SEGMENTS = 8  # s3ingest_fn.services.reconcile.SCAN_SEGMENTS
TAKEN_MS = 1_800_000_000_000


def key_of(i: int) -> str:
    return f"data/{i % 997:03d}/object {i:07d}+v.csv"


def etag_of(i: int, drifted: bool = False) -> str:
    return hashlib.md5(f"{i}{'x' if drifted else ''}".encode()).hexdigest()


def drift_kind(i: int) -> str | None:
    """1% drift: a third each missing from the ledger, deleted in the bucket, other ETag."""
    return {0: "missing", 100: "deleted_but_live", 200: "content_mismatch"}.get(i % 300)


def inventory(n: int) -> bytes:
    """The report's one gzip CSV data file."""
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
    return gzip.compress(out.getvalue().encode(), compresslevel=1)


def manifest() -> Any:
    from s3ingest_fn.services.inventory import Manifest

    columns = tuple(c.strip() for c in SCHEMA.split(","))
    return Manifest(BUCKET, "inv", TAKEN_MS, "CSV", columns, ("data.csv.gz",))


def _template() -> tuple[dict[str, Any], str, str, str]:
    """One ledger item as the adapter writes it (:func:`item_of`), and the names of the
    attributes holding its partition key, version id and ETag (found by their values, so the
    fixture follows the adapter's layout)."""
    from s3ingest_fn.adapters.dynamo_ledger import item_of
    from s3ingest_fn.core import sequencer
    from s3ingest_fn.core.row import Decision, LedgerRow

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


def ledger_item(template: Any, i: int) -> dict[str, Any] | None:
    item, pk, version, etag = template
    kind = drift_kind(i)
    if kind == "missing":
        return None
    out = dict(item)
    out[pk] = {"S": f"{BUCKET}/{key_of(i)}"}
    out[version] = {"S": f"v{i}"}
    out[etag] = {"S": etag_of(i, kind == "content_mismatch")}
    return out


def _answer(request: Any, body: bytes) -> Any:
    from botocore.awsrequest import AWSResponse

    headers = {"content-type": "application/x-amz-json-1.0"}
    return AWSResponse(request.url, 200, headers, _Raw(body))  # type: ignore[arg-type]


class _Raw:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_: Any) -> Any:
        yield self.data


def build(n: int, baseline_rows: int, folder: str) -> None:
    """Write the fixture: the report, every Scan answer of an 8-segment Scan projected as the
    scanner asks (``Limit`` and the 1 MB cap as DynamoDB applies them), every GetItem answer of
    the baseline's keys; each answer's place in ``index.json``."""
    from s3ingest_fn.adapters.dynamo_ledger import item_size
    from s3ingest_fn.adapters.dynamo_ledger.scan import SCAN_PAGE_ROWS, DynamoLedgerScanner

    with open(os.path.join(folder, "data.csv.gz"), "wb") as f:
        f.write(inventory(n))
    template = _template()
    item_bytes = item_size(template[0])
    wanted = DynamoLedgerScanner(None, "ledger")._attributes  # type: ignore[arg-type]
    index: dict[str, Any] = {"scan": {}, "get": {}}
    with open(os.path.join(folder, "answers.bin"), "wb") as f:
        for seg in range(SEGMENTS):
            i, start = seg, ""
            while True:
                items, size, evaluated, last = [], 0, 0, i
                while i < n and size < PAGE_BYTES and evaluated < SCAN_PAGE_ROWS:
                    evaluated += 1
                    item = ledger_item(template, i)
                    if item is not None:
                        items.append({k: item[k] for k in wanted if k in item})
                        size += item_bytes
                    last = i
                    i += SEGMENTS
                out: dict[str, Any] = {"Items": items, "Count": len(items)}
                out["ScannedCount"] = evaluated
                if i < n:
                    out["LastEvaluatedKey"] = {"pk": {"S": f"{BUCKET}/{key_of(last)}"}}
                data = json.dumps(out, separators=(",", ":")).encode()
                index["scan"][f"{seg}|{start}"] = (f.tell(), len(data))
                f.write(data)
                if i >= n:
                    break
                start = f"{BUCKET}/{key_of(last)}"
        for j in range(baseline_rows):
            item = ledger_item(template, j)
            data = json.dumps({"Item": item} if item else {}, separators=(",", ":")).encode()
            index["get"][f"{BUCKET}/{key_of(j)}"] = (f.tell(), len(data))
            f.write(data)
    with open(os.path.join(folder, "index.json"), "w") as f:
        json.dump(index, f)


class FakeDynamoHttp:
    """Answers Scan and GetItem from the fixture's bytes (one read per request)."""

    def __init__(self, folder: str, part: str) -> None:
        with open(os.path.join(folder, "index.json")) as f:
            self.index = json.load(f)[part]
        self.fd = os.open(os.path.join(folder, "answers.bin"), os.O_RDONLY)
        self.requests: dict[str, int] = {}

    def __call__(self, request: Any, **_: Any) -> Any:
        op = request.headers["X-Amz-Target"].decode().split(".")[-1]
        self.requests[op] = self.requests.get(op, 0) + 1
        body = json.loads(request.body)
        if op == "Scan":
            start = body.get("ExclusiveStartKey", {}).get("pk", {}).get("S", "")
            where = self.index[f"{body['Segment']}|{start}"]
        else:
            where = self.index[body["Key"]["pk"]["S"]]
        return _answer(request, os.pread(self.fd, where[1], where[0]))


def _client(fake: FakeDynamoHttp) -> Any:
    import boto3

    client = boto3.client(
        "dynamodb", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    # a before-send handler that returns a response short-circuits the HTTP send (botocore's
    # event system)
    client.meta.events.register("before-send.dynamodb", fake)
    return client


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _kinds(drifts: Any) -> dict[str, int]:
    kinds: dict[str, int] = {}
    for d in drifts:
        kinds[d.kind] = kinds.get(d.kind, 0) + 1
    return kinds


def columnar(folder: str, n: int) -> dict[str, Any]:
    from s3ingest_fn import wiring
    from s3ingest_fn.core.diff import DiffStats
    from s3ingest_fn.services import reconcile_columnar as rc
    from s3ingest_fn.services.reconcile import ReconcileReport

    with open(os.path.join(folder, "data.csv.gz"), "rb") as f:
        data = f.read()
    fake = FakeDynamoHttp(folder, "scan")
    reconciler = wiring.reconciler(
        s3=None, dynamodb=_client(fake), sqs=None, bucket=BUCKET, table="ledger", queue_url="-"
    )
    report = ReconcileReport(source="inventory", bucket=BUCKET, prefix="", dry_run=True)
    scanner: Any = reconciler.scanner

    def pages_of(segment: int, total: int) -> Any:
        return scanner.column_pages(BUCKET, segment, total)

    cpu, wall = _cpu(), time.perf_counter()
    truth = rc.truth_table(manifest(), [data])
    drifts = list(
        rc.diff_columns(
            truth,
            reconciler.pump_pages(pages_of, report, lambda p, c: None),
            taken_at_ms=TAKEN_MS,
            compare_versions=True,
            compare_etags=True,
            stats=DiffStats(),
        )
    )
    cpu, wall = _cpu() - cpu, time.perf_counter() - wall
    return {"cpu": cpu, "wall": wall, "requests": fake.requests, "drift": _kinds(drifts)}


def per_key(folder: str, n: int) -> dict[str, Any]:
    from s3ingest_fn import wiring
    from s3ingest_fn.core.diff import bucket_truth, diff
    from s3ingest_fn.services.inventory import read_rows
    from s3ingest_fn.services.reconcile import ReconcileReport

    with open(os.path.join(folder, "data.csv.gz"), "rb") as f:
        data = f.read()
    fake = FakeDynamoHttp(folder, "scan")
    reconciler = wiring.reconciler(
        s3=None, dynamodb=_client(fake), sqs=None, bucket=BUCKET, table="ledger", queue_url="-"
    )
    report = ReconcileReport(source="inventory", bucket=BUCKET, prefix="", dry_run=True)
    cpu, wall = _cpu(), time.perf_counter()
    truth = bucket_truth(read_rows(manifest(), data))
    drifts = list(
        diff(
            truth,
            reconciler.scan_ledger(report, lambda p, c: None),
            taken_at_ms=TAKEN_MS,
            compare_versions=True,
            compare_etags=True,
        )
    )
    cpu, wall = _cpu() - cpu, time.perf_counter() - wall
    return {"cpu": cpu, "wall": wall, "requests": fake.requests, "drift": _kinds(drifts)}


def baseline(folder: str, n: int) -> dict[str, Any]:
    from s3ingest_fn.adapters.dynamo_ledger import row_from_item

    with open(os.path.join(folder, "data.csv.gz"), "rb") as f:
        data = f.read()
    fake = FakeDynamoHttp(folder, "get")
    client = _client(fake)
    kinds: dict[str, int] = {}
    cpu, wall = _cpu(), time.perf_counter()
    text = gzip.decompress(data).decode()
    for row in csv.reader(io.StringIO(text)):
        if row[3] != "true":
            continue
        key = unquote_plus(row[1])
        if int(key.rsplit(" ", 1)[1].split("+", 1)[0]) >= n:
            break  # the baseline's share of the report
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
    cpu, wall = _cpu() - cpu, time.perf_counter() - wall
    return {"cpu": cpu, "wall": wall, "requests": fake.requests, "drift": kinds}


SIDES = {"columnar": columnar, "per-key": per_key, "baseline": baseline}


def _child(name: str, folder: str, n: int) -> dict[str, Any]:
    result = SIDES[name](folder, n)
    result["peak_mib"] = peak_mib()
    return result


def _run_child(name: str, folder: str, n: int) -> dict[str, Any]:
    return in_child(_child, name, folder, n)


def _spread(values: list[float]) -> str:
    return f"{min(values):.1f} / {statistics.median(values):.1f} / {max(values):.1f}"


def run(
    rows: int = 1_000_000,
    baseline_rows: int | None = None,
    repeats: int = 3,
    sides: tuple[str, ...] = ("columnar", "per-key"),
) -> dict[str, Any]:
    """Print the figures (and return them). ``baseline_rows`` runs the baseline on fewer keys
    and scales its times linearly; 0 or None runs it on all."""
    base_n = min(baseline_rows, rows) if baseline_rows else rows
    out: dict[str, Any] = {name: [] for name in (*sides, "baseline")}
    with tempfile.TemporaryDirectory(prefix="bench-reconcile-") as folder:
        started = time.perf_counter()
        build(rows, base_n, folder)
        print(f"   fixture built in {time.perf_counter() - started:.0f} s (untimed), {rows:,} rows")
        for _ in range(repeats):  # interleaved: a load change hits every side alike
            for name in sides:
                out[name].append(_run_child(name, folder, rows))
            out["baseline"].append(_run_child("baseline", folder, base_n))
    scale = rows / base_n
    base = out["baseline"]
    scaled = "" if base_n == rows else f", measured on {base_n:,} keys and scaled x{scale:g}"
    print(
        f"   baseline (csv + GetItem per key): CPU {_spread([b['cpu'] * scale for b in base])} s, "
        f"wall {_spread([b['wall'] * scale for b in base])} s (min/median/max{scaled}); peak "
        f"{max(b['peak_mib'] for b in base):.0f} MiB; "
        f"{sum(base[0]['requests'].values()) / base_n:.3f} requests per key; "
        f"found {json.dumps(base[0]['drift'], sort_keys=True)}"
    )
    for name in sides:
        mine = out[name]
        cpu_x = [b["cpu"] * scale / m["cpu"] for m, b in zip(mine, base, strict=True)]
        wall_x = [b["wall"] * scale / m["wall"] for m, b in zip(mine, base, strict=True)]
        requests = sum(mine[0]["requests"].values())
        print(
            f"   {name}: CPU {_spread([m['cpu'] for m in mine])} s, wall "
            f"{_spread([m['wall'] for m in mine])} s; peak "
            f"{_spread([m['peak_mib'] for m in mine])} MiB; {requests:,} Scan requests = "
            f"{requests / rows:.5f} per key; found {json.dumps(mine[0]['drift'], sort_keys=True)}"
        )
        print(
            f"   {name} vs baseline: CPU {_spread(cpu_x)}x, wall {_spread(wall_x)}x "
            "(min/median/max over repeats; target >= 50x for columnar)"
        )
    print(
        "   peak: each side's spawned child's own peak RSS (VmHWM: interpreter, imports, the "
        "report's bytes and all it builds; the fixture's answers are read from a file per "
        "request); target <= 300 MiB for columnar"
    )
    return out
