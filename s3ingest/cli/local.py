"""``s3ingest local``: the pipeline on the embedded emulator (``demo``, ``scenario``), and the
local onboarding ``onboard --local`` shares with ``local demo --existing``.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich.markup import escape

from s3ingest.cli.app import app
from s3ingest.cli.context import require_local
from s3ingest.cli.errors import fail
from s3ingest.cli.options import EXIT_UNHEALTHY, EXIT_USAGE, choices
from s3ingest.cli.render import (
    OnboardBar,
    Table,
    emit_backfill,
    emit_onboard,
    foreign_entries,
    out,
    plain,
    render_reconciliation,
    task_bar,
)

#: ``--reconcile`` of the demo (``none``: no reconciliation at the end).
DemoReconcile = Literal["inventory", "listing", "none"]


def scenario_ok(result: dict[str, Any]) -> bool:
    """The scenario converged, its effects broke no rule and no step failed."""
    return bool(result["converged"] and not result["effects_problems"] and not result["error"])


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


local_app = typer.Typer(
    no_args_is_help=True,
    help="Run the pipeline on an embedded AWS emulator (moto), no AWS account needed.",
)
app.add_typer(
    local_app, name="local", short_help="Run the pipeline on an embedded emulator (no AWS)."
)


@local_app.command("demo", short_help="The live pipeline under chaotic delivery.")
def demo(
    ctx: typer.Context,
    rounds: Annotated[
        int,
        typer.Option(
            min=1,
            max=50,
            metavar="N",
            help="Rounds of puts, overwrites and deletes over the hostile keys.",
        ),
    ] = 3,
    seed: Annotated[int, typer.Option(metavar="N", help="Seed of the workload and the chaos.")] = 7,
    duplicate: Annotated[
        float,
        typer.Option(
            min=0.0,
            max=1.0,
            metavar="P",
            help="Probability that an event is delivered more than once.",
        ),
    ] = 0.3,
    drop: Annotated[
        float,
        typer.Option(
            min=0.0,
            max=1.0,
            metavar="P",
            help="Probability that an event is lost for good (reconciliation repairs it).",
        ),
    ] = 0.1,
    reconcile: Annotated[
        DemoReconcile,
        typer.Option(
            metavar=choices(DemoReconcile),
            help="Reconciliation at the end: inventory, listing or none.",
        ),
    ] = "inventory",
    crash: Annotated[
        float,
        typer.Option(
            min=0.0,
            max=1.0,
            metavar="P",
            help="Probability that a worker is killed after the processor's effect, before its "
            "commit (the effect must run again).",
        ),
    ] = 0.05,
    existing: Annotated[
        bool,
        typer.Option(
            "--existing",
            help="Instead: onboard an existing bucket that already holds objects and another "
            "team's notification and inventory configurations (s3ingest onboard --local), with "
            "live traffic during the backfill.",
        ),
    ] = False,
    hold_deletes: Annotated[
        bool,
        typer.Option(
            "--hold-deletes",
            help="Instead: a mass delete held by the delete breaker (docs/hold.md), then "
            "approved; shows that no delete effect ran before its approval.",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Run the live pipeline locally under duplicated, reordered and lossy delivery, with the
    example processor (a JSON sidecar per object) and the change stream, reconcile once, and
    report whether the ledger equals the bucket and the sidecars match it (exit code 1 if not).
    With --existing, onboard an existing bucket instead; with --hold-deletes, hold a mass
    delete for review."""
    require_local("s3ingest local demo")
    from s3ingest.local.rehearsal.demo import DemoOptions, run_demo

    if existing or hold_deletes:
        given = [
            f"--{name.replace('_', '-')}"
            for name in ("rounds", "duplicate", "drop", "reconcile", "crash")
            if getattr(ctx.get_parameter_source(name), "name", "DEFAULT") != "DEFAULT"
        ]
        if existing and hold_deletes:
            given.insert(0, "--existing")
        if given:
            mode = "--hold-deletes" if hold_deletes else "--existing"
            fail(
                f"{mode} runs its own scenario: {', '.join(given)} "
                f"{'does' if len(given) == 1 else 'do'} not apply (only --seed and --json do)",
                EXIT_USAGE,
            )
    if existing:
        onboard_locally(seed=seed, as_json=as_json)
    if hold_deletes:
        _hold_demo(seed=seed, as_json=as_json)

    with task_bar(hidden=as_json) as bar:
        task = bar.add_task("starting the emulator", total=None)

        def on_progress(phase: str, done: int, total: int) -> None:
            bar.update(
                task,
                description=f"{phase}: records processed",
                completed=done,
                total=max(total, done),
            )

        options = DemoOptions(
            rounds=rounds,
            seed=seed,
            duplicate=duplicate,
            drop=drop,
            reconcile=None if reconcile == "none" else reconcile,
            crash=crash,
        )
        report = run_demo(options, on_progress=on_progress)
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
    out.print(
        f"bucket {report['bucket']}: S3 operations {report['operations']}; events "
        f"delivered (with duplicates and extras) {report['events_delivered']}; handler "
        f"invocations {report['invocations']}"
    )
    print_reconciliation = report.get("reconciliation")
    out.print(
        f"events lost for good: {report['events_dropped']}; ledger differences before "
        f"reconciliation: {report['differences_before_reconciliation']}"
    )
    if print_reconciliation:
        render_reconciliation(print_reconciliation)
    for m in report["dead_letter_queue"]:
        out.print(f"dead-letter queue: reason={m['reason']} body={m['body']!r}")
    out.print(f"ledger rows: {report['ledger_rows']}; visible objects: {report['visible_objects']}")
    fx = report.get("effects")
    if fx and fx["processor"]:
        out.print(
            f"effects ({fx['processor']}): {fx['effects_run']} runs, "
            f"{fx['crashes_injected']} killed before their commit; change events "
            f"published: {fx['change_events']} ({fx['change_events_unique']} distinct ids; "
            + ", ".join(f"{k}: {v}" for k, v in fx["change_events_by_type"].items())
            + ")"
        )
    if report["converged"]:
        out.print(
            "[bold green]CONVERGED[/]: the ledger equals the bucket"
            + ("; every sidecar matches its object" if fx and fx["processor"] else "")
        )
    else:
        out.print("[bold red]NOT CONVERGED[/]:")
        for d in report["differences"]:
            out.print(f"  {d}")


