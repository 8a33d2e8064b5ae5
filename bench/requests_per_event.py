"""DynamoDB requests per event in a chaotic local run, against a Powertools-Idempotency design.

The run: puts, overwrites, delete markers and deletes of single versions over a few hundred keys
of a versioned bucket, in rounds of 400 operations, every event delivered through EventBridge, SQS
and the real handler with 20% duplication and full reordering within its round, until about
``--events`` deliveries. Every DynamoDB request the
ledger makes is counted by operation (botocore ``before-call`` hook). Target: 1.00 write per
sequenced event. Reads: not 0 (see below; 0.06 to 0.11 per event at 10,000 to 2,000 events).
Every hiding delete and every delete of a single version costs one S3 HEAD (C4, C5).

The baseline: the same deliveries through Powertools' ``idempotent_function`` (DynamoDB
persistence layer, keyed by bucket, key and sequencer) around a plain ledger PutItem, counted the
same way on the same emulator.

Reads: every GetItem is attributed to the ingest code that made it (the caller's frame):
``_removed`` (a hiding delete whose key the bucket still shows: the key was written again
before the delete's event was handled, C4), ``_observe`` (an observation: a delete of a single
version or an event the ledger refused, read before its HEAD, C4/C7), ``rank`` (the
mass-delete breaker's counter). They are what the workload's deletes cost, not a defect: the
figure is printed with its parts.

Speed: the deliveries over the wall time of the local run, for scale only. The comparison with
an earlier runtime, by CPU and side by side in the same run, is :mod:`bench.runtime_speed`
(``python -m bench --only runtime``).
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections import Counter
from typing import Any

from s3ingest.local.emulator.chaos import Chaos
from s3ingest.local.emulator.server import Emulator
from s3ingest.local.stack.runtime import LocalRuntime

WRITES = {"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"}
READS = {"GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"}
DUPLICATE = 0.2

ROUND = 400  # S3 operations per delivery round (moto's SQS costs O(queue length) per send)


def _workload(
    rt: LocalRuntime, target_events: int, seed: int, version_deletes: bool
) -> tuple[list[Any], int]:
    """Rounds of S3 operations, each delivered under chaos and drained; returns the emitted
    events and the deliveries made."""
    rng = random.Random(seed)
    keys = [f"data/{i:04d}/file {i}+x.csv" for i in range(max(10, target_events // 40))]
    versions: dict[str, list[str]] = {k: [] for k in keys}
    ops = int(target_events / (1 + DUPLICATE * 1.25))
    emitted: list[Any] = []
    delivered = 0
    for n in range(ops):
        key = rng.choice(keys)
        roll = rng.random()
        if roll < 0.75 or not versions[key]:
            op = rt.faithful.put(key, f"{key} {rng.random()}")
            if op.version_id:
                versions[key].append(op.version_id)
        elif roll < 0.92 or not version_deletes:
            rt.faithful.delete(key)
        else:
            rt.faithful.delete(key, versions[key].pop(rng.randrange(len(versions[key]))))
        if (n + 1) % ROUND == 0 or n + 1 == ops:
            emitted.extend(rt.faithful.pending)
            delivered += rt.flush(Chaos(seed=seed + n, duplicate=DUPLICATE, reorder=True))
            rt.drain()
            print(f"   ... {n + 1}/{ops} operations, {delivered} deliveries", flush=True)
    return emitted, delivered


#: The ingest functions a GetItem is attributed to (the innermost on the caller's stack).
READ_CALLERS = ("_removed", "_observe", "rank")


def _count_calls(client: Any, reads_by: Counter[str] | None = None) -> Counter[str]:
    """DynamoDB calls of ``client`` by operation; with ``reads_by``, also its GetItems by the
    ingest function that made them (:data:`READ_CALLERS`, else ``other``)."""
    calls: Counter[str] = Counter()

    def count(model: Any, **_: Any) -> None:
        calls.update([model.name])
        if reads_by is not None and model.name in READS:
            frame = sys._getframe(1)
            while frame is not None and frame.f_code.co_name not in READ_CALLERS:
                frame = frame.f_back  # type: ignore[assignment]
            reads_by.update([frame.f_code.co_name if frame is not None else "other"])

    client.meta.events.register("before-call.dynamodb", count)
    return calls


def _baseline(emu: Emulator, events: list[dict[str, Any]]) -> tuple[Counter[str], int]:
    """Powertools idempotency around an unconditional ledger write, on the same deliveries."""
    from aws_lambda_powertools.utilities.idempotency import (
        DynamoDBPersistenceLayer,
        IdempotencyConfig,
        idempotent_function,
    )

    ddb = emu.client("dynamodb")
    for name, key in (("idempotency", "id"), ("baseline-ledger", "pk")):
        ddb.create_table(
            TableName=name,
            BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
        )
    calls = _count_calls(ddb)
    layer = DynamoDBPersistenceLayer(table_name="idempotency", boto3_client=ddb)

    @idempotent_function(
        data_keyword_argument="event",
        persistence_store=layer,
        config=IdempotencyConfig(event_key_jmespath="[bucket, key, sequencer]"),
    )
    def ingest(event: dict[str, Any]) -> dict[str, Any]:
        ddb.put_item(
            TableName="baseline-ledger",
            Item={
                "pk": {"S": f"{event['bucket']}/{event['key']}"},
                "seq": {"S": event["sequencer"]},
            },
        )
        return {"ok": True}

    for e in events:
        obj = e["detail"]["object"]
        ingest(
            event={
                "bucket": e["detail"]["bucket"]["name"],
                "key": obj["key"],
                "sequencer": obj["sequencer"],
            }
        )
    return calls, len(events)


def run(target_events: int, seed: int, version_deletes: bool = True) -> None:
    started = time.perf_counter()
    with Emulator() as emu:
        rt = LocalRuntime(emu, versioning="Enabled", seed=seed)
        reads_by: Counter[str] = Counter()
        calls = _count_calls(rt.ddb, reads_by)
        emitted, delivered = _workload(rt, target_events, seed, version_deletes)
        local_seconds = time.perf_counter() - started
        calls, reads_by = Counter(calls), Counter(reads_by)  # the workload's, not the checks'
        counts = rt.outcome_counts()
        processed = sum(counts.values())
        writes = sum(n for op, n in calls.items() if op in WRITES)
        reads = sum(n for op, n in calls.items() if op in READS)
        converged = rt.compare().converged
        heads = rt.objects.requests
        chaos = Chaos(seed=seed, duplicate=DUPLICATE, reorder=True)
        base_calls, base_events = _baseline(emu, chaos.schedule(emitted)[0])
    base_writes = sum(n for op, n in base_calls.items() if op in WRITES)
    base_reads = sum(n for op, n in base_calls.items() if op in READS)
    print(f"   deletes of single versions in the workload: {version_deletes}")
    print(
        f"   S3 operations {len(emitted)}, events delivered {delivered}, "
        f"records processed {processed}"
    )
    print(f"   outcomes {json.dumps(dict(sorted(counts.items())))}")
    print(f"   DynamoDB calls {json.dumps(dict(sorted(calls.items())))}")
    print(f"   writes per sequenced event  {writes / processed:6.3f}  (target 1.00)")
    parts = ", ".join(f"{name} {n / processed:.3f}" for name, n in sorted(reads_by.items()))
    print(f"   reads per sequenced event   {reads / processed:6.3f}  (by caller: {parts or '-'})")
    keys = max(10, target_events // 40)
    print(
        "     _removed: one GetItem per hiding delete the bucket contradicts (the key was put "
        "again before the delete's event was handled, C4); _observe: a delete of a single "
        "version or a refused event, read before its HEAD (C4/C7); rank: the mass-delete "
        f"breaker. The workload puts and deletes over {keys} keys, about "
        f"{ROUND / keys:.1f} operations per key per round of {ROUND} delivered reordered: "
        "the fewer the keys, the more deletes are contradicted"
    )
    print(f"   S3 HEADs per event          {heads / processed:6.3f}  (deletes: C4; stale: C5)")
    print(f"   converged                   {converged}")
    print(f"   baseline (Powertools idempotency + ledger PutItem), {base_events} deliveries:")
    print(f"     DynamoDB calls {json.dumps(dict(sorted(base_calls.items())))}")
    print(
        f"     writes per event {base_writes / base_events:6.3f}, "
        f"reads per event {base_reads / base_events:6.3f}"
    )
    print(
        f"   ratio of writes (s3ingest / baseline) "
        f"{(writes / processed) / (base_writes / base_events):6.3f}"
    )
    print(
        f"   local events per second     {delivered / local_seconds:6.2f}  (wall, for scale; "
        "against the earlier runtime by CPU: python -m bench --only runtime)"
    )
