"""Reconciliation fanned out over Step Functions, for buckets larger than one Lambda run handles.

A hash-partitioned diff in three map phases, each step a Lambda invocation of
:func:`~s3ingest_fn.handlers.reconcile_fanout.handler` with an ``action``:

1. ``plan``: find the newest inventory manifest, verify its checksum; return the data files, the
   ledger's Scan segments and the partitions to the state machine.
2. ``shard_inventory`` (Distributed Map, one child per inventory data file) and ``shard_ledger``
   (Map, one child per parallel-Scan segment), in parallel: each reads its slice and writes it,
   split by ``hash(key) % partitions``, as gzip JSON Lines shards to a work prefix of the
   inventory bucket (expired by a lifecycle rule). Only each key's latest inventory row is kept.
3. ``diff_partition`` (Map, one child per partition): read the partition's inventory and ledger
   shards, diff them with the same :func:`~s3ingest_fn.core.diff.diff` as the single run,
   confirm with HEADs and queue repairs in parallel batches (the single run's
   :class:`~s3ingest_fn.services.reconcile.RepairBatch`).
4. ``summarize``: add the children's counts up, emit the drift metrics.

With the plan's ``attest`` (the schedule's), each ``diff_partition`` child also writes its
partition's sorted run of attestation leaves, and the handler's ``summarize`` merges them into
the bucket's attestation (:mod:`s3ingest_fn.services.attestation_fanout`,
:meth:`FanOut.attestation`).

Every key's inventory row and ledger row land in the same partition, so each partition's diff is
exact; memory per child is bounded by the partition count.

Several buckets: the machine's input names one (``{"bucket": B}``; default the first of the
pipeline's). The plan's ``runId`` starts with it (``<bucket>/<hex>``) and its output carries it,
so each step finds its bucket in its event (``bucket``, ``plan.bucket``, or the run id's first
part: :func:`bucket_of`). Only keys in the bucket's scope count; ledger rows outside it are
counted apart (``out_of_scope``), never repaired.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from s3ingest_fn.core.diff import (
    DRIFT_KINDS,
    DiffStats,
    Truth,
    bucket_truth,
    diff,
    suspect_sequencer,
)
from s3ingest_fn.core.effects import EffectTarget
from s3ingest_fn.core.row import Effect, LedgerRow
from s3ingest_fn.services.attestation import Attestation
from s3ingest_fn.services.attestation_fanout import (
    SIDE,
    attestation,
    done_of,
    restore,
    tap_of,
    targets_of,
    write_run,
)
from s3ingest_fn.services.inventory import read_rows
from s3ingest_fn.services.reconcile import (
    CONCURRENCY,
    DEFAULT_MARGIN_MS,
    INVENTORY,
    Reconciler,
    ReconcileReport,
    RepairBatch,
)
from s3ingest_fn.services.reconcile_run import BEHIND_SAMPLES

WORK_PREFIX = "reconcile-work/"
#: 64 partitions of ~500 B a key (key by key) at the default 3,008 MiB hold 3.9e8 keys; a 5e7
#: bucket needs 9 by memory, and 64 gives 473 MiB a child: s3ingest/reconcile_sizing.py.
DEFAULT_PARTITIONS = 64
DEFAULT_SEGMENTS = 16


def bucket_of(event: dict[str, Any]) -> str | None:
    """The bucket a step works on: the event's ``bucket``, its plan's, or the first part of a
    ``<bucket>/<hex>`` run id; None (the default bucket) for a run id without one (a run
    started before several buckets were supported)."""
    found = event.get("plan")
    plan: dict[str, Any] = found if isinstance(found, dict) else {}
    named = event.get("bucket") or plan.get("bucket")
    if named:
        return str(named)
    run = str(event.get("runId") or plan.get("runId") or "")
    return run.split("/", 1)[0] if "/" in run else None


def partition_of(key: str, partitions: int) -> int:
    """The partition of a key: stable across processes (not Python's salted ``hash``)."""
    return (
        int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "big")
        % partitions
    )


