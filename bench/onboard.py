"""Onboarding an existing bucket locally: objects per second, requests per object by kind, peak
memory, convergence; then the model of the same onboarding of 50 million objects on AWS.

A versioned bucket that predates the pipeline holds N objects (one in ten with a hostile key:
spaces, ``+``, ``%``, control characters, non-ASCII, a 1,024-byte key) and another team's queue
notification and inventory configurations. :meth:`s3ingest.local.stack.runtime.LocalRuntime.onboard`
runs what ``s3ingest onboard`` runs on AWS: EventBridge delivery switched on, the listing backfill
state machine's execution (Distributed Map over key-range shards, the real handlers), then a
listing reconciliation. Live traffic (puts, overwrites, deletes, delivered duplicated and
reordered) overlaps the backfill. Requests are counted by the emulator per operation.
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections import Counter
from typing import Any

from bench.memory import in_child, peak_mib
from bench.onboard_model import PerObject, report
from s3ingest.local.emulator.chaos import Chaos
from s3ingest.local.emulator.server import ACCOUNT, Emulator
from s3ingest.local.rehearsal.demo import HOSTILE_KEYS
from s3ingest.local.stack.provisioning import LocalBucket
from s3ingest.local.stack.runtime import LocalRuntime, local_settings
from s3ingest.onboard import backfill_summary
from s3ingest.settings import BucketSpec

BUCKET = "bench-existing-bucket"

_WRITES = ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem")
_READS = ("GetItem", "Query", "Scan", "BatchGetItem")


def _keys(objects: int, rng: random.Random) -> list[str]:
    keys = []
    for i in range(objects):
        shard = f"{rng.getrandbits(16):04x}"  # spread over the key space, as hashed keys are
        if i % 10 == 0:
            keys.append(f"{shard}/{i:07d}/{rng.choice(HOSTILE_KEYS)}"[:1024])
        else:
            keys.append(f"{shard}/{i:07d}.json")
    keys.append("z/" + "k" * 1022)  # the longest key S3 takes
    return keys


def _put_before(keys: list[str]) -> None:
    """The bucket's objects from before the pipeline, written into the emulator's S3 backend
    directly (set-up, not measured: through the API it costs ~4 ms of CPU an object)."""
    from moto.s3.models import s3_backends

    backend = s3_backends[ACCOUNT]["aws"]
    for key in keys:
        # without moto's notification to the other team's queue: the queue's own cost grows
        # with its length (set-up of 100k objects would take ~20 minutes)
        backend.put_object(
            BUCKET, key, f"pre-existing {len(key)}".encode(), disable_notification=True
        )


def _by_kind(requests: dict[str, int]) -> dict[str, int]:
    kinds: Counter[str] = Counter()
    for name, count in requests.items():
        service, _, operation = name.partition(":")
        if service == "s3" and operation.startswith("List"):
            kinds["s3 list"] += count
        elif service == "s3" and operation in ("HeadObject", "GetObject"):
            kinds["s3 head/get"] += count
        elif service == "dynamodb" and operation in _WRITES:
            kinds["ledger write"] += count
        elif service == "dynamodb" and operation in _READS:
            kinds["ledger read"] += count
        elif service == "lambda":
            kinds["lambda invoke"] += count
        else:
            kinds[name] += count
    return dict(kinds)


def run(objects: int = 100_000, live_operations: int = 2_000, seed: int = 15) -> dict[str, Any]:
    """Onboard a local existing bucket of ``objects`` objects and print the figures, in a
    spawned child (:func:`bench.memory.in_child`: the peak RSS printed is the run's own)."""
    return in_child(_run, objects, live_operations, seed)


def _run(objects: int, live_operations: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    keys = _keys(objects, rng)
    settings = local_settings(processor=None, change_stream=False)
    with Emulator() as emu:
        rt = LocalRuntime(
            emu,
            settings,
            seed=seed,
            buckets=[
                LocalBucket(
                    BucketSpec(name=BUCKET, existing=True),
                    versioning="Enabled",
                    foreign_config=True,
                )
            ],
        )
        try:
            started = time.perf_counter()
            _put_before(keys)
            print(
                f"   {len(keys)} objects put before the pipeline in "
                f"{time.perf_counter() - started:.0f} s (no events: delivery off)",
                flush=True,
            )
            remaining = live_operations
            live_keys = keys[:]

            def live() -> None:
                nonlocal remaining
                for _ in range(min(remaining, 50)):
                    remaining -= 1
                    roll = rng.random()
                    if roll < 0.2:
                        rt.faithful.delete(rng.choice(live_keys))
                    elif roll < 0.6:
                        rt.faithful.put(rng.choice(live_keys), f"live {rng.random()}")
                    else:
                        key = f"live/{rng.getrandbits(32):08x}.json"
                        live_keys.append(key)
                        rt.faithful.put(key, "new")
                rt.flush(Chaos(seed=rng.randint(0, 999), duplicate=0.2, reorder=True))
                rt.drain()

            before = emu.request_counts()
            rss_before = peak_mib()
            started = time.perf_counter()
            onboarded = rt.onboard(between=live)
            elapsed = time.perf_counter() - started
            during_backfill = live_operations - remaining
            while remaining:
                live()
            requests = emu.request_counts() - before
            comparison = rt.compare()
        finally:
            rt.close()
    kinds = _by_kind(dict(requests))
    total = len(keys)
    print(
        f"   onboarded {total} objects in {elapsed:.0f} s: {total / elapsed:.0f} objects/s "
        f"(status {onboarded['status']}, backfill {onboarded['backfill']['status']}, "
        f"{onboarded['backfill']['shards']} shards); live operations during the backfill "
        f"{during_backfill}, after it {live_operations - during_backfill}"
    )
    per = {kind: count / total for kind, count in sorted(kinds.items())}
    print("   requests per object: " + ", ".join(f"{k} {v:.4f}" for k, v in per.items()))
    print(
        f"   peak RSS {peak_mib():.0f} MiB, the run's own process (VmHWM; before onboarding "
        f"{rss_before:.0f} MiB; the emulator and its objects live in this process too)"
    )
    print(
        f"   converged: {comparison.converged} "
        f"({len(comparison.differences)} differences, {len(comparison.ledger)} ledger rows)"
    )
    summary = backfill_summary(onboarded["backfill"].get("output"))
    backfill_requests = summary.get("requests") or {}
    listed = max(int((summary.get("counts") or {}).get("listed", 0)), 1)
    print(
        "   the listing backfill alone, per listed object: "
        + ", ".join(f"{k} {v / listed:.4f}" for k, v in sorted(backfill_requests.items()))
        + f" (counts {json.dumps(summary.get('counts') or {}, sort_keys=True)})"
    )
    model = PerObject(
        list_requests=(backfill_requests.get("list", 0) + backfill_requests.get("checkpoint", 0))
        / listed,
        ledger_writes=backfill_requests.get("write", 0) / listed,
        ledger_reads=backfill_requests.get("get", 0) / listed,
        heads=backfill_requests.get("head", 0) / listed,
        lambda_invocations=per.get("lambda invoke", 0.0),
    )
    print("   model, 50 million objects on AWS (docs/onboarding-model.md):")
    for line in report(model):
        print(f"     {line}")
    sys.stdout.flush()
    return {
        "objects": total,
        "seconds": elapsed,
        "per_object": per,
        "converged": comparison.converged,
    }
