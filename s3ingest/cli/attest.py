"""``s3ingest attest``: a completeness attestation of one bucket, and ``s3ingest attest verify``:
a saved one checked against the inputs it names (docs/attestation.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from s3ingest.cli.app import app
from s3ingest.cli.context import aws_call, aws_options, connect_target
from s3ingest.cli.errors import fail
from s3ingest.cli.options import (
    EXIT_UNHEALTHY,
    EXIT_USAGE,
    AsJson,
    BucketOption,
    LocalOption,
    Source,
    StackOrLocal,
    choices,
)
from s3ingest.cli.render import console, out
from s3ingest.outputs import ATTESTATION_BUCKET_NAME, INVENTORY_BUCKET_NAME, attestation_store

attest_app = typer.Typer(
    help="Attest that, at one reconciliation snapshot, every object of the bucket was in the "
    "ledger with its version and ETag and every processor's effect was done at its version: a "
    "Merkle root over the bucket and one over the ledger, counts and the snapshot's inputs, "
    "stored as a JSON document in the stack's bucket, or its Attestations bucket under Object "
    "Lock with attestationRetentionDays (attestations/BUCKET/SNAPSHOT.json, its leaves beside "
    "it). Prints the document's SHA-256 and every differing key. Exit code 0 "
    "when the roots are equal, 1 when they differ (docs/attestation.md).",
)
app.add_typer(
    attest_app, name="attest", short_help="Attest a bucket's completeness; verify a document."
)


@attest_app.callback(invoke_without_command=True)
def attest_command(
    ctx: typer.Context,
    bucket: BucketOption = None,
    prefix: Annotated[
        str, typer.Option(metavar="PREFIX", help="Only keys starting with this prefix.")
    ] = "",
    processor: Annotated[
        list[str] | None,
        typer.Option(
            "--processor",
            metavar="NAME",
            help="A processor to attest at its version (repeatable; default: every "
            "configured one).",
        ),
    ] = None,
    source: Annotated[
        Source,
        typer.Option(
            metavar=choices(Source),
            help="The bucket's side: listing (ListObjectVersions now) or inventory (the newest "
            "S3 Inventory report, or --manifest).",
        ),
    ] = "listing",
    manifest: Annotated[
        str | None,
        typer.Option(metavar="KEY", help="Inventory manifest.json key (with --source inventory)."),
    ] = None,
    margin_seconds: Annotated[
        int | None,
        typer.Option(
            min=0,
            metavar="SECONDS",
            help="Leave out keys changed this long before the snapshot or after it (default "
            "60 for a listing, 3600 for an inventory); they are counted and listed.",
        ),
    ] = None,
    stack: StackOrLocal = None,
    local: LocalOption = False,
    as_json: AsJson = False,
) -> None:
    """Attest that, at one snapshot, every object of the bucket was in the ledger with its
    version and ETag, and every processor's effect was done at its version: both Merkle roots,
    counts, the snapshot's inputs, stored as a JSON document in the stack's bucket
    (attestations/BUCKET/SNAPSHOT.json) with its leaves beside it. Prints the document's
    SHA-256 and, when the roots differ, every differing key. Exit code 0 when the roots are
    equal, 1 when they differ."""
    if ctx.invoked_subcommand is not None:
        return
    from s3ingest.commands.attest import attest_bucket
    from s3ingest_fn.services.attestation import AttestError

    if manifest is not None and source != "inventory":
        raise typer.BadParameter("--manifest needs --source inventory", param_hint="--manifest")
    deployed = connect_target(ctx, stack, local)
    store = attestation_store(deployed.outputs)
    if not store:
        fail(
            f"the stack has no bucket of its own to keep attestations in "
            f"(output {ATTESTATION_BUCKET_NAME} or {INVENTORY_BUCKET_NAME})",
            EXIT_USAGE,
        )
    reconciler = aws_call(lambda: deployed.reconciler(bucket))
    try:
        made: dict[str, Any] = aws_call(
            lambda: attest_bucket(
                reconciler,
                deployed.client("s3"),
                store_bucket=store,
                stack=deployed.name,
                source=source,
                prefix=prefix,
                processors=processor,
                targets=deployed.stack.processor_targets(),
                margin_seconds=margin_seconds,
                manifest=manifest,
            )
        )
    except AttestError as exc:
        fail(str(exc), EXIT_USAGE if "not configured" in str(exc) else EXIT_UNHEALTHY)
    doc = made["document"]
    exit_code = 0 if doc["equal"] else EXIT_UNHEALTHY
    if as_json:
        sys.stdout.write(json.dumps(made) + "\n")
        raise typer.Exit(exit_code)
    where = made["location"]
    console.print(f"sha256 {made['document_sha256']}", highlight=False)
    out.print(
        f"{doc['bucket']}: roots "
        + ("[green]equal[/]" if doc["equal"] else "[red]differ[/]")
        + f" over {doc['counts']['keys']} keys ({doc['counts']['skipped_recent']} changed "
        f"after the snapshot left out)"
    )
    out.print(f"bucket root {doc['roots']['bucket']}", highlight=False)
    out.print(f"ledger root {doc['roots']['ledger']}", highlight=False)
    out.print(
        f"document s3://{where['bucket']}/{where['key']}"
        + (f" (version {where['version_id']})" if where["version_id"] else ""),
        highlight=False,
    )
    out.print(f"sha256 {made['document_sha256']}", highlight=False)
    for d in doc["differences"]:
        out.print(f"  differs: {d['key']!r} (path {'/'.join(map(str, d['path'])) or '-'})")
    if doc["differences_total"] > len(doc["differences"]):
        out.print(f"  ... {doc['differences_total'] - len(doc['differences'])} more")
    raise typer.Exit(exit_code)


@attest_app.command("verify", short_help="Recompute a saved attestation's roots.")
def attest_verify(
    ctx: typer.Context,
    file: Annotated[
        Path,
        typer.Argument(
            metavar="FILE",
            exists=True,
            dir_okay=False,
            help="The attestation document (or attest --json's output).",
        ),
    ],
    stack: StackOrLocal = None,
    local: LocalOption = False,
    as_json: AsJson = False,
) -> None:
    """Recompute the roots of a saved attestation from the inputs it names (its leaves, and
    an inventory report it was made from) while they exist, and say whether they match and
    which input is gone. Without --stack or --local, the inputs are read with the default AWS
    credentials (--profile, --region, the environment): no stack is needed. Exit code 0 when
    every input there matches, 1 when one does not or is gone."""
    from s3ingest.commands.attest import load_document, verify_document

    try:
        document = load_document(file.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise typer.BadParameter(f"{file}: {exc}", param_hint="FILE") from exc
    s3 = aws_call(lambda: _verify_client(ctx, stack, local))
    found = aws_call(lambda: verify_document(document, s3))
    exit_code = 0 if found["match"] else EXIT_UNHEALTHY
    if as_json:
        sys.stdout.write(json.dumps(found) + "\n")
        raise typer.Exit(exit_code)
    out.print("[green]match[/]" if found["match"] else "[red]no match[/]")
    for check in found["checks"]:
        detail = check.get("where") or check.get("why", "")
        out.print(f"  {check['input']}: {check['status']} {detail}", highlight=False)
    for name in found["gone"]:
        out.print(f"  [red]gone[/]: {name}")
    raise typer.Exit(exit_code)


def _verify_client(ctx: typer.Context, stack: str | None, local: bool) -> Any:
    """The S3 client ``attest verify`` reads the inputs with: the stack's (``--stack``, also
    from $S3INGEST_STACK or before the command) or the local stack's (``--local``); with
    neither, the default credentials chain's (boto3's default session, with ``--profile`` and
    ``--region``): an auditor needs read access to the inputs, not the stack."""
    if stack is None and not local and aws_options.stack is None:
        import boto3

        session = boto3.Session(profile_name=aws_options.profile, region_name=aws_options.region)
        return session.client("s3")
    return connect_target(ctx, stack, local).client("s3")
