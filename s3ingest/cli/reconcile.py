"""``s3ingest reconcile``: compare a bucket with the ledger and queue repairs, on a stack or
locally.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer
from rich.progress import Progress, TextColumn, TimeElapsedColumn

from s3ingest.cli.app import app
from s3ingest.cli.context import (
    aws_call,
    connect_target,
    local_stack_running,
    one_target,
    require_local,
)
from s3ingest.cli.options import BucketOption, Source, StackOrLocal, choices
from s3ingest.cli.render import console, out, render_reconciliation


@app.command("reconcile", short_help="Compare bucket and ledger; queue repairs.")
def reconcile_command(
    ctx: typer.Context,
    source: Annotated[
        Source,
        typer.Option(
            metavar=choices(Source),
            help="Where the bucket's truth comes from: inventory "
            "(the newest S3 Inventory report) or listing "
            "(ListObjectVersions; for a prefix or a small bucket).",
        ),
    ] = "inventory",
    prefix: Annotated[
        str, typer.Option(metavar="PREFIX", help="Only keys starting with this prefix.")
    ] = "",
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Report the drift; queue no repair.")
    ] = False,
    stack: StackOrLocal = None,
    bucket: BucketOption = None,
    local: Annotated[
        bool,
        typer.Option(
            "--local",
            help="Act on the running local stack (s3ingest local up), as --stack does; "
            "without one, run on a fresh local runtime: a demo workload with lost events, "
            "then this reconciliation.",
        ),
    ] = False,
    manifest: Annotated[
        str | None,
        typer.Option(
            metavar="KEY", help="Inventory manifest.json key (default: the newest report)."
        ),
    ] = None,
    margin_seconds: Annotated[
        int | None,
        typer.Option(
            min=0,
            metavar="SECONDS",
            help="Skip ledger rows changed "
            "this long before the snapshot (default "
            "60 for a listing, 3600 for an "
            "inventory).",
        ),
    ] = None,
    fan_out: Annotated[
        bool,
        typer.Option(
            "--fan-out",
            help="With --local and no running local stack: run the stack's fan-out "
            "reconciliation state machine on a fresh local runtime (inventory only).",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Compare the bucket with the ledger and queue a repair event for every difference
    (rule C12 of docs/contract.md). Repairs go through the ingest queue and the same rules as
    live events."""
    from s3ingest.commands import reconcile as commands

    stack = one_target(ctx, stack, local)
    if local and not local_stack_running():
        require_local("s3ingest reconcile --local")
        if manifest or margin_seconds is not None or bucket is not None:
            raise typer.BadParameter(
                "--manifest, --margin-seconds and --bucket apply to --stack, or --local with "
                "a running local stack (s3ingest local up)"
            )
        if fan_out and source != "inventory":
            raise typer.BadParameter("the fan-out reads an inventory", param_hint="--fan-out")
        report = _reconcile_locally(source=source, prefix=prefix, dry_run=dry_run, fan_out=fan_out)
    else:
        if fan_out:
            raise typer.BadParameter(
                "--fan-out applies to --local without a running local stack only",
                param_hint="--fan-out",
            )
        deployed = connect_target(ctx, stack, local)
        reconciler = aws_call(lambda: deployed.reconciler(bucket))
        with Progress(
            TextColumn("[bold]{task.description}"),
            TextColumn("{task.completed}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
            disable=as_json,
        ) as bar:
            tasks = {
                p: bar.add_task(f"{p} rows", total=None)
                for p in ("ledger", "bucket", "confirm", "repair")
            }
            report = aws_call(
                lambda: commands.reconcile(
                    reconciler,
                    source=source,
                    prefix=prefix,
                    dry_run=dry_run,
                    manifest=manifest,
                    margin_seconds=margin_seconds,
                    on_rows=lambda phase, n: bar.advance(tasks[phase], n),
                )
            )
    if as_json:
        sys.stdout.write(json.dumps(report) + "\n")
    else:
        render_reconciliation(report)
        for sample in report["samples"]:
            if isinstance(sample, str):  # the fan-out's samples are keys
                out.print(f"  {sample!r}")
            else:
                out.print(f"  {sample['kind']}: {sample['key']!r}")
        if "converged" in report:
            out.print(
                "ledger equals bucket after the repairs: "
                + ("[green]yes[/]" if report["converged"] else "[red]no[/]")
            )


def _reconcile_locally(*, source: str, prefix: str, dry_run: bool, fan_out: bool) -> dict[str, Any]:
    """The local demo's workload (with lost events) on the embedded emulator, then this
    reconciliation: its report with ``converged`` and ``differences`` (the ledger against the
    bucket after the repairs). With ``fan_out``, an execution of the stack's fan-out state
    machine reconciles (the report is its summary with ``"execution"``)."""
    from s3ingest.local.rehearsal.demo import DemoOptions, run_demo

    demo = run_demo(
        DemoOptions(
            reconcile=source,
            reconcile_prefix=prefix,
            reconcile_dry_run=dry_run,
            reconcile_fan_out=fan_out,
        )
    )
    return {
        **demo["reconciliation"],
        "converged": demo["converged"],
        "differences": demo["differences"],
    }
