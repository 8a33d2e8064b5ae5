"""Runs the fan-out reconciliation's steps locally in the order the state machine runs them
(plan; shard the inventory files and the ledger segments; diff every partition; summarize), so
the same step code is exercised on the emulator. Step Functions itself is not emulated."""

from __future__ import annotations

from typing import Any

from s3ingest_fn.services.fanout import FanOut
from s3ingest_fn.services.reconcile import Reconciler


def run_fanout(reconciler: Reconciler, event: dict[str, Any]) -> dict[str, Any]:
    """Plan, shard, diff and summarize; return the summary (the state machine's output)."""
    steps = FanOut(reconciler)
    plan = steps.plan(event)
    common = {"runId": plan["runId"], "partitions": plan["partitions"], "prefix": plan["prefix"]}
    inventory = [
        steps.shard_inventory({**common, "manifest": plan["manifest"], "file": f})
        for f in plan["files"]
    ]
    ledger = [
        steps.shard_ledger({**common, "segment": s, "segments": plan["segments"]})
        for s in plan["segmentList"]
    ]
    partitions = [
        steps.diff_partition(
            {
                **common,
                "partition": p,
                "createdMs": plan["createdMs"],
                "marginMs": plan["marginMs"],
                "dryRun": plan["dryRun"],
                "compareVersions": plan["compareVersions"],
                "compareEtags": plan["compareEtags"],
            }
        )
        for p in plan["partitionList"]
    ]
    return steps.summarize(
        {"plan": plan, "inventory": inventory, "ledger": ledger, "partitions": partitions}
    )
