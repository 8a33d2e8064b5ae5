"""The attestation's trees at scale (issue 38 item 4, measured in a pass of their own): both
sides' leaves encoded and hashed and both trees built for ``keys`` keys (1% of the ledger's
leaves differing), whole and in 8 partitions combined, beside the reconciliation's diff
(:func:`s3ingest_fn.core.diff.diff`, as it is) over the same keys. Figures: seconds, the
builder's hashes held (its memory bound, ``O(16 x depth)``), and the time modelled at 5e7 keys
(linear)."""

from __future__ import annotations

import itertools
import time

from s3ingest_fn.core.attestation import Fragment, Leaf, PairBuilder, combine, depth_of
from s3ingest_fn.core.diff import Truth, diff
from s3ingest_fn.core.row import LedgerRow

BUCKET = "landing-bucket"
PARTITIONS = 8
MODELLED = 50_000_000


def _keys(n: int) -> list[str]:
    return [f"data/2026/03/{i:09d}.csv" for i in range(n)]


def _leaves(key: str, i: int) -> tuple[Leaf, Leaf]:
    owed = (("extract", "3"),)
    left = Leaf(BUCKET, key, f"v{i}", f"{i:032x}", "present", owed)
    right = (
        left
        if i % 100
        else Leaf(BUCKET, key, f"v{i}", f"{i:032x}", "present", (("extract", "none"),))
    )
    return left, right


def measure(keys: int) -> dict[str, float]:
    """The figures for ``keys`` keys (see the module's docstring)."""
    names = _keys(keys)
    started = time.perf_counter()
    builder = PairBuilder()
    held = 0
    for i, key in enumerate(names):
        builder.add(key, *_leaves(key, i))
        if i % 4096 == 0:
            held = max(held, builder.left.held() + builder.right.held())
    roots = builder.roots()
    whole_s = time.perf_counter() - started
    differing = len(builder.differences())

    started = time.perf_counter()
    bounds = [keys * p // PARTITIONS for p in range(PARTITIONS + 1)]
    parts = []
    for a, b in itertools.pairwise(bounds):
        part = Fragment(a)
        for i in range(a, b):
            part.add(_leaves(names[i], i)[0].hash())
        parts.append(part)
    partitioned = combine(parts).root()
    parts_s = time.perf_counter() - started

    truth = {k: Truth(True, f"v{i}", f"{i:032x}", 1) for i, k in enumerate(names)}
    rows = [
        LedgerRow(BUCKET, k, True, version_id=f"v{i}", etag=f"{i:032x}")
        for i, k in enumerate(names)
    ]
    started = time.perf_counter()
    drift = sum(
        1 for _ in diff(truth, rows, taken_at_ms=2, compare_versions=True, compare_etags=True)
    )
    diff_s = time.perf_counter() - started
    return {
        "keys": keys,
        "trees_s": whole_s,
        "partitioned_s": parts_s,
        "partitioned_equal": float(partitioned == roots[0]),
        "diff_s": diff_s,
        "held_hashes": held,
        "depth": depth_of(keys),
        "differing": differing,
        "drift": drift,
    }


def run(keys: int = 1_000_000) -> None:
    """Print the figures."""
    m = measure(keys)
    print(
        f"   keys {keys:,}: both trees {m['trees_s']:.1f} s ({m['differing']:,} differing "
        f"named), the bucket's in {PARTITIONS} partitions {m['partitioned_s']:.1f} s "
        f"(root equal to the whole build: {bool(m['partitioned_equal'])})"
    )
    print(
        f"   the diff alone over the same keys (in memory): {m['diff_s']:.1f} s; trees / diff "
        f"{m['trees_s'] / max(m['diff_s'], 1e-9):.1f}x"
    )
    print(
        f"   builder memory: at most {m['held_hashes']:.0f} hashes of 32 bytes held (depth "
        f"{m['depth']:.0f}); modelled at {MODELLED:.0e} keys: "
        f"{m['trees_s'] * MODELLED / keys / 60:.0f} min for both trees, depth "
        f"{depth_of(MODELLED)}"
    )
