"""The attestation's cost at scale (issue 38 item 4).

**In the diff's pass** (:func:`run_pass`): the reconciliation's ``inventory`` pass over
``keys`` keys with 1% drift (the fixture of :mod:`bench.reconcile_diff`: one gzip CSV report,
the ledger's parallel Scan answered from a file through a real botocore client, written before
any timer starts), each side in its own spawned child (its peak RSS its own ``VmHWM``):

- ``per-key`` / ``per-key+trees``: the per-key pass (:func:`~s3ingest_fn.core.diff.diff`, the
  deployed functions'), alone, then feeding a :class:`~s3ingest_fn.services.attestation_pass.
  TreeTap` and making the attestation (both trees, the leaves file, the document);
- ``columnar`` / ``columnar+trees``: the same in columns (pyarrow: the CLI, the local runtime).

Figures: wall and CPU seconds, peak MiB, the ratio of each ``+trees`` side to its diff alone,
and a model at 5e7 keys: one run's time (linear), and the memory of one partition of the
fan-out's 64 (the intercept and the bytes a key from a second, small run of each side).

**The trees alone** (:func:`measure`): both sides' leaves encoded and hashed and both trees
built in memory, whole and in 8 key-range partitions combined; the builder's hashes held (its
memory bound, ``O(16 x depth)``).
"""

from __future__ import annotations

import itertools
import os
import resource
import tempfile
import time
from typing import Any

from bench.memory import in_child, peak_mib
from s3ingest_fn.core.attestation import Fragment, Leaf, PairBuilder, combine, depth_of
from s3ingest_fn.core.diff import Truth, diff
from s3ingest_fn.core.row import LedgerRow

BUCKET = "landing-bucket"
PARTITIONS = 8
MODELLED = 50_000_000
#: The fan-out's partitions (:data:`s3ingest_fn.services.fanout.DEFAULT_PARTITIONS`).
FANOUT_PARTITIONS = 64
#: Keys of the small run that gives each side's memory intercept.
SMALL = 20_000


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


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _side(name: str, folder: str, n: int) -> dict[str, Any]:
    """One side of :func:`run_pass` over the fixture in ``folder`` (``n`` keys)."""
    from bench import reconcile_diff as rd
    from s3ingest_fn import wiring
    from s3ingest_fn.core.diff import DiffStats, bucket_truth, diff
    from s3ingest_fn.services import reconcile_columnar as rc
    from s3ingest_fn.services.attestation_pass import TreeTap
    from s3ingest_fn.services.inventory import read_rows
    from s3ingest_fn.services.reconcile import ReconcileReport

    with open(os.path.join(folder, "data.csv.gz"), "rb") as f:
        data = f.read()
    fake = rd.FakeDynamoHttp(folder, "scan")
    reconciler = wiring.reconciler(
        s3=None,
        dynamodb=rd._client(fake),
        sqs=None,
        bucket=rd.BUCKET,
        table="ledger",
        queue_url="-",
    )
    report = ReconcileReport(source="inventory", bucket=rd.BUCKET, prefix="", dry_run=True)
    trees = name.endswith("+trees")
    tap = TreeTap(rd.BUCKET, (), clock=lambda: rd.TAKEN_MS / 1000) if trees else None
    if tap is not None:
        tap.snapshot(taken_ms=rd.TAKEN_MS, margin_ms=0, versions=True, etags=True)
    scanner: Any = reconciler.scanner
    cpu, wall = _cpu(), time.perf_counter()
    if name.startswith("columnar"):
        truth_table = rc.truth_table(rd.manifest(), [data])
        drifts = sum(
            1
            for _ in rc.diff_columns(
                truth_table,
                reconciler.pump_pages(
                    lambda s, t: scanner.column_pages(rd.BUCKET, s, t), report, lambda p, c: None
                ),
                taken_at_ms=rd.TAKEN_MS,
                compare_versions=True,
                compare_etags=True,
                stats=DiffStats(),
                tap=tap,
            )
        )
    else:
        truth = bucket_truth(read_rows(rd.manifest(), data))
        drifts = sum(
            1
            for _ in diff(
                truth,
                reconciler.scan_ledger(report, lambda p, c: None),
                taken_at_ms=rd.TAKEN_MS,
                compare_versions=True,
                compare_etags=True,
                tap=tap,
            )
        )
    out: dict[str, Any] = {"drift": drifts}
    if tap is not None:
        tap.ledger_read("ledger", report.ledger_requests)
        made = tap.attestation(stack="bench", scope={}, prefix="")
        out["roots"] = made.document["roots"]
        out["keys"] = made.document["counts"]["keys"]
        out["differing"] = made.document["differences_total"]
        out["leaves_bytes"] = made.document["inputs"]["leaves"]["bytes"]  # not read back
    out["cpu"], out["wall"] = _cpu() - cpu, time.perf_counter() - wall
    return out


