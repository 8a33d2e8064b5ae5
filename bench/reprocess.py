"""A processor added to a running local stack, brought up to date with every existing key while
live traffic flows: keys per second, DynamoDB requests and write units per key, processor
invocations per key, peak memory; then the model of the same run over 50 million keys on AWS
(:mod:`bench.reprocess_model`).

A versioned bucket holds N objects whose ledger rows predate the processor (written as an
onboarding leaves them, with no effect state for it). The processor ``thumbs`` is configured
(:meth:`~s3ingest.local.stack.runtime.LocalRuntime.configure`, as a deploy would), then
:meth:`~s3ingest.local.stack.runtime.LocalRuntime.reprocess` runs the stack's reprocess state
machine (a Distributed Map over 16 ledger Scan segments, the real handlers) while puts, overwrites
and deletes of the same keys are delivered, duplicated and reordered, through the live path. The
emulator counts every request by operation.
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections import Counter
from typing import Any

from bench.memory import in_child, peak_mib
from bench.reprocess_model import PerKey, report
from s3ingest.local.emulator.chaos import Chaos
from s3ingest.local.emulator.server import ACCOUNT, Emulator
from s3ingest.local.stack.runtime import LocalRuntime, local_settings
from s3ingest_fn.adapters.dynamo_ledger import item_of, item_size, write_units
from s3ingest_fn.core.effects import AppliedChange, PinnedContent, change_id
from s3ingest_fn.core.row import LedgerRow

BUCKET = "bench-reprocess-bucket"

PROCESSOR = {"name": "thumbs", "module": "bench.reprocess:thumbs"}
_WRITES = ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem")


def thumbs(change: AppliedChange, content: PinnedContent | None) -> None:
    """The processor added later: reads the change's bytes (a pinned GetObject)."""
    if content is not None:
        content.read()


def _seed(rt: LocalRuntime, keys: list[str]) -> None:
    """The objects, written into the emulator's S3 backend directly (no events), and their
    ledger rows as an onboarding leaves them, 25 per BatchWriteItem (set-up, not measured)."""
    from moto.s3.models import s3_backends

    backend = s3_backends[ACCOUNT]["aws"]
    items = []
    for key in keys:
        obj = backend.put_object(BUCKET, key, f"object {key}".encode(), disable_notification=True)
        etag = obj.etag.strip('"')
        row = LedgerRow(
            bucket=BUCKET,
            key=key,
            present=True,
            observed=True,
            version_id=obj.version_id,
            etag=etag,
            size=obj.size,
            rev=1,
            event_name="Listing/onboard",
            reason="listed-state",
            source="backfill",
            updated_at=1,
            op="apply",
            change_id=change_id(BUCKET, key, "obs@1", True, obj.version_id, etag),
        )
        items.append(item_of(row))
    for i in range(0, len(items), 25):
        rt.ddb.batch_write_item(
            RequestItems={
                rt.resources.table: [{"PutRequest": {"Item": it}} for it in items[i : i + 25]]
            }
        )


def run(keys_n: int = 100_000, live_operations: int = 2_000, seed: int = 27) -> dict[str, Any]:
    """Reprocess a local bucket of ``keys_n`` objects for one new processor and print the
    figures, in a spawned child (:func:`bench.memory.in_child`: the peak RSS printed is the
    run's own)."""
    return in_child(_run, keys_n, live_operations, seed)


def _run(keys_n: int, live_operations: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    keys = [f"{rng.getrandbits(16):04x}/{i:07d}.json" for i in range(keys_n)]
    settings = local_settings(processor=None, processors=(), change_stream=False)
    with Emulator() as emu:
        rt = LocalRuntime(emu, settings, bucket=BUCKET, versioning="Enabled", seed=seed)
        try:
            started = time.perf_counter()
            _seed(rt, keys)
            print(
                f"   {len(keys)} objects and their ledger rows written in "
                f"{time.perf_counter() - started:.0f} s (set-up)",
                flush=True,
            )
            rt.configure([PROCESSOR])
            remaining = live_operations
            touched: set[str] = set()

            def live() -> None:
                nonlocal remaining
                if not remaining:
                    time.sleep(0.1)
                    return
                for _ in range(min(remaining, 25)):
                    remaining -= 1
                    key = rng.choice(keys)
                    touched.add(key)
                    if rng.random() < 0.2:
                        rt.faithful.delete(key)
                    else:
                        rt.faithful.put(key, f"live {rng.random()}")
                rt.flush(Chaos(seed=rng.randint(0, 999), duplicate=0.2, reorder=True))
                rt.drain()

            before = emu.request_counts()
            rss_before = peak_mib()
            started = time.perf_counter()
            summary = rt.reprocess("thumbs", segments=16, between=live)
            elapsed = time.perf_counter() - started
            requests = emu.request_counts() - before
            not_current = rt.effects_not_current()
            runs = [r for r in rt.effects if r.processor == "thumbs"]
            rows = rt.ledger_rows()
        finally:
            rt.close()
    counts = summary.get("counts") or {}
    ran = max(int(counts.get("run", 0)) + int(counts.get("superseded", 0)), 1)
    writes = sum(n for op, n in requests.items() if op.split(":")[-1] in _WRITES)
    reads = sum(n for op, n in requests.items() if op in ("dynamodb:Scan", "dynamodb:GetItem"))
    units = [write_units(item_size(item_of(r))) for r in rows if r.present]
    by_change = Counter((r.key, r.change_id) for r in runs)
    untouched = Counter(r.key for r in runs if r.key not in touched)
    print(
        f"   reprocessed {keys_n} keys in {elapsed:.0f} s: {keys_n / elapsed:.0f} keys/s "
        f"(execution {summary['execution']['status']}); live operations during the run "
        f"{live_operations - remaining}; counts {json.dumps(counts, sort_keys=True)}"
    )
    print(
        f"   DynamoDB requests per key run: {(writes + reads) / ran:.3f} "
        f"(writes {writes / ran:.3f}, Scan/GetItem {reads / ran:.4f}; the live path's included); "
        f"write units per write: {sum(units) / max(len(units), 1):.2f}"
    )
    print(
        f"   processor invocations per key untouched by live traffic: "
        f"{sum(untouched.values()) / max(keys_n - len(touched), 1):.4f} (target 1.00); "
        f"most runs of one change: {max(by_change.values(), default=0)}"
    )
    print(
        f"   peak RSS {peak_mib():.0f} MiB, the run's own process (VmHWM; before the run "
        f"{rss_before:.0f} MiB; the "
        f"emulator and its objects live in this process too); estimated AWS cost of this run "
        f"${summary.get('estimated_cost_usd')}"
    )
    print(f"   every visible key current for thumbs: {not not_current} ({len(not_current)} not)")
    per = PerKey(
        ledger_writes=(summary.get("requests") or {}).get("write", 0) / ran,
        scan_pages=(summary.get("requests") or {}).get("scan", 0) / max(keys_n, 1),
        processor_runs=(summary.get("requests") or {}).get("invoke", 0) / ran,
        s3_gets=1.0,
    )
    print("   model, 50 million keys on AWS (docs/reprocess.md):")
    for line in report(per):
        print(f"     {line}")
    sys.stdout.flush()
    return {"keys": keys_n, "seconds": elapsed, "current": not not_current}
