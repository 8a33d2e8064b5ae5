"""``s3ingest local up``, ``local down``, ``local status`` and ``local logs``: the stack on the
embedded emulator in a background process that stays up (:mod:`s3ingest.local.stack.daemon`), which
the operator commands reach with ``--local``, and what its functions printed
(:mod:`s3ingest.local.emulator.function_logs`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from s3ingest.cli.context import require_local
from s3ingest.cli.errors import fail
from s3ingest.cli.local import local_app
from s3ingest.cli.options import EXIT_UNHEALTHY, EXIT_USAGE, AsJson
from s3ingest.cli.render import console, out

StateDir = Annotated[
    Path | None,
    typer.Option(
        "--state",
        metavar="DIR",
        file_okay=False,
        help="A state folder: up loads the state saved there (its settings with it), down "
        "saves the state there (a pickle signed with your key, in a folder only you may "
        "write: another user's, or one others may write, is refused).",
    ),
]


@local_app.command("up", short_help="Start the stack on the emulator in the background.")
def up_command(
    context: Annotated[
        list[str] | None,
        typer.Option(
            "--context",
            "-c",
            metavar="KEY=VALUE",
            help="A setting over cdk.json's context (as cdk -c); repeatable.",
        ),
    ] = None,
    state: StateDir = None,
    port: Annotated[
        int | None,
        typer.Option(
            "--port",
            metavar="N",
            min=1,
            max=65535,
            help="The emulator's port on 127.0.0.1 (default: a free one); exit code 2 when "
            "it is taken.",
        ),
    ] = None,
    as_json: AsJson = False,
) -> None:
    """Start the emulator with the stack deployed from cdk.json's context (of the current
        directory, with --context over it) in a background process that stays up: objects
        written to its buckets by any client (the AWS CLI, boto3 against the printed endpoint)
        flow through the pipeline as in AWS. Prints the endpoint, region, credentials, buckets
        and the stack's outputs; operator commands act on it with --local (from the same
        directory: its run file is .s3ingest/local.json, or in S3INGEST_RUN_DIR when set; what its
    functions print: s3ingest local logs). Its state lives in that process's
        memory until local down; with --state DIR, the state saved there is loaded and saved there
        again on local down, and --context may deploy other processors and hold over it (a
        processor added later: then s3ingest reprocess --local). Exit code 2 for invalid settings
        (a processor that cannot be imported included), a refused state folder (another user's,
        writable by others, another moto, a signature that does not verify), a --port in use or a
        stack already running, 1 when it did not start."""
    require_local("s3ingest local up")
    from s3ingest.local.stack import daemon, saved_state
    from s3ingest.settings import Settings, SettingsError

    try:
        if state is not None:
            saved_state.prepare(state)
        saved = state is not None and saved_state.check(state)
    except saved_state.StateError as exc:
        fail(str(exc), EXIT_USAGE, kind=type(exc).__name__)
    try:
        ctx = daemon.read_context(context or [])
        if not saved:  # over a saved state, the daemon checks them with the saved settings
            Settings.from_context(ctx)
    except (ValueError, SettingsError) as exc:
        fail(str(exc), EXIT_USAGE, kind=type(exc).__name__)
    directory = daemon.run_dir()
    if port is not None:
        from s3ingest.local.emulator.server import PortInUseError, check_port

        try:
            check_port(port)
        except PortInUseError as exc:
            console.print(f"[red]error:[/] {escape(str(exc))}", highlight=False)
            raise typer.Exit(EXIT_USAGE) from exc
    redeploy: dict[str, Any] = {}
    if saved and context:
        redeploy = daemon.context_pairs(context)
        other = sorted(set(redeploy) - set(daemon.REDEPLOYABLE))
        if other:
            fail(
                f"{', '.join(other)}: over a saved state, --context deploys processors and "
                "hold only (the other settings are the saved state's)",
                EXIT_USAGE,
            )
        console.print(
            f"[yellow]note:[/] the saved state's settings apply, with --context's "
            f"{' and '.join(sorted(redeploy))} deployed over them"
        )
    try:
        daemon.running(directory)
    except daemon.LocalStackError:
        pass
    else:
        fail("a local stack already runs here: s3ingest local down first", EXIT_USAGE)
    try:
        info = daemon.start(ctx, directory, state=state, redeploy=redeploy or None, port=port)
    except daemon.LocalStackError as exc:
        fail(str(exc), EXIT_USAGE if exc.usage else EXIT_UNHEALTHY, kind=type(exc).__name__)
    if as_json:
        sys.stdout.write(json.dumps(info) + "\n")
        return
    _render(info)
    out.print(
        "act on it with --local (s3ingest status --local); its functions' logs: s3ingest local "
        "logs; stop it with s3ingest local down"
    )


def export_line(info: dict[str, Any]) -> str:
    """The ``export`` line of the run file ``info`` for the user's own clients: the endpoint,
    both region variables (boto3 reads ``AWS_DEFAULT_REGION``, newer SDKs and the AWS CLI v2
    ``AWS_REGION``: https://docs.aws.amazon.com/sdkref/latest/guide/feature-region.html) and
    the credentials."""
    creds = info["credentials"]
    return (
        f"export AWS_ENDPOINT_URL={info['endpoint']} AWS_REGION={info['region']} "
        f"AWS_DEFAULT_REGION={info['region']} "
        f"AWS_ACCESS_KEY_ID={creds['aws_access_key_id']} "
        f"AWS_SECRET_ACCESS_KEY={creds['aws_secret_access_key']}"
    )


def _render(info: dict[str, Any]) -> None:
    out.print(f"local stack {info['stack']} (pid {info['pid']})", highlight=False)
    out.print(f"endpoint: {info['endpoint']}  region: {info['region']}", highlight=False)
    out.print(export_line(info), highlight=False, soft_wrap=True)
    out.print(f"buckets: {', '.join(info['buckets'])}", highlight=False)
    for name, value in info["outputs"].items():
        out.print(f"  {name}: {value}", highlight=False, soft_wrap=True)


@local_app.command("status", short_help="Whether the local stack runs, and its resources.")
def status_command(as_json: AsJson = False) -> None:
    """Whether the stack s3ingest local up started runs (its pid alive, its endpoint
    answering) and its resources. Exit code 0 when it runs, 1 when not."""
    from s3ingest.local.stack import daemon

    report = daemon.probe(daemon.run_dir())
    ok = bool(report["running"] and report.get("answers"))
    if as_json:
        sys.stdout.write(json.dumps(report) + "\n")
        raise typer.Exit(0 if ok else EXIT_UNHEALTHY)
    if not report["running"]:
        out.print(f"not running: {report['reason']}", highlight=False)
        raise typer.Exit(EXIT_UNHEALTHY)
    out.print(
        "running" if ok else "[red]running, but its endpoint does not answer[/]",
        highlight=False,
    )
    _render(report)
    raise typer.Exit(0 if ok else EXIT_UNHEALTHY)


@local_app.command("down", short_help="Stop the local stack.")
def down_command(state: StateDir = None, as_json: AsJson = False) -> None:
    """Stop the stack s3ingest local up started (its process only, by its pid); its state,
    held in that process's memory, goes with it unless saved: to --state DIR, or to the folder
    of local up --state. Exit code 1 when none runs, 2 for a refused --state folder."""
    from s3ingest.local.stack import daemon, saved_state

    try:
        if state is not None:
            saved_state.prepare(state)
    except saved_state.StateError as exc:
        if as_json:
            sys.stdout.write(json.dumps({"stopped": None, "reason": str(exc)}) + "\n")
        else:
            console.print(f"[red]error:[/] {escape(str(exc))}", highlight=False)
        raise typer.Exit(EXIT_USAGE) from exc
    try:
        result = daemon.stop(daemon.run_dir(), state=state)
    except daemon.LocalStackError as exc:
        if as_json:
            sys.stdout.write(json.dumps({"stopped": None, "reason": str(exc)}) + "\n")
        else:
            console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(EXIT_UNHEALTHY) from exc
    if as_json:
        sys.stdout.write(json.dumps(result) + "\n")
    else:
        saved = f"; state saved to {result['state']}" if result["state"] else ""
        out.print(f"stopped the local stack (pid {result['stopped']}){saved}", highlight=False)


@local_app.command("logs", short_help="What the local stack's functions and processors print.")
def logs_command(
    function: Annotated[
        str | None,
        typer.Argument(
            metavar="[FUNCTION]",
            help="One log: a function's (ingest, change-relay, a state machine's function) or "
            "a processor's (processor-NAME); without it, all of them, each line named.",
        ),
    ] = None,
    follow: Annotated[
        bool,
        typer.Option("--follow", "-f", help="Go on printing new lines until Ctrl-C (tail -f)."),
    ] = False,
    as_json: AsJson = False,
) -> None:
    """What the functions and processors of the stack s3ingest local up started printed (their
    CloudWatch logs, locally): one file per function in the run directory's logs folder
    (.s3ingest/logs/NAME.log), kept after local down and emptied by the next local up. Each
    line: its UTC time and, without FUNCTION, the function's name first; with --json, one JSON
    object per line ({"function", "time", "text"}). Exit code 1 when no local stack ran here, 2
    for a FUNCTION without a log (the logs there are named; with --follow, it is waited for)."""
    from s3ingest.local.emulator import function_logs
    from s3ingest.local.stack import daemon

    directory = daemon.run_dir() / daemon.LOGS_DIR
    if not directory.is_dir():
        console.print("[red]error:[/] no logs: run s3ingest local up (from this directory)")
        raise typer.Exit(EXIT_UNHEALTHY)
    known = function_logs.names(directory)
    if function is not None and function not in known:
        named = ", ".join(known) or "none yet"
        if not follow:
            console.print(f"[red]error:[/] no log of {escape(function)}; the logs: {named}")
            raise typer.Exit(EXIT_USAGE)
        console.print(f"no log of {escape(function)} yet (the logs: {named}): waiting")

    def show(line: function_logs.Line) -> None:
        if as_json:
            text = json.dumps({"function": line.function, "time": line.time, "text": line.text})
        elif function is None:
            text = f"{line.function} {line.time} {line.text}"
        else:
            text = f"{line.time} {line.text}"
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    if not follow:
        for line in function_logs.read(directory, [function] if function else known):
            show(line)
        return
    try:
        for line in function_logs.follow(directory, function):
            show(line)
    except KeyboardInterrupt:
        raise typer.Exit(0) from None
