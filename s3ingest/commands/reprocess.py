"""``s3ingest reprocess``: run a processor over every visible key of the ledger it is behind on
(issue 27), and follow the run."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from s3ingest import reprocess_ops

#: Seconds between two reads of a followed run.
POLL_SECONDS = 10.0
#: What the final report lists, in order: the summary's ``counts``
#: (:data:`s3ingest_fn.services.reprocess.COUNTS`, pages apart).
REPORT_COUNTS = (
    "scanned",
    "behind",
    "run",
    "superseded",
    "held",
    "skipped",
    "busy",
    "failed",
    "removed",
)


class RunRunning(ValueError):
    """Raised when an execution of the run asked for is still running."""


def start_reprocess(sfn: Any, state_machine_arn: str, request: dict[str, Any]) -> str:
    """Start one execution of the reprocess machine (:func:`s3ingest.reprocess_ops.request_of`
    builds ``request``); return its ARN.

    Raises
    ------
    RunRunning
        When an execution of the same run is still running.
    """
    running = reprocess_ops.running_execution(sfn, state_machine_arn, request["run"])
    if running is not None:
        raise RunRunning(f"run {request['run']!r} is running now ({running}): wait for it to end")
    return reprocess_ops.start_reprocess(sfn, state_machine_arn, request)


def follow_reprocess(
    sfn: Any,
    execution: str,
    *,
    watch: bool,
    on_status: Callable[[dict[str, Any]], None] | None = None,
    poll_seconds: float = POLL_SECONDS,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """The execution's status and segments done (:func:`s3ingest.reprocess_ops.reprocess_status`);
    with ``watch``, read again every ``poll_seconds`` until it ends. ``on_status`` gets every
    reading."""
    while True:
        status = reprocess_ops.reprocess_status(sfn, execution)
        if on_status:
            on_status(status)
        if not watch or status["status"] in reprocess_ops.TERMINAL_EXECUTION:
            return status
        sleep(poll_seconds)


def healthy(status: dict[str, Any]) -> bool:
    """Whether a followed run ended well: the execution succeeded (or still runs), every
    segment is done and no processor call failed (a failed key stays behind)."""
    if status["status"] not in ("SUCCEEDED", "RUNNING"):
        return False
    output = status.get("output") or {}
    if output and int(output.get("done", 0)) < int(output.get("segments", 0)):
        return False
    return int((output.get("counts") or {}).get("failed", 0)) == 0


def with_target(summary: dict[str, Any] | None, target: str) -> dict[str, Any] | None:
    """``summary`` with ``target`` (``--local``, ``--stack NAME``; empty: none) added to its
    ``left_behind.command``, so the command it names runs against the same stack."""
    behind = (summary or {}).get("left_behind")
    if summary is None or not target or not isinstance(behind, dict) or not behind.get("command"):
        return summary
    return {**summary, "left_behind": {**behind, "command": f"{behind['command']} {target}"}}
