"""``s3ingest onboard``: bring an existing bucket into the pipeline, one code path for AWS and the
local runtime.

:func:`onboard` does, for one landing bucket:

1. reads the bucket's notification and inventory configurations
   (``s3ingest_fn.services.bucket_setup.describe``) and, when EventBridge delivery is off, asks
   ``confirm`` and switches it on with ``bucket_setup.enable_event_bridge`` (a read-modify-write
   that keeps every queue, topic and function configuration other stacks own);
2. starts the stack's listing backfill state machine (input ``{"bucket", "run"}``) with a run id
   derived from the stack and the bucket (:func:`run_id`), so a re-run resumes from the run's
   checkpoints; the execution is named ``<run>-<attempt>`` (Step Functions refuses a name used in
   the last 90 days); an execution of the run still running is followed instead of started;
3. follows it, reporting ``progress("backfill", shards done, shards total, objects recorded)``
   from the run's checkpoints and the Plan state's output in the execution history;
4. runs a listing reconciliation of the bucket, which closes the window between the listing and
   the first live events (a key written while its shard was being listed);
5. returns what it did: objects, elapsed seconds, requests by kind and an estimated cost
   (:data:`PRICES`).

The clients and the reconciliation come from an :class:`OnboardTarget`: built over a deployed
stack (:func:`s3ingest.commands.context.connect`) or over a local runtime
(:meth:`s3ingest.local.stack.runtime.LocalRuntime.onboard`).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: Where the listing backfill's checkpoints live in the checkpoint bucket:
#: ``backfill-listing/<bucket>/<run>/<shard id>.json``.
CHECKPOINT_FOLDER = "backfill-listing"
#: The run's plan (its shards) beside the checkpoints.
PLAN_FILE = "plan.json"
#: Execution statuses that end the wait.
TERMINAL = ("SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED")

#: AWS list prices (USD) used for the estimate: region, when read (check the pages for
#: today's prices), where from.
PRICES_REGION = "us-east-1"
PRICES_AS_OF = "2026-12-01"
PRICES_SOURCES = (
    "https://aws.amazon.com/s3/pricing/",
    "https://aws.amazon.com/dynamodb/pricing/on-demand/",
    "https://aws.amazon.com/sqs/pricing/",
    "https://aws.amazon.com/step-functions/pricing/",
    "https://aws.amazon.com/lambda/pricing/",
)
#: USD per request of each priced kind (S3 Standard requests; DynamoDB on-demand, one request
#: unit per request: items under 1 KB, a Scan page of up to 1 MB costs more; SQS standard queue;
#: Step Functions standard workflow per state transition; Lambda per request, compute not
#: included).
PRICES: dict[str, float] = {
    "s3:list": 0.005 / 1000,
    "s3:put": 0.005 / 1000,
    "s3:get": 0.0004 / 1000,
    "dynamodb:write": 0.625 / 1_000_000,
    "dynamodb:read": 0.125 / 1_000_000,
    "sqs:request": 0.40 / 1_000_000,
    "states:transition": 0.025 / 1000,
    "lambda:invoke": 0.20 / 1_000_000,
}
_DYNAMO_WRITES = ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems")
_DYNAMO_READS = ("GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems")


def run_id(stack: str, bucket: str) -> str:
    """The listing backfill run of ``bucket`` for ``stack``: ``onboard-<16 hex digits>``, the
    same on every re-run (its checkpoints are what a re-run resumes from)."""
    digest = hashlib.sha256(f"{stack}\n{bucket}".encode()).hexdigest()[:16]
    return f"onboard-{digest}"


def price_class(kind: str) -> str | None:
    """The :data:`PRICES` entry of a request kind (``s3:ListObjectVersions``), or None when it is
    not priced here (control-plane calls, free requests)."""
    service, _, operation = kind.partition(":")
    if service == "s3":
        if operation.startswith("List"):
            return "s3:list"
        if operation in ("PutObject", "CopyObject", "DeleteObjects") or operation.startswith("Put"):
            return "s3:put"
        if operation in ("GetObject", "HeadObject") or operation.startswith("Get"):
            return "s3:get"
        return None
    if service == "dynamodb":
        if operation in _DYNAMO_WRITES:
            return "dynamodb:write"
        if operation in _DYNAMO_READS:
            return "dynamodb:read"
        return None
    if service == "sqs" and operation in (
        "SendMessage",
        "SendMessageBatch",
        "ReceiveMessage",
        "DeleteMessage",
        "DeleteMessageBatch",
        "ChangeMessageVisibility",
        "ChangeMessageVisibilityBatch",
    ):
        return "sqs:request"
    if kind == "states:transition":
        return kind
    if kind == "lambda:Invoke":
        return "lambda:invoke"
    return None


def estimate_cost(requests: Mapping[str, int]) -> dict[str, Any]:
    """``{"usd", "by_class", "region", "prices_as_of", "sources"}`` for request counts by kind
    (:func:`price_class`; unpriced kinds are left out)."""
    by_class: Counter[str] = Counter()
    for kind, n in requests.items():
        cls = price_class(kind)
        if cls is not None:
            by_class[cls] += n
    usd = {cls: round(n * PRICES[cls], 6) for cls, n in sorted(by_class.items())}
    return {
        "usd": round(sum(usd.values()), 6),
        "by_class": {cls: {"requests": by_class[cls], "usd": usd[cls]} for cls in usd},
        "region": PRICES_REGION,
        "prices_as_of": PRICES_AS_OF,
        "sources": list(PRICES_SOURCES),
    }


#: ``progress(phase, done, total, objects)``: phase ``backfill`` (shards) or ``reconcile``
#: (rows read; total None).
OnProgress = Callable[[str, int, int | None, int], None]


@dataclass
class OnboardTarget:
    """What :func:`onboard` acts on.

    Attributes
    ----------
    stack : str
        The stack's name (part of the run id).
    s3, sfn : boto3 clients
        S3 (the bucket's configuration, the checkpoints) and Step Functions.
    machine_arn : str
        The listing backfill state machine (output ``ListingBackfillStateMachineArn``).
    checkpoint_bucket : str
        Where the machine writes its checkpoints (output ``InventoryBucketName``).
    reconcile : callable
        ``reconcile(bucket, on_rows)`` runs a listing reconciliation of ``bucket`` and returns
        its report (``ReconcileReport.as_dict()``); ``on_rows(phase, n)``.
    after_enable : callable
        Called with the bucket after EventBridge delivery was switched on.
    after_execution : callable
        Called when the execution ended (the local runtime lets its functions finish).
    requests : callable, optional
        Requests made so far by kind (the local runtime counts them exactly); None on AWS, where
        they are derived from the backfill's and the reconciliation's figures.
    poll_seconds : float
    """

    stack: str
    s3: Any
    sfn: Any
    machine_arn: str
    checkpoint_bucket: str
    reconcile: Callable[[str, Callable[[str, int], None] | None], dict[str, Any]]
    after_enable: Callable[[str], None] = lambda bucket: None
    after_execution: Callable[[], None] = lambda: None
    requests: Callable[[], Counter[str]] | None = None
    poll_seconds: float = 5.0
    clock: Callable[[], float] = field(default=time.monotonic)


def event_bridge_on(configuration: Mapping[str, Any]) -> bool:
    """Whether a ``describe`` result's notification configuration has EventBridge on."""
    return "EventBridgeConfiguration" in (configuration.get("notification") or {})


def onboard(
    target: OnboardTarget,
    bucket: str,
    *,
    confirm: Callable[[str, dict[str, Any]], bool],
    on_progress: OnProgress | None = None,
    timeout_seconds: float = 24 * 3600.0,
    reconcile: bool = True,
) -> dict[str, Any]:
    """Onboard ``bucket`` (module docstring). Returns the report:

    ``reconcile=False`` skips step 4 (``{"skipped": true}``): for a bucket of tens of
    millions of objects the closing listing takes longer than the backfill
    (``docs/onboarding-model.md``), and the scheduled reconciliation covers the same window.

    ``{"bucket", "stack", "status", "event_bridge": {"before", "after", "switched_on"},
    "backfill": {"run", "execution", "attempt", "resumed", "status", "shards", "objects",
    "output"}, "effects_pending": {"count", "finish"}, "reconciliation": {...}, "objects",
    "elapsed_s", "requests", "requests_source", "cost", "configuration"}``;
    ``effects_pending`` counts the rows the backfill wrote while a processor failed after them
    (the ledger is complete; ``finish`` says how their effects are run, None when none);
    ``status`` is ``done``, ``declined`` (EventBridge delivery off
    and not confirmed, or off on another account's bucket, ``reason``: nothing changed) or the
    failed execution's status (re-run to resume).

    Raises
    ------
    botocore.exceptions.ClientError
        An AWS error (permissions, a missing bucket).
    TimeoutError
        The execution has not ended after ``timeout_seconds`` (it keeps running; a re-run
        follows it).
    """
    bucket_setup = _bucket_setup()
    started = target.clock()
    counted_before = target.requests() if target.requests else None
    before = bucket_setup.describe(target.s3, bucket)
    was_on = event_bridge_on(before)
    report: dict[str, Any] = {"bucket": bucket, "stack": target.stack}
    remote_role = (getattr(target.s3, "roles", None) or {}).get(bucket)
    if not was_on and remote_role is not None:
        # another account's bucket: only its source stack may switch delivery on (the read
        # role the pipeline reads it through writes nothing)
        return {
            **report,
            "status": "declined",
            "reason": "EventBridge delivery is off: the bucket's account switches it on by "
            f"deploying its source stack (S3IngestSource; read role {remote_role})",
            "event_bridge": {"before": False, "after": False, "switched_on": False},
            "configuration": before,
        }
    if not was_on:
        if not confirm(bucket, before):
            return {
                **report,
                "status": "declined",
                "event_bridge": {"before": False, "after": False, "switched_on": False},
                "configuration": before,
            }
        bucket_setup.enable_event_bridge(target.s3, bucket)
        target.after_enable(bucket)
    run = run_id(target.stack, bucket)
    arn, attempt, resumed = _start_or_follow(target, run, {"bucket": bucket, "run": run})
    described = _follow(target, bucket, run, arn, on_progress, timeout_seconds)
    target.after_execution()
    progress = checkpoint_progress(target.s3, target.checkpoint_bucket, bucket, run)
    output = json.loads(described["output"]) if described.get("output") else None
    backfill = {
        "run": run,
        "execution": arn,
        "attempt": attempt,
        "resumed": resumed,
        "status": described["status"],
        "shards": progress["shards"],
        "objects": progress["objects"],
        "output": output,
    }
    if described["status"] != "SUCCEEDED":
        backfill["error"] = described.get("error")
        backfill["cause"] = described.get("cause")
    from s3ingest_fn.services.backfill import EFFECTS_FINISH

    pending = int(((output or {}).get("counts") or {}).get("effects_pending", 0))
    report.update(
        event_bridge={"before": was_on, "after": True, "switched_on": not was_on},
        backfill=backfill,
        # rows written while a processor failed after them: the ledger is complete, their
        # effects wait (docs/existing-buckets.md)
        effects_pending={"count": pending, "finish": EFFECTS_FINISH if pending else None},
    )
    if described["status"] != "SUCCEEDED":
        return _finish(target, report, described["status"], started, counted_before, bucket)
    rows = 0

    def on_rows(phase: str, n: int) -> None:
        nonlocal rows
        rows += n
        if on_progress:
            on_progress(f"reconcile: {phase}", rows, None, progress["objects"])

    if not reconcile:
        report["reconciliation"] = {"skipped": True, "reason": "--no-reconcile"}
        return _finish(target, report, "done", started, counted_before, bucket)
    report["reconciliation"] = target.reconcile(bucket, on_rows)
    return _finish(target, report, "done", started, counted_before, bucket)


def _finish(
    target: OnboardTarget,
    report: dict[str, Any],
    status: str,
    started: float,
    counted_before: Counter[str] | None,
    bucket: str,
) -> dict[str, Any]:
    bucket_setup = _bucket_setup()
    if target.requests is not None and counted_before is not None:
        requests = target.requests()
        requests.subtract(counted_before)
        requests = +requests
        source = "counted"
    else:
        requests = derived_requests(report)
        source = "derived from the backfill's and the reconciliation's figures"
    transitions = _state_transitions(target.sfn, report["backfill"]["execution"])
    if transitions:
        requests["states:transition"] = transitions
    reconciliation = report.get("reconciliation") or {}
    report.update(
        status=status,
        objects=report["backfill"]["objects"],
        repairs_queued=reconciliation.get("repairs_queued", 0),
        elapsed_s=round(target.clock() - started, 3),
        requests=dict(sorted(requests.items())),
        requests_source=source,
        cost=estimate_cost(requests),
        configuration=bucket_setup.describe(target.s3, bucket),
    )
    return report


def _bucket_setup() -> Any:
    """The functions' bucket-setup service (``s3ingest_fn.services.bucket_setup``: describe,
    enable_event_bridge), the code the stack's custom resource runs."""
    from s3ingest_fn.services import bucket_setup

    return bucket_setup


#: The listing backfill's request kinds (its summary's ``requests``) as request kinds here.
BACKFILL_REQUESTS = {
    "list": "s3:ListObjectVersions",
    "write": "dynamodb:UpdateItem",
    "get": "dynamodb:GetItem",
    "head": "s3:HeadObject",
    "checkpoint": "s3:PutObject",
}


def backfill_summary(output: Any) -> dict[str, Any]:
    """The Summarize step's result in an execution's output (the output itself, or under
    ``summary``); empty when there is none."""
    if not isinstance(output, dict):
        return {}
    summary = output.get("summary")
    return summary if isinstance(summary, dict) else output


def derived_requests(report: Mapping[str, Any]) -> Counter[str]:
    """Requests by kind from the backfill's summary (its ``requests``: list, write, get, head,
    checkpoint) and the reconciliation's figures (AWS, where they are not counted): listing
    pages of 1,000 keys, the ledger's Scan pages, HEADs, and repairs sent 10 per batch."""
    out: Counter[str] = Counter()
    summary = backfill_summary((report.get("backfill") or {}).get("output"))
    for name, n in (summary.get("requests") or {}).items():
        out[BACKFILL_REQUESTS.get(name, f"backfill:{name}")] += int(n)
    rec = report.get("reconciliation") or {}
    out["s3:ListObjectVersions"] += -(-int(rec.get("bucket_rows") or 0) // 1000)
    out["dynamodb:Scan"] += int(rec.get("ledger_requests") or 0)
    out["s3:HeadObject"] += int(rec.get("resolved_on_head") or 0)
    out["sqs:SendMessageBatch"] += -(-int(rec.get("repairs_queued") or 0) // 10)
    return +out


def _start_or_follow(
    target: OnboardTarget, run: str, execution_input: Mapping[str, Any]
) -> tuple[str, int, bool]:
    """``(execution arn, attempt, resumed)``: a running execution of ``run`` is followed; else
    attempt ``n + 1`` starts, ``n`` the run's earlier executions (``resumed`` when n > 0)."""
    earlier: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"stateMachineArn": target.machine_arn, "maxResults": 1000}
    while True:
        page = target.sfn.list_executions(**kwargs)
        earlier.extend(e for e in page["executions"] if e["name"].startswith(f"{run}-"))
        if not page.get("nextToken"):
            break
        kwargs["nextToken"] = page["nextToken"]
    running = [e for e in earlier if e["status"] == "RUNNING"]
    if running:
        return str(running[0]["executionArn"]), len(earlier), True
    attempt = len(earlier) + 1
    arn = target.sfn.start_execution(
        stateMachineArn=target.machine_arn,
        name=f"{run}-{attempt}",
        input=json.dumps(execution_input),
    )["executionArn"]
    return str(arn), attempt, attempt > 1


def _follow(
    target: OnboardTarget,
    bucket: str,
    run: str,
    arn: str,
    on_progress: OnProgress | None,
    timeout_seconds: float,
) -> dict[str, Any]:
    deadline = target.clock() + timeout_seconds
    total: int | None = None
    seen: dict[str, tuple[str, Any]] = {}
    while True:
        described: dict[str, Any] = target.sfn.describe_execution(executionArn=arn)
        if on_progress:
            progress = checkpoint_progress(target.s3, target.checkpoint_bucket, bucket, run, seen)
            if total is None:
                total = progress["shards"]["planned"] or planned_shards(target.sfn, arn)
            on_progress("backfill", progress["shards"]["done"], total, progress["objects"])
        if described["status"] in TERMINAL:
            return described
        if target.clock() > deadline:
            raise TimeoutError(
                f"{arn} still running after {timeout_seconds} s; re-run to follow it"
            )
        time.sleep(target.poll_seconds)


def planned_shards(sfn: Any, arn: str) -> int | None:
    """Shards of the run (those to list plus those done before), from the Plan state's output
    in the execution's history; None before Plan ended."""
    kwargs: dict[str, Any] = {"executionArn": arn, "maxResults": 1000}
    while True:
        page = sfn.get_execution_history(**kwargs)
        for event in page["events"]:
            details = event.get("stateExitedEventDetails") or {}
            if details.get("name") == "Plan" and details.get("output"):
                doc = json.loads(details["output"])
                plan = doc.get("plan", doc) if isinstance(doc, dict) else {}
                shards = plan.get("shards") or []
                return len(shards) + int(plan.get("done") or 0)
        if not page.get("nextToken"):
            return None
        kwargs["nextToken"] = page["nextToken"]


def _state_transitions(sfn: Any, arn: str) -> int:
    """States entered by the execution (Step Functions bills standard workflows per state
    transition; a Distributed Map's child executions are counted apart and left out here)."""
    entered = 0
    kwargs: dict[str, Any] = {"executionArn": arn, "maxResults": 1000}
    while True:
        page = sfn.get_execution_history(**kwargs)
        entered += sum(1 for e in page["events"] if e["type"].endswith("StateEntered"))
        if not page.get("nextToken"):
            return entered
        kwargs["nextToken"] = page["nextToken"]


def checkpoint_progress(
    s3: Any,
    checkpoint_bucket: str,
    bucket: str,
    run: str,
    seen: dict[str, tuple[str, Any]] | None = None,
) -> dict[str, Any]:
    """``{"shards": {"done", "started", "planned"}, "objects"}`` from the run's files in the
    checkpoint bucket (``backfill-listing/<bucket>/<run>/``: ``plan.json`` with the run's
    ``shards``, and one ``<shard id>.json`` per shard started, with ``done`` and ``counts``);
    ``planned`` is None before the plan is written.

    ``seen`` (key -> (ETag, document), filled here) spares a poll the GetObject of a file whose
    ETag the listing shows unchanged: a follow reads each checkpoint once per write, not once
    per poll (a done shard's file never changes)."""
    prefix = f"{CHECKPOINT_FOLDER}/{bucket}/{run}/"
    started = done = objects = 0
    planned: int | None = None
    for page in s3.get_paginator("list_objects_v2").paginate(
        Bucket=checkpoint_bucket, Prefix=prefix
    ):
        for item in page.get("Contents", []):
            known = (seen or {}).get(item["Key"])
            if known is not None and known[0] == item["ETag"]:
                doc = known[1]
            else:
                got = s3.get_object(Bucket=checkpoint_bucket, Key=item["Key"])
                doc = json.loads(got["Body"].read())
                if seen is not None:
                    seen[item["Key"]] = (got["ETag"], doc)
            if item["Key"] == f"{prefix}{PLAN_FILE}":
                shards = doc.get("shards") if isinstance(doc, dict) else None
                planned = len(shards) if isinstance(shards, list) else None
                continue
            started += 1
            done += bool(doc.get("done"))
            objects += checkpoint_objects(doc)
    return {"shards": {"done": done, "started": started, "planned": planned}, "objects": objects}


def checkpoint_objects(doc: Mapping[str, Any]) -> int:
    """Objects a shard's checkpoint says it has listed (its ``counts``' ``listed``, else the
    sum of its counts)."""
    counts = doc.get("counts") or {}
    if "listed" in counts:
        return int(counts["listed"])
    return sum(int(v) for v in counts.values() if isinstance(v, int))
