"""The Lambda handlers, one module per function role.

In Lambda (``AWS_EXECUTION_ENV`` ``AWS_Lambda_*``), importing this package pauses Python's cyclic
garbage collector for the cold start: the imports, settings and clients allocate objects that
live as long as the execution environment, and each collection would scan them again (about 10%
of the ingest cold start's CPU on CPython 3.13, ``bench/bundle_cold_start.py``). Each handler
module ends with :func:`resume`, and a handler that builds its clients on the first invocation
wraps that in :func:`cold_start`. :func:`resume` freezes what the cold start made out of later
collections, then collects again (https://docs.python.org/3/library/gc.html#gc.freeze).
Elsewhere (the CLI, the local runtime, tests) both are no-ops.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager

#: Whether this process is a Lambda execution environment
#: (https://docs.aws.amazon.com/lambda/latest/dg/configuration-envvars.html#configuration-envvars-runtime).
IN_LAMBDA = os.environ.get("AWS_EXECUTION_ENV", "").startswith("AWS_Lambda_")


def pause() -> None:
    """Stop the cyclic garbage collector (in Lambda only)."""
    if IN_LAMBDA:
        gc.disable()


def resume() -> None:
    """Freeze every object made so far out of later collections and collect again (in Lambda
    only; idempotent)."""
    if IN_LAMBDA and not gc.isenabled():
        gc.freeze()
        gc.enable()


@contextmanager
def cold_start() -> Iterator[None]:
    """:func:`pause` for the block, then :func:`resume`, also when it raises."""
    pause()
    try:
        yield
    finally:
        resume()


pause()
