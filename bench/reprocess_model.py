"""A model of a reprocess run over a large ledger on AWS, from requests counted locally.

The local run (:mod:`bench.reprocess`) counts the requests per key of ``s3ingest reprocess``;
this module turns them, AWS's published quotas and list prices into the time and cost of
bringing one processor up to date with N keys (50 million by default): a Distributed Map over
``segments`` ledger Scan segments, each child scanning its segment and running the processor
over the keys behind it, ``concurrency`` at a time, each key one claim and one commit.

Every assumption is a named constant with its source; latencies are assumptions (marked so),
not measurements. ``docs/reprocess.md`` explains the model and its result.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.onboard_model import (
    DDB_PER_MILLION_RRU,
    DDB_PER_MILLION_WRU,
    LAMBDA_CONCURRENCY,
    LAMBDA_PER_MILLION,
    MAP_CHILDREN,
    S3_GET_PER_1000,
    SFN_PER_1000_TRANSITIONS,
    WRITE_S,
    ddb_seconds,
)
from s3ingest.floor import S3_GETS_PER_PREFIX_PER_S, TABLE_QUOTA_PER_S, floor_segments
from s3ingest.settings import DEFAULTS

#: Lambda (arm64) per GB-second, the reprocess functions' architecture.
#: https://aws.amazon.com/lambda/pricing/
LAMBDA_ARM_PER_GB_S = 0.0000133334
#: The segment function's memory, GB (``reconcileMemoryMb``, the setting the stack gives it).
SEGMENT_MEMORY_GB = DEFAULTS["reconcileMemoryMb"] / 1024
#: Keys a segment worker runs at once (``recordConcurrency``, its ``RECORD_CONCURRENCY``).
KEYS_AT_ONCE = int(DEFAULTS["recordConcurrency"])
#: A Lambda invocation's longest run, seconds; a segment call returns 60 s before it.
#: https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html
CALL_S = 900 - 60
#: State transitions of one segment call and of the run's plan, Map and summary
#: (s3ingest_fn.services.reprocess).
TRANSITIONS_PER_CALL, TRANSITIONS_PER_RUN = 3, 8
#: A Scan reads up to 1 MB a request; a row is at most 1 KB (``python -m bench --only
#: rowsize``), read eventually consistent: half a read unit per 4 KB.
#: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html
ROW_BYTES = 1024

# -- Assumed latencies (not published figures; change them to your own measurements) ----------

#: The processor's own work per key, seconds (assumed: a pinned GetObject of a small object and
#: a little compute). The processor is the team's: measure yours.
PROCESSOR_S = 0.05


@dataclass
class PerKey:
    """Requests per key brought up to date, as the local run counted them."""

    ledger_writes: float
    scan_pages: float
    processor_runs: float
    #: The processor's own pinned reads (GetObject), priced apart: they are the processor's.
    s3_gets: float


def reprocess_model(
    keys: int,
    per: PerKey,
    *,
    segments: int = 16,
    concurrency: int = KEYS_AT_ONCE,
    rate: float | None = None,
    warm_units_per_s: int | None = None,
) -> dict[str, float | str]:
    """Time and cost of bringing one processor up to date with ``keys`` keys.

    The workers' rate: ``segments`` children (at most the account's Lambda concurrency and the
    Map's children), each running ``concurrency`` keys at once, a key taking its ledger writes
    plus the processor's time. The ledger's rate: DynamoDB's on-demand ramp for the writes.
    ``rate`` (``--rate``): the operator's cap. The slowest binds. Every child's Lambda runs
    for the whole run (paced, when something else binds), and is billed so.
    """
    children = min(segments, LAMBDA_CONCURRENCY, MAP_CHILDREN)
    key_s = per.ledger_writes * WRITE_S + per.processor_runs * PROCESSOR_S
    worker_rate = children * concurrency / key_s
    limits = {
        "segment workers": keys / worker_rate,
        "DynamoDB write throughput": ddb_seconds(keys * per.ledger_writes, warm_units_per_s),
    }
    if rate is not None:
        limits["--rate"] = keys / rate
    binding = max(limits, key=lambda k: limits[k])
    seconds = limits[binding]
    busy_gb_s = children * seconds * SEGMENT_MEMORY_GB
    calls = children * max(1.0, seconds / CALL_S)
    ledger_cost = (
        keys * per.ledger_writes / 1e6 * DDB_PER_MILLION_WRU
        + keys * ROW_BYTES / 4096 / 2 / 1e6 * DDB_PER_MILLION_RRU
    )
    run_cost = (
        ledger_cost
        + calls / 1e6 * LAMBDA_PER_MILLION
        + busy_gb_s * LAMBDA_ARM_PER_GB_S
        + (calls * TRANSITIONS_PER_CALL + TRANSITIONS_PER_RUN) / 1000 * SFN_PER_1000_TRANSITIONS
    )
    return {
        "seconds": seconds,
        "worker_seconds": limits["segment workers"],
        "ledger_seconds": limits["DynamoDB write throughput"],
        "binding": binding,
        "cost_usd": run_cost,
        "ledger_cost_usd": ledger_cost,
        "processor_reads_usd": keys * per.s3_gets / 1000 * S3_GET_PER_1000,
    }


def report(per: PerKey, keys: int = 50_000_000) -> list[str]:
    """Printable lines: the default run, wider ones (the segments the CLI picks for a ledger
    warmed to the 40,000 quota, :func:`s3ingest.floor.floor_segments`), ones capped by
    ``--rate``, and S3's per-prefix GET floor for the processor's reads."""
    lines = []
    chosen = floor_segments(keys, TABLE_QUOTA_PER_S)
    for label, kwargs in (
        (f"defaults (16 segments x {KEYS_AT_ONCE} at once)", {}),
        ("--segments 128 --concurrency 128", {"segments": 128}),
        ("the same, ledger pre-warmed to 40,000 WRU/s", {"segments": 128}),
        (
            f"the CLI's choice, ledger pre-warmed to 40,000 WRU/s ({chosen} segments)",
            {"segments": chosen},
        ),
        ("--rate 1000", {"rate": 1000.0}),
        ("--rate 1000 --concurrency 4", {"rate": 1000.0, "segments": 4}),
    ):
        warm = TABLE_QUOTA_PER_S if "pre-warmed" in label else None
        m = reprocess_model(keys, per, warm_units_per_s=warm, **kwargs)
        lines.append(
            f"{label}: {float(m['seconds']) / 3600:.1f} h (workers "
            f"{float(m['worker_seconds']) / 3600:.1f} h, ledger "
            f"{float(m['ledger_seconds']) / 3600:.1f} h; binds: {m['binding']}), "
            f"${float(m['cost_usd']):.2f} (ledger ${float(m['ledger_cost_usd']):.2f}; the "
            f"processor's own reads ${float(m['processor_reads_usd']):.2f} on top)"
        )
    floor_min = keys * per.s3_gets / S3_GETS_PER_PREFIX_PER_S / 60
    lines.append(
        f"S3's per-prefix floor: {floor_min:.1f} min for the processor's reads "
        f"({per.s3_gets:.2f} GET a key) if the keys share one partitioned prefix "
        f"({S3_GETS_PER_PREFIX_PER_S:,} GET a second; "
        "https://docs.aws.amazon.com/AmazonS3/latest/userguide/optimizing-performance.html)"
    )
    return lines
