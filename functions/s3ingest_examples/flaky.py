"""Example processor function that fails, to watch a failure and its recovery: the first
attempt at each change fails (a function error), every later attempt succeeds.

Processor entry: ``{"name": "flaky", "handler": "s3ingest_examples.flaky:handler"}``. A
failure releases this processor's claim and the message is retried (``docs/effects.md``); the
other processors of the same change are not held back. It remembers, in the process, the
(processor name, change id) pairs it has failed once, so the local runtime (one process)
shows exactly one failure per change; deployed, each new execution environment fails once
more per change.
"""

from __future__ import annotations

import threading
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from s3ingest_processor import Change, Content  # pragma: no cover

_failed: set[tuple[str, str]] = set()
_lock = threading.Lock()


class FirstAttemptFailed(RuntimeError):
    """The deliberate failure of a change's first attempt."""


def flaky(change: Change, content: Content | None) -> None:
    """Fail the first attempt at ``change``; succeed (doing nothing) after.

    Raises
    ------
    FirstAttemptFailed
        On the first attempt of each processor at each change id in this process.
    """
    with _lock:
        first = (change.processor, change.change_id) not in _failed
        _failed.add((change.processor, change.change_id))
    if first:
        raise FirstAttemptFailed(f"first attempt at change {change.change_id} fails on purpose")


def handler(event: Any, context: Any) -> dict[str, Any]:
    """The Lambda handler (``s3ingest_examples.flaky:handler``)."""
    return _handler()(event, context)


@cache
def _handler() -> Any:
    from s3ingest_processor import processor

    return processor(flaky)
