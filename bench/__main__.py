"""Run the benchmarks: ``python -m bench [--events N] [--only NAME ...]``.

Prints one block per benchmark with its figures, the ratio to its baseline and the target.
Targets are reported, not asserted: this machine is shared and noisy.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")


def main(argv: list[str] | None = None) -> int:
    from bench import (
        attestation_fanout,
        attestation_tree,
        backfill_cost,
        batch_concurrency,
        bundle_cold_start,
        effects_cost,
        history_writer,
        onboard,
        processor_writes,
        reconcile_diff,
        records_per_message,
        reprocess,
        requests_per_event,
        row_size,
        runtime_speed,
    )

    benches = {
        "requests": lambda a: requests_per_event.run(a.events, a.seed, not a.no_version_deletes),
        "concurrency": lambda a: batch_concurrency.run(),
        "bundle": lambda a: bundle_cold_start.run(a.bundle_runs),
        "reconcile": lambda a: reconcile_diff.run(a.rows, a.baseline_rows),
        "backfill": lambda a: backfill_cost.run(),
        "effects": lambda a: effects_cost.run(a.effect_events, a.seed),
        "rowsize": lambda a: row_size.run(),
        "onboard": lambda a: onboard.run(a.onboard_objects, a.live_operations, a.seed),
        "processors": lambda a: processor_writes.run(a.processor_events, a.seed),
        "records": lambda a: records_per_message.run(),
        "reprocess": lambda a: reprocess.run(a.reprocess_keys, a.live_operations, a.seed),
        "runtime": lambda a: runtime_speed.run(a.runtime_events, a.runtime_samples, a.seed),
        "attest": lambda a: attestation_tree.run(a.attest_keys),
        "history": lambda a: history_writer.run(a.history_commits),
        "attest-fanout": lambda a: attestation_fanout.run(a.attest_keys),
    }
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "--events",
        type=int,
        default=10_000,
        help="events delivered in the requests-per-event run (default 10000)",
    )
    parser.add_argument(
        "--effect-events",
        type=int,
        default=500,
        help="deliveries in the effects run: s3ingest's effect protocol against "
        "Powertools idempotency around the same hook (default 500; moto "
        "spends about 60 ms of CPU per delivery over the four designs)",
    )
    parser.add_argument(
        "--processor-events",
        type=int,
        default=200,
        help="deliveries in the processors run, for each of N = 1, 2, 3, 5 processors: "
        "s3ingest's protocol against Powertools idempotency around each processor (default 200)",
    )
    parser.add_argument(
        "--bundle-runs",
        type=int,
        default=15,
        help="runs of each variant in the bundle cold-start run, interleaved (default 15)",
    )
    parser.add_argument(
        "--runtime-events",
        type=int,
        default=400,
        help="events a sample in the runtime run: this tree's local runtime against commit "
        "488c6db's, built in the run (default 400)",
    )
    parser.add_argument("--runtime-samples", type=int, default=3)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument(
        "--no-version-deletes",
        action="store_true",
        help="requests run without deletes of single versions (which, as every "
        "delete, need a HEAD; they leave the row observed, CONTRACT C4/C7)",
    )
    parser.add_argument(
        "--rows",
        type=int,
        default=1_000_000,
        help="inventory and ledger rows in the reconciliation diff (default 10^6)",
    )
    parser.add_argument(
        "--baseline-rows",
        type=int,
        default=50_000,
        help="rows the one-GetItem-per-key baseline runs on, scaled linearly "
        "(default 50000; 0 runs it on all rows, about 20 minutes)",
    )
    parser.add_argument(
        "--onboard-objects",
        type=int,
        default=100_000,
        help="objects an existing local bucket holds before onboarding (default 100000; "
        "about 7 ms of CPU each on the emulator)",
    )
    parser.add_argument(
        "--live-operations",
        type=int,
        default=2_000,
        help="puts, overwrites and deletes delivered while the onboarding runs (default 2000)",
    )
    parser.add_argument(
        "--reprocess-keys",
        type=int,
        default=100_000,
        help="objects of a local bucket a processor added later is run over (default 100000)",
    )
    parser.add_argument(
        "--attest-keys",
        type=int,
        default=1_000_000,
        help="keys of the reconciliation's pass with the attestation's trees, beside the pass "
        "alone, and of the trees alone (default 10^6)",
    )
    parser.add_argument(
        "--history-commits",
        type=int,
        default=10,
        help="commits of each batch size (10, 100, 1000 changes) in the history run (default 10)",
    )
    parser.add_argument("--only", nargs="*", choices=sorted(benches), default=sorted(benches))
    args = parser.parse_args(argv)
    for name in args.only:
        started = time.perf_counter()
        print(f"== {name}", flush=True)
        benches[name](args)
        print(f"   ({time.perf_counter() - started:.1f} s)\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
