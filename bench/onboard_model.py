"""A model of onboarding a large existing bucket on AWS, from requests counted locally.

The local onboarding run (:mod:`bench.onboard`) counts every AWS request per object by kind; this
module turns those counts, AWS's published quotas and list prices into the time and cost of
onboarding N objects (50 million by default) two ways:

* **listing backfill** (``s3ingest onboard``): a Step Functions Distributed Map over key-range
  shards, each child listing its range (ListObjectVersions, 1,000 entries a page) and recording
  new keys with one conditional write each;
* **inventory + S3 Batch Operations** (the ``batch-operations`` engine): wait for the first S3
  Inventory report, then one Lambda invocation (one HEAD, one or two ledger requests) per object.

Every assumption is a named constant with its source; latencies are assumptions (marked so), not
measurements. ``docs/onboarding-model.md`` explains the model and its result.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from s3ingest.floor import S3_GETS_PER_PREFIX_PER_S, ramp_seconds
from s3ingest.onboard import PRICES

# -- Published quotas (us-east-1 defaults) ------------------------------------------------------

#: A new on-demand table serves up to 4,000 write request units a second at once, and up to
#: double its previous peak; more than double within 30 minutes may throttle.
#: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/on-demand-capacity-mode.html
DDB_NEW_TABLE_WRU_PER_S = 4_000
DDB_NEW_TABLE_RRU_PER_S = 12_000
DDB_DOUBLING_S = 30 * 60
#: Table-level throughput quota (each of reads and writes), on-demand.
#: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html
DDB_TABLE_QUOTA_PER_S = 40_000
#: Concurrent Lambda executions per account and Region (default quota).
#: https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html
LAMBDA_CONCURRENCY = 1_000
#: Distributed Map: up to 10,000 parallel child executions.
#: https://docs.aws.amazon.com/step-functions/latest/dg/state-map-distributed.html
MAP_CHILDREN = 10_000
#: The first S3 Inventory report is delivered within 48 hours of the configuration.
#: https://docs.aws.amazon.com/AmazonS3/latest/userguide/storage-inventory.html
FIRST_INVENTORY_S = 48 * 3_600

# -- List prices: those ``s3ingest onboard`` estimates with (s3ingest.onboard.PRICES, us-east-1),
# plus the ones only the inventory route and Lambda compute need -------------------------------

S3_LIST_PER_1000 = PRICES["s3:list"] * 1000
S3_GET_PER_1000 = PRICES["s3:get"] * 1000
DDB_PER_MILLION_WRU = PRICES["dynamodb:write"] * 1e6
DDB_PER_MILLION_RRU = PRICES["dynamodb:read"] * 1e6
LAMBDA_PER_MILLION = PRICES["lambda:invoke"] * 1e6
SFN_PER_1000_TRANSITIONS = PRICES["states:transition"] * 1000
#: S3 Inventory per million objects listed; S3 Batch Operations per job and per million objects.
#: https://aws.amazon.com/s3/pricing/ (Management and insights; Batch Operations)
S3_INVENTORY_PER_MILLION = 0.0025
BATCH_OPS_PER_JOB = 0.25
BATCH_OPS_PER_MILLION = 1.00
#: Lambda (x86) per GB-second. https://aws.amazon.com/lambda/pricing/
LAMBDA_PER_GB_S = 0.0000166667

# -- Assumed latencies (not published figures; change them to your own measurements) ----------

#: One ListObjectVersions page of 1,000 entries, seconds (assumed).
LIST_PAGE_S = 0.25
#: One conditional PutItem/UpdateItem from Lambda in the same Region, seconds (assumed).
WRITE_S = 0.008
#: One HEAD from Lambda in the same Region, seconds (assumed).
HEAD_S = 0.015


@dataclass
class PerObject:
    """AWS requests per object by kind, as the local run counted them."""

    list_requests: float
    ledger_writes: float
    ledger_reads: float
    heads: float
    lambda_invocations: float
    #: Any other request, by operation name (reported, not priced).
    other: dict[str, float] = field(default_factory=dict)


def ddb_seconds(units: float, warm_units_per_s: int | None) -> float:
    """Seconds to consume ``units`` write units on an on-demand table that starts at 4,000/s
    (or ``warm_units_per_s`` when pre-warmed) and doubles every 30 minutes, up to the table
    quota (:func:`s3ingest.floor.ramp_seconds`, what the CLI estimates with)."""
    return ramp_seconds(units, warm_units_per_s)


def listing_model(
    objects: int,
    per: PerObject,
    *,
    shards: int = 32,
    record_concurrency: int = 16,
    lambda_memory_gb: float = 0.5,
    warm_units_per_s: int | None = None,
) -> dict[str, float | str]:
    """Time and cost of the listing backfill of ``objects`` objects.

    The listers' rate is ``shards`` children, each listing a page then recording its new keys
    ``record_concurrency`` at a time; the ledger's rate is DynamoDB's on-demand ramp. The slower
    one binds.
    """
    page_s = LIST_PAGE_S + 1_000 * (per.ledger_writes * WRITE_S + per.heads * HEAD_S) / max(
        record_concurrency, 1
    )
    children = min(shards, LAMBDA_CONCURRENCY, MAP_CHILDREN)
    lister_rate = children * 1_000 / page_s
    lister_s = objects / lister_rate
    ledger_s = ddb_seconds(objects * per.ledger_writes, warm_units_per_s)
    seconds = max(lister_s, ledger_s)
    binding = "DynamoDB write throughput" if ledger_s >= lister_s else "listing shards"
    lambda_gb_s = children * seconds * lambda_memory_gb
    cost = (
        objects * per.list_requests / 1_000 * S3_LIST_PER_1000
        + objects * per.heads / 1_000 * S3_GET_PER_1000
        + objects * per.ledger_writes / 1e6 * DDB_PER_MILLION_WRU
        + objects * per.ledger_reads / 1e6 * DDB_PER_MILLION_RRU
        + objects * per.lambda_invocations / 1e6 * LAMBDA_PER_MILLION
        + lambda_gb_s * LAMBDA_PER_GB_S
        + objects * per.lambda_invocations * 3 / 1_000 * SFN_PER_1000_TRANSITIONS
    )
    return {
        "seconds": seconds,
        "lister_seconds": lister_s,
        "ledger_seconds": ledger_s,
        "binding": binding,
        "cost_usd": cost,
    }


def inventory_model(
    objects: int,
    *,
    heads: float = 1.0,
    ledger_writes: float = 1.0,
    ledger_reads: float = 1.0,
    task_s: float = 0.05,
    lambda_memory_gb: float = 0.5,
    warm_units_per_s: int | None = None,
) -> dict[str, float | str]:
    """Time and cost of the inventory + S3 Batch Operations backfill: the first report's wait,
    then one Lambda invocation per object (invocation schema 2.0 carries one task)."""
    lambda_rate = LAMBDA_CONCURRENCY / task_s
    run_s = max(objects / lambda_rate, ddb_seconds(objects * ledger_writes, warm_units_per_s))
    cost = (
        objects / 1e6 * S3_INVENTORY_PER_MILLION
        + BATCH_OPS_PER_JOB
        + objects / 1e6 * BATCH_OPS_PER_MILLION
        + objects * heads / 1_000 * S3_GET_PER_1000
        + objects * ledger_writes / 1e6 * DDB_PER_MILLION_WRU
        + objects * ledger_reads / 1e6 * DDB_PER_MILLION_RRU
        + objects / 1e6 * LAMBDA_PER_MILLION
        + objects * task_s * lambda_memory_gb * LAMBDA_PER_GB_S
    )
    return {
        "seconds": FIRST_INVENTORY_S + run_s,
        "wait_seconds": FIRST_INVENTORY_S,
        "run_seconds": run_s,
        "cost_usd": cost,
    }


def report(per: PerObject, objects: int = 50_000_000, shards: int = 32) -> list[str]:
    """Printable lines: the listing backfill at default quotas, pre-warmed, and the inventory
    route, for ``objects`` objects."""
    lines = []
    for label, warm in (
        ("default quotas", None),
        ("ledgerWarmWriteUnits=20000", 20_000),
        ("ledgerWarmWriteUnits=40000 (the table quota: the floor)", DDB_TABLE_QUOTA_PER_S),
    ):
        m = listing_model(objects, per, shards=shards, warm_units_per_s=warm)
        lines.append(
            f"listing backfill, {label}: {float(m['seconds']) / 60:.0f} min "
            f"(listers {float(m['lister_seconds']) / 60:.0f} min, ledger "
            f"{float(m['ledger_seconds']) / 60:.0f} min; binds: {m['binding']}), "
            f"${float(m['cost_usd']):.2f}"
        )
    lines.append(
        f"S3's per-prefix floor: {objects * per.heads / S3_GETS_PER_PREFIX_PER_S / 60:.1f} min "
        f"for the HEADs ({per.heads:.2f} an object) if the keys share one partitioned prefix "
        f"({S3_GETS_PER_PREFIX_PER_S:,} GET/HEAD a second; "
        "https://docs.aws.amazon.com/AmazonS3/latest/userguide/optimizing-performance.html)"
    )
    inv = inventory_model(objects, heads=1.0)
    lines.append(
        f"inventory + Batch Operations: {float(inv['seconds']) / 3600:.1f} h "
        f"(first report up to {float(inv['wait_seconds']) / 3600:.0f} h, then "
        f"{float(inv['run_seconds']) / 60:.0f} min), ${float(inv['cost_usd']):.2f}"
    )
    return lines
