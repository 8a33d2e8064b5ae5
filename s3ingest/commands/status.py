"""``s3ingest status``: one screen of a stack's health.

:func:`status` reads it with the clients it is given (a deployed stack's or the local
runtime's); :func:`stack_status` passes it a :class:`~s3ingest.commands.context.Deployed`'s.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from s3ingest.outputs import (
    ARCHIVE_ARN,
    BACKFILL_STATE_MACHINE_ARN,
    BUCKET_NAME,
    BUCKET_NAMES,
    CHANGE_DEAD_LETTER_QUEUE_URL,
    DEAD_LETTER_QUEUE_URL,
    EVENT_TARGET_DEAD_LETTER_QUEUE_URL,
    PROCESSOR_NAMES,
    QUEUE_URL,
    attestation_store,
)
from s3ingest_fn.adapters.s3_objects import eventbridge_delivery_enabled
from s3ingest_fn.contract import METRICS_NAMESPACE, metric_dimensions
from s3ingest_fn.core.model import TransientError

if TYPE_CHECKING:
    from s3ingest.commands.context import Deployed


def stack_status(stack: Deployed, *, max_age_seconds: int) -> dict[str, Any]:
    """The stack's health, as :func:`status` returns it (``healthy``,
    ``problems``, queue and dead-letter depths, delivery, drift, backfills, replays).

    Reads the outputs ``QueueUrl`` and ``DeadLetterQueueUrl`` (and the optional ones status
    knows); calls SQS, CloudWatch, Step Functions, EventBridge and S3 with the stack's clients.

    Raises
    ------
    s3ingest.deployed.StackNotFoundError
        The stack lacks a required output.
    """
    stack.require(QUEUE_URL, DEAD_LETTER_QUEUE_URL)
    return status(
        sqs=stack.client("sqs"),
        cloudwatch=stack.client("cloudwatch"),
        sfn=stack.client("stepfunctions"),
        events=stack.client("events"),
        s3=stack.client("s3"),
        outputs=stack.outputs,
        stack=stack.name,
        max_age_seconds=max_age_seconds,
    )


def stack_metric(name: str, stack: str) -> dict[str, Any]:
    """A ``GetMetricData`` metric of stack ``stack``'s own series (namespace ``S3Ingest``,
    dimensions ``service`` and ``stack``: another stage's series are never summed in)."""
    return {
        "Namespace": METRICS_NAMESPACE,
        "MetricName": name,
        "Dimensions": [{"Name": k, "Value": v} for k, v in metric_dimensions(stack).items()],
    }


#: Oldest ingest message, seconds, above which the stack is unhealthy (its alarm's threshold).
MAX_MESSAGE_AGE_SECONDS = 900
#: Final states of a Step Functions execution that failed (ABORTED is an operator's choice).
FAILED_EXECUTION = frozenset({"FAILED", "TIMED_OUT"})