@local_app.command("scenario", short_help="Run a JSON Lines scenario file.")
def scenario(
    file: Annotated[
        Path,
        typer.Argument(
            exists=True,
            dir_okay=False,
            readable=True,
            help="JSON Lines scenario (format: docs/scenarios.md).",
        ),
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Run a scenario file on a fresh local deployment and print what happened: messages, the
    ledger, the processor's effects and the change events, with their ids (exit code 1 if the
    ledger does not equal the bucket at the end, the effects broke a rule or a step failed, 2
    for an invalid scenario file)."""
    require_local("s3ingest local scenario")
    from s3ingest.local.rehearsal.scenario import ScenarioError, run_scenario

    try:
        # what the processors print goes to stderr: --json's stdout is the result alone
        with contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext():
            result = run_scenario(file)
    except ScenarioError as exc:
        fail(str(exc), EXIT_USAGE, kind=type(exc).__name__, label="scenario error")
    ok = scenario_ok(result)
    if as_json:
        sys.stdout.write(json.dumps(result, ensure_ascii=False) + "\n")
        raise typer.Exit(0 if ok else 1)
    for part in (
        _scenario_messages,
        _scenario_ledger,
        _scenario_repairs,
        _scenario_effects,
        _scenario_changes,
        _scenario_commands,
        _scenario_held,
        _scenario_end,
    ):
        part(result)
    raise typer.Exit(0 if ok else 1)


def _scenario_messages(result: dict[str, Any]) -> None:
    msgs = Table(title="messages (step: the line whose S3 operation emitted the event)")
    for col in ("step", "delivered at", "event", "outcome", "reason", "key", "sequencer"):
        msgs.add_column(col, overflow="fold")  # wrapped, never cut: read whole by operators
    for m in result["messages"]:
        msgs.add_row(
            plain(m["step"]),
            plain(m["delivered_at"]),
            plain(m["event"]),
            plain(m["outcome"]),
            plain(m["reason"]),
            repr(m["key"]),
            plain(m["sequencer"]),
        )
    out.print(msgs)


def _scenario_ledger(result: dict[str, Any]) -> None:
    ledger = Table(title="ledger")
    for col in ("key", "state", "sequencer", "version_id", "etag"):
        ledger.add_column(col, overflow="fold")
    for r in result["ledger"]:
        ledger.add_row(
            repr(r["key"]),
            plain(r["state"]),
            plain(r["sequencer"]),
            plain(r["version_id"]),
            plain(r["etag"]),
        )
    out.print(ledger)


def _scenario_repairs(result: dict[str, Any]) -> None:
    for rep in result["reconciliations"]:
        out.print(f"line {rep['step']}:")
        render_reconciliation(rep)
    for job in result["backfills"]:
        out.print(f"line {job['step']}:")
        emit_backfill(job, as_json=False)


def _scenario_effects(result: dict[str, Any]) -> None:
    if not result["effects"]:
        return
    fx = Table(title="effects run (processor)")
    for col in ("step", "processor", "key", "kind", "sequencer", "change id", "token", "then"):
        fx.add_column(col, overflow="fold")  # ids are matched by eye: never cut them
    for e in result["effects"]:
        fx.add_row(
            plain(e["step"]),
            plain(e["processor"]),
            repr(e["key"]),
            plain(e["kind"]),
            plain(e["sequencer"]),
            plain(e["id"]),
            plain(e["token"]),
            "killed before commit" if e["crashed_before_commit"] else "committed",
        )
    out.print(fx)


def _scenario_changes(result: dict[str, Any]) -> None:
    if not result["changes"]:
        return
    ch = Table(title="change stream (events a subscriber received)")
    for col in ("detail-type", "key", "processor", "sequencer", "id"):
        ch.add_column(col, overflow="fold")
    for c in result["changes"]:
        d = c["detail"]
        ch.add_row(
            plain(c["detail-type"]),
            repr(d["key"]),
            plain(d.get("processor") or ""),
            plain(d["sequencer"]),
            plain(d["id"]),
        )
    out.print(ch)


def _scenario_commands(result: dict[str, Any]) -> None:
    for review in result["reviews"]:
        decided = sum(1 for d in review["decided"] if d["applied"])
        out.print(
            f"line {review['step']}: {review['op']} {review['key']!r}: {decided} held "
            "change(s) decided" + ("" if decided else " [yellow](nothing held matched)[/]")
        )
    for entry in sorted(
        [("status", e) for e in result["statuses"]]
        + [("explain", e) for e in result["explanations"]]
        + [("redrive", e) for e in result["redrives"]],
        key=lambda pair: pair[1]["step"],
    ):
        out.print(escape(f"line {entry[1]['step']}: {_command_line(*entry)}"))


def _scenario_held(result: dict[str, Any]) -> None:
    if result["trail"]:
        tr = Table(title="decision trail (review decisions per key, newest first)")
        for col in ("key", "decision", "processor", "by", "reason"):
            tr.add_column(col, overflow="fold")
        for t in result["trail"]:
            for d in t["decisions"]:
                tr.add_row(
                    repr(t["key"]), d["action"], d["processor"], d["actor"], escape(d["reason"])
                )
        out.print(tr)
    if result["held"]:
        out.print(f"[yellow]still held for review: {len(result['held'])}[/]")
        for h in result["held"]:
            out.print(escape(f"  {h['key']!r} [{h['processor']}] {h['kind']}: {h['reason']}"))


def _scenario_end(result: dict[str, Any]) -> None:
    for problem in result["effects_problems"]:
        out.print(f"[red]effects problem:[/] {problem}")
    if result["error"]:
        out.print(f"[red]run stopped:[/] {plain(result['error'])}")
    out.print(f"events lost for good: {result['dropped']}")
    if result["undelivered"]:
        out.print(f"events archived, not delivered: {result['undelivered']}")
    for m in result["dead_letter_queue"]:
        out.print(f"dead-letter queue: reason={m['reason']} body={m['body']!r}")
    out.print("converged: " + ("[green]yes[/]" if result["converged"] else "[red]no[/]"))
    for d in result["differences"]:
        out.print(f"  {d}")


def _command_line(command: str, entry: dict[str, Any]) -> str:
    """One line of what a scenario's ``status``, ``explain`` or ``redrive`` step answered."""
    if command == "status":
        problems = "; ".join(entry["problems"])
        return "status: " + ("healthy" if entry["healthy"] else f"UNHEALTHY: {problems}")
    if command == "explain":
        effects = "".join(
            f"; effect {name}: {effect['status']}"
            for name, effect in (entry.get("effects") or {}).items()
            if effect
        )
        return f"explain {entry['key']!r}: {entry['verdict']}{effects}"
    moved = entry.get("progress", {}).get("moved", entry.get("moved", {}).get("moved", 0))
    return f"redrive: {entry['dlq']['approximate']} in the DLQ, {moved} moved"


def _hold_demo(*, seed: int, as_json: bool) -> None:
    """``local demo --hold-deletes``: run, print, end with the exit code (0 when nothing held
    ran before its approval, every approved effect ran, and the pipeline converged)."""
    from s3ingest.local.rehearsal.demo import run_hold_demo

    with task_bar(hidden=as_json) as bar:
        task = bar.add_task("starting the emulator", total=None)

        def on_progress(phase: str, done: int, total: int) -> None:
            bar.update(task, description=phase, completed=done, total=max(total, done))

        report = run_hold_demo(seed=seed, on_progress=on_progress)
    ok = hold_demo_ok(report)
    if as_json:
        sys.stdout.write(json.dumps(report, default=str) + "\n")
        raise typer.Exit(0 if ok else EXIT_UNHEALTHY)
    out.print(
        f"{report['objects']} objects ingested; then {report['deleted']} deleted at once "
        f"(hold policy: deletes above {report['breaker_above']} per 300 s are held)"
    )
    out.print(
        f"ledger: {report['tombstoned']} tombstones (the ledger follows the bucket); delete "
        f"effects run at once: {report['ran_before_review']}; held: {report['held']}"
    )
    out.print(
        f"approved {report['approved']}: delete effects run after approval: "
        f"{report['ran_after_approval']}; still held: {report['held_after']}"
    )
    events = ", ".join(f"{k}: {v}" for k, v in report["change_events_by_type"].items())
    out.print(f"change events: {events}")
    example = report["trail_example"]
    if example:
        out.print(f"decision trail of {example['key']!r}:")
        for d in example["decisions"]:
            out.print(escape(f"  {d['action']} [{d['processor']}] by {d['actor']}: {d['reason']}"))
    for problem in report["effects_problems"] + report["differences"]:
        out.print(f"  [red]{problem}[/]")
    out.print(
        "[bold green]OK[/]: no delete ran before its approval; every approved one ran"
        if ok
        else "[bold red]NOT OK[/]"
    )
    raise typer.Exit(0 if ok else EXIT_UNHEALTHY)


def onboard_locally(*, seed: int, as_json: bool) -> None:
    """``onboard --local`` and ``local demo --existing``: run, print, end with the exit code
    (0 when the onboarding finished, the ledger converged and the foreign entries survived)."""
    from s3ingest.local.rehearsal.demo import run_existing_demo

    with OnboardBar(hidden=as_json) as on_progress:
        report = run_existing_demo(seed=seed, on_progress=on_progress)
    ok = bool(report["converged"] and report["foreign_config_intact"])
    if as_json:
        sys.stdout.write(json.dumps(report, default=str) + "\n")
        raise typer.Exit(0 if ok else EXIT_UNHEALTHY)
    out.print(
        f"existing bucket {report['bucket']}: {report['objects_before']} objects before the "
        f"pipeline (events S3 sent for them: {report['events_before_onboarding']}), "
        f"{report['live_operations']} live operations during the backfill"
    )
    emit_onboard(report["onboard"], as_json=False)
    config = report["bucket_config"][report["bucket"]]
    out.print(
        "configuration after onboarding: EventBridge "
        + ("on" if report["event_bridge_on"] else "[red]off[/]")
        + f"; other notifications: {foreign_entries(config) or 'none'}; inventories: "
        + ", ".join(c["Id"] for c in config["inventory"])
        + ("" if report["foreign_config_intact"] else " [red](another team's entries lost)[/]")
    )
    out.print(f"ledger rows: {report['ledger_rows']}; visible objects: {report['visible_objects']}")
    if report["converged"]:
        out.print("[bold green]CONVERGED[/]: the ledger equals the bucket")
    else:
        out.print("[bold red]NOT CONVERGED[/]:")
        for d in report["differences"]:
            out.print(f"  {d}")
    raise typer.Exit(0 if ok else EXIT_UNHEALTHY)
