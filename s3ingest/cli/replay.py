"""``s3ingest replay`` and ``s3ingest redrive``: send events again, from the archive of a time
window or from the dead-letter queue.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
from rich.progress import Progress, TextColumn, TimeElapsedColumn

from s3ingest.cli.app import app
from s3ingest.cli.context import aws_call, connect_target, require_outputs
from s3ingest.cli.errors import fail
from s3ingest.cli.options import EXIT_UNHEALTHY, LocalOption, StackOrLocal
from s3ingest.cli.render import console, out, plain
from s3ingest.outputs import ARCHIVE_ARN, DEAD_LETTER_QUEUE_URL, QUEUE_URL, RULE_ARN


def _parse_when(value: str, option: str) -> Any:
    from datetime import UTC, datetime

    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise typer.BadParameter(
            f"{value!r} is not an ISO-8601 time such as 2026-11-30T08:00:00Z", param_hint=option
        ) from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


@app.command("replay", short_help="Replay archived S3 events of a time window.")
def replay_command(
    start: Annotated[
        str, typer.Option("--from", metavar="TIME", help="Window start, ISO-8601 (UTC if no zone).")
    ],
    end: Annotated[
        str,
        typer.Option(
            "--to",
            metavar="TIME",
            help="Window end, ISO-8601; at least 10 minutes before now "
            "(the archive's ingestion lag).",
        ),
    ],
    ctx: typer.Context,
    stack: StackOrLocal = None,
    local: LocalOption = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run", help="Check the window and show what would be replayed; start nothing."
        ),
    ] = False,
    wait: Annotated[bool, typer.Option(help="Follow the replay until it ends.")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Replay the archived S3 events of a time window to the ingest rule only (rule C14 of
    docs/contract.md). The ledger makes it safe: replaying the same window twice changes nothing.
    Replayed events are counted apart (metric "replayed", log field source=replay)."""
    from s3ingest.cli.render import to_json
    from s3ingest.commands import replay as commands
    from s3ingest.commands.replay import OperationError, check_window

    window = (_parse_when(start, "--from"), _parse_when(end, "--to"))
    try:  # arguments are checked before any AWS call
        check_window(*window)
    except OperationError as exc:
        raise typer.BadParameter(str(exc), param_hint="--from/--to") from exc
    deployed = connect_target(ctx, stack, local)
    archive, rule = require_outputs(deployed, ARCHIVE_ARN, RULE_ARN)
    events = deployed.client("events")
    try:
        result = aws_call(
            lambda: commands.replay_window(
                events, archive_arn=archive, rule_arn=rule, window=window, dry_run=dry_run
            )
        )
        if not dry_run:
            name = result["replay"]
            console.print(f"started replay {name}")
            if wait:
                with Progress(
                    TextColumn("[bold]{task.description}"),
                    TimeElapsedColumn(),
                    console=console,
                    transient=True,
                    disable=as_json,
                ) as bar:
                    task = bar.add_task("replaying", total=None)
                    result |= aws_call(
                        lambda: commands.follow_replay(
                            events,
                            deployed.client("cloudwatch"),
                            stack=deployed.name,
                            name=name,
                            on_state=lambda d: bar.update(
                                task,
                                description=f"replay {d['State'].lower()}, last event "
                                f"{d.get('EventLastReplayedTime', '-')}",
                            ),
                        )
                    )
    except OperationError as exc:  # the replay failed or was cancelled
        fail(str(exc), EXIT_UNHEALTHY, kind=type(exc).__name__)
    if as_json:
        sys.stdout.write(to_json(result) + "\n")
    elif dry_run:
        out.print(f"dry run: nothing replayed; window {result['from']} to {result['to']}")
        out.print("events in the window: not known before a replay")
        out.print(f"events in the whole archive (every window): {result['archive_event_count']}")
        out.print(result["note"], highlight=False)
    else:
        for k, v in result.items():
            out.print(f"{k}: {plain(v)}")


@app.command("redrive", short_help="Inspect the dead-letter queue and redrive it.")
def redrive_command(
    ctx: typer.Context,
    stack: StackOrLocal = None,
    local: LocalOption = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count and classify the DLQ; move nothing.")
    ] = False,
    max_messages: Annotated[
        int, typer.Option("--max", min=1, metavar="N", help="Most messages to look at or move.")
    ] = 1000,
    include_invalid: Annotated[
        bool,
        typer.Option(
            help="Also move messages the handler marked invalid (they will be invalid again)."
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Count and classify the ingest dead-letter queue, then move its messages back to the
    ingest queue. Invalid messages are listed and stay unless --include-invalid."""
    from s3ingest.cli.render import to_json
    from s3ingest.commands.redrive import redrive

    deployed = connect_target(ctx, stack, local)
    dlq_url, queue_url = require_outputs(deployed, DEAD_LETTER_QUEUE_URL, QUEUE_URL)
    result = aws_call(
        lambda: redrive(
            deployed.client("sqs"),
            dlq_url,
            queue_url,
            dry_run=dry_run,
            max_messages=max_messages,
            include_invalid=include_invalid,
        )
    )
    summary = result["dlq"]
    if as_json:
        sys.stdout.write(to_json(result) + "\n")
        return
    out.print(
        f"dead-letter queue: about {summary['approximate']} messages, {summary['sampled']} sampled"
    )
    for name in ("by_reason", "by_kind"):
        for k, v in summary[name].items():
            out.print(f"  {name[3:]}: {k}: {plain(v)}")
    for key in summary["sample_keys"][:10]:
        out.print(f"  key: {key!r}")
    if "task" in result:
        out.print(
            f"message-move task started: {plain(result['task'])} ({plain(result['progress'])})"
        )
    if "moved" in result:
        out.print(
            f"moved {result['moved']['moved']}; kept "
            f"{result['moved']['kept_invalid']} invalid in the DLQ"
        )
