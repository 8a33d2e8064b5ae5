"""The operator CLI, ``s3ingest``.

Command functions here parse arguments, get their clients from :mod:`s3ingest.commands.context`
(the one place they are built), call a plain function of :mod:`s3ingest.commands`, render its
result (a table, or JSON with ``--json``) and choose the exit code.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from s3ingest.commands.context import AwsOptions
from s3ingest.extras import MissingExtraError, require
from s3ingest.version import version
from s3ingest_fn.contract import STACK_ENV as STACK_ENV_NAME

if TYPE_CHECKING:
    from s3ingest.commands.context import Deployed


def _plain_argument_help() -> None:
    """Write arguments the classic way, ``KEY`` and ``[EXECUTION_ARN]``: typer 0.2x writes a
    required argument as ``{KEY}`` in the usage line and adds its type (``<str>``) to the help,
    which reads like syntax to type."""
    from typer.core import TyperArgument

    def usage_name(self: TyperArgument) -> str:
        name = self.display_name_raw
        return name if self.required or name.startswith("[") else f"[{name}]"

    TyperArgument._usage_display_name = usage_name  # type: ignore[method-assign]
    TyperArgument.display_type_rich = lambda self, ctx: None  # type: ignore[method-assign]


_plain_argument_help()

app = typer.Typer(
    name="s3ingest",
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Turn S3's at-least-once, unordered events into a correct per-key ledger.\n\n"
    "Deploy the CDK app with `npx cdk deploy`; try everything locally first with "
    "`s3ingest local demo`.",
)
local_app = typer.Typer(
    no_args_is_help=True,
    help="Run the pipeline on an embedded AWS emulator (moto), no AWS account needed.",
)
app.add_typer(
    local_app, name="local", short_help="Run the pipeline on an embedded emulator (no AWS)."
)


def _print_version(value: bool) -> None:
    if value:
        out.print(f"s3ingest {version()}", highlight=False)
        raise typer.Exit(0)


_aws_options = AwsOptions()


@app.callback()
def _main(
    show_version: Annotated[
        bool | None,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print the s3ingest version and exit.",
        ),
    ] = None,
    profile: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help="AWS profile for the credentials and region (default: the AWS default chain, "
            "which reads AWS_PROFILE).",
        ),
    ] = None,
    region: Annotated[
        str | None,
        typer.Option(
            metavar="REGION",
            help="AWS region (default: AWS_REGION, then AWS_DEFAULT_REGION, then the profile's).",
        ),
    ] = None,
    debug: Annotated[
        bool,
        typer.Option(
            "--debug",
            help="Log every AWS request and response (botocore's wire log) to standard error.",
        ),
    ] = False,
) -> None:
    # Options of the command itself (the help text is the Typer app's).
    _aws_options.profile = profile
    # The AWS CLI reads AWS_REGION before AWS_DEFAULT_REGION; boto3 reads only the latter.
    _aws_options.region = region or os.environ.get("AWS_REGION") or None
    if debug:
        import logging

        import boto3

        boto3.set_stream_logger("botocore", logging.DEBUG)


console = Console(stderr=True, soft_wrap=True)
out = Console()

#: Exit codes (README): 0 ok, 1 unhealthy or not converged, 2 usage error, 3 AWS error.
EXIT_UNHEALTHY, EXIT_USAGE, EXIT_AWS = 1, 2, 3
#: Where the stack name comes from when --stack is not given (the functions' own variable).
STACK_ENV = STACK_ENV_NAME
_STACK_HELP = "Deployed stack name (S3Ingest-<stage>); default: $S3INGEST_STACK."
Stack = Annotated[
    str, typer.Option(metavar="NAME", envvar=STACK_ENV, show_envvar=False, help=_STACK_HELP)
]
StackOrLocal = Annotated[
    str | None,
    typer.Option(
        metavar="NAME",
        envvar=STACK_ENV,
        show_envvar=False,
        help=_STACK_HELP + " Uses your AWS credentials.",
    ),
]
AsJson = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]
BucketOption = Annotated[
    str | None,
    typer.Option(
        "--bucket",
        metavar="BUCKET",
        help="One of the stack's landing buckets (default: the first of its BucketNames output).",
    ),
]


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
        str,
        typer.Option(
            metavar="SOURCE", help="Reconciliation at the end: inventory, listing or none."
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
    _require_local("s3ingest local demo")
    from s3ingest.commands import local as commands

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
            console.print(
                f"[red]error:[/] {mode} runs its own scenario: {', '.join(given)} "
                f"{'does' if len(given) == 1 else 'do'} not apply (only --seed and --json do)"
            )
            raise typer.Exit(EXIT_USAGE)
    if existing:
        _onboard_locally(seed=seed, as_json=as_json)
    if hold_deletes:
        _hold_demo(seed=seed, as_json=as_json)

    if reconcile not in commands.DEMO_RECONCILE:
        raise typer.BadParameter("must be inventory, listing or none", param_hint="--reconcile")

    with _task_bar(hidden=as_json) as bar:
        task = bar.add_task("starting the emulator", total=None)

        def on_progress(phase: str, done: int, total: int) -> None:
            bar.update(
                task,
                description=f"{phase}: records processed",
                completed=done,
                total=max(total, done),
            )

        report = commands.demo(
            rounds=rounds,
            seed=seed,
            duplicate=duplicate,
            drop=drop,
            reconcile=reconcile,
            crash=crash,
            on_progress=on_progress,
        )
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
        _render_reconciliation(print_reconciliation)
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


def _render_reconciliation(rep: dict[str, Any]) -> None:
    table = Table(
        title=f"reconciliation ({rep['source']}"
        + (", fan-out" if rep.get("execution") else "")
        + (", dry run)" if rep.get("dry_run") else ")")
    )
    table.add_column("figure")
    table.add_column("value", justify="right")
    rows = [
        ("bucket rows read", rep.get("bucket_rows")),
        ("bucket keys", rep["bucket_keys"]),
        ("ledger rows", rep["ledger_rows"]),
        ("ledger requests", rep["ledger_requests"]),
        ("skipped (changed after the snapshot)", rep["skipped_recent"]),
    ]
    rows += [(f"drift: {kind}", n) for kind, n in rep["drift"].items()]
    rows += [
        ("effects pending (re-run by a repair)", rep.get("pending_effects", 0)),
        ("effects behind the row (re-run by a repair)", rep.get("effects_behind", 0)),
        ("resolved on HEAD", rep["resolved_on_head"]),
        ("repairs queued", rep["repairs_queued"]),
        ("seconds", rep.get("duration_s")),
    ]
    execution = rep.get("execution")
    if execution:
        rows += [("execution", execution["status"]), ("execution arn", execution["arn"])]
    for name, value in rows:
        if value is not None:
            table.add_row(name, str(value))
    out.print(table)


@local_app.command("scenario", short_help="Run a JSON Lines scenario file.")
def scenario(
    file: Annotated[
        Path,
        typer.Argument(
            exists=True, dir_okay=False, readable=True, help="JSON Lines scenario (format: README)."
        ),
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Run a scenario file on a fresh local deployment and print what happened: messages, the
    ledger, the processor's effects and the change events, with their ids (exit code 1 if the
    ledger does not equal the bucket at the end, the effects broke a rule or a step failed, 2
    for an invalid scenario file)."""
    _require_local("s3ingest local scenario")
    from s3ingest.commands import local as commands
    from s3ingest.local.scenario import ScenarioError

    try:
        result = commands.scenario(file)
    except ScenarioError as exc:
        console.print(f"[red]scenario error:[/] {escape(str(exc))}", highlight=False)
        raise typer.Exit(EXIT_USAGE) from exc
    ok = commands.scenario_ok(result)
    if as_json:
        sys.stdout.write(json.dumps(result, ensure_ascii=False) + "\n")
        raise typer.Exit(0 if ok else 1)
    msgs = Table(title="messages (step: the line whose S3 operation emitted the event)")
    for col in ("step", "delivered at", "event", "outcome", "reason", "key", "sequencer"):
        msgs.add_column(col, overflow="fold")  # wrapped, never cut: read whole by operators
    for m in result["messages"]:
        msgs.add_row(
            str(m["step"]),
            str(m["delivered_at"]),
            str(m["event"]),
            m["outcome"],
            m["reason"],
            repr(m["key"]),
            str(m["sequencer"]),
        )
    out.print(msgs)
    ledger = Table(title="ledger")
    for col in ("key", "state", "sequencer", "version_id", "etag"):
        ledger.add_column(col, overflow="fold")
    for r in result["ledger"]:
        ledger.add_row(
            repr(r["key"]), r["state"], str(r["sequencer"]), str(r["version_id"]), str(r["etag"])
        )
    out.print(ledger)
    for rep in result["reconciliations"]:
        out.print(f"line {rep['step']}:")
        _render_reconciliation(rep)
    for job in result["backfills"]:
        out.print(f"line {job['step']}:")
        _emit_backfill(job, as_json=False)
    if result["effects"]:
        fx = Table(title="effects run (processor)")
        for col in ("step", "processor", "key", "kind", "sequencer", "change id", "token", "then"):
            fx.add_column(col, overflow="fold")  # ids are matched by eye: never cut them
        for e in result["effects"]:
            fx.add_row(
                str(e["step"]),
                e["processor"],
                repr(e["key"]),
                e["kind"],
                str(e["sequencer"]),
                e["id"],
                str(e["token"]),
                "killed before commit" if e["crashed_before_commit"] else "committed",
            )
        out.print(fx)
    if result["changes"]:
        ch = Table(title="change stream (events a subscriber received)")
        for col in ("detail-type", "key", "processor", "sequencer", "id"):
            ch.add_column(col, overflow="fold")
        for c in result["changes"]:
            d = c["detail"]
            ch.add_row(
                str(c["detail-type"]),
                repr(d["key"]),
                str(d.get("processor") or ""),
                str(d["sequencer"]),
                d["id"],
            )
        out.print(ch)
    for review in result["reviews"]:
        decided = sum(1 for d in review["decided"] if d["applied"])
        out.print(
            f"line {review['step']}: {review['op']} {review['key']!r}: {decided} held "
            "change(s) decided" + ("" if decided else " [yellow](nothing held matched)[/]")
        )
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
    for problem in result["effects_problems"]:
        out.print(f"[red]effects problem:[/] {problem}")
    if result["error"]:
        out.print(f"[red]run stopped:[/] {result['error']}")
    out.print(f"events lost for good: {result['dropped']}")
    for m in result["dead_letter_queue"]:
        out.print(f"dead-letter queue: reason={m['reason']} body={m['body']!r}")
    out.print("converged: " + ("[green]yes[/]" if result["converged"] else "[red]no[/]"))
    for d in result["differences"]:
        out.print(f"  {d}")
    raise typer.Exit(0 if ok else 1)