class FanOut:
    """The fan-out steps, over a :class:`Reconciler` (its ports, bucket, ledger and queue);
    the work shards go to its inventory store, in the inventory bucket."""

    def __init__(self, reconciler: Reconciler) -> None:
        self.r = reconciler
        self._store = reconciler.inventory

    def plan(self, event: dict[str, Any]) -> dict[str, Any]:
        """``{"manifest"?, "partitions"?, "segments"?, "prefix"?, "dryRun"?, "marginSeconds"?}``
        -> the run's plan."""
        manifest_key = event.get("manifest") or self.r.newest_manifest()
        manifest = self.r.manifest(manifest_key)
        partitions = int(event.get("partitions", DEFAULT_PARTITIONS))
        segments = int(event.get("segments", DEFAULT_SEGMENTS))
        margin = event.get("marginSeconds")
        return {
            "runId": event.get("runId") or f"{self.r.bucket}/{uuid.uuid4().hex}",
            "bucket": self.r.bucket,
            "manifest": manifest_key,
            "createdMs": manifest.created_ms,
            "files": list(manifest.files),
            "partitions": partitions,
            "partitionList": list(range(partitions)),
            "segments": segments,
            "segmentList": list(range(segments)),
            "prefix": str(event.get("prefix") or ""),
            "dryRun": bool(event.get("dryRun", False)),
            "marginMs": int(margin) * 1000 if margin is not None else DEFAULT_MARGIN_MS[INVENTORY],
            "compareVersions": "VersionId" in manifest.columns or "version_id" in manifest.columns,
            "compareEtags": "ETag" in manifest.columns or "e_tag" in manifest.columns,
            # the diff's children write sorted runs of the leaves for summarize's attestation
            "attest": bool(event.get("attest")) and not bool(event.get("dryRun", False)),
        }

    def shard_inventory(self, event: dict[str, Any]) -> dict[str, Any]:
        """``{"runId", "manifest", "file", "partitions", "prefix"}``: split one data file."""
        manifest = self.r.manifest(event["manifest"])
        rows = read_rows(manifest, self.r.get_inventory_object(event["file"]))
        truth = bucket_truth(rows, prefix=event.get("prefix", ""))
        contains = self.r.scope.contains
        truth = {k: t for k, t in truth.items() if contains(k)}
        records = (
            [k, t.visible, t.version_id, t.etag, t.last_modified_ms] for k, t in truth.items()
        )
        name = hashlib.sha1(event["file"].encode()).hexdigest()[:16]
        written = self._write_shards(
            event["runId"], "inventory", name, records, int(event["partitions"])
        )
        return {"file": event["file"], "keys": len(truth), "shards": written}

    def shard_ledger(self, event: dict[str, Any]) -> dict[str, Any]:
        """``{"runId", "segment", "segments", "partitions"}``: split one Scan segment; its held
        effects are counted here (``heldEffects``, ``heldOldestSeconds``: held changes are
        never drift, so the diff does not see them)."""
        scanned, requests = self.r.scan_segment(int(event["segment"]), int(event["segments"]))
        prefix, contains = str(event.get("prefix") or ""), self.r.scope.contains
        rows = [r for r in scanned if not r.key.startswith(prefix) or contains(r.key)]
        out_of_scope = len(scanned) - len(rows)
        del scanned
        held = ReconcileReport(source=INVENTORY, bucket=self.r.bucket, prefix="", dry_run=True)
        now_ms = int(self.r.now() * 1000)
        for row in rows:
            if row.key.startswith(prefix):
                held.count_held(row, now_ms, self.r.targets)
        targets = targets_of(self.r)
        records = (_ledger_record(r, now_ms / 1000, targets) for r in rows)
        written = self._write_shards(
            event["runId"],
            "ledger",
            f"segment-{event['segment']}",
            records,
            int(event["partitions"]),
        )
        return {
            "segment": event["segment"],
            "rows": len(rows),
            "requests": requests,
            "shards": written,
            "outOfScope": out_of_scope,
            "heldEffects": held.held_effects,
            "heldOldestSeconds": held.held_oldest_seconds,
            "effectsBehindByProcessor": held.effects_behind_by_processor,
            "behindSamples": held.behind_samples,
        }

    def diff_partition(self, event: dict[str, Any]) -> dict[str, Any]:
        """``{"runId", "partition", "createdMs", "marginMs", "dryRun", "compareVersions",
        "compareEtags", "prefix"}``: diff one partition, confirm, queue repairs."""
        run, p = event["runId"], int(event["partition"])
        truth = {
            rec[0]: Truth(rec[1], rec[2], rec[3], rec[4])
            for rec in self._read_shards(run, "inventory", p)
        }
        ledger = (_ledger_row(self.r.bucket, rec) for rec in self._read_shards(run, "ledger", p))
        report = ReconcileReport(
            source=INVENTORY,
            bucket=self.r.bucket,
            prefix=event.get("prefix", ""),
            dry_run=bool(event["dryRun"]),
        )
        stats = DiffStats(snapshot_ms=int(event["createdMs"]))
        tap = tap_of(self.r, event) if event.get("attest") else None
        with ThreadPoolExecutor(max_workers=CONCURRENCY) as pool:
            batch = RepairBatch(self.r, report, lambda phase, n: None, report.dry_run, pool)
            if tap is not None:
                batch.queued = tap.queued
            for d in diff(
                truth,
                ledger,
                taken_at_ms=int(event["createdMs"]) - int(event["marginMs"]),
                compare_versions=bool(event["compareVersions"]),
                compare_etags=bool(event["compareEtags"]),
                stats=stats,
                prefix=event.get("prefix", ""),
                tap=tap,
            ):
                report.count(d)
                batch.add(d)
                if batch.full:
                    batch.flush()
            batch.flush()
        attested: dict[str, Any] = {}
        if tap is not None:
            written = write_run(tap, lambda i, body: self._put_run(run, p, i, body))
            attested = {"attestLines": written["lines"]}
        return {
            **attested,
            "partition": p,
            "ledgerRows": stats.ledger_rows,
            "skippedRecent": stats.skipped_recent,
            "skippedAfterSnapshot": stats.skipped_after_snapshot,
            "drift": report.drift,
            "resolvedOnHead": report.resolved_on_head,
            "repairsQueued": report.repairs_queued,
            "pendingEffects": report.pending_effects,
            "effectsBehind": report.effects_behind,
            "samples": [sample["key"] for sample in report.samples[:5]],
        }

    @staticmethod
    def summarize(event: dict[str, Any]) -> dict[str, Any]:
        """``{"plan", "inventory": [...], "ledger": [...], "partitions": [...]}`` -> totals."""
        parts = event.get("partitions", [])
        drift = {k: sum(int(p["drift"][k]) for p in parts) for k in DRIFT_KINDS}
        return {
            "source": INVENTORY,
            "bucket": event.get("plan", {}).get("bucket"),
            "manifest": event.get("plan", {}).get("manifest"),
            "bucket_keys": sum(int(i["keys"]) for i in event.get("inventory", [])),
            "ledger_rows": sum(int(s["rows"]) for s in event.get("ledger", [])),
            "ledger_requests": sum(int(s["requests"]) for s in event.get("ledger", [])),
            "skipped_recent": sum(int(p["skippedRecent"]) for p in parts),
            "skipped_after_snapshot": sum(int(p.get("skippedAfterSnapshot", 0)) for p in parts),
            "margin_s": int(event.get("plan", {}).get("marginMs", 0)) / 1000,
            "drift": drift,
            "drift_total": sum(drift.values()),
            "resolved_on_head": sum(int(p["resolvedOnHead"]) for p in parts),
            "repairs_queued": sum(int(p["repairsQueued"]) for p in parts),
            "pending_effects": sum(int(p.get("pendingEffects", 0)) for p in parts),
            "effects_behind": sum(int(p.get("effectsBehind", 0)) for p in parts),
            "out_of_scope": sum(int(s.get("outOfScope", 0)) for s in event.get("ledger", [])),
            "held_effects": sum(int(s.get("heldEffects", 0)) for s in event.get("ledger", [])),
            "held_oldest_seconds": max(
                (int(s.get("heldOldestSeconds", 0)) for s in event.get("ledger", [])), default=0
            ),
            "samples": [k for p in parts for k in p.get("samples", [])][:20],
            **_behind(event.get("ledger", [])),
        }

    def attestation(
        self,
        event: dict[str, Any],
        *,
        stack: str,
        read_row: Callable[[str], LedgerRow | None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> Attestation:
        """``summarize``'s event (a plan with ``attest``) -> the run's attestation, merged
        from the partitions' sorted runs (:mod:`s3ingest_fn.services.attestation_fanout`);
        ``read_row(key)`` reads a repaired key's row again."""
        plan = event["plan"]
        store, bucket = self._store, self.r.require_inventory_bucket()

        def objects(p: int) -> Iterator[bytes]:
            for key in store.keys(bucket, self._run_prefix(plan["runId"], p)):
                yield self.r.get_inventory_object(key)

        return attestation(
            self.r,
            plan,
            [objects(p) for p in range(int(plan["partitions"]))],
            ledger_requests=sum(int(s["requests"]) for s in event.get("ledger", [])),
            ledger_rows=sum(int(p["ledgerRows"]) for p in event.get("partitions", [])),
            stack=stack,
            read_row=read_row,
            clock=clock,
        )

    # -- shards ---------------------------------------------------------------------------

    def _run_prefix(self, run: str, partition: int) -> str:
        return f"{WORK_PREFIX}{run}/{SIDE}/{partition:04d}/"

    def _put_run(self, run: str, partition: int, index: int, body: bytes) -> None:
        key = f"{self._run_prefix(run, partition)}{index:06d}.jsonl.gz"
        self._store.put(self.r.require_inventory_bucket(), key, body)

    def _shard_key(self, run: str, side: str, partition: int, name: str) -> str:
        return f"{WORK_PREFIX}{run}/{side}/{partition:04d}/{name}.jsonl.gz"

    def _write_shards(
        self, run: str, side: str, name: str, records: Iterable[list[Any]], partitions: int
    ) -> int:
        buckets: list[list[str]] = [[] for _ in range(partitions)]
        for rec in records:
            buckets[partition_of(str(rec[0]), partitions)].append(json.dumps(rec))
        written = 0
        for p, lines in enumerate(buckets):
            if not lines:
                continue
            self._store.put(
                self.r.require_inventory_bucket(),
                self._shard_key(run, side, p, name),
                gzip.compress(("\n".join(lines) + "\n").encode()),
            )
            written += 1
        return written

    def _read_shards(self, run: str, side: str, partition: int) -> Iterator[list[Any]]:
        prefix = f"{WORK_PREFIX}{run}/{side}/{partition:04d}/"
        for key in self._store.keys(self.r.require_inventory_bucket(), prefix):
            text = gzip.decompress(self.r.get_inventory_object(key)).decode("utf-8")
            for line in text.splitlines():
                if line:
                    yield json.loads(line)


def _ledger_record(row: LedgerRow, now_s: float, targets: Sequence[EffectTarget] = ()) -> list[Any]:
    """What the diff and the attestation read of a ledger row, as a JSON list in a work shard
    (key first; the sequencer only when S3 cannot have sent it at ``now_s``,
    :func:`~s3ingest_fn.core.diff.suspect_sequencer`; last, the done version of each of
    ``targets`` whose effect is done, :func:`~s3ingest_fn.services.attestation_fanout.done_of`)."""
    effect = row.effect
    return [
        row.key,
        row.present,
        row.version_id,
        row.etag,
        row.updated_at,
        effect.status if effect else None,
        effect.lease_until_ms if effect else None,
        effect.done_change_id if effect else None,
        row.change_id,
        suspect_sequencer(row, now_s),
        done_of(row, targets),
    ]


def _ledger_row(bucket: str, rec: list[Any]) -> LedgerRow:
    """The row of a :func:`_ledger_record`; a shard written by an earlier release (an
    execution that spans a deploy) holds the state as ``"present"`` or ``"deleted"``, or no
    sequencer."""
    key, present, version_id, etag, updated_at, status, lease, done, change = rec[:9]
    seq = rec[9] if len(rec) > 9 else None
    row = LedgerRow(
        bucket=bucket,
        key=key,
        present=present is True or present == "present",
        version_id=version_id,
        etag=etag,
        updated_at=int(updated_at or 0),
        effect=Effect(status=status, lease_until_ms=lease, done_change_id=done) if status else None,
        change_id=change,
        seq=seq,
    )
    return restore(row, rec[10]) if len(rec) > 10 and rec[10] else row


def _behind(segments: list[dict[str, Any]]) -> dict[str, Any]:
    """``effects_behind_by_processor`` and ``behind_samples`` over the ledger segments'
    results: counts summed, samples the first :data:`BEHIND_SAMPLES` of each processor."""
    counts: dict[str, int] = {}
    samples: dict[str, list[str]] = {}
    for segment in segments:
        for name, n in (segment.get("effectsBehindByProcessor") or {}).items():
            counts[name] = counts.get(name, 0) + int(n)
        for name, keys in (segment.get("behindSamples") or {}).items():
            samples.setdefault(name, []).extend(str(k) for k in keys)
    return {
        "effects_behind_by_processor": counts,
        "behind_samples": {name: keys[:BEHIND_SAMPLES] for name, keys in samples.items()},
    }
