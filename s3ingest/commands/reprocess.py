"""``s3ingest reprocess``: run a processor over every visible key of the ledger it is behind on
(issue 27), and follow the run: start the reprocess state machine and follow its Distributed
Map over the ledger's Scan segments. Plain functions over an injected Step Functions client
(the CLI only parses and renders).

Progress comes from the execution's history (the ``Plan`` step's output: the run's segments,
those already done by an earlier execution of the run left out) and its Map Run's item counts
(``DescribeMapRun`` ``itemCounts``:
https://docs.aws.amazon.com/step-functions/latest/apireference/API_DescribeMapRun.html).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

TERMINAL_EXECUTION = ("SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED")
#: What a run name may hold (:func:`s3ingest_fn.services.reprocess.ReprocessRequest.of`).
RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}$")


def default_run(processor: str, now: float | None = None) -> str:
    """A new run's name: ``<processor>-<UTC timestamp>`` (``default-20260102T030405Z``), the
    processor's name cut to what a run name allows."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    head = re.sub(r"[^A-Za-z0-9_.-]", "-", processor).lstrip("-_.")[:60] or "reprocess"
    return f"{head}-{stamp}"


def request_of(
    processor: str,
    *,
    run: str,
    bucket: str | None = None,
    prefix: str = "",
    rate: float | None = None,
    dry_run: bool = False,
    remove: bool = False,
    segments: int | None = None,
    concurrency: int | None = None,
) -> dict[str, Any]:
    """The execution's input (:class:`s3ingest_fn.services.reprocess.ReprocessRequest`):
    only the fields given, so the service's defaults apply to the others.

    Raises
    ------
    ValueError
        A run name that is not letters, digits, ``.``, ``_``, ``-`` (80 at most).
    """
    if not RUN_NAME.match(run):
        raise ValueError(f"run {run!r} is not a name of letters, digits, '.', '_', '-' (<= 80)")
    request: dict[str, Any] = {"run": run, "processor": processor, "prefix": prefix}
    if bucket:
        request["bucket"] = bucket
    if rate is not None:
        request["rate"] = rate
    if dry_run:
        request["dry_run"] = True
    if remove:
        request["remove"] = True
    if segments is not None:
        request["segments"] = segments
    if concurrency is not None:
        request["concurrency"] = concurrency
    return request


def start_execution(sfn: Any, state_machine_arn: str, request: dict[str, Any]) -> str:
    """Start one execution of the reprocess machine with ``request`` (:func:`request_of`);
    return its ARN. The execution is named as the run; a later execution of the run (resuming
    it) as the run plus the time, since execution names are unique per machine for 90 days
    (`StartExecution <https://docs.aws.amazon.com/step-functions/latest/apireference/API_StartExecution.html>`_).

    Raises
    ------
    botocore.exceptions.ClientError
        Any refusal but a name already taken.
    """
    body = json.dumps(request)
    try:
        resp = sfn.start_execution(
            stateMachineArn=state_machine_arn, name=request["run"], input=body
        )
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ExecutionAlreadyExists":
            raise
        now = time.time()
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now)) + f"{int(now * 1000) % 1000:03d}Z"
        resp = sfn.start_execution(
            stateMachineArn=state_machine_arn, name=f"{request['run'][:60]}-{stamp}", input=body
        )
    return str(resp["executionArn"])


def running_execution(sfn: Any, state_machine_arn: str, run: str) -> str | None:
    """The ARN of an execution of ``run`` still running, if there is one."""
    pages = sfn.get_paginator("list_executions").paginate(
        stateMachineArn=state_machine_arn, statusFilter="RUNNING"
    )
    for page in pages:
        for listed in page.get("executions", []):
            name = str(listed.get("name", ""))
            if name != run and not name.startswith(f"{run[:63]}-"):
                continue
            desc = sfn.describe_execution(executionArn=listed["executionArn"])
            if json.loads(desc.get("input") or "{}").get("run") == run:
                return str(listed["executionArn"])
    return None


def cause_text(cause: str | None) -> str:
    """A failed execution's ``cause`` in one line: a Lambda error's type and message (its
    stack trace left out), else the cause cut to 500 characters."""
    if not cause:
        return ""
    try:
        parsed = json.loads(cause)
    except ValueError:
        return cause[:500]
    if isinstance(parsed, dict) and "errorMessage" in parsed:
        kind = parsed.get("errorType")
        return f"{kind}: {parsed['errorMessage']}" if kind else str(parsed["errorMessage"])
    return cause[:500]


def plan_of(sfn: Any, execution_arn: str) -> dict[str, Any] | None:
    """The ``Plan`` step's output (``{...request, "segments", "total", "done"}``), or None
    before it ran."""
    pages = sfn.get_paginator("get_execution_history").paginate(executionArn=execution_arn)
    for page in pages:
        for event in page.get("events", []):
            details = event.get("taskSucceededEventDetails") or {}
            if details.get("resourceType") == "lambda" and details.get("output"):
                payload = json.loads(details["output"]).get("Payload")
                if isinstance(payload, dict) and "segments" in payload and "total" in payload:
                    return payload
    return None


def reprocess_status(sfn: Any, execution_arn: str) -> dict[str, Any]:
    """The execution's status and its segments' progress.

    Returns
    -------
    dict
        ``{"execution", "status", "run", "total", "done", "output", "error", "cause"}``:
        ``total`` the run's segments and ``done`` those finished (by this execution's Map Run,
        or an earlier one of the run), None before the plan ran; ``output`` the summary once
        it succeeded.
    """
    desc = sfn.describe_execution(executionArn=execution_arn)
    request = json.loads(desc.get("input") or "{}")
    out: dict[str, Any] = {
        "execution": execution_arn,
        "status": desc["status"],
        "run": request.get("run"),
        "total": None,
        "done": None,
        "output": json.loads(desc["output"]) if desc.get("output") else None,
        "error": desc.get("error"),
        "cause": desc.get("cause"),
    }
    if isinstance(out["output"], dict) and "segments" in out["output"]:
        out.update(total=out["output"]["segments"], done=out["output"]["done"])
        return out
    plan = plan_of(sfn, execution_arn)
    if plan is None:
        return out
    succeeded = 0
    for listed in sfn.list_map_runs(executionArn=execution_arn).get("mapRuns", []):
        run = sfn.describe_map_run(mapRunArn=listed["mapRunArn"])
        succeeded += int(run.get("itemCounts", {}).get("succeeded", 0))
    out.update(total=int(plan["total"]), done=int(plan["done"]) + succeeded)
    return out


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
    """Start one execution of the reprocess machine (:func:`request_of`
    builds ``request``); return its ARN.

    Raises
    ------
    RunRunning
        When an execution of the same run is still running.
    """
    running = running_execution(sfn, state_machine_arn, request["run"])
    if running is not None:
        raise RunRunning(f"run {request['run']!r} is running now ({running}): wait for it to end")
    return start_execution(sfn, state_machine_arn, request)


def follow_reprocess(
    sfn: Any,
    execution: str,
    *,
    watch: bool,
    on_status: Callable[[dict[str, Any]], None] | None = None,
    poll_seconds: float = POLL_SECONDS,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """The execution's status and segments done (:func:`reprocess_status`);
    with ``watch``, read again every ``poll_seconds`` until it ends. ``on_status`` gets every
    reading."""
    while True:
        status = reprocess_status(sfn, execution)
        if on_status:
            on_status(status)
        if not watch or status["status"] in TERMINAL_EXECUTION:
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
