"""The operator CLI, ``s3ingest``.

Command functions only parse arguments and render; the work is done by plain functions in
:mod:`s3ingest.local` (and, for deployed stacks, by later commands with injected clients).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

app = typer.Typer(
    name="s3ingest", no_args_is_help=True, rich_markup_mode=None,
    help="Turn S3's at-least-once, unordered events into a correct per-key ledger.\n\n"
         "Deploy the CDK app with `npx cdk deploy`; try everything locally first with "
         "`s3ingest local demo`.",
)
local_app = typer.Typer(no_args_is_help=True, help="Run the pipeline on an embedded AWS "
                        "emulator (moto), no AWS account needed.")
app.add_typer(local_app, name="local")

console = Console(stderr=True)
out = Console()


@local_app.command("demo")
def demo(
    rounds: Annotated[int, typer.Option(min=1, max=50, help="Rounds of puts, overwrites and "
                                        "deletes over the hostile keys.")] = 3,
    seed: Annotated[int, typer.Option(help="Seed of the workload and the chaos.")] = 7,
    duplicate: Annotated[float, typer.Option(min=0.0, max=1.0, help="Probability that an "
                                             "event is delivered more than once.")] = 0.3,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Run the live pipeline locally under duplicated, reordered delivery and report whether
    the ledger equals the bucket (exit code 1 if it does not)."""
    from s3ingest.local.demo import DemoOptions, run_demo

    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, transient=True,
                  disable=as_json) as bar:
        task = bar.add_task("starting the emulator", total=None)

        def on_progress(phase: str, done: int, total: int) -> None:
            bar.update(task, description=f"{phase}: records processed", completed=done,
                       total=max(total, done))

        report = run_demo(DemoOptions(rounds=rounds, seed=seed, duplicate=duplicate),
                          on_progress=on_progress)
    if as_json:
        out.print_json(json.dumps(report))
    else:
        _render_demo(report)
    raise typer.Exit(0 if report["converged"] else 1)


def _render_demo(report: dict[str, Any]) -> None:
    table = Table(title="records per outcome")
    table.add_column("outcome")
    table.add_column("records", justify="right")
    for outcome, count in report["outcomes"].items():
        table.add_row(outcome, str(count))
    out.print(table)
    out.print(f"bucket {report['bucket']}: S3 operations {report['operations']}; events "
              f"delivered (with duplicates and extras) {report['events_delivered']}; handler "
              f"invocations {report['invocations']}")
    for m in report["dead_letter_queue"]:
        out.print(f"dead-letter queue: reason={m['reason']} body={m['body']!r}")
    out.print(f"ledger rows: {report['ledger_rows']}; visible objects: "
              f"{report['visible_objects']}")
    if report["converged"]:
        out.print("[bold green]CONVERGED[/]: the ledger equals the bucket")
    else:
        out.print("[bold red]NOT CONVERGED[/]:")
        for d in report["differences"]:
            out.print(f"  {d}")


@local_app.command("scenario")
def scenario(
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True,
                                         help="JSON Lines scenario (format: README).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Run a scenario file on a fresh local deployment and print what happened."""
    from s3ingest.local.scenario import ScenarioError, run_scenario

    try:
        result = run_scenario(file)
    except ScenarioError as exc:
        console.print(f"[red]scenario error:[/] {exc}")
        raise typer.Exit(2) from exc
    if as_json:
        sys.stdout.write(json.dumps(result, ensure_ascii=False) + "\n")
        return
    msgs = Table(title="messages")
    for col in ("step", "outcome", "reason", "key", "sequencer"):
        msgs.add_column(col)
    for m in result["messages"]:
        msgs.add_row(str(m["step"]), m["outcome"], m["reason"], repr(m["key"]),
                     str(m["sequencer"]))
    out.print(msgs)
    ledger = Table(title="ledger")
    for col in ("key", "state", "sequencer", "version_id", "etag"):
        ledger.add_column(col)
    for r in result["ledger"]:
        ledger.add_row(repr(r["key"]), r["state"], str(r["sequencer"]), str(r["version_id"]),
                       str(r["etag"]))
    out.print(ledger)
    out.print("converged: " + ("[green]yes[/]" if result["converged"] else "[red]no[/]"))
    for d in result["differences"]:
        out.print(f"  {d}")


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