@app.command("reconcile", short_help="Compare bucket and ledger; queue repairs.")
def reconcile_command(
    ctx: typer.Context,
    source: Annotated[
        str,
        typer.Option(
            metavar="SOURCE",
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
            help="Run against the local runtime: a "
            "demo workload with lost events, then this "
            "reconciliation.",
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
            help="With --local: run the stack's fan-out "
            "reconciliation state machine (inventory only).",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Compare the bucket with the ledger and queue a repair event for every difference
    (rule C12 of docs/contract.md). Repairs go through the ingest queue and the same rules as
    live events."""
    from s3ingest.commands import reconcile as commands

    if source not in ("inventory", "listing"):
        raise typer.BadParameter("must be inventory or listing", param_hint="--source")
    stack = _one_target(ctx, stack, local)
    if local:
        _require_local("s3ingest reconcile --local")
        if manifest or margin_seconds is not None or bucket is not None:
            raise typer.BadParameter(
                "--manifest, --margin-seconds and --bucket apply to --stack only"
            )
        if fan_out and source != "inventory":
            raise typer.BadParameter("the fan-out reads an inventory", param_hint="--fan-out")
        report = commands.reconcile_locally(
            source=source, prefix=prefix, dry_run=dry_run, fan_out=fan_out
        )
    else:
        if fan_out:
            raise typer.BadParameter("--fan-out applies to --local only", param_hint="--fan-out")
        deployed = _connect(str(stack))
        reconciler = _aws(lambda: deployed.reconciler(bucket))
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
            report = _aws(
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
        _render_reconciliation(report)
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
            help="Run the same on the local runtime: an existing bucket holding objects and "
            "another team's configurations, live traffic during the backfill.",
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
    events. Prints objects, elapsed time, requests by kind and an estimated cost. Re-running
    resumes the same backfill run. Exit code 1 when it did not finish (declined, failed)."""
    stack = _one_target(ctx, stack, local)
    if local:
        _require_local("s3ingest onboard --local")
        if bucket is not None:
            raise typer.BadParameter("--bucket applies to --stack only", param_hint="--bucket")
        _onboard_locally(seed=7, as_json=as_json)
    from s3ingest.onboard import OnboardTarget, onboard

    deployed = _connect(str(stack))
    name = _aws(lambda: deployed.stack.bucket(bucket))
    machine, checkpoints = _require(
        deployed, "ListingBackfillStateMachineArn", "InventoryBucketName"
    )
    reconciler = _aws(lambda: deployed.reconciler(name))

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
        others = _foreign_entries(configuration)
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
    with _OnboardBar(hidden=as_json) as on_progress:
        report = _aws(
            lambda: onboard(
                target,
                name,
                confirm=confirm,
                on_progress=on_progress,
                reconcile=closing_reconcile,
            )
        )
    _emit_onboard(report, as_json)
    raise typer.Exit(0 if report["status"] == "done" else EXIT_UNHEALTHY)


def _foreign_entries(configuration: dict[str, Any]) -> str:
    """The notification configurations other than EventBridge, as ``Queue: id, ...``."""
    notification = configuration.get("notification") or {}
    parts = [
        f"{kind.removesuffix('Configurations')}: {entry.get('Id', '?')}"
        for kind in ("QueueConfigurations", "TopicConfigurations", "LambdaFunctionConfigurations")
        for entry in notification.get(kind, [])
    ]
    return ", ".join(parts)


def _hold_demo(*, seed: int, as_json: bool) -> None:
    """``local demo --hold-deletes``: run, print, end with the exit code (0 when nothing held
    ran before its approval, every approved effect ran, and the pipeline converged)."""
    from s3ingest.commands import local as commands

    with _task_bar(hidden=as_json) as bar:
        task = bar.add_task("starting the emulator", total=None)

        def on_progress(phase: str, done: int, total: int) -> None:
            bar.update(task, description=phase, completed=done, total=max(total, done))

        report = commands.hold_demo(seed=seed, on_progress=on_progress)
    ok = commands.hold_demo_ok(report)
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


def _onboard_locally(*, seed: int, as_json: bool) -> None:
    """``onboard --local`` and ``local demo --existing``: run, print, end with the exit code
    (0 when the onboarding finished, the ledger converged and the foreign entries survived)."""
    from s3ingest.commands import local as commands

    with _OnboardBar(hidden=as_json) as on_progress:
        report = commands.existing_demo(seed=seed, on_progress=on_progress)
    ok = bool(report["converged"] and report["foreign_config_intact"])
    if as_json:
        sys.stdout.write(json.dumps(report, default=str) + "\n")
        raise typer.Exit(0 if ok else EXIT_UNHEALTHY)
    out.print(
        f"existing bucket {report['bucket']}: {report['objects_before']} objects before the "
        f"pipeline (events S3 sent for them: {report['events_before_onboarding']}), "
        f"{report['live_operations']} live operations during the backfill"
    )
    _emit_onboard(report["onboard"], as_json=False)
    config = report["bucket_config"][report["bucket"]]
    out.print(
        "configuration after onboarding: EventBridge "
        + ("on" if report["event_bridge_on"] else "[red]off[/]")
        + f"; other notifications: {_foreign_entries(config) or 'none'}; inventories: "
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


class _OnboardBar:
    """The onboarding's progress bar on standard error: shards done/total and objects
    recorded during the backfill, rows read during the reconciliation."""

    def __init__(self, *, hidden: bool) -> None:
        self._bar = _task_bar(hidden=hidden)
        self._task: Any = None

    def __enter__(self) -> Any:
        self._bar.__enter__()
        self._task = self._bar.add_task("checking EventBridge delivery", total=None)
        return self.update

    def update(self, phase: str, done: int, total: int | None, objects: int) -> None:
        if phase == "backfill":
            description = f"listing backfill: shards ({objects} objects recorded)"
        else:
            description = f"{phase} rows"
        self._bar.update(self._task, description=description, completed=done, total=total)

    def __exit__(self, *exc: object) -> None:
        self._bar.__exit__(*exc)  # type: ignore[arg-type]


def _emit_onboard(report: dict[str, Any], as_json: bool) -> None:
    if as_json:
        sys.stdout.write(json.dumps(report, default=str) + "\n")
        return
    if report["status"] == "declined":
        out.print(f"{report['bucket']}: EventBridge delivery left off; nothing done")
        return
    table = Table(title=f"onboarding {report['bucket']}")
    table.add_column("figure")
    table.add_column("value", justify="right", overflow="fold")
    eb = report["event_bridge"]
    backfill = report["backfill"]
    rows = [
        ("EventBridge delivery", "switched on" if eb["switched_on"] else "was on"),
        ("backfill run", backfill["run"]),
        ("execution", f"{backfill['status']} (attempt {backfill['attempt']})"),
        ("shards done", backfill["shards"]["done"]),
        ("objects listed", report["objects"]),
    ]
    rec = report.get("reconciliation")
    if rec and rec.get("skipped"):
        rows.append(("reconciliation", "skipped (--no-reconcile)"))
    elif rec:
        rows += [(f"reconciliation drift: {k}", v) for k, v in rec["drift"].items()]
        rows.append(("repairs queued", rec["repairs_queued"]))
    rows.append(("elapsed seconds", report["elapsed_s"]))
    cost = report["cost"]
    rows.append(
        (
            "estimated cost (USD)",
            f"{cost['usd']:.6f} ({cost['region']} list prices, {cost['prices_as_of']})",
        )
    )
    for name, value in rows:
        table.add_row(name, str(value))
    out.print(table)
    requests = Table(title=f"requests by kind ({report['requests_source']})")
    requests.add_column("kind")
    requests.add_column("requests", justify="right")
    for kind, n in sorted(report["requests"].items(), key=lambda kv: -kv[1]):
        requests.add_row(kind, str(n))
    out.print(requests)
    if report["status"] != "done":
        out.print(
            f"[red]onboarding stopped:[/] execution {backfill['status']}: "
            f"{backfill.get('error')}: {backfill.get('cause')}; re-run to resume"
        )


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
            help="Run on the local runtime: objects "
            "that predate the pipeline, a backfill, live traffic "
            "at the same time.",
        ),
    ] = False,
    wait: Annotated[bool, typer.Option(help="Follow the job until it ends.")] = True,
    engine: Annotated[
        str | None,
        typer.Option(
            metavar="ENGINE",
            help="With --local: batch-operations (default) or distributed-map, the "
            "backfill state machine to run (a deployed stack has the one it was deployed with).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Start a backfill (rule C13 of docs/contract.md): safe to overlap with live traffic and to
    run twice."""
    from s3ingest.commands import backfill as commands

    stack = _one_target(ctx, stack, local)
    if local:
        _require_local("s3ingest backfill start --local")
        if manifest or not wait:
            raise typer.BadParameter("--manifest and --no-wait apply to --stack only")
        engine = engine or commands.LOCAL_ENGINES[0]
        if engine not in commands.LOCAL_ENGINES:
            raise typer.BadParameter(
                "must be " + " or ".join(commands.LOCAL_ENGINES), param_hint="--engine"
            )

        with _task_bar(hidden=as_json) as bar:
            task = bar.add_task("starting the emulator", total=None)
            report = commands.backfill_locally(
                on_progress=lambda phase, done, total: bar.update(
                    task, description=phase, completed=done, total=total
                ),
                engine=engine,
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
        _emit_backfill(report, as_json)
        raise typer.Exit(0 if ok else 1)
    if engine is not None:
        raise typer.BadParameter("--engine applies to --local only", param_hint="--engine")
    deployed = _connect(str(stack))
    (arn,) = _require(deployed, "BackfillStateMachineArn")
    execution = _aws(
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
    stack: Stack,
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

    deployed = _connect(stack)
    if execution is None:
        (arn,) = _require(deployed, "BackfillStateMachineArn")
        execution = _aws(lambda: commands.latest_backfill(deployed.client("stepfunctions"), arn))
        if execution is None:
            console.print("no backfill has run yet")
            raise typer.Exit(EXIT_UNHEALTHY)
    _follow_backfill(deployed, execution, watch=watch, as_json=as_json)


def _follow_backfill(deployed: Deployed, execution: str, *, watch: bool, as_json: bool) -> None:
    """Render a backfill's status (followed with ``watch``, a progress bar on standard error)
    and end the command: exit code 0 while it runs or after it succeeded, else 1."""
    from s3ingest.commands import backfill as commands

    with _task_bar(hidden=as_json or not watch) as bar:
        task = bar.add_task("backfill tasks", total=None)

        def on_status(status: dict[str, Any]) -> None:
            done = (status["succeeded"] or 0) + (status["failed"] or 0)
            bar.update(
                task,
                completed=done,
                total=status["total"],
                description=f"job {status['jobStatus'] or 'not created yet'}",
            )

        status = _aws(
            lambda: commands.follow_backfill(
                deployed.client("stepfunctions"),
                deployed.client("s3control"),
                execution,
                watch=watch,
                on_status=on_status,
            )
        )
    _emit_backfill(status, as_json)
    raise typer.Exit(0 if status["status"] in commands.OK_STATES else EXIT_UNHEALTHY)


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
    stack: Stack,
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
    from s3ingest.commands import replay as commands
    from s3ingest.operations import OperationError, check_window, to_json

    window = (_parse_when(start, "--from"), _parse_when(end, "--to"))
    try:  # arguments are checked before any AWS call
        check_window(*window)
    except OperationError as exc:
        raise typer.BadParameter(str(exc), param_hint="--from/--to") from exc
    deployed = _connect(stack)
    archive, rule = _require(deployed, "ArchiveArn", "RuleArn")
    events = deployed.client("events")
    try:
        result = _aws(
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
                    result |= _aws(
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
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(EXIT_UNHEALTHY) from exc
    if as_json:
        sys.stdout.write(to_json(result) + "\n")
    else:
        for k, v in result.items():
            out.print(f"{k}: {v}")


@app.command("redrive", short_help="Inspect the dead-letter queue and redrive it.")
def redrive_command(
    stack: Stack,
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
    from s3ingest.commands.redrive import redrive
    from s3ingest.operations import to_json

    deployed = _connect(stack)
    dlq_url, queue_url = _require(deployed, "DeadLetterQueueUrl", "QueueUrl")
    result = _aws(
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
            out.print(f"  {name[3:]}: {k}: {v}")
    for key in summary["sample_keys"][:10]:
        out.print(f"  key: {key!r}")
    if "task" in result:
        out.print(f"message-move task started: {result['task']} ({result['progress']})")
    if "moved" in result:
        out.print(
            f"moved {result['moved']['moved']}; kept "
            f"{result['moved']['kept_invalid']} invalid in the DLQ"
        )


@app.command("explain", short_help="Why the ledger says what it says of one key.")
def explain_command(
    bucket: Annotated[str, typer.Argument(metavar="BUCKET", help="Bucket name.")],
    key: Annotated[
        str, typer.Argument(metavar="KEY", help="Object key, decoded (as in the bucket).")
    ],
    stack: Stack,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Why does the ledger say this about this object? The ledger row (state, sequencer,
    version, ETag, last decision and its reason, source, times) beside what the bucket holds."""
    from s3ingest.commands.explain import explain_key
    from s3ingest.operations import to_json

    deployed = _connect(stack)
    ledger = _aws(deployed.ledger)
    result = _aws(lambda: explain_key(ledger, deployed.objects(), bucket, key))
    if as_json:
        sys.stdout.write(to_json(result) + "\n")
        return
    table_ = Table(title=f"{bucket}/{key}")
    table_.add_column("field")
    table_.add_column("ledger")
    table_.add_column("bucket now")
    for name in (
        "state",
        "version_id",
        "etag",
        "size",
        "sequencer",
        "observed",
        "last_event",
        "last_reason",
        "source",
        "updated_at",
        "tombstone_expires_at",
        "revision",
        "change_id",
    ):
        table_.add_row(
            name,
            str(result["ledger"].get(name)),
            str(
                result["bucket"].get(name, "")
                if name != "state"
                else ("visible" if result["bucket"]["visible"] else "absent")
            ),
        )
    out.print(table_)
    out.print(result["verdict"])
    for name, effect in result["effects"].items():
        who = "processor" if name == "default" else f"processor {name!r}"
        out.print(
            f"{who} effect of this change: {effect['status']} (fencing token "
            f"{effect['fencing_token']}"
            + (f", lease until {effect['lease_until']}" if effect["lease_until"] else "")
            + ")"
            + (
                f"; {len(effect['waiting_changes'])} change(s) waiting (every-change)"
                if effect["waiting_changes"]
                else ""
            )
            + (
                "; behind the row: a reconciliation re-runs it (runbook: effects-behind)"
                if effect["behind"]
                else ""
            )
        )
    history = Table(title="decision trail (newest first)")
    for col in ("at", "decision", "sequencer", "event", "reason", "source", "actor"):
        history.add_column(col)
    for h in result["trail"]:
        decision = h["kind"] if h["kind"] != "applied" else f"applied ({h['state']})"
        if h.get("processor"):
            decision += f" [{h['processor']}]"
        history.add_row(
            str(h["at"]),
            escape(decision),
            str(h["seq"]),
            str(h["event"] or ""),
            h["reason"],
            h["source"],
            str(h["actor"] or ""),
        )
    out.print(history)
    out.print(result["skipped_rule"])


def _processors(deployed: Deployed) -> list[str]:
    """The stack's processor names (output ``ProcessorNames``; ``default`` for the single
    ``processor`` setting)."""
    names = [n for n in deployed.outputs.get("ProcessorNames", "").split(",") if n]
    return names or ["default"]


@app.command("held", short_help="List the changes a hold policy holds for review.")
def held_command(
    stack: Stack,
    bucket: Annotated[
        str | None, typer.Option("--bucket", metavar="B", help="Only this bucket's keys.")
    ] = None,
    prefix: Annotated[
        str, typer.Option("--prefix", metavar="P", help="Only keys under P (needs --bucket).")
    ] = "",
    limit: Annotated[
        int, typer.Option("--limit", min=1, max=1000, metavar="N", help="Rows per page.")
    ] = 100,
    after: Annotated[
        str | None,
        typer.Option("--after", metavar="TOKEN", help="The next page (a token a page printed)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Held changes, one per processor and key: the change, why it is held and since when
    (docs/hold.md). Decide them with approve or reject. Reads the ledger with a Scan."""
    from datetime import UTC, datetime

    from s3ingest.commands.review import check_held_args, list_held
    from s3ingest.operations import to_json

    try:
        check_held_args(bucket, prefix, after)
    except ValueError as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(EXIT_USAGE) from exc
    deployed = _connect(stack)
    (table,) = _require(deployed, "LedgerTableName")
    page = _aws(
        lambda: list_held(
            deployed.client("dynamodb"),
            table,
            _processors(deployed),
            bucket=bucket,
            prefix=prefix,
            limit=limit,
            after=after,
        )
    )
    if as_json:
        sys.stdout.write(to_json(page) + "\n")
        return
    table_ = Table(title=f"held changes ({len(page['held'])})")
    for col in ("bucket", "key", "processor", "kind", "reason", "held since", "change"):
        table_.add_column(col)
    for h in page["held"]:
        since = datetime.fromtimestamp(h["held_at"] / 1000, UTC).isoformat(timespec="seconds")
        cells = (h["bucket"], h["key"], h["processor"], h["kind"], h["reason"], since)
        table_.add_row(*(escape(str(c)) for c in cells), h["change_id"])
    out.print(table_)
    if page["next"]:
        out.print(f"more: s3ingest held --stack {stack} --after {page['next']}")


Target = Annotated[
    str | None, typer.Argument(metavar="BUCKET", help="Bucket name (omit with --all-matching).")
]
TargetKey = Annotated[str | None, typer.Argument(metavar="KEY", help="Object key, decoded.")]
ChangeOpt = Annotated[
    str | None,
    typer.Option("--change", metavar="ID", help="Only this held change (its change id)."),
]
ProcessorOpt = Annotated[
    str | None, typer.Option("--processor", metavar="NAME", help="Only this processor's.")
]
AllMatching = Annotated[
    str | None,
    typer.Option(
        "--all-matching",
        metavar="PREFIX",
        help="Every held change of --bucket under PREFIX ('' for all); asks first.",
    ),
]
BucketOpt = Annotated[
    str | None, typer.Option("--bucket", metavar="B", help="The bucket of --all-matching.")
]
DryRun = Annotated[
    bool, typer.Option("--dry-run", help="List what would be decided; decide nothing.")
]
Yes = Annotated[bool, typer.Option("--yes", help="Decide many without asking.")]


@app.command("approve", short_help="Approve held changes: their effects run.")
def approve_command(
    stack: Stack,
    bucket_arg: Target = None,
    key: TargetKey = None,
    change: ChangeOpt = None,
    processor: ProcessorOpt = None,
    all_matching: AllMatching = None,
    bucket: BucketOpt = None,
    dry_run: DryRun = False,
    yes: Yes = False,
    as_json: AsJson = False,
) -> None:
    """Approve a key's held changes (or --all-matching PREFIX of --bucket): each effect runs
    through the normal claim and commit, once; the decision is recorded on the row with your
    identity (STS GetCallerIdentity) and published as Change Approved."""
    _review_command(
        "approved",
        stack,
        bucket_arg,
        key,
        change,
        processor,
        all_matching,
        bucket,
        dry_run,
        yes,
        as_json,
    )


@app.command("reject", short_help="Reject held changes: their effects never run.")
def reject_command(
    stack: Stack,
    bucket_arg: Target = None,
    key: TargetKey = None,
    change: ChangeOpt = None,
    processor: ProcessorOpt = None,
    all_matching: AllMatching = None,
    bucket: BucketOpt = None,
    dry_run: DryRun = False,
    yes: Yes = False,
    as_json: AsJson = False,
) -> None:
    """Reject a key's held changes (or --all-matching PREFIX of --bucket): their effects will
    not run (an every-change processor's newer changes behind one then run); recorded with
    your identity and published as Change Rejected. The ledger row is unchanged."""
    _review_command(
        "rejected",
        stack,
        bucket_arg,
        key,
        change,
        processor,
        all_matching,
        bucket,
        dry_run,
        yes,
        as_json,
    )


def _review_command(
    decision: str,
    stack: str,
    bucket_arg: str | None,
    key: str | None,
    change: str | None,
    processor: str | None,
    all_matching: str | None,
    bucket: str | None,
    dry_run: bool,
    yes: bool,
    as_json: bool,
) -> None:
    from s3ingest.commands.review import matching
    from s3ingest.operations import to_json
    from s3ingest_fn import wiring
    from s3ingest_fn.services.review import HeldChange, held_changes

    verb = "approve" if decision == "approved" else "reject"
    bulk = all_matching is not None
    if (
        bulk == (bucket_arg is not None)
        or (not bulk and (key is None or bucket is not None))
        or (bulk and not bucket)
    ):
        console.print(
            f"[red]error:[/] give BUCKET KEY, or --bucket B --all-matching PREFIX "
            f"(s3ingest {verb} --help)"
        )
        raise typer.Exit(EXIT_USAGE)
    deployed = _connect(stack)
    table, queue_url = _require(deployed, "LedgerTableName", "QueueUrl")
    ledger = _aws(deployed.ledger)
    if bulk:
        assert bucket is not None and all_matching is not None
        targets: list[HeldChange] = _aws(
            lambda: matching(
                deployed.client("dynamodb"), table, _processors(deployed), bucket, all_matching
            )
        )
    else:
        assert bucket_arg is not None and key is not None
        row = _aws(lambda: ledger.get(bucket_arg, key))
        targets = held_changes(row) if row is not None else []
    targets = [
        h
        for h in targets
        if (processor is None or h.processor == processor)
        and (change is None or h.change_id == change)
    ]
    if dry_run or not targets:
        result = {
            "decision": decision,
            "dry_run": dry_run,
            "matched": [h.as_dict() for h in targets],
        }
        if as_json:
            sys.stdout.write(to_json(result) + "\n")
        else:
            out.print(
                f"{len(targets)} held change(s) would be {decision}"
                if dry_run
                else "nothing held matches"
            )
            for h in targets:
                out.print(escape(f"  {h.bucket}/{h.key} [{h.processor}] {h.kind}: {h.reason}"))
        return
    if bulk and len(targets) > 1 and not yes:
        if not sys.stdin.isatty():
            console.print(f"[red]error:[/] {len(targets)} held changes: give --yes to {verb} them")
            raise typer.Exit(EXIT_USAGE)
        if not typer.confirm(f"{verb} {len(targets)} held changes?"):
            raise typer.Exit(EXIT_USAGE)
    actor = str(_aws(lambda: deployed.client("sts").get_caller_identity()["Arn"]))
    reviewer = wiring.reviewer(ledger, deployed.client("sqs"), queue_url)
    with _task_bar(hidden=as_json or len(targets) < 2) as bar:
        task = bar.add_task(verb, total=len(targets))
        done = _aws(
            lambda: reviewer.decide_each(
                targets, decision, actor, on_done=lambda n: bar.update(task, completed=n)
            )
        )
    result = {"decision": decision, "actor": actor, "decided": done}
    if as_json:
        sys.stdout.write(to_json(result) + "\n")
        return
    applied = sum(1 for d in done if d["applied"])
    out.print(f"{applied} of {len(done)} held change(s) {decision} by {actor}")
    for d in done:
        if not d["applied"]:
            out.print(
                escape(
                    f"  not {decision}: {d['bucket']}/{d['key']} [{d['processor']}] "
                    "(no longer held)"
                )
            )


@app.command("status", short_help="One screen of health; exit 1 when unhealthy.")
def status_command(
    stack: Stack,
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
    from s3ingest.commands.status import stack_status
    from s3ingest.operations import to_json

    deployed = _connect(stack)
    result = _aws(lambda: stack_status(deployed, max_age_seconds=max_age_seconds))
    exit_code = 0 if result["healthy"] else EXIT_UNHEALTHY
    if as_json:
        sys.stdout.write(to_json(result) + "\n")
        raise typer.Exit(exit_code)
    out.print(
        "healthy" if result["healthy"] else "[red]UNHEALTHY[/]: " + "; ".join(result["problems"])
    )
    q = result["queue"]
    out.print(
        f"ingest queue: {q['visible']} waiting, {q['in_flight']} in flight, oldest "
        f"{q['oldest_age_seconds']} s"
    )
    out.print(f"dead-letter queue: {result['dead_letter_queue']['visible']}")
    if "target_dead_letter_queue" in result:
        out.print(f"rule-target DLQ: {result['target_dead_letter_queue']['visible']}")
    if "change_dead_letter_queue" in result:
        out.print(
            "change-stream DLQ (batches not published for 24 h): "
            f"{result['change_dead_letter_queue']['visible']}"
        )
    out.print(f"last reconciliation drift: {result['last_drift']}")
    out.print(f"EventBridge delivery: {_on_off(result['eventbridge_delivery'])}")
    out.print(f"newest backfill: {result['last_backfill'] or 'none'}")
    out.print(f"running backfills: {result['running_backfills'] or 'none'}")
    out.print(f"running replays: {result['running_replays'] or 'none'}")
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
    local: Annotated[bool, typer.Option("--local", help="Run against the local runtime.")] = False,
    timeout_seconds: Annotated[
        float, typer.Option(min=1, metavar="SECONDS", help="How long each hop may take.")
    ] = 120.0,
    as_json: AsJson = False,
) -> None:
    """The deploy check: write a canary object under the reserved prefix _s3ingest-canary/
    (never given to a processor), wait for its ledger row and, with the change stream, its
    change event; delete it, wait for the tombstone and its change event; remove its versions.
    Prints each hop's latency; exit code 0 when every hop arrived, 1 when one did not."""
    from s3ingest.commands.verify import verify_pipeline
    from s3ingest.verify import Hop

    stack = _one_target(ctx, stack, local)

    def show(hop: Hop) -> None:
        if not as_json:
            out.print(
                f"{hop.name}: "
                + (f"{hop.ms} ms" if hop.ms is not None else "[red]did not arrive[/]")
            )

    if local:
        _require_local("s3ingest verify --local")
        from s3ingest.commands.context import local_pipeline

        with local_pipeline() as pipeline:
            report = verify_pipeline(pipeline, timeout_seconds=timeout_seconds, on_hop=show)
    else:
        deployed = _connect(str(stack))
        pipeline = _aws(deployed.verify_pipeline)
        report = _aws(
            lambda: verify_pipeline(pipeline, timeout_seconds=timeout_seconds, on_hop=show)
        )
    if as_json:
        sys.stdout.write(json.dumps(report.as_dict()) + "\n")
    else:
        out.print("[green]verified[/]" if report.ok else "[red]not verified[/]")
    raise typer.Exit(0 if report.ok else EXIT_UNHEALTHY)


def _emit_backfill(report: dict[str, Any], as_json: bool) -> None:
    if as_json:
        sys.stdout.write(json.dumps(report, default=str) + "\n")
        return
    table = Table(title="backfill")
    table.add_column("figure")
    table.add_column("value", justify="right")
    execution = report.get("execution")
    if execution:
        table.add_row("execution", str(execution["status"]))
    for name in (
        "status",
        "jobId",
        "jobStatus",
        "total",
        "succeeded",
        "failed",
        "temporary_retries",
        "report",
        "converged",
    ):
        if name in report and report[name] is not None:
            table.add_row(name, str(report[name]))
    for text, count in sorted(report.get("result_strings", {}).items()):
        table.add_row(f"tasks: {text}", str(count))
    out.print(table)
    for failure in report.get("failures", [])[:20]:
        out.print(
            f"  failed: {failure['key']!r} {failure['resultCode']}: {failure['resultString']}"
        )


def _require_local(what: str) -> None:
    """End the command with exit code 2 and the pip install to run when the local runtime's
    extra (moto's server, Powertools) is missing."""
    try:
        require("local", what)
    except MissingExtraError as exc:
        console.print(f"[red]error:[/] {escape(str(exc))}", highlight=False)
        raise typer.Exit(2) from exc


def _one_target(ctx: typer.Context, stack: str | None, local: bool) -> str | None:
    """The stack to act on, or None with ``--local``; a usage error unless exactly one is
    given (a stack from $S3INGEST_STACK gives way to ``--local``)."""
    source = ctx.get_parameter_source("stack")  # click's ParameterSource
    if local and source is not None and source.name == "ENVIRONMENT":
        stack = None
    if local == (stack is not None):
        raise typer.BadParameter(
            "give exactly one of --stack NAME or --local (the stack may come from $S3INGEST_STACK)"
        )
    if stack is not None and not stack.strip():
        raise typer.BadParameter("the stack name is empty", param_hint="--stack")
    return stack


def _connect(stack: str) -> Deployed:
    """The stack's clients and adapters (:func:`s3ingest.commands.context.connect`) with the
    global options (``--profile``, ``--region``, else the default chain); an AWS error ends
    the command (:func:`_aws`)."""
    from s3ingest.commands.context import connect

    deployed: Deployed = _aws(lambda: connect(_aws_options, stack))
    return deployed


def _require(deployed: Deployed, *names: str) -> list[str]:
    """The stack's named outputs; a missing one ends the command with exit code 3."""
    return list(_aws(lambda: deployed.require(*names)))


def _aws(call: Any) -> Any:
    """Run an AWS call; a profile, credentials, region, stack or service error ends the command
    with exit code 3 (:data:`EXIT_AWS`) and one line, not a traceback."""
    from botocore.exceptions import (
        BotoCoreError,
        ClientError,
        NoCredentialsError,
        NoRegionError,
    )

    from s3ingest.deployed import StackNotFoundError
    from s3ingest_fn.core.model import TransientError
    from s3ingest_fn.services.reconcile import ReconcileError

    try:
        return call()
    except NoRegionError as exc:
        console.print(
            "[red]error:[/] no AWS region: give --region, or set AWS_REGION (or "
            "AWS_DEFAULT_REGION, or a region in your AWS profile)"
        )
        raise typer.Exit(EXIT_AWS) from exc
    except NoCredentialsError as exc:
        console.print(
            "[red]error:[/] no AWS credentials: give --profile, or set AWS_PROFILE "
            "or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (or use SSO or an instance "
            "role)"
        )
        raise typer.Exit(EXIT_AWS) from exc
    except (BotoCoreError, ClientError, StackNotFoundError, ReconcileError, TransientError) as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(EXIT_AWS) from exc


def _task_bar(*, hidden: bool) -> Progress:
    """The progress bar of a long operation (description, bar, done/total, elapsed) on standard
    error; ``hidden`` for ``--json`` output, so a script reads only the JSON."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=hidden,
    )


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