def _measured(name: str, folder: str, n: int) -> dict[str, Any]:
    """:func:`_side` and this process's own peak (run in a child: :func:`bench.memory.in_child`)."""
    result = _side(name, folder, n)
    result["peak_mib"] = peak_mib()
    return result


def _in_child(name: str, folder: str, n: int) -> dict[str, Any]:
    return in_child(_measured, name, folder, n)


SIDES = ("per-key", "per-key+trees", "columnar", "columnar+trees")


def measure_pass(keys: int, small: int = SMALL) -> dict[str, dict[str, Any]]:
    """Each of :data:`SIDES` over ``keys`` keys, and over ``small`` keys (``name@small``)."""
    from bench import reconcile_diff as rd

    out: dict[str, dict[str, Any]] = {}
    for n, tag in ((keys, ""), (small, "@small")):
        with tempfile.TemporaryDirectory(prefix="bench-attest-") as folder:
            started = time.perf_counter()
            rd.build(n, 0, folder)
            built = time.perf_counter() - started
            for name in SIDES:
                out[name + tag] = _in_child(name, folder, n)
            out["fixture" + tag] = {"seconds": built}
    return out


def run_pass(keys: int) -> dict[str, dict[str, Any]]:
    """Print the figures of the trees in the diff's pass (the module's docstring)."""
    small = min(SMALL, max(keys // 10, 1))
    m = measure_pass(keys, small)
    print(
        f"   in the diff's pass, {keys:,} keys (1% drift; fixture built in "
        f"{m['fixture']['seconds']:.0f} s, untimed; each side a child process):"
    )
    per_partition = MODELLED / FANOUT_PARTITIONS
    for alone, trees in (("per-key", "per-key+trees"), ("columnar", "columnar+trees")):
        a, t = m[alone], m[trees]
        print(
            f"   {alone}: diff alone {a['wall']:.1f} s wall ({a['cpu']:.1f} s CPU), peak "
            f"{a['peak_mib']:.0f} MiB; diff + trees {t['wall']:.1f} s wall ({t['cpu']:.1f} s "
            f"CPU), peak {t['peak_mib']:.0f} MiB; ratio {t['wall'] / a['wall']:.2f}x time, "
            f"{t['peak_mib'] / a['peak_mib']:.2f}x memory ({t['keys']:,} keys attested, "
            f"{t['differing']:,} differing, leaves file {t['leaves_bytes'] / 2**20:.0f} MiB)"
        )
        slope = {
            s: (m[s]["peak_mib"] - m[s + "@small"]["peak_mib"]) / (keys - small)
            for s in (alone, trees)
        }
        base = {s: m[s + "@small"]["peak_mib"] - slope[s] * small for s in (alone, trees)}
        scale = MODELLED / keys / 60
        mib = {s: base[s] + slope[s] * per_partition for s in (alone, trees)}
        print(
            f"   {alone} modelled at {MODELLED:.0e} keys: one run {a['wall'] * scale:.0f} min "
            f"alone, {t['wall'] * scale:.0f} min with the trees; one key-range partition of "
            f"{FANOUT_PARTITIONS} ({per_partition:,.0f} keys) {mib[alone]:.0f} MiB alone, "
            f"{mib[trees]:.0f} MiB with the trees ({slope[alone] * 2**20:.0f} and "
            f"{slope[trees] * 2**20:.0f} bytes a key above {base[alone]:.0f} and "
            f"{base[trees]:.0f} MiB)"
        )
    same = m["per-key+trees"]["roots"] == m["columnar+trees"]["roots"]
    print(f"   roots of the per-key and the columnar pass equal: {same}")
    return m


def run(keys: int = 1_000_000) -> None:
    """Print the figures: the trees in the diff's pass, then the trees alone."""
    run_pass(keys)
    m = measure(keys)
    print(
        f"   the trees alone, in memory, keys {keys:,}: both trees {m['trees_s']:.1f} s "
        f"({m['differing']:,} differing named), the bucket's in {PARTITIONS} partitions "
        f"{m['partitioned_s']:.1f} s "
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