def status(
    *,
    sqs: Any,
    cloudwatch: Any,
    sfn: Any,
    events: Any,
    s3: Any,
    outputs: dict[str, str],
    stack: str,
    now: datetime | None = None,
    max_age_seconds: int = MAX_MESSAGE_AGE_SECONDS,
) -> dict[str, Any]:
    """One screen of the pipeline's health, read from everything it shows.

    Returns
    -------
    dict
        ``{"healthy": bool, "problems": [str], "queue": {"visible", "in_flight",
        "oldest_age_seconds"}, "dead_letter_queue": {"visible", "in_flight"},
        "target_dead_letter_queue": {...}, "eventbridge_delivery": bool | None, "last_drift":
        {...} | None, "last_backfill": {"arn", "status"} | None, "running_backfills": [...],
        "running_replays": [...]}``, plus ``"change_dead_letter_queue"`` with the change stream.
        Unhealthy (``problems`` says why): a dead-letter queue not empty, the oldest message
        older than ``max_age_seconds``, EventBridge delivery off on the bucket, drift above
        zero in the last reconciliation, or the newest backfill FAILED or TIMED_OUT (an ABORTED
        one was stopped on purpose). ``eventbridge_delivery`` is None when it cannot be read.
        With the stack's bucket (output ``InventoryBucketName``), ``"last_attestation"``:
        per landing bucket its newest attestation (:func:`last_attestations`), unhealthy when
        its roots differ or it cannot be read.
    """
    now = now or datetime.now(UTC)

    def depth(url: str) -> dict[str, int]:
        a = sqs.get_queue_attributes(
            QueueUrl=url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return {
            "visible": int(a.get("ApproximateNumberOfMessages", 0)),
            "in_flight": int(a.get("ApproximateNumberOfMessagesNotVisible", 0)),
        }

    queue: dict[str, Any] = dict(depth(outputs[QUEUE_URL]))
    queue_name = outputs[QUEUE_URL].rsplit("/", 1)[-1]
    metrics = cloudwatch.get_metric_data(
        StartTime=now - timedelta(days=2),
        EndTime=now,
        ScanBy="TimestampDescending",
        MetricDataQueries=[
            {
                "Id": "age",
                "ReturnData": True,
                "MetricStat": {
                    "Stat": "Maximum",
                    "Period": 300,
                    "Metric": {
                        "Namespace": "AWS/SQS",
                        "MetricName": "ApproximateAgeOfOldestMessage",
                        "Dimensions": [{"Name": "QueueName", "Value": queue_name}],
                    },
                },
            },
            # one-minute periods, newest first: the last run's value, not the hour's maximum
            {
                "Id": "drift",
                "ReturnData": True,
                "MetricStat": {
                    "Stat": "Maximum",
                    "Period": 60,
                    "Metric": stack_metric("drift_total", stack),
                },
            },
        ],
    )["MetricDataResults"]
    by_id = {r["Id"]: r for r in metrics}
    age = by_id.get("age", {}).get("Values", [])
    drift = by_id.get("drift", {})
    queue["oldest_age_seconds"] = int(age[0]) if age else None
    backfills: list[str] = []
    last_backfill = None
    if BACKFILL_STATE_MACHINE_ARN in outputs:
        backfills = [
            e["executionArn"]
            for e in sfn.list_executions(
                stateMachineArn=outputs[BACKFILL_STATE_MACHINE_ARN], statusFilter="RUNNING"
            ).get("executions", [])
        ]
        newest = sfn.list_executions(
            stateMachineArn=outputs[BACKFILL_STATE_MACHINE_ARN], maxResults=1
        ).get("executions", [])
        if newest:
            last_backfill = {"arn": newest[0]["executionArn"], "status": newest[0]["status"]}
    delivery: bool | None = None
    if BUCKET_NAME in outputs:
        try:
            delivery = eventbridge_delivery_enabled(s3, outputs[BUCKET_NAME])
        except TransientError:  # e.g. no s3:GetBucketNotification: shown as unknown
            delivery = None
    # ListReplays' filters are exclusive (one at most, else ValidationException:
    # https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_ListReplays.html): the
    # archive's replays, their state read here
    replays = (
        [
            r["ReplayName"]
            for r in events.list_replays(EventSourceArn=outputs[ARCHIVE_ARN]).get("Replays", [])
            if r.get("State") in ("STARTING", "RUNNING")
        ]
        if ARCHIVE_ARN in outputs
        else []
    )
    out: dict[str, Any] = {
        "queue": queue,
        "dead_letter_queue": depth(outputs[DEAD_LETTER_QUEUE_URL]),
        "last_drift": (
            {"drift_total": int(drift["Values"][0]), "at": drift["Timestamps"][0].isoformat()}
            if drift.get("Values")
            else None
        ),
        "eventbridge_delivery": delivery,
        "last_backfill": last_backfill,
        "running_backfills": backfills,
        "running_replays": replays,
    }
    if EVENT_TARGET_DEAD_LETTER_QUEUE_URL in outputs:
        out["target_dead_letter_queue"] = depth(outputs[EVENT_TARGET_DEAD_LETTER_QUEUE_URL])
    if CHANGE_DEAD_LETTER_QUEUE_URL in outputs:
        # changes the relay can never publish, and batches it gave up on (docs/runbook.md)
        out["change_dead_letter_queue"] = depth(outputs[CHANGE_DEAD_LETTER_QUEUE_URL])
    attested, attestation_problems = _attestations(s3, outputs)
    out.update(attested)
    problems = [
        f"{name.replace('_', ' ')} holds {out[name]['visible'] + out[name]['in_flight']} message(s)"
        for name in ("dead_letter_queue", "target_dead_letter_queue", "change_dead_letter_queue")
        if name in out and out[name]["visible"] + out[name]["in_flight"] > 0
    ]
    if queue["oldest_age_seconds"] is not None and queue["oldest_age_seconds"] > max_age_seconds:
        problems.append(
            f"the oldest ingest message is {queue['oldest_age_seconds']} s old "
            f"(more than {max_age_seconds} s)"
        )
    if delivery is False:
        problems.append(
            f"EventBridge delivery is off on {outputs['BucketName']}: no events reach the pipeline"
        )
    if out["last_drift"] and out["last_drift"]["drift_total"] > 0:
        problems.append(
            f"the last reconciliation found {out['last_drift']['drift_total']} difference(s)"
        )
    problems += attestation_problems
    if last_backfill and last_backfill["status"] in FAILED_EXECUTION:
        problems.append(f"the newest backfill ended {last_backfill['status']}")
    names = [n for n in outputs.get(PROCESSOR_NAMES, "").split(",") if n]
    if names:
        out["processors"] = processor_effects(cloudwatch, stack, names, now)
        for name, counts in out["processors"].items():
            if counts["failed"] and not counts["done"]:
                problems.append(
                    f"processor {name!r} failed {counts['failed']} time(s) in the last hour "
                    "and completed none (its changes wait, then dead-letter: docs/runbook.md)"
                )
    return {"healthy": not problems, "problems": problems, **out}


def _attestations(s3: Any, outputs: dict[str, str]) -> tuple[dict[str, Any], list[str]]:
    """``{"last_attestation": ...}`` (nothing without a bucket to keep them,
    :func:`~s3ingest.outputs.attestation_store`) and the problems it shows: each bucket whose
    newest attestation has differing roots or cannot be read (a hidden verdict is not a good
    one)."""
    if attestation_store(outputs) is None:
        return {}, []
    unreadable: dict[str, str] = {}
    found = last_attestations(s3, outputs, unreadable)
    problems = [
        f"the last attestation of {landing} ({made['taken_at']}) has differing roots "
        f"({made['differing']} key(s))"
        for landing, made in found.items()
        if made is not None and not made["equal"]
    ]
    problems += [
        f"the last attestation of {landing} could not be read: {why}"
        for landing, why in unreadable.items()
    ]
    return {"last_attestation": found}, problems


def last_attestations(
    s3: Any, outputs: dict[str, str], unreadable: dict[str, str] | None = None
) -> dict[str, Any]:
    """Per landing bucket (``BucketNames``), its newest attestation under
    ``attestations/<bucket>/`` of :func:`~s3ingest.outputs.attestation_store`: ``{"taken_at",
    "equal", "keys", "differing", "document", "sha256"}``, or None when there is none or it
    cannot be read; why it cannot goes to ``unreadable`` by bucket (docs/attestation.md)."""
    from botocore.exceptions import BotoCoreError, ClientError

    from s3ingest_fn.services.attestation_store import newest

    store = attestation_store(outputs)
    if store is None:
        return {}
    landings = [b for b in outputs.get(BUCKET_NAMES, "").split(",") if b] or [
        outputs[n] for n in (BUCKET_NAME,) if n in outputs
    ]
    found: dict[str, Any] = {}
    for landing in landings:
        try:
            doc = newest(s3, store, landing)
        except (ClientError, BotoCoreError, ValueError, KeyError) as exc:
            doc = None
            if unreadable is not None:
                unreadable[landing] = _reason(exc)
        found[landing] = (
            None
            if doc is None
            else {
                "taken_at": doc["snapshot"]["taken_at"],
                "equal": bool(doc["equal"]),
                "keys": doc["counts"]["keys"],
                "differing": doc["differences_total"],
                "document": f"s3://{store}/{doc['_location']['key']}",
                "sha256": doc["_sha256"],
            }
        )
    return found


def _reason(exc: Exception) -> str:
    """An S3 error's code and message (``AccessDenied: ...``), else the exception's text."""
    from botocore.exceptions import ClientError

    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        return f"{error.get('Code', 'error')}: {error.get('Message', '')}".rstrip(": ")
    return f"{type(exc).__name__}: {exc}"


def processor_effects(
    cloudwatch: Any, stack: str, names: list[str], now: datetime
) -> dict[str, dict[str, int]]:
    """Each processor's effect runs in the hour before ``now``, ``{name: {"done", "failed",
    "superseded"}}``, from the ingest handler's ``effect_<status>`` counts (dimensions
    ``service``, ``stack``, ``processor``; one GetMetricData request)."""
    statuses = ("done", "failed", "superseded")
    queries = []
    for i, name in enumerate(names):
        for status in statuses:
            metric = stack_metric(f"effect_{status}", stack)
            metric["Dimensions"] = [*metric["Dimensions"], {"Name": "processor", "Value": name}]
            queries.append(
                {
                    "Id": f"p{i}_{status}",
                    "ReturnData": True,
                    "MetricStat": {"Stat": "Sum", "Period": 3600, "Metric": metric},
                }
            )
    results = cloudwatch.get_metric_data(
        StartTime=now - timedelta(hours=1), EndTime=now, MetricDataQueries=queries
    )["MetricDataResults"]
    by_id = {r["Id"]: r.get("Values", []) for r in results}
    return {
        name: {s: int(sum(by_id.get(f"p{i}_{s}", []))) for s in statuses}
        for i, name in enumerate(names)
    }
