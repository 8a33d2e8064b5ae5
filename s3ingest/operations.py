"""Operating the pipeline after an incident: replay and DLQ redrive (``explain`` and ``status``
moved to :mod:`s3ingest.commands.explain` and :mod:`s3ingest.commands.status`; their old names
here are deprecated aliases).

Plain functions over injected boto3 clients; the CLI parses arguments and renders, the local
runtime and the tests pass clients bound to the emulator or stubbed with botocore ``Stubber``.
"""

from __future__ import annotations

import json
import time
import uuid
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from s3ingest.commands.status import stack_metric
from s3ingest_fn.adapters.sqs import REASON_ATTRIBUTE
from s3ingest_fn.core.events import parse_body
from s3ingest_fn.core.model import InvalidMessageError

#: EventBridge archives events with a delay; a replay window must end this long before now
#: (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-replay-archived-event.html).
ARCHIVE_INGESTION_LAG = timedelta(minutes=10)
TERMINAL_REPLAY = ("COMPLETED", "CANCELLED", "FAILED")


class OperationError(RuntimeError):
    """An operation refused or failed, with a message for the operator."""


# -- replay --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReplayTarget:
    """The stack's archive, bus and ingest rule (the replay is scoped to that rule only)."""

    archive_arn: str
    bus_arn: str
    rule_arn: str


def start_replay(
    events: Any,
    target: ReplayTarget,
    start: datetime,
    end: datetime,
    *,
    name: str | None = None,
    now: datetime | None = None,
    min_lag: timedelta = ARCHIVE_INGESTION_LAG,
) -> str:
    """Start an EventBridge replay of the archive to the default bus, filtered to the ingest
    rule, so other rules on the bus do not see the events again (CONTRACT C14).

    Parameters
    ----------
    start, end : datetime
        The window (timezone-aware).
    min_lag : timedelta
        ``end`` must be at least this long before ``now``: events reach the archive late, and a
        replay ending too close to now would miss some of them.

    Returns
    -------
    str
        The replay's name.

    Raises
    ------
    OperationError
        For an empty window, or one ending too close to now.
    """
    check_window(start, end, now=now, min_lag=min_lag)
    name = name or f"s3ingest-{datetime.now(UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"
    events.start_replay(
        ReplayName=name,
        EventSourceArn=target.archive_arn,
        EventStartTime=start,
        EventEndTime=end,
        Destination={"Arn": target.bus_arn, "FilterArns": [target.rule_arn]},
    )
    return name


def check_window(
    start: datetime,
    end: datetime,
    *,
    now: datetime | None = None,
    min_lag: timedelta = ARCHIVE_INGESTION_LAG,
) -> None:
    """Refuse an empty window, or one ending closer to ``now`` than ``min_lag``.

    Raises
    ------
    OperationError
    """
    now = now or datetime.now(UTC)
    if end <= start:
        raise OperationError(f"--to ({end.isoformat()}) must be after --from ({start.isoformat()})")
    if end > now - min_lag:
        raise OperationError(
            f"--to {end.isoformat()} is closer to now than the archive's ingestion lag "
            f"({int(min_lag.total_seconds() // 60)} min): events of that window may not be "
            f"archived yet; use --to {(now - min_lag).replace(microsecond=0).isoformat()} or "
            "earlier"
        )


def wait_replay(
    events: Any,
    name: str,
    *,
    poll_seconds: float = 5.0,
    on_state: Callable[[dict[str, Any]], None] | None = None,
    timeout_seconds: float = 6 * 3600,
) -> dict[str, Any]:
    """Poll DescribeReplay until the replay ends; return its last description.

    Raises
    ------
    OperationError
        When the replay fails or is cancelled, or does not end in ``timeout_seconds``.
    """
    deadline = time.monotonic() + timeout_seconds
    while True:
        desc = events.describe_replay(ReplayName=name)
        if on_state:
            on_state(desc)
        if desc["State"] in TERMINAL_REPLAY:
            if desc["State"] != "COMPLETED":
                raise OperationError(
                    f"replay {name} {desc['State']}: {desc.get('StateReason', 'no reason given')}"
                )
            return dict(desc)
        if time.monotonic() > deadline:
            raise OperationError(
                f"replay {name} still {desc['State']} after {timeout_seconds:.0f} s"
            )
        time.sleep(poll_seconds)


