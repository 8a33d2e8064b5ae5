"""``s3ingest history QUERY``: a named query of the history table (``historyTable``,
docs/history.md), locally by duckdb, deployed by Athena; ``s3ingest history maintain``: the
table's maintenance (compaction, snapshot expiry), locally or by the deployed writer."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
from rich.markup import escape

from s3ingest.cli.app import app
from s3ingest.cli.context import aws_call, connect, one_target
from s3ingest.cli.errors import fail
from s3ingest.cli.options import EXIT_AWS, EXIT_USAGE, AsJson, StackOrLocal
from s3ingest.cli.render import Table, out, plain, to_json
from s3ingest.cli.replay import _parse_when
from s3ingest.history_queries import QUERIES

_QUERY_HELP = "; ".join(f"{name}: {q.description}" for name, q in QUERIES.items())
#: Not a query: the table's maintenance.
MAINTAIN = "maintain"
#: ``historySnapshotRetentionHours``'s default, as the deployed schedule's (not imported: the
#: functions' package loads Powertools, which the CLI does not at load).
RETENTION_HOURS = 6


@app.command("history", short_help="A named query of the history table (historyTable).")
def history_command(
    query: Annotated[
        str,
        typer.Argument(
            metavar="QUERY",
            help=f"One of {', '.join(QUERIES)}, or {MAINTAIN}. {_QUERY_HELP}; {MAINTAIN}: "
            "compact the closed days with many small files, expire old snapshots and delete "
            "the files only they reached.",
        ),
    ],
    ctx: typer.Context,
    key: Annotated[
        str | None, typer.Option("--key", metavar="K", help="The object key (trail).")
    ] = None,
    bucket: Annotated[
        str | None, typer.Option("--bucket", metavar="B", help="Only this bucket.")
    ] = None,
    prefix: Annotated[
        str | None, typer.Option("--prefix", metavar="P", help="Only keys under P (changes).")
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            metavar="T",
            help="Only changes at or after T, ISO-8601 (UTC if no zone); default: all.",
        ),
    ] = None,
    processor: Annotated[
        str | None,
        typer.Option("--processor", metavar="NAME", help="The processor (processor, reviews)."),
    ] = None,
    processor_version: Annotated[
        str | None,
        typer.Option(
            "--processor-version",
            metavar="V",
            help="The processor's version (processor): keys that version, or a later one, "
            "has not reached; default 1 (no version has done them). Not --version, the "
            "global option printing s3ingest's own.",
        ),
    ] = None,
    stack: StackOrLocal = None,
    local: Annotated[
        bool,
        typer.Option(
            "--local",
            help="Query the local history table (the run directory's history/, which a local "
            "scenario or local up with the history table writes) with duckdb.",
        ),
    ] = False,
    retention_hours: Annotated[
        int,
        typer.Option(
            "--retention-hours",
            metavar="H",
            help="maintain: expire snapshots older than H hours (the last 10 stay).",
        ),
    ] = RETENTION_HOURS,
    as_json: AsJson = False,
) -> None:
    """Run a named query of the history table: every change on the change stream, once per
    change key. Locally (--local) duckdb reads the table's scan; deployed, Athena runs the same
    SQL in the stack's workgroup (outputs HistoryWorkGroup, HistoryTable). --json prints
    {"query", "columns", "rows"}. Exit code 2 for an unknown query or a missing option the
    query needs, 3 when there is no history table to query. `history maintain` maintains the
    table (locally here; deployed, the stack's history writer does it, output
    HistoryWriterFunctionName, as its hourly schedule does) and prints its figures."""
    from s3ingest.commands.history import (
        HistoryQueryFailed,
        HistoryUnavailable,
        query_athena,
        query_local,
    )

    if query == MAINTAIN:
        _maintain(one_target(ctx, stack, local), retention_hours, as_json)
        return
    if query not in QUERIES:
        raise typer.BadParameter(
            f"unknown query {query!r} (one of {', '.join(QUERIES)})", param_hint="QUERY"
        )
    values: dict[str, Any] = {
        "key": key,
        "bucket": bucket,
        "prefix": prefix,
        "processor": processor,
        "processor_version": processor_version,
        # a space, not "T": Athena (Trino) refuses ISO 8601's "T" in a cast to a timestamp
        "since": _parse_when(since, "--since").isoformat(sep=" ") if since else None,
    }
    name = one_target(ctx, stack, local)
    try:
        if name is None:
            result = query_local(query, values)
        else:
            deployed = connect(name)
            athena = deployed.client("athena")
            result = aws_call(lambda: query_athena(athena, deployed.outputs, query, values))
    except HistoryUnavailable as exc:
        fail(str(exc), EXIT_AWS, kind="NoHistoryTable")
    except HistoryQueryFailed as exc:
        fail(str(exc), EXIT_AWS, kind="HistoryQueryFailed")
    except ValueError as exc:
        fail(str(exc), EXIT_USAGE)
    if as_json:
        sys.stdout.write(to_json(result) + "\n")
        return
    table = Table(title=f"history {query}")
    for column in result["columns"]:
        table.add_column(column)
    for row in result["rows"]:
        table.add_row(*(escape(plain(row[c])) for c in result["columns"]))
    out.print(table)
    out.print(f"{len(result['rows'])} row(s)")


def _maintain(stack: str | None, retention_hours: int, as_json: bool) -> None:
    """``history maintain``: on the local table (``stack`` None) or by the stack's writer."""
    from s3ingest.commands.history import (
        MAINTAIN_READ_TIMEOUT,
        HistoryQueryFailed,
        HistoryUnavailable,
        maintain_deployed,
        maintain_local,
    )

    try:
        if stack is None:
            result = maintain_local(retention_hours)
        else:
            from botocore.config import Config

            deployed = connect(stack)
            client = deployed.session.client(
                "lambda",
                config=Config(
                    read_timeout=MAINTAIN_READ_TIMEOUT, retries={"total_max_attempts": 1}
                ),
            )
            result = aws_call(lambda: maintain_deployed(client, deployed.outputs, retention_hours))
    except HistoryUnavailable as exc:
        fail(str(exc), EXIT_AWS, kind="NoHistoryTable")
    except HistoryQueryFailed as exc:
        fail(str(exc), EXIT_AWS, kind="HistoryMaintenanceFailed")
    except ValueError as exc:
        fail(str(exc), EXIT_USAGE)
    if as_json:
        sys.stdout.write(to_json(result) + "\n")
        return
    table = Table(title="history maintain")
    table.add_column("figure")
    table.add_column("value")
    for name, value in result.items():
        table.add_row(name, escape(plain(value)))
    out.print(table)
