"""``s3ingest onboard``: bring an existing bucket into the ledger (events on, listing backfill,
closing reconciliation), on a stack or locally.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from s3ingest.cli.app import app
from s3ingest.cli.context import (
    aws_call,
    connect_target,
    local_stack_running,
    one_target,
    require_local,
    require_outputs,
)
from s3ingest.cli.local import onboard_locally
from s3ingest.cli.options import EXIT_UNHEALTHY, BucketOption, StackOrLocal
from s3ingest.cli.render import OnboardBar, console, emit_onboard, foreign_entries
from s3ingest.outputs import INVENTORY_BUCKET_NAME, LISTING_BACKFILL_STATE_MACHINE_ARN


@app.command("onboard", short_help="Onboard an existing bucket: events on, backfill, reconcile.")
def onboard_command(
    ctx: typer.Context,
    stack: StackOrLocal = None,
    bucket: BucketOption = None,
    yes: Annotated[
        bool,
        typer.Option("--yes", help="Switch EventBridge delivery on without asking."),
    ] = False,
    local: Annotated[
        bool,
        typer.Option(
            "--local",
            help="Act on the running local stack (s3ingest local up), as --stack does; "
            "without one, run the same on a fresh local runtime: an existing bucket holding "
            "objects and another team's configurations, live traffic during the backfill.",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    closing_reconcile: Annotated[
        bool,
        typer.Option(
            "--reconcile/--no-reconcile",
            help="Run the closing listing reconciliation (default). For tens of millions of "
            "objects it takes longer than the backfill: --no-reconcile leaves it to the "
            "scheduled reconciliation (docs/onboarding-model.md).",
        ),
    ] = True,
) -> None:
    """Bring an existing bucket into the ledger while live traffic flows: check its
    EventBridge delivery and (after confirmation, or --yes) switch it on keeping every other
    notification configuration, run the listing backfill state machine with a progress bar,
    then a listing reconciliation that closes the window between the listing and the first
    events. Before it starts, when the ledger table's on-demand ramp binds, prints an estimate
    from the bucket's size (S3's daily NumberOfObjects metric) with the warm-throughput setting
    and its cost. Prints objects, elapsed time, requests by kind and an estimated cost. Re-running
    resumes the same backfill run. Exit code 1 when it did not finish (declined, failed)."""
    stack = one_target(ctx, stack, local)
    if local and not local_stack_running():
        require_local("s3ingest onboard --local")
        if bucket is not None:
            raise typer.BadParameter(
                "--bucket applies to --stack only (or --local with a running local stack)",
                param_hint="--bucket",
            )
        onboard_locally(seed=7, as_json=as_json)
    from s3ingest.onboard import OnboardTarget, onboard

    deployed = connect_target(ctx, stack, local)
    name = aws_call(lambda: deployed.stack.bucket(bucket))
    machine, checkpoints = require_outputs(
        deployed, LISTING_BACKFILL_STATE_MACHINE_ARN, INVENTORY_BUCKET_NAME
    )
    reconciler = aws_call(lambda: deployed.reconciler(name))
    _estimate(deployed, name)

    def reconcile(target_bucket: str, on_rows: Any) -> dict[str, Any]:
        from s3ingest.commands import reconcile as commands

        return commands.reconcile(
            reconciler,
            source="listing",
            prefix="",
            dry_run=False,
            manifest=None,
            margin_seconds=None,
            on_rows=on_rows,
        )

    def confirm(target_bucket: str, configuration: dict[str, Any]) -> bool:
        others = foreign_entries(configuration)
        console.print(
            f"EventBridge delivery is [red]off[/] on {target_bucket}; switching it on keeps "
            f"its other notification configurations ({others or 'none'})."
        )
        if yes:
            return True
        if as_json or not sys.stdin.isatty():
            console.print("not switched on: give --yes to switch it on without asking")
            return False
        return bool(typer.confirm(f"Switch EventBridge delivery on for {target_bucket}?"))

    target = OnboardTarget(
        stack=deployed.name,
        s3=deployed.client("s3"),
        sfn=deployed.client("stepfunctions"),
        machine_arn=machine,
        checkpoint_bucket=checkpoints,
        reconcile=reconcile,
    )
    with OnboardBar(hidden=as_json) as on_progress:
        report = aws_call(
            lambda: onboard(
                target,
                name,
                confirm=confirm,
                on_progress=on_progress,
                reconcile=closing_reconcile,
            )
        )
    emit_onboard(report, as_json)
    raise typer.Exit(0 if report["status"] == "done" else EXIT_UNHEALTHY)


def _estimate(deployed: Any, bucket: str) -> None:
    """The ledger's estimate of onboarding ``bucket`` when the ramp binds (stderr)."""
    from s3ingest import floor
    from s3ingest.cli import floor_notice

    objects = floor_notice.bucket_objects(deployed, bucket)
    if objects is None:
        return
    size = floor_notice.ledger(deployed)
    warm = size[1] if size else None
    floor_notice.notice(
        console, floor.estimate("onboarding", objects, floor.ONBOARD_WRITES_PER_OBJECT, warm)
    )
