"""Options and exit codes shared by several command groups: ``--stack`` (from
``$S3INGEST_STACK``), ``--json``, ``--bucket``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

import typer

from s3ingest_fn.contract import STACK_ENV as STACK_ENV_NAME

#: Exit codes (docs/operating.md): 0 ok, 1 unhealthy or not converged, 2 usage error, 3 AWS error.
EXIT_UNHEALTHY, EXIT_USAGE, EXIT_AWS = 1, 2, 3
#: ``reconcile --source``: where the bucket's truth comes from.
Source = Literal["inventory", "listing"]


def choices(kind: Any) -> str:
    """The metavar of an option with fixed choices (a ``Literal``), as click writes it:
    ``[inventory|listing]``; a value not among them is a usage error that names them."""
    return "[" + "|".join(get_args(kind)) + "]"


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
LocalOption = Annotated[
    bool,
    typer.Option(
        "--local",
        help="Act on the local stack that s3ingest local up runs from this directory "
        "(instead of --stack).",
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
