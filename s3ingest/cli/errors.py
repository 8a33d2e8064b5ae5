"""Errors as the operator reads them: one line on standard error (``error: <why>``) and, when
the command was given ``--json``, also one JSON object on standard output, so a script that
parses stdout always gets JSON (docs/operating.md, "Errors with --json")::

    {"error": {"type": "StackNotFoundError", "message": "...", "exit_code": 3}}

``type`` is the error's kind: the exception's class name (``BadParameter``, ``NoSuchOption``,
``ClientError``, ``NoCredentialsError``, ``StackNotFoundError``, ...) or ``UsageError``; the
exit code is the command's, unchanged. The root command (:mod:`s3ingest.cli.app`) says per run
whether ``--json`` was given (:func:`begin`, :func:`remember_json`).
"""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

import typer
from rich.markup import escape

from s3ingest.cli.render import console

#: Whether this run's command was given --json: None until its option is read.
_json: dict[str, Any] = {"given": None, "argv": []}


def begin(argv: list[str]) -> None:
    """A new run of the CLI with these arguments (its command's ``--json`` not read yet)."""
    _json.update(given=None, argv=list(argv))


def remember_json(ctx: Any, param: Any, value: Any) -> Any:
    """The callback of every command's ``--json`` option: records whether it was given."""
    _json["given"] = bool(value)
    return value


def json_requested() -> bool:
    """Whether this run prints JSON: its command's ``--json``, or, when the error came before
    that option was read (a bad value of an earlier option), ``--json`` among the arguments
    (before a ``--``)."""
    if _json["given"] is not None:
        return bool(_json["given"])
    argv: list[str] = _json["argv"]
    return "--json" in (argv[: argv.index("--")] if "--" in argv else argv)


def emit_json_error(kind: str, message: str, exit_code: int) -> None:
    """With ``--json``: the error as one JSON object on standard output; else nothing."""
    if json_requested():
        doc = {"error": {"type": kind, "message": message, "exit_code": exit_code}}
        sys.stdout.write(json.dumps(doc) + "\n")
        sys.stdout.flush()


def fail(
    message: str, exit_code: int, *, kind: str = "UsageError", label: str | None = "error"
) -> NoReturn:
    """End the command with ``exit_code``: ``label: message`` on standard error (the message
    alone without a label), and the JSON error with ``--json``."""
    shown = escape(message)
    console.print(f"[red]{label}:[/] {shown}" if label else shown, highlight=False)
    emit_json_error(kind, message, exit_code)
    raise typer.Exit(exit_code)
