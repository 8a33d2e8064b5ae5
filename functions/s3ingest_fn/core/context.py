"""Worker threads that run in the invocation's context.

What an invocation binds in :mod:`contextvars` (the time it has left,
:meth:`~s3ingest_fn.core.effects.EffectRunner.bind_context`) is not seen by a pool's threads
unless each task runs in a copy of the submitting thread's context: :func:`in_caller_context`.
Pure standard library.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import copy_context
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


def in_caller_context(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` run, on whatever thread calls it, in a copy of the caller's context (taken when
    ``in_caller_context`` is called); each call gets its own copy."""
    context = copy_context()

    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        return context.copy().run(fn, *args, **kwargs)

    return run


__all__ = ["in_caller_context"]
