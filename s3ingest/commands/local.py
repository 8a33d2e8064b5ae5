"""``s3ingest local``: the pipeline on the embedded emulator (needs the ``local`` extra)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

#: ``--reconcile`` choices of the demo (``none``: no reconciliation at the end).
DEMO_RECONCILE = ("inventory", "listing", "none")


def demo(
    *,
    rounds: int,
    seed: int,
    duplicate: float,
    drop: float,
    reconcile: str,
    crash: float,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """Run the live pipeline under chaotic delivery and return the demo's report
    (:func:`s3ingest.local.demo.run_demo`: outcomes, reconciliation, effects, ``converged``).

    ``reconcile`` is one of :data:`DEMO_RECONCILE`; ``on_progress(phase, done, total)``."""
    from s3ingest.local.demo import DemoOptions, run_demo

    return run_demo(
        DemoOptions(
            rounds=rounds,
            seed=seed,
            duplicate=duplicate,
            drop=drop,
            reconcile=None if reconcile == "none" else reconcile,
            crash=crash,
        ),
        on_progress=on_progress,
    )


def scenario(file: Path) -> dict[str, Any]:
    """Run a JSON Lines scenario on a fresh local deployment; its result document
    (:func:`s3ingest.local.scenario.run_scenario`).

    Raises
    ------
    s3ingest.local.scenario.ScenarioError
        An invalid scenario file.
    """
    from s3ingest.local.scenario import run_scenario

    return run_scenario(file)


def scenario_ok(result: dict[str, Any]) -> bool:
    """The scenario converged, its effects broke no rule and no step failed."""
    return bool(result["converged"] and not result["effects_problems"] and not result["error"])


def hold_demo(
    *, seed: int = 7, on_progress: Callable[[str, int, int], None] | None = None
) -> dict[str, Any]:
    """A mass delete held by the breaker, then approved
    (:func:`s3ingest.local.demo.run_hold_demo`): ``s3ingest local demo --hold-deletes``."""
    from s3ingest.local.demo import run_hold_demo

    return run_hold_demo(seed=seed, on_progress=on_progress)


def hold_demo_ok(report: dict[str, Any]) -> bool:
    """Nothing held ran before its approval, every held change was approved and ran, and the
    pipeline converged without effect problems."""
    return bool(
        report["ran_before_review"] <= report["breaker_above"]
        and report["held"] == report["deleted"] - report["ran_before_review"]
        and report["approved"] == report["held"]
        and report["ran_after_approval"] == report["held"]
        and report["held_after"] == 0
        and report["converged"]
        and not report["effects_problems"]
    )


def existing_demo(
    *,
    objects: int = 200,
    live_operations: int = 30,
    seed: int = 7,
    onboard_twice: bool = False,
    on_progress: Callable[[str, int, int | None, int], None] | None = None,
) -> dict[str, Any]:
    """Onboard an existing bucket that already holds objects, with live traffic during the
    backfill (:func:`s3ingest.local.demo.run_existing_demo`): ``s3ingest local demo
    --existing`` and ``s3ingest onboard --local``."""
    from s3ingest.local.demo import run_existing_demo

    return run_existing_demo(
        objects=objects,
        live_operations=live_operations,
        seed=seed,
        on_progress=on_progress,
        onboard_twice=onboard_twice,
    )
