"""Live traffic while a state machine's execution runs: the ``"during": [LINE, ...]`` field of
the ``backfill``, ``onboard`` and ``reprocess`` steps.

Each ``LINE`` is a step line of an S3 operation (:data:`OPS`). They run once, at the first
moment the runtime hands control back while the step's execution runs (the runtime's
``between`` hook: :meth:`~s3ingest.local.stack.runtime.LocalRuntime.onboard` at each progress poll,
:meth:`~s3ingest.local.stack.runtime.LocalRuntime.reprocess` and :func:`run_execution` at each check
of the execution), then their events are delivered and drained, as live traffic is; the
entry's ``during`` says whether an execution of the machine was still running then. Their
events' ``step`` is the line of the step they ran during.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from s3ingest.local.rehearsal.steps.base import Run, ScenarioError, Step

#: The ops a ``during`` line may be: S3 operations only.
OPS = ("put", "copy", "delete", "multipart", "expire")
#: Seconds between two checks of the execution once the traffic ran.
POLL_SECONDS = 0.05


def parse_during(lineno: int, op: str, lines: Any) -> list[Step]:
    """The steps of a ``during`` list, each checked as its own line would be.

    Raises
    ------
    ScenarioError
        Naming the line and the entry.
    """
    from s3ingest.local.rehearsal.steps import step_class

    if not isinstance(lines, list) or not all(isinstance(x, dict) for x in lines):
        raise ScenarioError(f"line {lineno}: {op} during must be a list of step lines")
    steps = []
    for index, doc in enumerate(lines):
        if doc.get("op") not in OPS:
            raise ScenarioError(
                f"line {lineno}: {op} during[{index}] must be one of {', '.join(OPS)}, "
                f"not {doc.get('op')!r}"
            )
        if "expect_failure" in doc:
            raise ScenarioError(f"line {lineno}: {op} during[{index}] takes no expect_failure")
        try:
            steps.append(step_class(lineno, doc["op"]).parse(lineno, doc))
        except ScenarioError as exc:
            raise ScenarioError(f"{exc} (in during[{index}])") from exc
    return steps


def check_during_in_order(
    lineno: int, lines: Sequence[Mapping[str, Any]], versioning: str | None, puts: dict[int, str]
) -> None:
    """Refuse a ``during`` line given the lines before the step (``"@N"`` of a delete);
    their puts cannot be named by a later ``"@N"`` (they have no line of their own)."""
    for step in parse_during(lineno, "during", list(lines)):
        step.check_in_order(lineno, versioning, dict(puts))


class During:
    """The ``between`` callback of one step: runs its lines once, then waits a little."""

    def __init__(self, run: Run, lineno: int, lines: Sequence[Mapping[str, Any]], machine: str):
        self.run = run
        self.lineno = lineno
        self.steps = parse_during(lineno, "during", list(lines))
        self.machine = machine
        self.ran = False
        self.while_running: bool | None = None

    def __call__(self, *_: Any) -> None:
        if self.ran:
            time.sleep(POLL_SECONDS)
            return
        self.ran = True
        self.while_running = self._running()
        self._traffic()

    def finish(self) -> dict[str, Any]:
        """Run the lines now if the execution ended before any hook (``while_running``
        false); the entry's ``during``: ``{"ops", "while_running"}``."""
        if not self.ran:
            self.ran, self.while_running = True, False
            self._traffic()
        return {"ops": len(self.steps), "while_running": self.while_running}

    def _running(self) -> bool:
        machines = self.run.rt.machines
        found = machines.sfn.list_executions(
            stateMachineArn=machines.machine(self.machine), statusFilter="RUNNING"
        )
        return bool(found["executions"])

    def _traffic(self) -> None:
        for step in self.steps:
            step.run(self.run, self.lineno)
        self.run.rt.flush()
        self.run.rt.drain()


def run_execution(run: Run, machine: str, request: dict[str, Any], during: During) -> Any:
    """An execution of ``machine`` with ``request``, followed to its end with ``during`` run
    while it runs (what :meth:`~s3ingest.local.stack.runtime.LocalRuntime.backfill` and
    :meth:`~s3ingest.local.stack.runtime.LocalRuntime.backfill_listing` do, with the hook)."""
    rt = run.rt
    arn = rt.machines.start(machine, request)
    while rt.machines.running(arn):
        during()
    execution = rt.machines.wait(arn, 600.0)
    rt.pump_changes()  # the functions wrote to the ledger outside drain()
    return execution
