"""``s3ingest local demo``: the live pipeline on the emulator under chaotic delivery.

The workload writes objects with hostile keys (spaces, ``+``, ``%``, non-ASCII, a trailing ``/``,
a long key), overwrites them, deletes some (delete markers in the versioned bucket), deletes
single versions, and delivers S3's events with duplicates, reordering and (by default 10%) drops: a
dropped event is lost for good, as after a misconfigured rule. An ``s3:TestEvent`` and one
malformed message ride along to show the ``ignored`` and ``invalid`` outcomes. Then one
reconciliation against an S3 Inventory report of the bucket (written in the real format) finds
what the lost events left behind and repairs it through the ingest queue. The report gives the
events per outcome, the drift found, and whether the ledger equals the bucket.

Effects (CONTRACT C11): the example processor writes a JSON sidecar per object to a separate
output bucket for every applied change, and by default 5% of workers are killed between an effect
and its commit; every applied change is also published on the change bus. The report checks that
the effects ran in order with only crash-caused repeats and that the sidecars match the bucket.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from s3ingest.local.emulator.chaos import Chaos
from s3ingest.local.emulator.server import Emulator
from s3ingest.local.stack.runtime import BATCH_OPERATIONS, LocalRuntime, local_settings
from s3ingest.onboard import OnProgress as OnboardProgress
from s3ingest.settings import Settings

HOSTILE_KEYS = (
    "reports/2026-11-30 daily.csv",
    "a+b=c&d.txt",
    "100%/done.json",
    "café/naïve résumé.pdf",
    "日本語/ファイル.txt",
    "folder/",
    "deep/" + "x" * 200 + "/" + "y" * 200 + ".bin",
    "this im + age blah.txt",
    "a@b",
    "5:00.log",
    "plain.txt",
    "tab\tand~tilde.txt",
)

TEST_EVENT = (
    '{"Service":"Amazon S3","Event":"s3:TestEvent","Time":"2026-11-30T00:00:00.000Z",'
    '"Bucket":"%s","RequestId":"5582815E1AEA5ADF","HostId":"demo"}'
)


@dataclass(frozen=True)
class DemoOptions:
    """Demo knobs: rounds of operations, random seed, duplicate and drop probabilities, and the
    reconciliation source (``None``: no reconciliation)."""

    rounds: int = 3
    seed: int = 7
    duplicate: float = 0.3
    drop: float = 0.1
    reconcile: str | None = "inventory"
    reconcile_prefix: str = ""
    reconcile_dry_run: bool = False
    #: Reconcile with the stack's fan-out state machine (``inventory`` only).
    reconcile_fan_out: bool = False
    crash: float = 0.05


def run_demo(
    options: DemoOptions,
    settings: Settings | None = None,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """Run the demo and return its report.

    Parameters
    ----------
    options : DemoOptions
    settings : Settings, optional
    on_progress : callable, optional
        ``on_progress(phase, done, total)``; ``total`` is the number of events to process.

    Returns
    -------
    dict
        ``{"bucket", "operations", "events_emitted", "events_delivered", "events_dropped",
        "differences_before_reconciliation", "reconciliation", "outcomes", "invocations",
        "dead_letter_queue", "effects", "converged", "differences", "ledger_rows",
        "visible_objects"}``; ``effects`` is :meth:`LocalRuntime.effects_report`, and
        ``converged`` also needs its problem lists empty.
    """
    rng = random.Random(options.seed)
    with Emulator() as emu:
        rt = LocalRuntime(
            emu, settings or local_settings(), versioning="Enabled", seed=options.seed
        )
        s3 = rt.faithful
        versions: dict[str, list[str]] = {k: [] for k in HOSTILE_KEYS}
        delivered_total = 0
        processed = 0

        def progress(n: int) -> None:
            nonlocal processed
            processed += n
            if on_progress:
                on_progress("ingest", processed, delivered_total)

        for rnd in range(options.rounds):
            for key in HOSTILE_KEYS:
                op = s3.put(key, f"{key} round {rnd} {rng.random()}")
                if op.version_id:
                    versions[key].append(op.version_id)
            for key in rng.sample(HOSTILE_KEYS, 4):
                s3.put(key, f"overwrite {rnd} {rng.random()}")
            for key in rng.sample(HOSTILE_KEYS, 3):
                s3.delete(key)  # a delete marker
            for key in rng.sample(HOSTILE_KEYS, 2):
                if versions[key]:  # remove one old version: the key's visibility may not change
                    s3.delete(key, versions[key].pop(0))
            chaos = Chaos(
                seed=options.seed + rnd,
                duplicate=options.duplicate,
                reorder=True,
                drop=options.drop,
                crash=options.crash,
            )
            delivered_total += rt.flush(chaos)
            if rnd == 0:
                rt.send_raw(TEST_EVENT % rt.resources.bucket)
                rt.send_raw('{"detail-type": "Object Created", "detail": ')  # malformed
                delivered_total += 2
            rt.drain(on_batch=progress)
        before = rt.compare()
        reconciliation = None
        if options.reconcile:
            if on_progress:
                on_progress("reconcile", processed, delivered_total)
            if options.reconcile_fan_out:
                reconciliation = rt.reconcile_fan_out(
                    prefix=options.reconcile_prefix, dry_run=options.reconcile_dry_run
                )
            else:
                reconciliation = rt.reconcile(
                    options.reconcile,
                    prefix=options.reconcile_prefix,
                    dry_run=options.reconcile_dry_run,
                ).as_dict()
        comparison = rt.compare()
        effects = rt.effects_report()
        effects_ok = not effects["problems"] and not effects["sidecar_differences"]
        return {
            "bucket": rt.resources.bucket,
            "operations": len(s3.log),
            "events_emitted": len(s3.log),
            "events_delivered": delivered_total,
            "events_dropped": len(rt.dropped),
            "differences_before_reconciliation": len(before.differences),
            "reconciliation": reconciliation,
            "outcomes": dict(sorted(rt.outcome_counts().items())),
            "invocations": rt.invocations,
            "dead_letter_queue": rt.dead_letters(),
            "effects": effects,
            "converged": comparison.converged and effects_ok,
            "differences": comparison.differences
            + effects["problems"]
            + effects["sidecar_differences"],
            "ledger_rows": len(comparison.ledger),
            "visible_objects": len(comparison.bucket),
        }


def run_backfill_demo(
    objects: int = 60,
    live_operations: int = 20,
    seed: int = 7,
    on_progress: Callable[[str, int, int], None] | None = None,
    *,
    engine: str = BATCH_OPERATIONS,
    max_failures: int = 0,
) -> dict[str, Any]:
    """Backfill locally: ``objects`` exist before the pipeline (their events never reach it),
    an S3 Inventory report is written, and the backfill runs with ``engine`` while
    ``live_operations`` happen and are delivered (duplicated, reordered).

    The backfill is an execution of the stack's state machine for ``engine``; the live
    operations happen after the inventory report and before the execution (its tasks run inside
    the machine), so the backfill meets objects changed since the snapshot.

    Returns
    -------
    dict
        The backfill's report (:meth:`LocalRuntime.backfill`: ``total``, ``succeeded``,
        ``failed``, ``execution``; ``jobId`` and ``reportManifest`` for a job) plus
        ``converged``, ``differences``, ``ledger_rows``, ``visible_objects``.
    """
    rng = random.Random(seed)
    keys = [f"archive/{i:04d} {rng.choice(HOSTILE_KEYS)}" for i in range(objects)]
    with Emulator() as emu:
        rt = LocalRuntime(emu, settings=None, versioning="Enabled", seed=seed)
        for key in keys:
            rt.faithful.put(key, f"pre-existing {key}")
        rt.faithful.take_pending()  # these events happened before the pipeline existed
        manifest = rt.write_inventory()
        remaining = live_operations

        def live(index: int) -> None:
            nonlocal remaining
            if on_progress:
                on_progress("backfill tasks", index, objects)
            if remaining and rng.random() < live_operations / max(objects, 1):
                remaining -= 1
                key = rng.choice(keys)
                rt.faithful.delete(key) if rng.random() < 0.3 else rt.faithful.put(key, "live")
                rt.flush(Chaos(seed=rng.randint(0, 999), duplicate=0.3, reorder=True))
                rt.drain()

        try:
            for index in range(objects):
                live(index)
            if on_progress:
                on_progress(f"backfill execution ({engine})", 0, objects)
            report = rt.backfill(manifest, engine=engine, max_failures=max_failures)
            rt.flush(Chaos(seed=seed, duplicate=0.3, reorder=True))
            rt.drain()
            comparison = rt.compare()
        finally:
            rt.close()
        return {
            **report,
            "bucket": rt.resources.bucket,
            "converged": comparison.converged,
            "differences": comparison.differences,
            "ledger_rows": len(comparison.ledger),
            "visible_objects": len(comparison.bucket),
        }


#: The existing bucket of :func:`run_existing_demo` (its name, and its first key prefix).
EXISTING_BUCKET = "team-archive-existing"


def run_existing_demo(
    objects: int = 200,
    live_operations: int = 30,
    seed: int = 7,
    on_progress: OnboardProgress | None = None,
    *,
    onboard_twice: bool = False,
) -> dict[str, Any]:
    """Onboard an existing bucket locally, as ``s3ingest onboard`` does on AWS: the bucket,
    versioned, holds ``objects`` objects (hostile keys) before the pipeline and has another
    team's SQS notification and inventory configurations; S3 sends it no EventBridge events
    yet. :meth:`LocalRuntime.onboard` switches delivery on (the foreign entries kept), runs the
    listing backfill machine while ``live_operations`` puts, overwrites and deletes happen and
    are delivered (duplicated, reordered), then reconciles the bucket by listing.
    ``onboard_twice`` runs onboarding again afterwards (it resumes: every shard is done).

    Returns
    -------
    dict
        ``{"bucket", "objects_before", "live_operations", "onboard": <report>, "onboard_again":
        <report> | None, "bucket_config", "foreign_config_intact", "converged", "differences",
        "ledger_rows", "visible_objects", "effects"}``.
    """
    from s3ingest.local.stack.provisioning import (
        FOREIGN_INVENTORY_ID,
        FOREIGN_QUEUE_ID,
        LocalBucket,
    )
    from s3ingest.settings import BucketSpec

    rng = random.Random(seed)
    keys = [f"{i:05d}/{rng.choice(HOSTILE_KEYS)}" for i in range(objects)]
    spec = BucketSpec(name=EXISTING_BUCKET, existing=True)
    with Emulator() as emu:
        rt = LocalRuntime(
            emu,
            local_settings(),
            seed=seed,
            buckets=[LocalBucket(spec, versioning="Enabled", foreign_config=True)],
        )
        try:
            for key in keys:
                rt.faithful.put(key, f"pre-existing {key}")
            emitted_before = rt.flush()  # S3 sent nothing: EventBridge delivery is off
            remaining = live_operations

            def live() -> None:
                nonlocal remaining
                for _ in range(min(remaining, 5)):
                    remaining -= 1
                    key = rng.choice(keys)
                    if rng.random() < 0.3:
                        rt.faithful.delete(key)
                    else:
                        rt.faithful.put(key, f"live {rng.random()}")
                rt.flush(Chaos(seed=rng.randint(0, 999), duplicate=0.3, reorder=True))
                rt.drain()

            report = rt.onboard(on_progress=on_progress, between=live)
            while remaining:  # traffic the backfill outran, delivered afterwards
                live()
            again = rt.onboard(on_progress=on_progress) if onboard_twice else None
            comparison = rt.compare()
            effects = rt.effects_report()
            config = rt.bucket_config()[EXISTING_BUCKET]
        finally:
            rt.close()
        intact = any(
            q.get("Id") == FOREIGN_QUEUE_ID
            for q in config["notification"].get("QueueConfigurations", [])
        ) and any(c["Id"] == FOREIGN_INVENTORY_ID for c in config["inventory"])
        effects_ok = not effects["problems"] and not effects["sidecar_differences"]
        return {
            "bucket": EXISTING_BUCKET,
            "objects_before": objects,
            "events_before_onboarding": emitted_before,
            "live_operations": live_operations,
            "onboard": report,
            "onboard_again": again,
            "bucket_config": {EXISTING_BUCKET: config},
            "foreign_config_intact": intact,
            "event_bridge_on": "EventBridgeConfiguration" in config["notification"],
            "converged": comparison.converged and effects_ok and report["status"] == "done",
            "differences": comparison.differences
            + effects["problems"]
            + effects["sidecar_differences"],
            "ledger_rows": len(comparison.ledger),
            "visible_objects": len(comparison.bucket),
            "effects": effects,
        }


#: The breaker of :func:`run_hold_demo`: deletes beyond this many per window are held.
HOLD_DEMO_ABOVE = 5


def run_hold_demo(
    objects: int = 40,
    deleted: int = 30,
    seed: int = 7,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """A mass delete held by the breaker, then approved (``s3ingest local demo
    --hold-deletes``): ``objects`` are put and ingested (the example processor writes their
    sidecars), then ``deleted`` of them are deleted at once (an ``aws s3 rm --recursive``),
    delivered duplicated and reordered, with the hold policy ``{"deletes": {"above":
    HOLD_DEMO_ABOVE, "windowSeconds": 300}}``; then every held delete is approved.

    Returns
    -------
    dict
        ``objects``, ``deleted``, ``tombstoned`` (ledger rows deleted after the mass delete),
        ``ran_before_review`` (delete effects run before any approval), ``held`` (held
        changes then), ``approved`` (approvals applied), ``ran_after_approval``,
        ``held_after``, ``change_events_by_type``, ``converged``, ``effects_problems``,
        ``trail_example`` (one key's decision trail, newest first).
    """
    rng = random.Random(seed)
    keys = [f"published/{i:03d} {rng.choice(HOSTILE_KEYS)}" for i in range(objects)]
    hold = {"deletes": {"above": HOLD_DEMO_ABOVE, "windowSeconds": 300}}
    with Emulator() as emu:
        rt = LocalRuntime(emu, local_settings(hold=hold), versioning="Enabled", seed=seed)
        try:
            for key in keys:
                rt.faithful.put(key, f"evidence {key}")
            rt.flush(Chaos(seed=seed, duplicate=0.2, reorder=True))
            rt.drain()
            if on_progress:
                on_progress("ingested", objects, objects)
            removed_before = _removals(rt)
            for key in keys[:deleted]:
                rt.faithful.delete(key)
            rt.flush(Chaos(seed=seed + 1, duplicate=0.3, reorder=True))
            rt.drain()
            tombstoned = sum(1 for row in rt.ledger_rows() if not row.present)
            ran_before = _removals(rt) - removed_before
            held = rt.held()
            approved = 0
            for i, h in enumerate(held, start=1):
                done = rt.review(h["key"], "approved", bucket=h["bucket"])
                approved += sum(1 for d in done if d["applied"])
                if on_progress:
                    on_progress("approved", i, len(held))
            ran_after = _removals(rt) - removed_before - ran_before
            held_after = len(rt.held())
            comparison = rt.compare()
            fx = rt.effects_report()
            example = next((row for row in rt.ledger_rows() if row.trail), None)
        finally:
            rt.close()
    return {
        "bucket": rt.resources.bucket,
        "objects": objects,
        "deleted": deleted,
        "tombstoned": tombstoned,
        "breaker_above": HOLD_DEMO_ABOVE,
        "ran_before_review": ran_before,
        "held": len(held),
        "approved": approved,
        "ran_after_approval": ran_after,
        "held_after": held_after,
        "change_events_by_type": fx["change_events_by_type"],
        "converged": comparison.converged,
        "differences": comparison.differences,
        "effects_problems": fx["problems"] + fx["sidecar_differences"],
        "trail_example": (
            {
                "key": example.key,
                "decisions": [r.as_dict() for r in example.trail],
            }
            if example is not None
            else None
        ),
    }


def _removals(rt: LocalRuntime) -> int:
    """Completed processor runs for removals so far."""
    return sum(1 for run in rt.effects if run.kind == "removed" and not run.crashed_before_commit)
