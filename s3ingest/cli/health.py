"""``s3ingest status`` and ``s3ingest verify``: the stack's health in one screen, and a canary
sent through the pipeline.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from s3ingest.cli.app import app
from s3ingest.cli.context import (
    aws_call,
    connect_target,
    local_stack_running,
    one_target,
    require_local,
)
from s3ingest.cli.options import EXIT_UNHEALTHY, AsJson, LocalOption, StackOrLocal
from s3ingest.cli.render import out, plain


@app.command("status", short_help="One screen of health; exit 1 when unhealthy.")
def status_command(
    ctx: typer.Context,
    stack: StackOrLocal = None,
    local: LocalOption = False,
    max_age_seconds: Annotated[
        int,
        typer.Option(
            min=1,
            metavar="SECONDS",
            help="Oldest ingest message age above which the stack is "
            "unhealthy (the alarm's threshold).",
        ),
    ] = 900,
    as_json: Annotated[bool, typer.Option("--json", help="Print the status as JSON.")] = False,
) -> None:
    """Queue depth and age of the oldest message, DLQ depths, EventBridge delivery, last
    reconciliation drift, the newest backfill, running backfills and replays, in one screen.
    Exit code 1 when the stack is unhealthy (a probe can use it)."""
    from s3ingest.cli.render import to_json
    from s3ingest.commands.status import stack_status

    deployed = connect_target(ctx, stack, local)
    result = aws_call(lambda: stack_status(deployed, max_age_seconds=max_age_seconds))
    exit_code = 0 if result["healthy"] else EXIT_UNHEALTHY
    if as_json:
        sys.stdout.write(to_json(result) + "\n")
        raise typer.Exit(exit_code)
    out.print(
        "healthy" if result["healthy"] else "[red]UNHEALTHY[/]: " + "; ".join(result["problems"])
    )
    q = result["queue"]
    age = q["oldest_age_seconds"]
    out.print(
        f"ingest queue: {q['visible']} waiting, {q['in_flight']} in flight, oldest "
        + (f"{age} s" if age is not None else "-")
    )
    out.print(f"dead-letter queue: {result['dead_letter_queue']['visible']}")
    if "target_dead_letter_queue" in result:
        out.print(f"rule-target DLQ: {result['target_dead_letter_queue']['visible']}")
    if "change_dead_letter_queue" in result:
        out.print(
            "change-stream DLQ (batches not published for 24 h): "
            f"{result['change_dead_letter_queue']['visible']}"
        )
    out.print(f"last reconciliation drift: {plain(result['last_drift'] or 'none')}")
    for landing, made in (result.get("last_attestation") or {}).items():
        verdict = "none" if made is None else ("equal" if made["equal"] else "differ")
        when = f" at {made['taken_at']}" if made is not None else ""
        out.print(f"last attestation of {landing}: {verdict}{when}", highlight=False)
    out.print(f"EventBridge delivery: {_on_off(result['eventbridge_delivery'])}")
    out.print(f"newest backfill: {plain(result['last_backfill'] or 'none')}")
    out.print(f"running backfills: {plain(result['running_backfills'])}")
    out.print(f"running replays: {plain(result['running_replays'])}")
    for name, counts in result.get("processors", {}).items():
        out.print(
            f"processor {name}, last hour: {counts['done']} done, {counts['failed']} failed, "
            f"{counts['superseded']} superseded"
        )
    raise typer.Exit(exit_code)


def _on_off(value: bool | None) -> str:
    return "unknown" if value is None else ("on" if value else "[red]OFF[/]")


@app.command("verify", short_help="Send a canary through the pipeline; time each hop.")
def verify_command(
    ctx: typer.Context,
    stack: StackOrLocal = None,
    local: Annotated[
        bool,
        typer.Option(
            "--local",
            help="Act on the running local stack (s3ingest local up), as --stack does; "
            "without one, run against a fresh local runtime.",
        ),
    ] = False,
    timeout_seconds: Annotated[
        float, typer.Option(min=1, metavar="SECONDS", help="How long each hop may take.")
    ] = 120.0,
    as_json: AsJson = False,
) -> None:
    """The deploy check: write a canary object under the reserved prefix _s3ingest-canary/
    (never given to a processor), wait for its ledger row and, with the change stream, its
    change event; delete it, wait for the tombstone and its change event; remove its versions.
    Prints each hop's latency; exit code 0 when every hop arrived, 1 when one did not."""
    from s3ingest.commands.verify import Hop, verify_pipeline

    stack = one_target(ctx, stack, local)

    def show(hop: Hop) -> None:
        if not as_json:
            out.print(
                f"{hop.name}: "
                + (f"{hop.ms} ms" if hop.ms is not None else "[red]did not arrive[/]")
            )

    if local and not local_stack_running():
        require_local("s3ingest verify --local")
        from s3ingest.commands.verify import LocalPipeline
        from s3ingest.local.emulator.server import Emulator
        from s3ingest.local.stack.runtime import LocalRuntime, local_settings

        # a fresh local runtime on the embedded emulator (stopped on exit)
        with Emulator() as emu:
            pipeline = LocalPipeline(LocalRuntime(emu, local_settings()))
            report = verify_pipeline(pipeline, timeout_seconds=timeout_seconds, on_hop=show)
    else:
        deployed = connect_target(ctx, stack, local)
        pipeline = aws_call(deployed.verify_pipeline)
        report = aws_call(
            lambda: verify_pipeline(pipeline, timeout_seconds=timeout_seconds, on_hop=show)
        )
    if as_json:
        sys.stdout.write(json.dumps(report.as_dict()) + "\n")
    else:
        out.print("[green]verified[/]" if report.ok else "[red]not verified[/]")
    raise typer.Exit(0 if report.ok else EXIT_UNHEALTHY)
