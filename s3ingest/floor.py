"""How long a big onboarding or reprocess takes at the ledger's floor, from the bucket's size.

Pure functions (no AWS call but :func:`bucket_objects` and :func:`ledger_size`, which take a
client): ``s3ingest onboard`` and ``s3ingest reprocess`` print :func:`Estimate.lines` before they
start when the table's on-demand ramp binds, and ``bench/onboard_model.py`` and
``bench/reprocess_model.py`` model with the same figures.

The ramp: a new on-demand table serves 4,000 write units a second at once and up to double its
previous peak, more than double within 30 minutes may throttle
(https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/on-demand-capacity-mode.html);
a table's warm throughput is what it serves at once, raised ahead of a peak by pre-warming
(https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/warm-throughput.html: the
stack's ``ledgerWarmWriteUnits`` setting); 40,000 write units a second is the default table
quota (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html).
S3 serves 5,500 GET/HEAD a second per partitioned prefix
(https://docs.aws.amazon.com/AmazonS3/latest/userguide/optimizing-performance.html).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

#: Write units a second a new on-demand table serves at once.
NEW_TABLE_WRITES_PER_S = 4_000
#: The on-demand ramp's window: up to double the previous peak within it.
DOUBLING_S = 30 * 60
#: The default table quota, write units a second (on-demand).
TABLE_QUOTA_PER_S = 40_000
#: S3 GET/HEAD requests a second per partitioned prefix.
S3_GETS_PER_PREFIX_PER_S = 5_500
#: USD per provisioned write capacity unit-hour, us-east-1 (https://aws.amazon.com/dynamodb/pricing/provisioned/).
#: The warm-throughput charge is priced as one hour of it at the target (an assumption: the
#: cost of the pre-warming procedure of switching to provisioned capacity at the peak and back,
#: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/pre-warming-on-demand-capacity-mode.html;
#: check the pricing page for warm throughput's own price).
WCU_HOUR_USD = 0.00065
#: The stack setting that pre-warms the ledger's writes.
WARM_SETTING = "ledgerWarmWriteUnits"
#: Ledger writes per object an onboarding records (one conditional write per new key) and per
#: key a reprocess brings up to date (its claim and its commit).
ONBOARD_WRITES_PER_OBJECT = 1.0
REPROCESS_WRITES_PER_KEY = 2.0
#: A reprocess key's time, seconds: its two ledger writes (8 ms each, assumed) and the
#: processor's work (50 ms, assumed: bench/reprocess_model.py); keys a segment runs at once.
REPROCESS_KEY_S = 2 * 0.008 + 0.05
KEYS_AT_ONCE = 16
#: Segments of a reprocess that names none (s3ingest_fn.services.reprocess.DEFAULT_SEGMENTS),
#: the most run at once by default, and keys a segment has at least when more are chosen.
DEFAULT_SEGMENTS = 16
MAX_SEGMENTS = 1_000
KEYS_PER_SEGMENT = 50_000


def ramp_seconds(units: float, start_per_s: float | None = None) -> float:
    """Seconds to consume ``units`` write units on an on-demand table serving ``start_per_s``
    at once (default: a new table's 4,000), doubling every 30 minutes up to the table quota."""
    rate = min(start_per_s or NEW_TABLE_WRITES_PER_S, TABLE_QUOTA_PER_S)
    elapsed, left = 0.0, float(units)
    while left > 0:
        step = rate * DOUBLING_S
        if left <= step:
            return elapsed + left / rate
        elapsed, left = elapsed + DOUBLING_S, left - step
        rate = min(rate * 2, TABLE_QUOTA_PER_S)
    return elapsed


def warm_cost_usd(units_per_s: int) -> float:
    """The assumed one-time charge of pre-warming to ``units_per_s`` write units (see
    :data:`WCU_HOUR_USD`)."""
    return units_per_s * WCU_HOUR_USD


@dataclass(frozen=True)
class Estimate:
    """The ledger's writes of a run at the ramp and at the floor.

    ``seconds``: at the table's warm throughput now (``warm_now``, else a new table's), ramping;
    ``floor_seconds``: warmed to the table quota; ``ramp_binds``: the run outlasts the first
    30-minute window, so the ramp, not the table quota, sets its length."""

    what: str
    items: int
    write_units: float
    warm_now: int
    seconds: float
    floor_seconds: float
    ramp_binds: bool
    s3_prefix_floor_seconds: float = 0.0

    def lines(self) -> list[str]:
        """What the CLI prints: the estimate, the warm setting and its cost, S3's floor."""
        out = [
            f"estimate: {self.what} {self.items:,} keys, {self.write_units:,.0f} ledger writes: "
            f"about {self.seconds / 60:.0f} min on the table's on-demand ramp (from "
            f"{self.warm_now:,} write units/s, doubling every 30 min); the ramp binds."
        ]
        out.append(
            f"  warmed to {TABLE_QUOTA_PER_S:,} ({WARM_SETTING}={TABLE_QUOTA_PER_S}, "
            f"the table quota; one-time about ${warm_cost_usd(TABLE_QUOTA_PER_S):.2f}, "
            f"assumed): about {self.floor_seconds / 60:.0f} min, the ledger's floor."
        )
        if self.s3_prefix_floor_seconds:
            out.append(
                f"  S3: at least {self.s3_prefix_floor_seconds / 60:.0f} min for the objects' "
                f"reads if the keys share one partitioned prefix "
                f"({S3_GETS_PER_PREFIX_PER_S:,} GET/s)."
            )
        return out


def estimate(
    what: str,
    items: int,
    writes_per_item: float,
    warm_now: int | None = None,
    gets_per_item: float = 0.0,
) -> Estimate:
    """The estimate of ``items`` keys, ``writes_per_item`` ledger writes each, on a table whose
    warm write throughput is ``warm_now`` (None: a new table's)."""
    units = items * writes_per_item
    start = min(warm_now or NEW_TABLE_WRITES_PER_S, TABLE_QUOTA_PER_S)
    return Estimate(
        what=what,
        items=items,
        write_units=units,
        warm_now=start,
        seconds=ramp_seconds(units, start),
        floor_seconds=units / TABLE_QUOTA_PER_S,
        ramp_binds=start < TABLE_QUOTA_PER_S and units > start * DOUBLING_S,
        s3_prefix_floor_seconds=items * gets_per_item / S3_GETS_PER_PREFIX_PER_S,
    )


def floor_segments(keys: int, warm_units_per_s: int | None) -> int:
    """Segments a reprocess of ``keys`` keys needs for its writes to reach the table's warm
    throughput (capped by the quota): at least :data:`DEFAULT_SEGMENTS`, at most
    :data:`MAX_SEGMENTS`, and no more than one per :data:`KEYS_PER_SEGMENT` keys."""
    rate = min(warm_units_per_s or NEW_TABLE_WRITES_PER_S, TABLE_QUOTA_PER_S)
    per_segment = KEYS_AT_ONCE / REPROCESS_KEY_S * REPROCESS_WRITES_PER_KEY
    need = math.ceil(rate / per_segment)
    by_size = math.ceil(keys / KEYS_PER_SEGMENT)
    return max(DEFAULT_SEGMENTS, min(need, by_size, MAX_SEGMENTS))


def bucket_objects(cloudwatch: Any, bucket: str, now: datetime | None = None) -> int | None:
    """The bucket's object count from S3's daily storage metric (``NumberOfObjects``, all
    storage types, the latest of the last three days), or None when there is none."""
    end = now or datetime.now(UTC)
    out = cloudwatch.get_metric_statistics(
        Namespace="AWS/S3",
        MetricName="NumberOfObjects",
        Dimensions=[
            {"Name": "BucketName", "Value": bucket},
            {"Name": "StorageType", "Value": "AllStorageTypes"},
        ],
        StartTime=end - timedelta(days=3),
        EndTime=end,
        Period=86_400,
        Statistics=["Average"],
    )
    points = sorted(out.get("Datapoints", []), key=lambda p: p["Timestamp"])
    return int(points[-1]["Average"]) if points else None


def ledger_size(dynamodb: Any, table: str) -> tuple[int, int | None]:
    """The ledger's item count (DynamoDB updates it about every six hours) and its warm write
    throughput (None when the table reports none)."""
    described = dynamodb.describe_table(TableName=table)["Table"]
    warm = described.get("WarmThroughput", {}).get("WriteUnitsPerSecond")
    return int(described.get("ItemCount", 0)), (int(warm) if warm else None)
