"""Peak memory of a listing reconciliation on the emulator: the streamed run against the
in-memory one (each key's state of the whole listing in a dict), for N keys.

The emulator (moto's server) runs in a process of its own, filled through moto's S3 backend (the
objects) and BatchWriteItem (the ledger rows), so its storage is not counted; each measurement
runs in a fresh spawned process of its own too, its peak its own ``VmHWM``
(:func:`bench.memory.in_child`, :func:`bench.memory.peak_mib`). The bucket
is unversioned (moto's ListObjectVersions copies the whole bucket per request). Drift: 1% of the
keys missing from the ledger, and 0.1% more ledger rows whose object is gone.

Printed per run: seconds, requests, differences, tracemalloc's peak of the run's own Python
allocations, the process's peak RSS (and its RSS before the run: the interpreter, boto3 and the
clients), and for the streamed run the most rows it held (its internal counter) and the seconds
between its first and last progress tick per phase. The in-memory run only diffs (no HEAD, no
repair): compare memory, not time. Times are moto's (its listing and Scan cost grows with the
bucket per request) on a shared machine. Figures are printed, never asserted.

Run: ``python -m bench.reconcile_listing [N ...] [--streamed-only | --in-memory-only]``
(default: 20000 100000, both).
"""

from __future__ import annotations

import multiprocessing
import os
import time
import tracemalloc
from typing import Any

from bench.memory import in_child, peak_mib

KEYS_DEFAULT = (20_000, 100_000)
MIB = 1024 * 1024


def key_of(i: int) -> str:
    return f"data/{i % 997:03d}/object {i:07d}+v%é.csv"


def _serve(n: int, conn: Any) -> None:
    """The emulator's process: provision, fill, answer until told to stop."""
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    from concurrent.futures import ThreadPoolExecutor

    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    from s3ingest.local.emulator.server import Emulator
    from s3ingest.local.stack.provisioning import provision
    from s3ingest.local.stack.runtime import local_settings
    from s3ingest_fn.adapters.dynamo_ledger import item_of
    from s3ingest_fn.core.row import LedgerRow

    with Emulator() as emu:
        res = provision(emu, local_settings(), versioning=None)
        backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
        etags = {}
        for i in range(n):
            etags[i] = backend.put_object(res.bucket, key_of(i), b"x%d" % i).etag.strip('"')
        ddb = emu.client("dynamodb")

        def item(i: int) -> dict[str, Any]:
            row = LedgerRow(res.bucket, key_of(i), True, etag=etags.get(i, "e"), updated_at=1)
            return {"PutRequest": {"Item": item_of(row)}}

        rows = [i for i in range(n) if i % 100] + list(range(n, n + n // 1000))

        def write(chunk: list[int]) -> None:
            ddb.batch_write_item(RequestItems={res.table: [item(i) for i in chunk]})

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(write, [rows[i : i + 25] for i in range(0, len(rows), 25)]))
        conn.send(
            {
                "endpoint": emu.endpoint_url,
                "bucket": res.bucket,
                "table": res.table,
                "queue": res.queue_url,
            }
        )
        conn.recv()  # stop


def _measured(info: dict[str, Any], mode: str) -> dict[str, Any]:
    import boto3
    from botocore.config import Config

    from s3ingest_fn import wiring
    from s3ingest_fn.core.diff import DiffStats, bucket_truth, diff
    from s3ingest_fn.services.reconcile import ReconcileReport, ReconcileRequest

    session = boto3.session.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
    )

    def client(name: str) -> Any:
        # moto answers a Scan of 100,000 items in minutes, not seconds
        config = Config(read_timeout=900, retries={"max_attempts": 1})
        return session.client(  # type: ignore[call-overload]
            name, endpoint_url=str(info["endpoint"]), config=config
        )

    r = wiring.reconciler(
        s3=client("s3"),
        dynamodb=client("dynamodb"),
        sqs=client("sqs"),
        bucket=info["bucket"],
        table=info["table"],
        queue_url=info["queue"],
    )
    before = peak_mib() * MIB
    tracemalloc.start()
    started = time.perf_counter()
    out: dict[str, Any] = {}
    if mode == "streamed":
        phases: dict[str, list[float]] = {}

        def tick(phase: str, n: int) -> None:
            now = time.perf_counter() - started
            phases.setdefault(phase, [now, now])[1] = now

        report = r.run(ReconcileRequest(source="listing", margin_ms=0), tick)
        out["phases"] = {p: round(b - a, 1) for p, (a, b) in phases.items()}
        out.update(
            drift=report.drift_total,
            repairs=report.repairs_queued,
            requests=report.bucket_requests + report.ledger_requests,
            held=r.held.peak,
        )
    else:
        scratch = ReconcileReport(source="listing", bucket=r.bucket, prefix="", dry_run=True)
        truth = bucket_truth(r.listing.rows(r.bucket, ""))
        drifts = list(
            diff(
                truth,
                r.scan_ledger(scratch, lambda p, n: None),
                taken_at_ms=int(time.time() * 1000),
                compare_versions=True,
                compare_etags=True,
                stats=DiffStats(),
            )
        )
        out.update(drift=len(drifts), repairs=0, requests=None, held=None)
    out["seconds"] = time.perf_counter() - started
    out["traced_peak"] = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    out["rss_before"] = before
    out["rss_peak"] = peak_mib() * MIB
    return out


def run(
    sizes: tuple[int, ...] = KEYS_DEFAULT, modes: tuple[str, ...] = ("streamed", "in-memory")
) -> list[dict[str, Any]]:
    """Measure each size in each mode; print one line per run; return the figures."""
    ctx = multiprocessing.get_context("spawn")
    results = []
    for n in sizes:
        here, there = ctx.Pipe()
        server = ctx.Process(target=_serve, args=(n, there), daemon=True)
        filled = time.perf_counter()
        server.start()
        info = here.recv()
        print(f"   {n:,} keys: emulator filled in {time.perf_counter() - filled:.0f} s", flush=True)
        try:
            for mode in modes:
                try:  # a fresh spawned process: _measured's peak is its own
                    got = in_child(_measured, info, mode)
                except RuntimeError as exc:
                    print(f"   {mode:>9}: failed: {exc}", flush=True)
                    continue
                got.update(keys=n, mode=mode)
                results.append(got)
                held = f", rows held at most {got['held']:,}" if got["held"] is not None else ""
                if "phases" in got:
                    held += f", seconds by phase {got['phases']}"
                print(
                    f"   {mode:>9}: {got['seconds']:6.1f} s, {got['drift']:,} differences, "
                    f"tracemalloc peak {got['traced_peak'] / MIB:6.1f} MiB, "
                    f"peak RSS {got['rss_peak'] / MIB:6.1f} MiB "
                    f"(before the run {got['rss_before'] / MIB:.1f} MiB){held}",
                    flush=True,
                )
        finally:
            here.send("stop")
            server.join(timeout=30)
    return results


if __name__ == "__main__":
    import sys

    args = sys.argv[1:]
    chosen: tuple[str, ...] = ("streamed", "in-memory")
    if "--streamed-only" in args:
        chosen = ("streamed",)
    elif "--in-memory-only" in args:
        chosen = ("in-memory",)
    run(tuple(int(a) for a in args if a.isdigit()) or KEYS_DEFAULT, chosen)
