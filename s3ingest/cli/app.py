"""The root Typer app: the global options (``--version``, ``--profile``, ``--region``,
``--pipeline``, ``--debug``) and the help of ``s3ingest`` itself; each command group adds its
commands to it.
"""

from __future__ import annotations

import os
from typing import Annotated

import typer

from s3ingest.cli.context import aws_options
from s3ingest.cli.render import out
from s3ingest.version import version


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


def _print_version(value: bool) -> None:
    if value:
        out.print(f"s3ingest {version()}", highlight=False)
        raise typer.Exit(0)


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
    pipeline: Annotated[
        str | None,
        typer.Option(
            metavar="STAGE",
            envvar="S3INGEST_PIPELINE",
            help="The pipeline to act on, by its stage, in a stack that holds several "
            "S3IngestPipelines (default: the stack's one; $S3INGEST_PIPELINE).",
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
    aws_options.profile = profile
    aws_options.pipeline = pipeline
    # The AWS CLI reads AWS_REGION before AWS_DEFAULT_REGION; boto3 reads only the latter.
    aws_options.region = region or os.environ.get("AWS_REGION") or None
    if debug:
        import logging

        import boto3

        boto3.set_stream_logger("botocore", logging.DEBUG)
