"""``s3ingest backfill``: start a backfill of pre-existing objects (on a stack or locally) and
follow it.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated, Any

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
from s3ingest.cli.errors import fail
from s3ingest.cli.options import EXIT_UNHEALTHY, LocalOption, StackOrLocal, choices
from s3ingest.cli.render import console, emit_backfill, task_bar
from s3ingest.commands.backfill import LocalEngine
from s3ingest.outputs import BACKFILL_STATE_MACHINE_ARN

if TYPE_CHECKING:
    from s3ingest.commands.context import Deployed


backfill_app = typer.Typer(
    no_args_is_help=True,
    help="Bring objects that existed before the "
    "pipeline into the ledger: an S3 Batch Operations job over the "
    "newest S3 Inventory report, through the same ledger rules.",
)
app.add_typer(
    backfill_app, name="backfill", short_help="Bring pre-existing objects into the ledger."
)


@backfill_app.command("start", short_help="Start a backfill of pre-existing objects.")
def backfill_start(
    ctx: typer.Context,
    manifest: Annotated[
        str | None,
        typer.Option(
            metavar="KEY",
            help="Inventory manifest.json key in the stack's inventory bucket (default: newest).",
        ),
    ] = None,
    max_failures: Annotated[
        int,
        typer.Option(min=0, metavar="N", help="Fail the backfill when more tasks than this fail."),
    ] = 0,
    stack: StackOrLocal = None,
    local: Annotated[
        bool,
        typer.Option(
            "--local",
            help="Act on the running local stack (s3ingest local up), as --stack does; "
            "without one, run on a fresh local runtime: objects that predate the pipeline, "
            "a backfill, live traffic at the same time.",
        ),
    ] = False,
    wait: Annotated[bool, typer.Option(help="Follow the job until it ends.")] = True,
    engine: Annotated[
        LocalEngine | None,
        typer.Option(
            metavar=choices(LocalEngine),
            help="With --local and no running local stack: batch-operations (default) or "
            "distributed-map, the backfill state machine to run (a deployed or running local "
            "stack has the one it was deployed with).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Start a backfill (rule C13 of docs/contract.md): safe to overlap with live traffic and to
    run twice."""
    from s3ingest.commands import backfill as commands

    stack = one_target(ctx, stack, local)
    if local and not local_stack_running():
        require_local("s3ingest backfill start --local")
        from s3ingest.local.rehearsal.demo import run_backfill_demo

        if manifest or not wait:
            raise typer.BadParameter(
                "--manifest and --no-wait apply to --stack, or --local with a running local "
                "stack (s3ingest local up)"
            )
        local_engine = engine or commands.LOCAL_ENGINES[0]

        with task_bar(hidden=as_json) as bar:
            task = bar.add_task("starting the emulator", total=None)
            report = run_backfill_demo(
                on_progress=lambda phase, done, total: bar.update(
                    task, description=phase, completed=done, total=total
                ),
                engine=local_engine,
                max_failures=max_failures,
            )
        execution = report.get("execution")
        failed = int(report.get("failed", 0))
        ok = report["converged"] and failed <= max_failures
        if execution is not None and execution["status"] != "SUCCEEDED":
            console.print(
                f"[red]backfill {execution['status']}:[/] {execution.get('error')}: "
                f"{execution.get('cause')}"
            )
            ok = False
        elif failed > max_failures:
            console.print(
                f"[red]backfill failed:[/] {failed} tasks failed "
                f"(more than --max-failures {max_failures})"
            )
        emit_backfill(report, as_json)
        raise typer.Exit(0 if ok else 1)
    if engine is not None:
        raise typer.BadParameter(
            "--engine applies to --local without a running local stack only",
            param_hint="--engine",
        )
    deployed = connect_target(ctx, stack, local)
    (arn,) = require_outputs(deployed, BACKFILL_STATE_MACHINE_ARN)
    execution = aws_call(
        lambda: commands.start_backfill(
            deployed.client("stepfunctions"), arn, manifest=manifest, max_failures=max_failures
        )
    )
    console.print(f"started {execution}")
    if wait:
        _follow_backfill(deployed, execution, watch=True, as_json=as_json)
    elif as_json:
        sys.stdout.write(json.dumps({"execution": execution}) + "\n")


@backfill_app.command("status", short_help="Show a backfill's progress.")
def backfill_status(
    ctx: typer.Context,
    stack: StackOrLocal = None,
    local: LocalOption = False,
    execution: Annotated[
        str | None,
        typer.Argument(
            metavar="[EXECUTION_ARN]", help="Execution ARN (default: the most recent backfill)."
        ),
    ] = None,
    watch: Annotated[bool, typer.Option(help="Follow the job until it ends.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the status as JSON.")] = False,
) -> None:
    """Show a backfill's execution status and its Batch Operations job's progress."""
    from s3ingest.commands import backfill as commands

    deployed = connect_target(ctx, stack, local)
    if execution is None:
        (arn,) = require_outputs(deployed, BACKFILL_STATE_MACHINE_ARN)
        execution = aws_call(
            lambda: commands.latest_backfill(deployed.client("stepfunctions"), arn)
        )
        if execution is None:
            fail("no backfill has run yet", EXIT_UNHEALTHY, kind="NoBackfill", label=None)
    _follow_backfill(deployed, execution, watch=watch, as_json=as_json)


def _follow_backfill(deployed: Deployed, execution: str, *, watch: bool, as_json: bool) -> None:
    """Render a backfill's status (followed with ``watch``, a progress bar on standard error)
    and end the command: exit code 0 while it runs or after it succeeded, else 1."""
    from s3ingest.commands import backfill as commands

    with task_bar(hidden=as_json or not watch) as bar:
        task = bar.add_task("backfill tasks", total=None)

        def on_status(status: dict[str, Any]) -> None:
            done = (status["succeeded"] or 0) + (status["failed"] or 0)
            bar.update(
                task,
                completed=done,
                total=status["total"],
                description=f"job {status['jobStatus'] or 'not created yet'}",
            )

        status = aws_call(
            lambda: commands.follow_backfill(
                deployed.client("stepfunctions"),
                deployed.client("s3control"),
                execution,
                watch=watch,
                on_status=on_status,
            )
        )
    emit_backfill(status, as_json)
    raise typer.Exit(0 if status["status"] in commands.OK_STATES else EXIT_UNHEALTHY)
