"""Each in-process invocation sees its own function's environment, and only that.

The local Lambda service runs every invocation with
:func:`s3ingest_fn.config.use_env` (a :class:`contextvars.ContextVar`): wiring's cold-start
builders read the invocation's configuration from it
(:func:`s3ingest_fn.config.invocation_env`), never from the process. Team code run in-process
(an in-process processor, boto3's default chain inside it, Powertools) reads ``os.environ``
instead, as it would in Lambda; :func:`install` makes that read the invocation's environment
too, once per process: ``os.environ`` becomes :class:`InvocationEnviron`, a view that answers
from the invocation's environment while one runs in the calling context and from the process
environment otherwise. Nothing is ever written to the process environment on an invocation's
behalf, no lock is held while a handler runs (invocations overlap, as Lambda's do) and nothing
of the host's environment (``PROCESSOR``, ``HOME``, ...) reaches a function.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import Any, TypeVar, cast

from s3ingest_fn.config import _INVOCATION_ENV, use_env

R = TypeVar("R")

_INSTALL_LOCK = threading.Lock()


class InvocationEnviron(MutableMapping[str, str]):
    """``os.environ`` as each invocation sees it: the environment :func:`use_env
    <s3ingest_fn.config.use_env>` set for the calling context (reads and writes stay in that
    invocation's own copy), else ``base`` (the process environment, which writes still reach,
    ``putenv`` included)."""

    def __init__(self, base: MutableMapping[str, str]) -> None:
        self.base = base

    def _target(self) -> MutableMapping[str, str]:
        env = _INVOCATION_ENV.get()
        return self.base if env is None else cast(MutableMapping[str, str], env)

    def __getitem__(self, key: str) -> str:
        return self._target()[key]

    def __setitem__(self, key: str, value: str) -> None:
        self._target()[key] = value

    def __delitem__(self, key: str) -> None:
        del self._target()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._target()))

    def __len__(self) -> int:
        return len(self._target())

    def copy(self) -> dict[str, str]:
        """A plain dict of what the caller sees (as ``os.environ.copy()``)."""
        return dict(self._target())

    # os._Environ's union operators (PEP 584), which MutableMapping does not provide
    def __or__(self, other: Any) -> dict[str, str]:
        if not isinstance(other, Mapping):
            return NotImplemented
        return {**self._target(), **other}

    def __ror__(self, other: Any) -> dict[str, str]:
        if not isinstance(other, Mapping):
            return NotImplemented
        return {**other, **self._target()}

    def __ior__(self, other: Any) -> InvocationEnviron:
        self.update(other)
        return self

    def __repr__(self) -> str:
        return f"InvocationEnviron({dict(self._target())!r})"

    def __getattr__(self, name: str) -> Any:
        # os._Environ's helpers (encodekey, ...) for code that reaches for them
        return getattr(self.base, name)


def install() -> None:
    """Make ``os.environ`` an :class:`InvocationEnviron` over the process environment
    (idempotent; nothing changes for code running outside an invocation)."""
    with _INSTALL_LOCK:
        if not isinstance(os.environ, InvocationEnviron):
            # a view, not a patch: the process environment keeps every value (ruff B003 warns
            # of clearing it, which this does not do)
            os.environ = InvocationEnviron(os.environ)  # type: ignore[assignment]  # noqa: B003


def run_in(env: Mapping[str, str], fn: Callable[..., R], *args: Any) -> R:
    """``fn(*args)`` as an invocation with ``env`` as its whole environment
    (:func:`s3ingest_fn.config.use_env`)."""
    with use_env(env):
        return fn(*args)


__all__ = ["InvocationEnviron", "install", "run_in"]