REPLAY_OUTCOMES = ("applied", "duplicate", "stale", "superseded", "ignored", "invalid", "retried")


def replay_outcomes(cloudwatch: Any, stack: str, start: datetime, end: datetime) -> dict[str, int]:
    """Outcomes of stack ``stack``'s replayed records between ``start`` and ``end``, from the
    handler's ``replayed_<outcome>`` metrics (:func:`stack_metric`).

    Metrics arrive a minute or two after the records are processed; call it after the replay
    completed and the queue drained. The window lasts one period (60 s) at least: GetMetricData
    refuses an ``EndTime`` equal to its ``StartTime`` (a replay that ended within its second).
    """
    end = max(end, start + timedelta(seconds=60))
    queries = [
        {
            "Id": f"o{i}",
            "Label": outcome,
            "ReturnData": True,
            "MetricStat": {
                "Stat": "Sum",
                "Period": 60,
                "Metric": stack_metric(f"replayed_{outcome}", stack),
            },
        }
        for i, outcome in enumerate(REPLAY_OUTCOMES)
    ]
    results = cloudwatch.get_metric_data(MetricDataQueries=queries, StartTime=start, EndTime=end)[
        "MetricDataResults"
    ]
    return {r["Label"]: int(sum(r.get("Values", []))) for r in results}


# -- DLQ inspection and redrive ------------------------------------------------------------------


