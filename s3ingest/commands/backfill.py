"""``s3ingest backfill``: start a backfill of pre-existing objects and follow it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from s3ingest import backfill_ops

#: ``--engine`` values of ``backfill start --local`` (the first is the default).
LOCAL_ENGINES = ("batch-operations", "distributed-map")
#: Seconds between two reads of a followed backfill.
POLL_SECONDS = 10.0
#: Execution states a backfill command exits 0 with (an ABORTED one was stopped on purpose, but
#: did not bring every object in).
OK_STATES = ("SUCCEEDED", "RUNNING")


def start_backfill(
    sfn: Any, state_machine_arn: str, *, manifest: str | None, max_failures: int
) -> str:
    """Start one execution of the backfill state machine over ``manifest`` (an inventory
    ``manifest.json`` key; the newest report when None); return the execution's ARN."""
    return backfill_ops.start_backfill(
        sfn, state_machine_arn, manifest=manifest, max_failures=max_failures
    )


def latest_backfill(sfn: Any, state_machine_arn: str) -> str | None:
    """The ARN of the most recent backfill execution, or None when none has run."""
    return backfill_ops.latest_execution(sfn, state_machine_arn)


def follow_backfill(
    sfn: Any,
    s3control: Any,
    execution: str,
    *,
    watch: bool,
    on_status: Callable[[dict[str, Any]], None] | None = None,
    poll_seconds: float = POLL_SECONDS,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """The execution's status and its Batch Operations job's progress
    (:func:`s3ingest.backfill_ops.backfill_status`); with ``watch``, read again every
    ``poll_seconds`` until the execution ends. ``on_status`` gets every reading."""
    while True:
        status = backfill_ops.backfill_status(sfn, s3control, execution)
        if on_status:
            on_status(status)
        if not watch or status["status"] in backfill_ops.TERMINAL_EXECUTION:
            return status
        sleep(poll_seconds)
