"""The reconcile function's memory default and the fan-out's partition count, derived from the
measured bytes and CPU time per key (docs/reconciliation.md, measured at 10^6 report rows
against 10^6 ledger rows by ``python -m bench --only reconcile``: each side's own ``VmHWM``).

A run holds a floor (interpreter, imports, client, the report's first bytes) plus a share per
key; a Lambda function gets CPU in proportion to its memory, one vCPU at 1,769 MB
(https://docs.aws.amazon.com/lambda/latest/dg/configuration-memory.html). So at ``m`` MiB a run
holds ``(m - floor) / bytes_per_key`` keys (:func:`keys_within`), and ``n`` keys need
``floor + n * bytes_per_key`` (:func:`memory_for`).

The reconcile function (its asset carries pyarrow: the run is :data:`COLUMNS`): at the default
:data:`RECONCILE_MEMORY_MIB`, 3,008 MiB, it holds (3,008 - 140) MiB / 130 B = 2.3·10^7 keys,
a margin of 1.15 over :data:`SINGLE_RUN_KEYS` (2·10^7, the largest bucket the daily single run
is sized for; above it, ``reconcileFanOut`` or a larger ``reconcileMemoryMb``, to Lambda's 10,240
MiB: 8.1·10^7 keys). Memory binds before time: the CPU a key costs in columns (7.7 µs) at 3,008
MiB (1.7 vCPU) puts 2.3·10^7 keys at about 105 s, well inside the 900 s timeout. 1,769 MiB (one
vCPU) would hold 1.3·10^7; and the fan-out's steps, the backfill control, the listing shards and
the reprocess segments follow the same setting, so the default stays at 3,008.

The fan-out's partitions (``s3ingest_fn.services.fanout.DEFAULT_PARTITIONS``, 64) run the shared
asset, :data:`KEYS` (no pyarrow): a partition child at 3,008 MiB holds (3,008 - 100) MiB / 500 B
= 6.1·10^6 keys, so 64 partitions hold 3.9·10^8 keys (:func:`fan_out_keys`), and at 71 µs a key
a partition of that many takes about 255 s of CPU at 1.7 vCPU, inside the timeout with a margin
of 3.5. A 5·10^7-key bucket needs at least 9 partitions by memory (:func:`partitions_for`); 64
gives 781,250 keys a partition, 473 MiB each, and 40 at a time (the state machine's concurrency)
finish in 2 rounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MIB = 1024 * 1024
#: Lambda's memory per vCPU, MB (one full vCPU at 1,769 MB).
MB_PER_VCPU = 1769
#: Lambda's memory limits, MiB.
LAMBDA_MAX_MIB = 10240


@dataclass(frozen=True)
class Engine:
    """One way a reconciliation runs, as measured at 10^6 x 10^6 keys (1% drift).

    Attributes
    ----------
    name : str
        ``"columns"`` (pyarrow) or ``"key by key"``.
    floor_mib : int
        What the process holds before the run's keys, MiB.
    bytes_per_key : int
        Peak bytes per key above the floor.
    cpu_us_per_key : float
        CPU time per key, microseconds (median of 3 on a 2-core machine).
    """

    name: str
    floor_mib: int
    bytes_per_key: int
    cpu_us_per_key: float


#: The columnar run (the reconcile function, the CLI with pyarrow): 269-271 MiB at 10^6 keys,
#: 166 MiB at 2·10^5: about 130 bytes a key above 140 MiB; 7.7 s of CPU at 10^6.
COLUMNS = Engine("columns", 140, 130, 7.7)
#: The per-key run (the fan-out's steps: the shared asset): 565-572 MiB at 10^6 keys, about
#: 500 bytes a key above 100 MiB; 71 µs of CPU a key.
KEYS = Engine("key by key", 100, 500, 71.0)

#: The largest bucket (keys) the daily single run is sized for at the default memory.
SINGLE_RUN_KEYS = 20_000_000
#: The default ``reconcileMemoryMb``: :func:`memory_for` :data:`SINGLE_RUN_KEYS` in
#: :data:`COLUMNS` (2,620 MiB) with a margin, at the 3,008 MiB the function always had.
RECONCILE_MEMORY_MIB = 3008


def keys_within(memory_mib: int, engine: Engine = COLUMNS) -> int:
    """The keys one run of ``engine`` holds in ``memory_mib`` MiB."""
    return max(0, (memory_mib - engine.floor_mib) * MIB // engine.bytes_per_key)


def memory_for(keys: int, engine: Engine = COLUMNS) -> int:
    """The MiB one run of ``engine`` needs for ``keys`` keys (rounded up)."""
    return engine.floor_mib + math.ceil(keys * engine.bytes_per_key / MIB)


def cpu_seconds(keys: int, memory_mib: int, engine: Engine = COLUMNS) -> float:
    """Seconds a run of ``keys`` takes on the CPU Lambda gives ``memory_mib`` (at most the
    measured machine's cores are used: the figures are per core)."""
    vcpu = min(memory_mib / MB_PER_VCPU, 2.0)
    return keys * engine.cpu_us_per_key / 1e6 / max(vcpu, 1.0)


def partitions_for(keys: int, memory_mib: int = RECONCILE_MEMORY_MIB) -> int:
    """The fewest fan-out partitions whose children (:data:`KEYS`) hold ``keys`` at
    ``memory_mib``."""
    return max(1, math.ceil(keys / keys_within(memory_mib, KEYS)))


def fan_out_keys(partitions: int, memory_mib: int = RECONCILE_MEMORY_MIB) -> int:
    """The keys ``partitions`` fan-out partitions hold at ``memory_mib``."""
    return partitions * keys_within(memory_mib, KEYS)