def inspect_dlq(
    sqs: Any, dlq_url: str, *, max_messages: int = 100, peek_visibility: int = 30
) -> dict[str, Any]:
    """Count and classify what is in the dead-letter queue.

    Messages are received (not deleted) with a short visibility timeout, so they come back; this
    adds one to their receive count, as any peek at SQS does.

    Returns
    -------
    dict
        ``{"approximate": n, "sampled": n, "by_reason": {...}, "by_kind": {...},
        "sample_keys": [...], "invalid_ids": [...]}``: ``by_reason`` from the
        ``s3ingest-reason`` attribute (``retries-exhausted`` when absent: SQS moved it after
        ``maxReceiveCount``), ``by_kind`` from parsing the body.
    """
    attrs = sqs.get_queue_attributes(
        QueueUrl=dlq_url, AttributeNames=["ApproximateNumberOfMessages"]
    )
    approximate = int(attrs["Attributes"].get("ApproximateNumberOfMessages", 0))
    seen: dict[str, dict[str, Any]] = {}
    while len(seen) < max_messages:
        msgs = sqs.receive_message(
            QueueUrl=dlq_url,
            MaxNumberOfMessages=10,
            VisibilityTimeout=peek_visibility,
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        fresh = [m for m in msgs if m["MessageId"] not in seen]
        if not fresh:
            break
        for m in fresh[: max_messages - len(seen)]:
            seen[m["MessageId"]] = m
    by_reason: Counter[str] = Counter()
    by_kind: Counter[str] = Counter()
    keys: list[str] = []
    invalid: list[str] = []
    for m in seen.values():
        reason = m.get("MessageAttributes", {}).get(REASON_ATTRIBUTE, {}).get("StringValue")
        by_reason[reason or "retries-exhausted"] += 1
        if reason:
            invalid.append(m["MessageId"])
        try:
            parsed = parse_body(m["Body"])
            kinds = [c.kind.value for c in parsed.changes] or [parsed.ignored_reason or "none"]
            by_kind.update(kinds)
            keys.extend(c.key for c in parsed.changes if len(keys) < 20)
        except InvalidMessageError as exc:
            by_kind[f"invalid:{exc.reason}"] += 1
    return {
        "approximate": approximate,
        "sampled": len(seen),
        "by_reason": dict(by_reason),
        "by_kind": dict(by_kind),
        "sample_keys": keys,
        "invalid_ids": invalid,
    }


def redrive_all(
    sqs: Any, dlq_arn: str, source_arn: str, *, max_per_second: int | None = None
) -> str:
    """Move every DLQ message back to the ingest queue with an SQS message-move task
    (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_StartMessageMoveTask.html).

    Returns the task handle.
    """
    kwargs: dict[str, Any] = {"SourceArn": dlq_arn, "DestinationArn": source_arn}
    if max_per_second:
        kwargs["MaxNumberOfMessagesPerSecond"] = max_per_second
    return str(sqs.start_message_move_task(**kwargs)["TaskHandle"])


def move_task_status(sqs: Any, dlq_arn: str) -> dict[str, Any]:
    """The most recent message-move task of the DLQ: status, moved and to-move counts."""
    results = sqs.list_message_move_tasks(SourceArn=dlq_arn, MaxResults=1).get("Results", [])
    if not results:
        return {"status": "NONE"}
    task = results[0]
    return {
        "status": task.get("Status"),
        "moved": task.get("ApproximateNumberOfMessagesMoved"),
        "to_move": task.get("ApproximateNumberOfMessagesToMove"),
        "failure": task.get("FailureReason"),
    }


def redrive_valid(sqs: Any, dlq_url: str, queue_url: str, *, max_messages: int) -> dict[str, int]:
    """Move the DLQ messages that were not classified invalid back to the ingest queue, one by
    one (receive, send, delete), leaving invalid ones in the DLQ. A message-move task cannot
    filter, so this is the path when invalid messages must stay.

    Returns ``{"moved": n, "kept_invalid": n}``.
    """
    moved = kept = 0
    kept_ids: set[str] = set()
    kept_handles: list[str] = []
    while moved < max_messages:
        msgs = sqs.receive_message(
            QueueUrl=dlq_url,
            MaxNumberOfMessages=10,
            VisibilityTimeout=60,
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        fresh = [m for m in msgs if m["MessageId"] not in kept_ids]
        if not fresh:
            break
        for m in fresh:
            if REASON_ATTRIBUTE in m.get("MessageAttributes", {}):
                kept_ids.add(m["MessageId"])
                kept_handles.append(m["ReceiptHandle"])
                kept += 1
                continue
            if moved >= max_messages:
                break
            sqs.send_message(QueueUrl=queue_url, MessageBody=m["Body"])
            sqs.delete_message(QueueUrl=dlq_url, ReceiptHandle=m["ReceiptHandle"])
            moved += 1
    for handle in kept_handles:  # the invalid ones stay, visible again at once
        sqs.change_message_visibility(QueueUrl=dlq_url, ReceiptHandle=handle, VisibilityTimeout=0)
    return {"moved": moved, "kept_invalid": kept}


def to_json(doc: Any) -> str:
    """JSON for ``--json`` output (datetimes as ISO-8601)."""
    return json.dumps(doc, default=lambda o: o.isoformat() if isinstance(o, datetime) else str(o))


#: Names that moved to their command's module, by the module now holding them (deprecated
#: here: one release).
MOVED = {
    "explain": "s3ingest.commands.explain",
    "status": "s3ingest.commands.status",
    "processor_effects": "s3ingest.commands.status",
    "MAX_MESSAGE_AGE_SECONDS": "s3ingest.commands.status",
    "FAILED_EXECUTION": "s3ingest.commands.status",
}


def __getattr__(name: str) -> Any:
    """The names of :data:`MOVED`, with a :class:`DeprecationWarning` naming their new module."""
    if name not in MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from s3ingest.commands import explain, status

    module = explain if MOVED[name] == explain.__name__ else status
    warnings.warn(
        f"s3ingest.operations.{name} moved to {MOVED[name]}.{name}",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(module, name)
