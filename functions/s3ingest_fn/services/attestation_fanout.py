"""The attestation from the fan-out reconciliation's own pass (issue 38 item 4): no second read
of the ledger or the inventory report.

The fan-out's partitions are hash partitions (:func:`~s3ingest_fn.services.fanout.partition_of`):
a partition's keys are no key range, so a partition cannot build a subtree at a known index.
Instead each ``diff_partition`` child, from the diff it already does (a
:class:`~s3ingest_fn.services.attestation_pass.TreeTap` shown every row), writes its keys'
lines of the leaves file in key order, a sorted *run* (:func:`write_run`): gzip JSON Lines
under ``reconcile-work/<run id>/attest/<partition>/``, cut into objects of
:data:`RUN_LINES` lines. A key the child queued a repair for is written as its bucket state
alone (``{"key": k, "recheck": [visible, version id, ETag, last modified ms] | null}``).

The ``summarize`` step merges the runs by key order (:func:`merge`: :func:`heapq.merge`, one
object of each partition's run held at a time, so memory grows with the partitions, not the
keys), feeding :class:`~s3ingest_fn.services.attestation.TreeWriter`: both trees, the leaves
file and the document are those :func:`~s3ingest_fn.services.attestation.attest` and the
single pass make of the same snapshot; a ``recheck`` key's row is read again (GetItem: what
the repair wrote), as the single run's scheduled attestation does.

The ledger shards carry, per row, the version whose effect is done of each processor that has
one (:func:`done_of`), so that a shard's row gives the ledger's leaf the Scan's row gives
(:func:`restore`); the diff reads none of it.
"""

from __future__ import annotations

import gzip
import heapq
import io
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from operator import itemgetter
from typing import Any

from s3ingest_fn.core.attestation import NOT_CONCERNED, NOT_DONE, Leaf, iso_ms, key_order
from s3ingest_fn.core.diff import Truth
from s3ingest_fn.core.effects import EffectTarget
from s3ingest_fn.core.row import DEFAULT_PROCESSOR, DONE, Effect, LedgerRow
from s3ingest_fn.services.attestation import (
    Attestation,
    TreeWriter,
    _done_version,
    _leaf_json,
    bucket_leaf,
    leaf_from_json,
)
from s3ingest_fn.services.attestation_pass import TreeTap, named
from s3ingest_fn.services.reconcile import Reconciler, inventory_inputs

#: Lines of a run per object: what the merge holds of each partition at a time (about 30
#: bytes a line compressed, ``docs/attestation.md``).
RUN_LINES = 16_384
#: The runs' folder under a fan-out run's work prefix.
SIDE = "attest"


def targets_of(r: Reconciler) -> tuple[EffectTarget, ...]:
    """The processors attested: every configured one, sorted by name (as the scheduled
    single run's)."""
    return tuple(sorted(r.targets, key=lambda t: t.name))


def done_of(row: LedgerRow, targets: Sequence[EffectTarget]) -> dict[str, int]:
    """Per processor of ``targets`` whose effect is done for the row's change, its version
    (what :func:`~s3ingest_fn.services.attestation.ledger_leaf` states of it)."""
    done: dict[str, int] = {}
    for t in targets:
        value = _done_version(row, t)
        if value not in (NOT_DONE, NOT_CONCERNED):
            done[t.name] = int(value)
    return done


def restore(row: LedgerRow, done: dict[str, int]) -> LedgerRow:
    """``row`` (a shard's: the summary effect alone) with the effects :func:`done_of` states:
    the default processor's version on its effect, the others' as done effects of the row's
    change. The diff reads neither."""
    if DEFAULT_PROCESSOR in done and row.effect is not None:
        row.effect = replace(row.effect, version=done[DEFAULT_PROCESSOR])
    row.named_effects = {
        name: Effect(status=DONE, done_change_id=row.change_id, version=version)
        for name, version in done.items()
        if name != DEFAULT_PROCESSOR
    }
    return row


def tap_of(r: Reconciler, plan: dict[str, Any], clock: Callable[[], float] = time.time) -> TreeTap:
    """A partition's tap, for the plan's snapshot (``createdMs``, ``marginMs``,
    ``compareVersions``, ``compareEtags``)."""
    tap = TreeTap(r.bucket, targets_of(r), clock)
    tap.snapshot(
        taken_ms=int(plan["createdMs"]),
        margin_ms=int(plan["marginMs"]),
        versions=bool(plan["compareVersions"]),
        etags=bool(plan["compareEtags"]),
    )
    return tap


def _record(seen: Truth | None) -> list[Any] | None:
    if seen is None:
        return None
    return [seen.visible, seen.version_id, seen.etag, seen.last_modified_ms]


