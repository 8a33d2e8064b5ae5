"""``s3ingest reprocess``: run a processor over every visible key already in the ledger (a
processor added to a running stack, or whose ``version`` was raised), on a stack or the
running local stack, and follow the run."""

from __future__ import annotations

import json
import shlex
import sys
from typing import Annotated, Any

import typer

from s3ingest.cli.app import app
from s3ingest.cli.context import aws_call, connect_target, require_outputs
from s3ingest.cli.options import EXIT_UNHEALTHY, LocalOption, StackOrLocal
from s3ingest.cli.render import Table, console, out, plain, task_bar
from s3ingest.outputs import BUCKET_NAMES, PROCESSOR_NAMES, REPROCESS_STATE_MACHINE_ARN

#: The stack output naming the reprocess state machine.
OUTPUT = REPROCESS_STATE_MACHINE_ARN


@app.command(
    "reprocess",
    short_help="Run a processor over the keys already in the ledger.",
    epilog="Exit codes: 0 done (or started, with --no-wait), 1 the run failed (run again with "
    "the same --run to resume it) or a processor call failed (its claim released, the key "
    "stays behind: a new run, or the next reconciliation, takes it up), 2 usage error, 3 AWS "
    "error.",
)
def reprocess(
    ctx: typer.Context,
    processor: Annotated[
        str,
        typer.Option(
            "--processor",
            metavar="NAME",
            help="The processor to bring up to date (its name in the processors setting; "
            "default for the single processor setting).",
        ),
    ],
    bucket: Annotated[
        str | None,
        typer.Option(
            metavar="BUCKET", help="Only this landing bucket's keys (default: every bucket)."
        ),
    ] = None,
    prefix: Annotated[
        str,
        typer.Option(metavar="PREFIX", help="Only keys starting with this (needs --bucket)."),
    ] = "",
    rate: Annotated[
        float | None,
        typer.Option(
            min=0.001,
            metavar="N",
            help="At most N keys per second over the whole run (default: no limit).",
        ),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run", help="Count the keys behind (or, with --remove, to clean); write nothing."
        ),
    ] = False,
    remove: Annotated[
        bool,
        typer.Option(
            "--remove",
            help="Clean the effect state a removed processor left on the rows (remove it from "
            "the configuration and deploy first).",
        ),
    ] = False,
    segments: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=1000,
            metavar="N",
            help="Parallel Scan segments of the ledger (default 16; a new run on a ledger warmed "
            "past what 16 reach: enough segments to reach its warm throughput).",
        ),
    ] = None,
    concurrency: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=1000,
            metavar="N",
            help="Segments run at once (default: the segments, at most 16); each runs "
            "recordConcurrency keys at once (16 by default). Mind the Lambda concurrency and "
            "the ledger's write throughput (docs/reprocess.md).",
        ),
    ] = None,
    run: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help="The run's name (default: <processor>-<UTC time>). Give an earlier run's "
            "name, with the same options, to resume it: finished segments are skipped.",
        ),
    ] = None,
    stack: StackOrLocal = None,
    local: LocalOption = False,
    wait: Annotated[
        bool, typer.Option(help="Follow the run until it ends (--no-wait: start it only).")
    ] = True,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the run's summary (or status) as JSON.")
    ] = False,
) -> None:
    """Run PROCESSOR over every visible key in the ledger it is behind on (never run, done
    under a lower version or for an earlier change, superseded, or left pending by a worker
    that died), once per key, with the same claims and fencing tokens as live ingest (rule C11
    of docs/contract.md): safe beside live traffic and to run twice. Keys deleted before the
    processor existed are not run (docs/reprocess.md). A new run without --segments,
    --concurrency or --rate reads the ledger's size and warm throughput: when the table's
    on-demand ramp binds it prints an estimate (the warm-throughput setting, its cost, S3's
    per-prefix GET floor), and on a warm table it runs enough segments to reach it."""
    from s3ingest.commands import reprocess as commands

    if prefix and not bucket:
        raise typer.BadParameter("--prefix needs --bucket", param_hint="--prefix")
    name = run or commands.default_run(processor)
    try:
        request = commands.request_of(
            processor,
            run=name,
            bucket=bucket,
            prefix=prefix,
            rate=rate,
            dry_run=dry_run,
            remove=remove,
            segments=segments,
            concurrency=concurrency,
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--run") from exc
    deployed = connect_target(ctx, stack, local)
    configured = [n for n in deployed.outputs.get(PROCESSOR_NAMES, "").split(",") if n]
    if remove and processor in configured:
        raise typer.BadParameter(
            f"{processor!r} is still configured: remove it from the configuration and deploy first",
            param_hint="--processor",
        )
    if not remove and processor not in configured:
        raise typer.BadParameter(
            f"not one of the stack's processors ({', '.join(configured) or 'none'})",
            param_hint="--processor",
        )
    buckets = [b for b in deployed.outputs.get(BUCKET_NAMES, "").split(",") if b]
    if bucket and buckets and bucket not in buckets:
        raise typer.BadParameter(
            f"not one of the stack's buckets ({', '.join(buckets)})", param_hint="--bucket"
        )
    (arn,) = require_outputs(deployed, OUTPUT)
    if run is None and segments is None and concurrency is None and rate is None:
        chosen = _floor_segments(deployed, dry_run or remove)
        if chosen:
            request.update(segments=chosen, concurrency=chosen)
            console.print(
                f"{chosen} segments, all at once, to reach the ledger's warm throughput "
                f"(resume with --run {name} --segments {chosen} --concurrency {chosen})"
            )
    sfn = deployed.client("stepfunctions")
    try:
        execution = aws_call(lambda: commands.start_reprocess(sfn, arn, request))
    except commands.RunRunning as exc:
        raise typer.BadParameter(str(exc), param_hint="--run") from exc
    console.print(f"started run {name}: {execution}")
    if not wait:
        if as_json:
            sys.stdout.write(json.dumps({"run": name, "execution": execution}) + "\n")
        raise typer.Exit(0)
    with task_bar(hidden=as_json) as bar:
        task = bar.add_task(f"reprocess {processor}: planning", total=None)

        def on_status(status: dict[str, Any]) -> None:
            bar.update(
                task,
                completed=status["done"] or 0,
                total=status["total"],
                description=f"reprocess {processor}: segments",
            )

        status = aws_call(
            lambda: commands.follow_reprocess(sfn, execution, watch=True, on_status=on_status)
        )
    target = "--local" if local else (f"--stack {shlex.quote(stack)}" if stack else "")
    emit_reprocess(status, as_json, target=target)
    raise typer.Exit(0 if commands.healthy(status) else EXIT_UNHEALTHY)


def emit_reprocess(status: dict[str, Any], as_json: bool, *, target: str = "") -> None:
    """A followed run: its summary as one JSON line (the status, when it did not succeed), or
    the report table (keys by what became of them, requests, estimated cost), then the keys
    the run left behind and the command that finishes them (``left_behind``, its ``command``
    given the run's ``target``: ``--local`` or ``--stack NAME``)."""
    from s3ingest.commands.reprocess import REPORT_COUNTS, cause_text, with_target

    summary = with_target(status.get("output"), target)
    if as_json:
        body = summary if status["status"] == "SUCCEEDED" and summary else status
        sys.stdout.write(json.dumps(body, default=str) + "\n")
        return
    if status["status"] != "SUCCEEDED" or not summary:
        why = cause_text(status.get("cause")) or plain(status.get("error"))
        console.print(f"[red]reprocess {status['status']}:[/] {why}")
        return
    mode = " (dry run)" if summary.get("dry_run") else ""
    what = "remove" if summary.get("remove") else "reprocess"
    table = Table(title=f"{what} {summary['processor']} run {summary['run']}{mode}")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_row("processor version", plain(summary.get("version")))
    table.add_row("segments done", f"{summary['done']} of {summary['segments']}")
    counts = summary.get("counts") or {}
    for name in REPORT_COUNTS:
        label = "to remove" if name == "behind" and summary.get("remove") else name
        table.add_row(f"keys {label}", str(counts.get(name, 0)))
    for name, value in (summary.get("requests") or {}).items():
        table.add_row(f"requests: {name}", plain(value))
    table.add_row("estimated cost (USD)", f"{summary.get('estimated_cost_usd', 0):.6f}")
    out.print(table)
    failures = summary.get("failures") or []
    if failures:
        console.print(f"[red]failed keys[/] (up to {len(failures)} shown; each stays behind):")
        for failure in failures:
            console.print(
                f"  {failure.get('bucket')}/{failure.get('key')}: {plain(failure.get('error'))}"
            )
    behind = summary.get("left_behind") or {}
    if behind.get("command"):
        samples = behind.get("samples") or []
        console.print(
            f"[red]{behind['count']} keys left behind[/] (their effects pending; "
            f"{len(samples)} shown):"
        )
        for sample in samples:
            console.print(f"  {sample.get('bucket')}/{sample.get('key')}")
        console.print(f"once the processor works, finish them with:\n  {behind['command']}")


def _floor_segments(deployed: Any, counting: bool) -> int | None:
    """Segments (all at once) for the ledger's writes to reach its warm throughput, when more
    than the default; prints the estimate when the table's on-demand ramp binds. None: the
    default (an unreadable table, a small one, a cold one, or a run that writes no claims)."""
    from s3ingest import floor
    from s3ingest.cli import floor_notice

    size = floor_notice.ledger(deployed)
    if size is None or counting:
        return None
    keys, warm = size
    floor_notice.notice(
        console,
        floor.estimate("reprocess", keys, floor.REPROCESS_WRITES_PER_KEY, warm, gets_per_item=1.0),
    )
    chosen = floor.floor_segments(keys, warm)
    return chosen if chosen > floor.DEFAULT_SEGMENTS else None
