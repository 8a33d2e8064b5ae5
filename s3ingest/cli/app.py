"""The root Typer app: the global options (``--version``, ``--profile``, ``--region``,
``--pipeline``, ``--debug``; ``--stack`` before the command) and the help of ``s3ingest`` itself;
each command group adds its commands to it.

As with the AWS CLI and sam, the global options are taken before or after the command
(``s3ingest status --local --profile ops``), ``-h`` is ``--help`` everywhere, and an error of a
command given ``--json`` is also a JSON object on standard output (:mod:`s3ingest.cli.errors`):
:class:`RootGroup` does all three, for every command, when the command tree is built.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterable
from typing import Annotated, Any

import typer
from typer.core import TyperGroup
from typer.exceptions import TyperException

from s3ingest.cli import errors
from s3ingest.cli.context import aws_options
from s3ingest.cli.render import out
from s3ingest.version import version

#: The root options that are not global options (typer's shell-completion pair, and
#: ``--stack``: the commands that act on a stack have their own).
_ROOT_ONLY = ("install_completion", "show_completion", "stack")
#: ``-h`` is ``--help`` on every command (its context passes it to its subcommands').
HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}


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


def _global_option(ctx: Any, param: Any, value: Any) -> Any:
    """A global option given after the command: it wins over the same option before it."""
    if param.name == "profile" and value is not None:
        aws_options.profile = value
    elif param.name == "region" and value is not None:
        aws_options.region = value
    elif param.name == "pipeline" and value is not None:
        aws_options.pipeline = value
    elif param.name == "debug" and value:
        _wire_log()
    return value


def _with_globals(commands: Iterable[Any], globals_: list[Any]) -> None:
    """Give each command and group of the tree a copy of the global options (not passed to its
    function: :func:`_global_option` applies them) and record its ``--json`` option's value."""
    for command in commands:
        names = {p.name for p in command.params}
        for param in globals_:
            if param.name not in names:
                twin = copy.copy(param)
                twin.expose_value = False
                if param.name != "show_version":  # --version prints and exits wherever it is
                    twin.callback = _global_option
                command.params.append(twin)
        for param in command.params:
            if param.name == "as_json" and param.callback is None:
                param.callback = errors.remember_json
        if isinstance(command, TyperGroup):
            _with_globals(command.commands.values(), globals_)


class RootGroup(TyperGroup):
    """``s3ingest`` itself: gives every command the global options (:func:`_with_globals`)
    and, with ``--json``, writes a usage error (a bad option or value) as the JSON error too
    (:func:`s3ingest.cli.errors.emit_json_error`; click still prints it on standard error)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        globals_ = [p for p in self.params if p.name not in _ROOT_ONLY]
        _with_globals(self.commands.values(), globals_)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        errors.begin(args)
        rest: list[str] = super().parse_args(ctx, args)
        return rest

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except TyperException as exc:  # click's errors: usage (exit code 2) and the like
            errors.emit_json_error(type(exc).__name__, exc.format_message(), exc.exit_code)
            raise


app = typer.Typer(
    name="s3ingest",
    cls=RootGroup,
    context_settings=HELP_OPTIONS,
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
    stack: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help="The deployed stack, given before the command (`s3ingest --stack Uploads "
            "status`): the command's own --stack, which wins when both are given.",
        ),
    ] = None,
) -> None:
    # Options of the command itself (the help text is the Typer app's).
    aws_options.profile = profile
    aws_options.pipeline = pipeline
    aws_options.stack = stack
    # The AWS CLI reads AWS_REGION before AWS_DEFAULT_REGION; boto3 reads only the latter.
    aws_options.region = region or os.environ.get("AWS_REGION") or None
    if debug:
        _wire_log()


def _wire_log() -> None:
    """``--debug``: botocore's wire log on standard error."""
    import logging

    import boto3

    boto3.set_stream_logger("botocore", logging.DEBUG)
