"""Where the local functions' and processors' output goes: their CloudWatch logs, locally.

What an invocation's code prints (``print``, Powertools' logs and metrics, tracebacks on
standard error) goes to its function's log, not to the caller's standard output, as Lambda sends
a function's output to CloudWatch Logs. :func:`routed` makes ``sys.stdout`` and ``sys.stderr``
routers while invocations run: a write goes to the sink of the current context (a
:class:`~contextvars.ContextVar`, so the worker threads an invocation starts with its context,
``s3ingest_fn.core.context.in_caller_context``, write to its log too); other writes go through.

:class:`FunctionLogs` gives each function (and each processor, ``processor-<name>``) its sink:
with a folder (``local up``: ``.s3ingest/logs/`` of the run directory), one file per name,
``<name>.log``, each line stamped with its UTC time (``2026-12-07T12:00:00.123Z text``); without
one (a test's, a demo's or a scenario's runtime), the functions' in a buffer in memory shared by
all, and the processors' on the caller's own standard output, where a team running a scenario
sees what its processor printed (``local scenario --json`` sends it to standard error).
:func:`read` and :func:`follow` read the files back (``s3ingest local logs``).
"""

from __future__ import annotations

import contextvars
import io
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

#: A log file's suffix in the logs folder.
SUFFIX = ".log"
#: A processor's log name: ``processor-<name>``.
PROCESSOR_PREFIX = "processor-"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
R = TypeVar("R")


class Sink(Protocol):
    """Where a function's output goes (a text stream's ``write`` and ``flush``)."""

    def write(self, text: str, /) -> int: ...

    def flush(self) -> None: ...


