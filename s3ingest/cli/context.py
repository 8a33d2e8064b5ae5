"""What every command needs before and around its AWS calls: the global AWS options, the
stack's clients (:func:`connect`), its outputs, the one-line error and exit code 3 for an AWS
failure (:func:`aws_call`), the ``--stack``/``--local`` choice and the local extra's check.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from s3ingest.cli.errors import fail
from s3ingest.cli.options import EXIT_AWS, EXIT_USAGE
from s3ingest.commands.context import AwsOptions
from s3ingest.extras import MissingExtraError, require
from s3ingest.outputs import PROCESSOR_NAMES

if TYPE_CHECKING:
    from s3ingest.commands.context import Deployed


aws_options = AwsOptions()


def require_local(what: str) -> None:
    """End the command with exit code 2 and the pip install to run when the local runtime's
    extra (moto's server, Powertools) is missing."""
    try:
        require("local", what)
    except MissingExtraError as exc:
        fail(str(exc), EXIT_USAGE, kind=type(exc).__name__)


def one_target(ctx: typer.Context, stack: str | None, local: bool) -> str | None:
    """The stack to act on, or None with ``--local``; a usage error unless exactly one is
    given (a stack from $S3INGEST_STACK gives way to ``--local``; the command's ``--stack`` is
    the one given before the command when it has none of its own)."""
    source = ctx.get_parameter_source("stack")  # click's ParameterSource
    given = source is not None and source.name not in ("ENVIRONMENT", "DEFAULT")
    if aws_options.stack is not None and not given:  # s3ingest --stack NAME COMMAND
        stack, source = aws_options.stack, None
    if local and source is not None and source.name == "ENVIRONMENT":
        stack = None
    if local == (stack is not None):
        raise typer.BadParameter(
            "give exactly one of --stack NAME or --local (the stack may come from $S3INGEST_STACK)"
        )
    if stack is not None and not stack.strip():
        raise typer.BadParameter("the stack name is empty", param_hint="--stack")
    return stack


def connect(stack: str) -> Deployed:
    """The stack's clients and adapters (:func:`s3ingest.commands.context.connect`) with the
    global options (``--profile``, ``--region``, else the default chain); an AWS error ends
    the command (:func:`aws_call`)."""
    from s3ingest.commands.context import connect as connect_stack

    deployed: Deployed = aws_call(lambda: connect_stack(aws_options, stack))
    return deployed


def connect_target(ctx: typer.Context, stack: str | None, local: bool) -> Deployed:
    """``--stack NAME`` (:func:`connect`) or ``--local``: the stack ``s3ingest local up``
    runs from the current directory, through the same :class:`Deployed`
    (:func:`s3ingest.commands.context.connect_local`); exit code 2 when none runs."""
    name = one_target(ctx, stack, local)
    if name is not None:
        return connect(name)
    from s3ingest.commands.context import connect_local
    from s3ingest.local.emulator.s3control_jobs import local_host
    from s3ingest.local.stack.daemon import LocalStackError, run_dir, running

    try:
        run = running(run_dir())
    except LocalStackError as exc:
        fail(str(exc), EXIT_USAGE, kind=type(exc).__name__)
    return connect_local(run, wrap={"s3control": local_host})


def local_stack_running() -> bool:
    """Whether ``s3ingest local up`` runs a local stack from the current directory
    (:func:`s3ingest.local.stack.daemon.running`): ``--local`` of ``reconcile``, ``backfill``,
    ``onboard`` and ``verify`` then acts on it (:func:`connect_target`), else on a fresh local
    runtime of their own."""
    from s3ingest.local.stack.daemon import LocalStackError, run_dir, running

    try:
        running(run_dir())
    except LocalStackError:
        return False
    return True


def require_outputs(deployed: Deployed, *names: str) -> list[str]:
    """The stack's named outputs; a missing one ends the command with exit code 3."""
    return list(aws_call(lambda: deployed.require(*names)))


def aws_call(call: Any) -> Any:
    """Run an AWS call; a profile, credentials, region, stack or service error ends the command
    with exit code 3 (:data:`EXIT_AWS`) and one line, not a traceback (with ``--json``, the
    JSON error too: :func:`s3ingest.cli.errors.fail`)."""
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
        fail(
            "no AWS region: give --region, or set AWS_REGION (or AWS_DEFAULT_REGION, or a "
            "region in your AWS profile)",
            EXIT_AWS,
            kind=type(exc).__name__,
        )
    except NoCredentialsError as exc:
        fail(
            "no AWS credentials: give --profile, or set AWS_PROFILE or "
            "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (or use SSO or an instance role)",
            EXIT_AWS,
            kind=type(exc).__name__,
        )
    except (BotoCoreError, ClientError, StackNotFoundError, ReconcileError, TransientError) as exc:
        fail(str(exc), EXIT_AWS, kind=type(exc).__name__)


def processor_names(deployed: Deployed) -> list[str]:
    """The stack's processor names (output ``ProcessorNames``; ``default`` for the single
    ``processor`` setting)."""
    names = [n for n in deployed.outputs.get(PROCESSOR_NAMES, "").split(",") if n]
    return names or ["default"]