class _RunWriter(TreeWriter):
    """The leaves file's lines of one partition, in key order, put as run objects of
    :data:`RUN_LINES` lines (no tree: the merge builds it)."""

    def __init__(self, tap: TreeTap, put: Callable[[int, bytes], None]) -> None:
        super().__init__(tap.bucket, tap.targets, tap.fields, tap.cutoff_ms)
        self._put = put
        self._lines: list[str] = []
        self.objects = self.written = 0

    def leaves(self, key: str, left: Leaf, right: Leaf) -> None:
        bucket = _leaf_json(left)
        ledger = bucket if right is left else _leaf_json(right)
        self._line({"key": key, "bucket": bucket, "ledger": ledger})

    def _line(self, entry: dict[str, Any]) -> None:
        self._lines.append(json.dumps(entry))
        if len(self._lines) >= RUN_LINES:
            self.flush()

    def flush(self) -> None:
        """Put the lines held as the run's next object."""
        if not self._lines:
            return
        self._put(self.objects, gzip.compress(("\n".join(self._lines) + "\n").encode(), 6))
        self.objects += 1
        self.written += len(self._lines)
        self._lines = []


def write_run(tap: TreeTap, put: Callable[[int, bytes], None]) -> dict[str, int]:
    """Write a partition's sorted run from its pass's ``tap`` with ``put(index, body)`` (the
    module's docstring).

    Returns
    -------
    dict
        ``objects`` put and ``lines`` written.
    """
    repaired = set(tap.repaired)
    writer = _RunWriter(tap, put)
    for key, seen, row, agreed in tap.states():
        if key in repaired:
            writer._line({"key": key, "recheck": _record(seen)})
        elif agreed:
            leaf = bucket_leaf(tap.bucket, key, seen, tap.targets, tap.fields)
            writer.leaves(key, leaf, leaf)
        elif named(seen, row):
            writer.key(key, seen, row)
    writer.flush()
    return {"objects": writer.objects, "lines": writer.written}


def _entries(objects: Iterator[bytes]) -> Iterator[tuple[bytes, dict[str, Any]]]:
    """A run's entries, one object held at a time, with their keys' order."""
    for body in objects:
        with gzip.GzipFile(fileobj=io.BytesIO(body)) as lines:
            for line in lines:
                entry = json.loads(line)
                yield key_order(entry["key"]), entry


def merge(
    tree: TreeWriter,
    runs: Sequence[Iterator[bytes]],
    read_row: Callable[[str], LedgerRow | None] | None,
) -> None:
    """Feed ``tree`` the runs' entries merged in key order (each run: its objects' bodies, in
    order); a ``recheck`` key with its row read again by ``read_row`` (what the repair wrote).

    Raises
    ------
    ValueError
        When a run has a ``recheck`` key and there is no ``read_row``, or keys out of order.
    """
    bucket = tree.bucket
    for _, entry in heapq.merge(*(_entries(r) for r in runs), key=itemgetter(0)):
        key = entry["key"]
        if entry.get("skipped"):
            tree.skip(key)
        elif "recheck" in entry:
            if read_row is None:
                raise ValueError("a repaired key's row cannot be read again")
            rec = entry["recheck"]
            seen = None if rec is None else Truth(rec[0], rec[1], rec[2], rec[3])
            row = read_row(key)
            if named(seen, row):
                tree.key(key, seen, row)
        else:
            left = leaf_from_json(bucket, key, entry["bucket"])
            same = entry["ledger"] == entry["bucket"]
            tree.leaves(key, left, left if same else leaf_from_json(bucket, key, entry["ledger"]))


def attestation(
    r: Reconciler,
    plan: dict[str, Any],
    runs: Sequence[Iterator[bytes]],
    *,
    ledger_requests: int,
    ledger_rows: int,
    stack: str,
    read_row: Callable[[str], LedgerRow | None] | None = None,
    clock: Callable[[], float] = time.time,
) -> Attestation:
    """The attestation of a fan-out run (``plan``: :meth:`~s3ingest_fn.services.fanout.FanOut.
    plan`'s) from its partitions' ``runs``; ``ledger_requests`` and ``ledger_rows`` are the
    Scan's (its segments' requests, the partitions' rows under the prefix). The manifest is
    read again (its identity in the document), no data file.

    Raises
    ------
    ReconcileError, TransientError
        When the manifest cannot be read.
    """
    manifest, raw, checksum = r.manifest_read(plan["manifest"])
    tap = tap_of(r, plan, clock)
    tree = TreeWriter(r.bucket, tap.targets, tap.fields, tap.cutoff_ms)
    merge(tree, runs, read_row)
    inputs = {
        "bucket": inventory_inputs(r.inventory_bucket, plan["manifest"], manifest, raw, checksum),
        "ledger": {
            "kind": "ledger-scan",
            "table": r.table,
            "read_at": iso_ms(int(clock() * 1000)),
            "requests": ledger_requests,
            "rows": ledger_rows,
        },
    }
    return tree.attestation(
        stack=stack,
        scope=r.scope.as_dict(),
        prefix=str(plan.get("prefix") or ""),
        source="inventory",
        taken_ms=tap.taken_ms,
        margin_ms=tap.margin_ms,
        inputs=inputs,
    )
