"""``s3ingest held``, ``approve`` and ``reject``: the changes a hold policy holds for review,
and the operator's decisions on them (docs/hold.md).
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
from rich.markup import escape

from s3ingest.cli.app import app
from s3ingest.cli.context import aws_call, connect_target, processor_names, require_outputs
from s3ingest.cli.errors import fail
from s3ingest.cli.options import EXIT_USAGE, AsJson, LocalOption, StackOrLocal
from s3ingest.cli.render import Table, out, plain, task_bar
from s3ingest.outputs import LEDGER_TABLE_NAME, QUEUE_URL


@app.command("held", short_help="List the changes a hold policy holds for review.")
def held_command(
    ctx: typer.Context,
    stack: StackOrLocal = None,
    local: LocalOption = False,
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

    from s3ingest.cli.render import to_json
    from s3ingest.commands.review import check_held_args, list_held

    try:
        check_held_args(bucket, prefix, after)
    except ValueError as exc:
        fail(str(exc), EXIT_USAGE)
    deployed = connect_target(ctx, stack, local)
    (table,) = require_outputs(deployed, LEDGER_TABLE_NAME)
    page = aws_call(
        lambda: list_held(
            deployed.client("dynamodb"),
            table,
            processor_names(deployed),
            bucket=bucket,
            prefix=prefix,
            limit=limit,
            after=after,
            hold_processors=deployed.stack.hold_processors(),
        )
    )
    if as_json:
        sys.stdout.write(to_json(page) + "\n")
        return
    if page["hold_configured"] is False:
        out.print(
            "no hold policy is configured: no change is held for review "
            "(the hold setting, docs/hold.md)"
        )
    table_ = Table(title=f"held changes ({len(page['held'])})")
    for col in ("bucket", "key", "processor", "kind", "reason", "held since", "change"):
        table_.add_column(col)
    for h in page["held"]:
        since = datetime.fromtimestamp(h["held_at"] / 1000, UTC).isoformat(timespec="seconds")
        cells = (h["bucket"], h["key"], h["processor"], h["kind"], h["reason"], since)
        table_.add_row(*(escape(plain(c)) for c in cells), h["change_id"])
    out.print(table_)
    if page["next"]:
        target = "--local" if local else f"--stack {stack}"
        out.print(f"more: s3ingest held {target} --after {page['next']}")


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
    ctx: typer.Context,
    stack: StackOrLocal = None,
    local: LocalOption = False,
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
        connect_target,
        (ctx, stack, local),
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
    ctx: typer.Context,
    stack: StackOrLocal = None,
    local: LocalOption = False,
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
        connect_target,
        (ctx, stack, local),
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
    target: Any,
    target_args: tuple[Any, ...],
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
    from s3ingest.cli.render import to_json
    from s3ingest.commands.review import matching
    from s3ingest_fn import wiring
    from s3ingest_fn.services.review import HeldChange, held_changes

    verb = "approve" if decision == "approved" else "reject"
    bulk = all_matching is not None
    if (
        bulk == (bucket_arg is not None)
        or (not bulk and (key is None or bucket is not None))
        or (bulk and not bucket)
    ):
        fail(
            f"give BUCKET KEY, or --bucket B --all-matching PREFIX (s3ingest {verb} --help)",
            EXIT_USAGE,
        )
    deployed = target(*target_args)
    table, queue_url = require_outputs(deployed, LEDGER_TABLE_NAME, QUEUE_URL)
    ledger = aws_call(deployed.ledger)
    if bulk:
        assert bucket is not None and all_matching is not None
        targets: list[HeldChange] = aws_call(
            lambda: matching(
                deployed.client("dynamodb"), table, processor_names(deployed), bucket, all_matching
            )
        )
    else:
        assert bucket_arg is not None and key is not None
        row = aws_call(lambda: ledger.get(bucket_arg, key))
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
            fail(f"{len(targets)} held changes: give --yes to {verb} them", EXIT_USAGE)
        if not typer.confirm(f"{verb} {len(targets)} held changes?"):
            raise typer.Exit(EXIT_USAGE)
    actor = str(aws_call(lambda: deployed.client("sts").get_caller_identity()["Arn"]))
    reviewer = wiring.reviewer(ledger, deployed.client("sqs"), queue_url)
    with task_bar(hidden=as_json or len(targets) < 2) as bar:
        task = bar.add_task(verb, total=len(targets))
        done = aws_call(
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