def stamp(when: float | None = None) -> str:
    """UTC time ``when`` (epoch seconds; default now) as ``2026-12-07T12:00:00.123Z``."""
    moment = datetime.fromtimestamp(time.time() if when is None else when, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


class LogFile:
    """One function's log file: complete lines appended, each stamped (:func:`stamp`); a line
    written in pieces (``print`` writes the text, then the newline) is kept per thread until its
    newline, so two threads' lines never mix."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._partial: dict[int, str] = {}
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("a", encoding="utf-8", errors="replace")

    def write(self, text: str, /) -> int:
        me = threading.get_ident()
        with self._lock:
            if self._file.closed:  # a timed-out invocation printing after the stack's end
                return len(text)
            pending = self._partial.pop(me, "") + text
            *lines, rest = pending.split("\n")
            if rest:
                self._partial[me] = rest
            if lines:
                now = stamp()
                self._file.write("".join(f"{now} {line}\n" for line in lines))
                self._file.flush()
        return len(text)

    def flush(self) -> None:
        """Write this thread's unfinished line (an invocation ended without its newline)."""
        with self._lock:
            rest = self._partial.pop(threading.get_ident(), "")
        if rest:
            self.write(rest + "\n")

    def close(self) -> None:
        with self._lock:
            self._file.close()


class FunctionLogs:
    """The sinks of one deployment's functions: files under ``directory`` when given, else
    one in-memory buffer (:attr:`memory`) for all."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory
        #: Everything written, without a folder.
        self.memory = io.StringIO()
        self._files: dict[str, LogFile] = {}
        self._lock = threading.Lock()

    def sink(self, name: str) -> Sink:
        """The sink of function ``name`` (its file ``<name>.log``, made safe for a file name)."""
        if self.directory is None:
            return self.memory
        with self._lock:
            found = self._files.get(name)
            if found is None:
                path = self.directory / f"{_UNSAFE.sub('_', name)}{SUFFIX}"
                found = self._files[name] = LogFile(path)
            return found

    def processor(self, name: str, call: Callable[..., R]) -> Callable[..., R]:
        """``call`` (processor ``name``) with what it prints in ``processor-<name>``'s log (without
        a folder, on the caller's standard output)."""
        sink = CALLER if self.directory is None else self.sink(PROCESSOR_PREFIX + name)

        def run(*args: Any) -> R:
            with routed(sink):
                return call(*args)

        return run

    def close(self) -> None:
        with self._lock:
            for file in self._files.values():
                file.close()
            self._files.clear()


# -- routing -----------------------------------------------------------------------------------

_SINK: contextvars.ContextVar[Sink | None] = contextvars.ContextVar(
    "s3ingest_function_log", default=None
)


class _Router(io.TextIOBase):
    """``sys.stdout`` (or ``sys.stderr``) while invocations run: a write goes to the current
    context's sink, else to :attr:`fallback` (the stream it replaced). One per process, so a
    logger that bound its stream during an invocation stays routed."""

    def __init__(self, fallback: Any) -> None:
        self.fallback = fallback

    def write(self, text: str) -> int:
        target = _SINK.get()
        if target is not None:
            return target.write(text)
        return int(self.fallback.write(text))

    def flush(self) -> None:
        if _SINK.get() is None:
            self.fallback.flush()


_OUT = _Router(sys.stdout)
_ERR = _Router(sys.stderr)


class _Caller:
    """The caller's standard output: the stream routing stands in for."""

    def write(self, text: str, /) -> int:
        return int(_OUT.fallback.write(text))

    def flush(self) -> None:
        _OUT.fallback.flush()


#: A sink that writes to the caller's standard output while invocations are routed.
CALLER: Sink = _Caller()
#: Guards :data:`_active` and the swap of ``sys.stdout`` / ``sys.stderr``.
_LOCK = threading.Lock()
_active = 0


@contextmanager
def routed(sink: Sink) -> Iterator[None]:
    """What this context prints (and the threads it starts with its context) goes to ``sink``
    while the block runs."""
    global _active
    with _LOCK:
        if sys.stdout is not _OUT:
            _OUT.fallback = sys.stdout
        if sys.stderr is not _ERR:
            _ERR.fallback = sys.stderr
        _active += 1
        sys.stdout, sys.stderr = _OUT, _ERR
    token = _SINK.set(sink)
    try:
        yield
    finally:
        sink.flush()
        _SINK.reset(token)
        with _LOCK:
            _active -= 1
            if not _active:  # the last one out gives the caller its streams back
                if sys.stdout is _OUT:
                    sys.stdout = _OUT.fallback
                if sys.stderr is _ERR:
                    sys.stderr = _ERR.fallback


# -- reading -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Line:
    """One logged line: ``function`` (its log's name), ``time`` (its stamp) and ``text``."""

    function: str
    time: str
    text: str


def names(directory: Path) -> list[str]:
    """The logs in ``directory``, by name (sorted); none when it does not exist."""
    if not directory.is_dir():
        return []
    return sorted(p.name.removesuffix(SUFFIX) for p in directory.glob(f"*{SUFFIX}"))


def _parse(function: str, raw: str) -> Line:
    when, _, text = raw.rstrip("\n").partition(" ")
    return Line(function, when, text)


def read(directory: Path, functions: list[str]) -> list[Line]:
    """Every line of ``functions``' logs in ``directory``, in time order (one function's lines
    in their order)."""
    lines: list[Line] = []
    for name in functions:
        path = directory / f"{name}{SUFFIX}"
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            lines.extend(_parse(name, raw) for raw in text.splitlines())
    return sorted(lines, key=lambda line: line.time)


def follow(
    directory: Path,
    function: str | None,
    stop: Callable[[], bool] = lambda: False,
    poll_seconds: float = 0.5,
) -> Iterator[Line]:
    """The lines of ``function``'s log (of every log, logs created later included, when None)
    as :func:`read` gives them, then each line appended, until ``stop()``: ``tail -f``."""
    offsets: dict[str, int] = {}

    def watched() -> list[str]:
        return [function] if function is not None else names(directory)

    while not stop():
        fresh: list[Line] = []
        for name in watched():
            path = directory / f"{name}{SUFFIX}"
            try:
                with path.open("rb") as file:
                    file.seek(offsets.get(name, 0))
                    data = file.read()
            except OSError:
                continue
            complete = data[: data.rfind(b"\n") + 1]  # a line still being written waits
            offsets[name] = offsets.get(name, 0) + len(complete)
            text = complete.decode("utf-8", errors="replace")
            fresh.extend(_parse(name, raw) for raw in text.splitlines())
        yield from sorted(fresh, key=lambda line: line.time)
        if not fresh:
            time.sleep(poll_seconds)


__all__ = [
    "PROCESSOR_PREFIX",
    "FunctionLogs",
    "Line",
    "LogFile",
    "Sink",
    "follow",
    "names",
    "read",
    "routed",
    "stamp",
]
