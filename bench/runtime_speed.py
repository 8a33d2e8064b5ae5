"""The local runtime's events per CPU-second against the runtime of an earlier commit, built in
the run.

Set-up (outside every timed window): ``git archive`` of :data:`BASELINE_COMMIT`'s ``s3ingest``
and ``functions`` trees into a temporary folder. Each sample is a fresh interpreter running
:data:`WORKLOAD` (the requests bench's rounds: puts, overwrites, delete markers and deletes of
single versions, each round delivered under chaos, 20% duplicates, reordered, then drained) with
one tree first on ``sys.path``: this one, or the earlier commit's, interleaved sample by sample so
that the machine's load falls on both alike. Timed: the workload alone, by ``time.process_time``
(the process's CPU, every thread: the earlier runtime's moto server runs in the same process);
the emulator's start and the imports are not. Printed: events delivered per CPU-second, min,
median and max over the samples, and the ratio of the medians.

If the earlier commit's runtime cannot run in this virtual environment the sample's error is
printed and no ratio is: there is no recorded figure to fall back on.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

#: The earlier runtime (before the emulator speed-ups of 0.2.0: moto's server over HTTP).
BASELINE_COMMIT = "488c6db"
ROOT = Path(__file__).resolve().parents[1]
#: The child's code: ``{tree}`` first on ``sys.path``; prints deliveries and CPU seconds.
WORKLOAD = """
import random, sys, time
sys.path[:0] = [{tree!r}, {functions!r}]
from s3ingest.local.emulator import Emulator
try:  # the local runtime's layout since issue 35 item 6
    from s3ingest.local.emulator.chaos import Chaos
    from s3ingest.local.stack.runtime import LocalRuntime
except ImportError:  # the earlier commit's
    from s3ingest.local.chaos import Chaos
    from s3ingest.local.runtime import LocalRuntime
import s3ingest_fn

for module in (sys.modules[LocalRuntime.__module__], s3ingest_fn):  # the tree's, not the installed
    assert module.__file__.startswith({tree!r}), module.__file__
rng = random.Random({seed})
keys = [f"data/{{i:04d}}/file {{i}}+x.csv" for i in range(max(10, {events} // 40))]
versions = {{k: [] for k in keys}}
ops = int({events} / 1.25)
with Emulator() as emu:
    rt = LocalRuntime(emu, versioning="Enabled", seed={seed})
    delivered = 0
    started = time.process_time()
    for n in range(ops):
        key = rng.choice(keys)
        roll = rng.random()
        if roll < 0.75 or not versions[key]:
            op = rt.faithful.put(key, f"{{key}} {{rng.random()}}")
            if op.version_id:
                versions[key].append(op.version_id)
        elif roll < 0.92:
            rt.faithful.delete(key)
        else:
            rt.faithful.delete(key, versions[key].pop(rng.randrange(len(versions[key]))))
        if (n + 1) % 400 == 0 or n + 1 == ops:
            delivered += rt.flush(Chaos(seed={seed} + n, duplicate=0.2, reorder=True))
            rt.drain()
    cpu = time.process_time() - started
print(delivered, cpu)
"""


def checkout(commit: str, into: Path) -> Path:
    """``commit``'s ``s3ingest`` and ``functions`` trees, extracted under ``into``."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", commit, "s3ingest", "functions"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def sample(tree: Path, events: int, seed: int) -> tuple[int, float]:
    """One fresh interpreter's run on ``tree``: (deliveries, CPU seconds of the workload)."""
    code = WORKLOAD.format(
        tree=str(tree), functions=str(tree / "functions"), events=events, seed=seed
    )
    env = {**os.environ, "POWERTOOLS_METRICS_DISABLED": "true", "PYTHONPATH": ""}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tree
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr else "failed")
    delivered, cpu = done.stdout.split()[-2:]
    return int(delivered), float(cpu)


def _line(label: str, rates: list[float]) -> str:
    return (
        f"   {label:<34} events per CPU-second: min {min(rates):7.1f}  "
        f"median {statistics.median(rates):7.1f}  max {max(rates):7.1f}"
    )


def run(events: int = 400, samples: int = 3, seed: int = 11) -> None:
    with tempfile.TemporaryDirectory(prefix="s3ingest-runtime-bench-") as tmp:
        before = checkout(BASELINE_COMMIT, Path(tmp))
        trees = {"this tree": ROOT, f"commit {BASELINE_COMMIT}": before}
        rates: dict[str, list[float]] = {name: [] for name in trees}
        failed: dict[str, str] = {}
        for _ in range(samples):  # interleaved
            for name, tree in trees.items():
                if name in failed:
                    continue
                try:
                    delivered, cpu = sample(tree, events, seed)
                except RuntimeError as exc:
                    failed[name] = str(exc)
                    continue
                rates[name].append(delivered / cpu)
    print(
        f"   {events} events a sample, {samples} samples interleaved, fresh interpreters, "
        "CPU of the workload only"
    )
    for name in trees:
        if name in failed:
            print(f"   {name}: could not run here: {failed[name]}")
        else:
            print(_line(name, rates[name]))
    now, then = rates["this tree"], rates[f"commit {BASELINE_COMMIT}"]
    if now and then:
        print(
            f"   ratio of the medians (this tree / {BASELINE_COMMIT})   "
            f"{statistics.median(now) / statistics.median(then):6.2f}"
        )
