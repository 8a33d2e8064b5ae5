"""DynamoDB requests per event in a chaotic local run, against a Powertools-Idempotency design.

The run: puts, overwrites, delete markers and deletes of single versions over a few hundred keys
of a versioned bucket, in rounds of 400 operations, every event delivered through EventBridge, SQS
and the real handler with 20% duplication and full reordering within its round, until about
``--events`` deliveries. Every DynamoDB request the
ledger makes is counted by operation (botocore ``before-call`` hook). Target: 1.00 write per
sequenced event; reads only for a delete the bucket contradicts (one GetItem: a delete marker
whose key was written again before its event was handled, CONTRACT C4), so near 0.00. Every
hiding delete and every delete of a single version costs one S3 HEAD (C4, C5).

The baseline: the same deliveries through Powertools' ``idempotent_function`` (DynamoDB
persistence layer, keyed by bucket, key and sequencer) around a plain ledger PutItem, counted the
same way on the same emulator.

Speed: local events per second, the deliveries over the wall time of the whole run (the local
run and the baseline, as ``python -m bench`` reports it), and its ratio to
:data:`EVENTS_PER_SECOND_BEFORE`, and the local run's alone to
:data:`LOCAL_EVENTS_PER_SECOND_BEFORE` (target: at least 5 times). Wall time on a shared machine is
noisy: the figure is reported, not asserted.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from typing import Any

from s3ingest.local.emulator.chaos import Chaos
from s3ingest.local.emulator.server import Emulator
from s3ingest.local.stack.runtime import LocalRuntime

WRITES = {"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"}
READS = {"GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"}
DUPLICATE = 0.2

#: Local events per second before this release's emulator speed-ups (``fast_moto``,
#: ``in_process``): 1968 deliveries in 261.2 s for the whole run (7.53/s; the local run alone
#: 9.46/s), this benchmark's code on commit 488c6db's runtime (``python -m bench --only requests
#: --events 2000``), on the project's 2-core machine, idle, back to back with the run after.
EVENTS_PER_SECOND_BEFORE = 1968 / 261.2
#: The local run alone (the figure the target is about), same run.
LOCAL_EVENTS_PER_SECOND_BEFORE = 9.46
#: The target ratio to :data:`EVENTS_PER_SECOND_BEFORE`.
SPEED_TARGET = 5.0


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


def _count_calls(client: Any) -> Counter[str]:
    calls: Counter[str] = Counter()
    client.meta.events.register(
        "before-call.dynamodb", lambda model, **_: calls.update([model.name])
    )
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
        calls = _count_calls(rt.ddb)
        emitted, delivered = _workload(rt, target_events, seed, version_deletes)
        local_seconds = time.perf_counter() - started
        counts = rt.outcome_counts()
        processed = sum(counts.values())
        writes = sum(n for op, n in calls.items() if op in WRITES)
        reads = sum(n for op, n in calls.items() if op in READS)
        converged = rt.compare().converged
        heads = rt.objects.requests
        chaos = Chaos(seed=seed, duplicate=DUPLICATE, reorder=True)
        base_calls, base_events = _baseline(emu, chaos.schedule(emitted)[0])
    seconds = time.perf_counter() - started
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
    print(f"   reads per sequenced event   {reads / processed:6.3f}  (contradicted deletes only)")
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
    speed = delivered / seconds
    print(
        f"   local events per second     {speed:6.2f}  ({delivered} deliveries in {seconds:.1f} s; "
        f"the local run alone {delivered / local_seconds:.2f}/s)"
    )
    print(
        f"   speed ratio (now / before)  {speed / EVENTS_PER_SECOND_BEFORE:6.2f}  "
        f"(before {EVENTS_PER_SECOND_BEFORE:.2f}/s at 488c6db); the local run alone "
        f"{delivered / local_seconds / LOCAL_EVENTS_PER_SECOND_BEFORE:.2f} "
        f"(before {LOCAL_EVENTS_PER_SECOND_BEFORE:.2f}/s; target {SPEED_TARGET:.0f}x)"
    )
