"""``s3ingest repair``: repair one key through the pipeline's normal path and show the
decision."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.markup import escape

from s3ingest.cli.app import app
from s3ingest.cli.context import aws_call, connect_target, require_outputs
from s3ingest.cli.options import EXIT_UNHEALTHY, AsJson, BucketOption, LocalOption, StackOrLocal
from s3ingest.cli.render import Table, out, plain
from s3ingest.outputs import QUEUE_URL

_FIELDS = ("state", "sequencer", "version_id", "etag", "observed", "revision", "reason")


@app.command("repair", short_help="Repair one key through the pipeline (a repair event) and wait.")
def repair_command(
    key: Annotated[
        str, typer.Argument(metavar="KEY", help="Object key, decoded (as in the bucket).")
    ],
    ctx: typer.Context,
    stack: StackOrLocal = None,
    local: LocalOption = False,
    bucket: BucketOption = None,
    wait: Annotated[
        int,
        typer.Option(
            "--wait",
            min=0,
            metavar="SECONDS",
            help="How long to wait for the row to settle (0: queue the repair and return).",
        ),
    ] = 60,
    as_json: AsJson = False,
) -> None:
    """Ask the pipeline to repair KEY: the same repair event a reconciliation sends goes on the
    ingest queue, and the ingest function reads the bucket and the row and records what the
    bucket shows, through the ledger's conditional writes (rules C7 and C12 of
    docs/contract.md). It also resets a row whose stored sequencer S3 cannot have sent (a
    forged one written before this release, which makes every later real event stale): the
    row keeps the bucket's state, without a sequencer, and the decision says
    "sequencer-reset: <why>".

    First the row and one HEAD say what is due (state-differs, absent-from-ledger,
    sequencer-contradicted, effect-pending, effect-behind); nothing due: nothing is sent. Then
    the row is read every second until it settles or --wait passes, and the row before and
    after, the bucket's state and the row's newest decision are printed.

    Exit codes: 0 the row agrees with the bucket (or nothing was due, or --wait 0 queued the
    repair); 1 the row did not settle within --wait, or still differs from the bucket; 2 usage
    error; 3 AWS error (credentials, stack, DynamoDB, S3, SQS)."""
    from s3ingest.cli.render import to_json
    from s3ingest.commands import repair as commands
    from s3ingest_fn.adapters.sqs import SqsRepairQueue

    deployed = connect_target(ctx, stack, local)
    (queue_url,) = require_outputs(deployed, QUEUE_URL)
    name = str(aws_call(lambda: deployed.stack.bucket(bucket)))
    ledger = aws_call(deployed.ledger)
    repairs = SqsRepairQueue(deployed.client("sqs"), queue_url)
    result = aws_call(
        lambda: commands.repair_key(
            ledger,
            deployed.objects(),
            repairs,
            name,
            key,
            wait_seconds=wait,
            sleep=lambda s: commands.wait_step(s),
        )
    )
    failed = result["waited"] and not (result["settled"] and result["agrees"])
    if as_json:
        sys.stdout.write(to_json(result) + "\n")
    else:
        _render(result)
    if failed:
        raise typer.Exit(EXIT_UNHEALTHY)


def _render(result: dict[str, object]) -> None:
    before, after = result["before"], result["after"]
    bucket_state = result["bucket_state"]
    assert isinstance(bucket_state, dict)
    if not result["queued"]:
        out.print("nothing due: the ledger row agrees with the bucket; no repair sent")
    table = Table(title=escape(f"{result['bucket']}/{result['key']}"))
    for col in ("field", "before", "after"):
        table.add_column(col)
    for field in _FIELDS:
        table.add_row(
            field,
            escape(plain(before.get(field) if isinstance(before, dict) else None)),
            escape(plain(after.get(field) if isinstance(after, dict) else None)),
        )
    out.print(table)
    shown = (
        f"visible {plain(bucket_state['version_id'])} {plain(bucket_state['etag'])}"
        if bucket_state["visible"]
        else "absent"
    )
    out.print(escape(f"bucket now: {shown}"))
    due = result["due"]
    assert isinstance(due, list)
    if result["queued"]:
        out.print(escape(f"repair queued; due: {', '.join(str(d) for d in due)}"))
    decision = result["decision"]
    if isinstance(decision, dict):
        out.print(
            escape(
                f"decision: {decision['reason']} ({decision['source']}, seq "
                f"{plain(decision['seq'])}, {decision['state']})"
            )
        )
    if result["waited"] and not result["settled"]:
        out.print("[red]the row did not settle in time[/] (check the ingest queue and its DLQ)")
    elif result["queued"]:
        verdict = "[green]agrees[/]" if result["agrees"] else "[red]still differs[/]"
        out.print(f"ledger and bucket: {verdict}")
