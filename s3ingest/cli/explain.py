"""``s3ingest explain``: why the ledger says what it says of one key; ``s3ingest log-key``: the
hash that stands for one key in the logs (``logKeys: hashed``)."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer
from rich.markup import escape

from s3ingest.cli.app import app
from s3ingest.cli.context import aws_call, connect_target
from s3ingest.cli.errors import fail
from s3ingest.cli.options import EXIT_AWS, AsJson, LocalOption, StackOrLocal
from s3ingest.cli.render import Table, out, plain
from s3ingest.outputs import LOG_KEY_SECRET_ARN, LOG_KEYS

#: What ``log-key`` says of a stack whose logs hash no key (its ``logKeys``, output ``LogKeys``).
UNHASHED = {
    "plain": "this stack logs object keys in plain (logKeys: plain): no key is hashed, so there "
    "is no hash to look up; search the logs for the key itself",
    "none": "this stack leaves object keys out of its logs (logKeys: none): no line carries a "
    "key or its hash, so there is nothing to look up",
}


@app.command("explain", short_help="Why the ledger says what it says of one key.")
def explain_command(
    bucket: Annotated[str, typer.Argument(metavar="BUCKET", help="Bucket name.")],
    key: Annotated[
        str, typer.Argument(metavar="KEY", help="Object key, decoded (as in the bucket).")
    ],
    ctx: typer.Context,
    stack: StackOrLocal = None,
    local: LocalOption = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Why does the ledger say this about this object? The ledger row (state, sequencer,
    version, ETag, last decision and its reason, source, times) beside what the bucket holds."""
    from s3ingest.cli.render import to_json
    from s3ingest.commands.explain import explain_key

    deployed = connect_target(ctx, stack, local)
    ledger = aws_call(deployed.ledger)
    targets = deployed.stack.processor_targets()
    scope = aws_call(deployed.stack.scope)
    result = aws_call(lambda: explain_key(ledger, deployed.objects(), bucket, key, targets, scope))
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
            plain(result["ledger"].get(name)),
            plain(
                result["bucket"].get(name, "")
                if name != "state"
                else ("visible" if result["bucket"]["visible"] else "absent")
            ),
        )
    out.print(table_)
    out.print(result["verdict"])
    for name, effect in result["effects"].items():
        who = "processor" if name == "default" else f"processor {name!r}"
        if effect["status"] is None:  # configured, never run for this row
            out.print(
                f"{who} effect of this change: none"
                + (
                    f"; behind: s3ingest reprocess --processor {name} runs it"
                    if effect["behind"]
                    else ""
                )
            )
            continue
        out.print(
            f"{who} effect of this change: {effect['status']} (fencing token "
            f"{plain(effect['fencing_token'])}"
            + (f", lease until {effect['lease_until']}" if effect["lease_until"] else "")
            + (
                f", completed at version {effect['completed_version']}"
                if effect["completed_version"] is not None
                else ""
            )
            + ")"
            + (
                f"; {len(effect['waiting_changes'])} change(s) waiting (every-change)"
                if effect["waiting_changes"]
                else ""
            )
            + (
                "; behind the row: a reconciliation re-runs it (runbook: effects-behind)"
                if effect["behind"] and effect["status"] == "superseded"
                else f"; behind: s3ingest reprocess --processor {name} runs it"
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
            plain(h["at"]),
            escape(decision),
            plain(h["seq"]),
            plain(h["event"] or ""),
            escape(plain(h["reason"])),
            plain(h["source"]),
            plain(h["actor"] or ""),
        )
    out.print(history)
    out.print(result["skipped_rule"])


@app.command("log-key", short_help="The hash that stands for a key in the logs.")
def log_key_command(
    key: Annotated[
        str, typer.Argument(metavar="KEY", help="Object key, decoded (as in the bucket).")
    ],
    ctx: typer.Context,
    stack: StackOrLocal = None,
    local: LocalOption = False,
    as_json: AsJson = False,
) -> None:
    """With logKeys: hashed, logs show each object key as its keyed hash (key_hash in function
    logs, keyHash in the change audit log): print the hash of KEY, to grep the logs for it.
    Reads the stack's log key secret (output LogKeySecretArn) with your credentials
    (secretsmanager:GetSecretValue); exit code 3 when the stack has none (with logKeys: plain
    or none it says so: there is no hash to look up)."""
    from s3ingest.cli.context import require_outputs
    from s3ingest_fn import wiring

    deployed = connect_target(ctx, stack, local)
    unhashed = UNHASHED.get(deployed.outputs.get(LOG_KEYS, ""))
    if unhashed is not None:  # no secret by design (output LogKeys), not a stack that lacks one
        fail(unhashed, EXIT_AWS, kind="NoKeyHash")
    (arn,) = require_outputs(deployed, LOG_KEY_SECRET_ARN)
    client = deployed.client("secretsmanager")
    policy = aws_call(lambda: wiring.key_policy(client, "hashed", arn))
    digest = str(policy.shown(key))
    if as_json:
        sys.stdout.write(json.dumps({"key_hash": digest}) + "\n")
        return
    out.print(digest, highlight=False)
