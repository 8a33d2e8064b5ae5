"""The operator CLI, ``s3ingest``.

Command functions here parse arguments, get their clients from :mod:`s3ingest.commands.context`
(the one place they are built), call a plain function of :mod:`s3ingest.commands`, render its
result (a table, or JSON with ``--json``) and choose the exit code.

One module per command group, each adding its commands to the root :data:`app`
(:mod:`~s3ingest.cli.app`): :mod:`~s3ingest.cli.local` (``local demo``, ``local scenario``),
:mod:`~s3ingest.cli.local_stack` (``local up``, ``local down``, ``local status``),
:mod:`~s3ingest.cli.reconcile`, :mod:`~s3ingest.cli.onboard`, :mod:`~s3ingest.cli.backfill`
(``backfill start``, ``backfill status``), :mod:`~s3ingest.cli.replay` (``replay``,
``redrive``), :mod:`~s3ingest.cli.reprocess`, :mod:`~s3ingest.cli.explain`,
:mod:`~s3ingest.cli.repair`,
:mod:`~s3ingest.cli.review` (``held``, ``approve``, ``reject``) and :mod:`~s3ingest.cli.health`
(``status``, ``verify``), :mod:`~s3ingest.cli.attest` (``attest``, ``attest verify``),
:mod:`~s3ingest.cli.history` (``history``);
shared options and exit codes in :mod:`~s3ingest.cli.options`, the
AWS call guard and the stack's clients in :mod:`~s3ingest.cli.context`, output in
:mod:`~s3ingest.cli.render`.
"""

from __future__ import annotations

# isort: off
# Each import registers its group's commands on `app`: `s3ingest --help` lists them in this order.
from s3ingest.cli import local, local_stack, reconcile, onboard, backfill, replay  # noqa: F401
from s3ingest.cli import reprocess, explain, repair, review, health, attest, history  # noqa: F401

# isort: on
from s3ingest.cli.app import app
from s3ingest.cli.options import EXIT_AWS, EXIT_UNHEALTHY, EXIT_USAGE, STACK_ENV

__all__ = ["EXIT_AWS", "EXIT_UNHEALTHY", "EXIT_USAGE", "STACK_ENV", "app", "main"]


def main() -> None:
    """Console-script entry point."""
    app()
