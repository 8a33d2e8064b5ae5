"""The fan-out attestation's runs and merge (issue 38 item 4): ``keys`` keys (the leaves of
:mod:`bench.attestation_tree`: one processor, 1% differing) split into the fan-out's 64 hash
partitions, each partition's sorted run written as the ``diff_partition`` child writes it
(:class:`~s3ingest_fn.services.attestation_fanout._RunWriter`, gzip objects of
:data:`~s3ingest_fn.services.attestation_fanout.RUN_LINES` lines, to a temporary folder), then
merged by ``summarize``'s :func:`~s3ingest_fn.services.attestation_fanout.merge` in a spawned
child (its peak RSS its own ``VmHWM``): wall and CPU seconds, peak MiB, the runs' bytes a key,
and the model at 5e7 keys (time linear, memory the merge's, the runs' bytes).

Run: ``python -m bench.attestation_fanout [keys]``.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.attestation_tree import BUCKET, FANOUT_PARTITIONS, MODELLED, _keys, _leaves
from bench.memory import in_child, peak_mib
from s3ingest_fn.services.attestation import TreeWriter
from s3ingest_fn.services.attestation_fanout import _RunWriter, merge
from s3ingest_fn.services.attestation_pass import TreeTap
from s3ingest_fn.services.fanout import partition_of


def _tap() -> TreeTap:
    from s3ingest_fn.core.effects import EffectTarget

    tap = TreeTap(BUCKET, (EffectTarget("extract", version=3),))
    tap.snapshot(taken_ms=10**13, margin_ms=0, versions=True, etags=True)
    return tap


def write(keys: int, folder: Path) -> dict[str, float]:
    """Every partition's run of ``keys`` keys under ``folder``: seconds and bytes."""
    started = time.perf_counter()
    names = _keys(keys)
    parts: list[list[int]] = [[] for _ in range(FANOUT_PARTITIONS)]
    for i, key in enumerate(names):
        parts[partition_of(key, FANOUT_PARTITIONS)].append(i)
    size = 0
    for p, members in enumerate(parts):
        (folder / f"{p:04d}").mkdir()

        def put(index: int, body: bytes, p: int = p) -> None:
            (folder / f"{p:04d}" / f"{index:06d}.jsonl.gz").write_bytes(body)

        writer = _RunWriter(_tap(), put)
        for i in sorted(members, key=lambda i: names[i]):
            writer.leaves(names[i], *_leaves(names[i], i))
        writer.flush()
    for path in folder.rglob("*.gz"):
        size += path.stat().st_size
    return {"write_s": time.perf_counter() - started, "bytes": size}


def _merge(folder: str) -> dict[str, Any]:
    """The merge's figures, run in a child (:func:`bench.memory.in_child`): its peak its own."""

    def objects(p: int) -> Iterator[bytes]:
        for path in sorted((Path(folder) / f"{p:04d}").iterdir()):
            yield path.read_bytes()

    tap = _tap()
    tree = TreeWriter(BUCKET, tap.targets, tap.fields, tap.cutoff_ms)
    wall, cpu = time.perf_counter(), time.process_time()
    merge(tree, [objects(p) for p in range(FANOUT_PARTITIONS)], None)
    made = tree.attestation(
        stack="s", scope={}, prefix="", source="inventory", taken_ms=10**13, margin_ms=0, inputs={}
    )
    return {
        "wall": time.perf_counter() - wall,
        "cpu": time.process_time() - cpu,
        "peak_mib": peak_mib(),
        "keys": made.document["counts"]["keys"],
        "differing": made.document["differences_total"],
        "leaves_bytes": made.document["inputs"]["leaves"]["bytes"],
    }


def run(keys: int = 1_000_000) -> dict[str, Any]:
    """Print the figures (the module's docstring)."""
    with tempfile.TemporaryDirectory() as folder:
        w = write(keys, Path(folder))
        m = in_child(_merge, folder)
    per_key = w["bytes"] / keys
    scale = MODELLED / keys
    print(
        f"   fan-out attestation, {keys:,} keys in {FANOUT_PARTITIONS} partitions: runs "
        f"{w['bytes'] / 2**20:.1f} MiB ({per_key:.1f} bytes a key gzip), written in "
        f"{w['write_s']:.1f} s; merge {m['wall']:.1f} s wall ({m['cpu']:.1f} s CPU), peak "
        f"{m['peak_mib']:.0f} MiB ({m['keys']:,} keys, {m['differing']:,} differing, leaves "
        f"file {m['leaves_bytes'] / 2**20:.0f} MiB)"
    )
    print(
        f"   modelled at {MODELLED:.0e} keys: runs {per_key * MODELLED / 2**30:.1f} GiB, merge "
        f"{m['wall'] * scale / 60:.0f} min, leaves file "
        f"{m['leaves_bytes'] * scale / 2**30:.1f} GiB"
    )
    return {**w, **m, "bytes_per_key": per_key}


if __name__ == "__main__":
    run(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
