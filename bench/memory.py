"""A bench's peak memory, its own: measured in a spawned child by the kernel's ``VmHWM``.

On Linux a process's ``ru_maxrss`` starts at its parent's peak (``fork`` copies the high-water
mark and ``exec`` keeps it), so a bench that reads it in the process that ran ``make bench`` (or
in a child of one that built a large fixture) prints the larger of the two. ``VmHWM`` in
``/proc/self/status`` is the high-water mark since the process's own ``exec``
(https://man7.org/linux/man-pages/man5/proc_pid_status.5.html): :func:`peak_mib` reads it,
and :func:`in_child` runs a bench's measured part in a fresh spawned interpreter, so the figure
is that part's alone (its interpreter and imports included).
"""

from __future__ import annotations

import multiprocessing
import resource
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

_T = TypeVar("_T")


def peak_mib() -> float:
    """This process's own peak RSS, MiB: ``VmHWM`` (Linux), else ``ru_maxrss`` (KiB on Linux,
    bytes on macOS: read as KiB)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _call(conn: Any, target: Callable[..., Any], args: tuple[Any, ...]) -> None:
    try:
        conn.send(("ok", target(*args)))
    except BaseException as exc:  # reported by the parent, which would wait forever otherwise
        conn.send(("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))


def in_child(target: Callable[..., _T], *args: Any) -> _T:
    """``target(*args)`` run in a spawned child process (a fresh interpreter: its
    :func:`peak_mib` is its own), its return value sent back (it must pickle; ``target`` must
    be importable by name). The child's output goes to this process's.

    Raises
    ------
    RuntimeError
        When ``target`` raised in the child (its traceback in the message), or the child died
        without an answer.
    """
    ctx = multiprocessing.get_context("spawn")
    mine, theirs = ctx.Pipe(duplex=False)  # a pipe, not a socket pair
    child = ctx.Process(target=_call, args=(theirs, target, args))
    child.start()
    theirs.close()
    try:
        status, value = mine.recv()
    except EOFError as exc:
        child.join()
        raise RuntimeError(f"the bench's child exited {child.exitcode} with no answer") from exc
    child.join()
    if status != "ok":
        raise RuntimeError(f"the bench's child failed: {value}")
    result: _T = value
    return result
