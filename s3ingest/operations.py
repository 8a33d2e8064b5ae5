"""Operating the pipeline after an incident: replay, DLQ redrive, explain a key, status.

Plain functions over injected boto3 clients; the CLI parses arguments and renders, the local
runtime and the tests pass clients bound to the emulator or stubbed with botocore ``Stubber``.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from s3ingest_fn.adapters.s3_objects import eventbridge_delivery_enabled
from s3ingest_fn.adapters.sqs import REASON_ATTRIBUTE
from s3ingest_fn.contract import METRICS_NAMESPACE, metric_dimensions
from s3ingest_fn.core.effects import EffectTarget
from s3ingest_fn.core.events import parse_body
from s3ingest_fn.core.model import InvalidMessageError, TransientError
from s3ingest_fn.core.row import LedgerRow

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


def stack_metric(name: str, stack: str) -> dict[str, Any]:
    """A ``GetMetricData`` metric of stack ``stack``'s own series (namespace ``S3Ingest``,
    dimensions ``service`` and ``stack``: another stage's series are never summed in)."""
    return {
        "Namespace": METRICS_NAMESPACE,
        "MetricName": name,
        "Dimensions": [{"Name": k, "Value": v} for k, v in metric_dimensions(stack).items()],
    }


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


# -- explain -------------------------------------------------------------------------------------


def explain(
    ledger_row: LedgerRow | None,
    bucket_state: Any,
    targets: Sequence[EffectTarget] = (),
    now_ms: int | None = None,
) -> dict[str, Any]:
    """The ledger row and the bucket's current state side by side, with a verdict, the row's
    last applied decisions (``history``, newest first), the decision trail (``trail``: applied
    decisions and the hold policy's reviews, newest first, each with its actor; ``docs/hold.md``)
    and the state of the processor's effect
    for the row's change (``effect``: ``status`` pending/done/superseded, ``fencing_token``,
    ``lease_until``, ``completed_for_change`` (the change id its last completed run was for),
    ``completed_version`` and ``behind`` (CONTRACT C11); None without a processor).

    Parameters
    ----------
    ledger_row : LedgerRow or None
        From :meth:`s3ingest_fn.adapters.dynamo_ledger.DynamoLedger.get`.
    bucket_state : ObjectState
        From :meth:`s3ingest_fn.adapters.s3_objects.S3Objects.current`.
    targets : sequence of EffectTarget
        The configured processors (the stack's ``ProcessorTargets`` output): ``behind`` is
        :meth:`~s3ingest_fn.core.effects.EffectTarget.behind` at ``now_ms`` (a processor with
        no state on the row is listed too, ``status`` None). Without them, only a superseded
        effect is behind.
    """
    row = ledger_row
    ledger: dict[str, Any] = {
        "state": row.state if row else "absent",
        "sequencer": row.raw_seq if row else None,
        "version_id": row.version_id if row else None,
        "etag": row.etag if row else None,
        "size": row.size if row else None,
        "observed": row.observed if row else None,
        "last_event": row.event_name if row else None,
        "last_reason": row.reason if row else None,
        "source": row.source if row else None,
        "updated_at": _iso_ms(row.updated_at) if row else None,
        "tombstone_expires_at": _iso_s(row.expires_at) if row else None,
        "revision": row.rev if row else None,
        "change_id": row.change_id if row else None,
    }
    # Each processor's effect (CONTRACT C11): ``effect`` the single processor's (the
    # ``processor`` setting), ``effects`` every processor's by name.
    effects: dict[str, dict[str, Any]] = {}
    by_name = {target.name: target for target in targets}
    clock_ms = int(time.time() * 1000) if now_ms is None else now_ms
    for name, fx in (row.effects() if row is not None else {}).items():
        effects[name] = {
            "status": fx.status,
            "fencing_token": fx.token,
            "lease_until": _iso_ms(fx.lease_until_ms),
            "completed_for_change": fx.done_change_id,
            # the processor's version that completed it (behind a higher one: reprocess)
            "completed_version": fx.version if fx.done_change_id is not None else None,
            "behind": (
                by_name[name].behind(row, clock_ms)  # type: ignore[arg-type]
                if name in by_name
                else fx.status == "superseded"
            ),
            "waiting_changes": [q.change_id for q in fx.queue],
            "held": (
                {
                    "change_id": fx.hold.change_id,
                    "reason": fx.hold.reason,
                    "held_at": _iso_ms(fx.hold.at),
                    "decision": fx.hold.decision,
                    "actor": fx.hold.actor or None,
                    "decided_at": _iso_ms(fx.hold.decided_at),
                }
                if fx.hold is not None
                else None
            ),
        }
    for target in targets:  # configured, no state on the row: never run for its change
        if target.name not in effects and row is not None:
            effects[target.name] = {
                **dict.fromkeys(("status", "fencing_token", "lease_until")),
                **dict.fromkeys(("completed_for_change", "completed_version", "held")),
                "behind": target.behind(row, clock_ms),
                "waiting_changes": [],
            }
    effect = effects.get("default")
    history = [
        {**decision.as_dict(), "at": _iso_ms(decision.at)}
        for decision in (row.history if row else ())
    ]
    # the whole trail, newest first: applied decisions and review decisions (hold, approve,
    # reject) by time; each review names its processor and actor
    timed: list[tuple[int, dict[str, Any]]] = [
        (d.at, {"kind": "applied", **h, "actor": None, "processor": None})
        for h, d in zip(history, row.history if row else (), strict=True)
    ]
    timed += [
        (
            r.at,
            {
                "kind": r.action,
                "seq": r.seq,
                "event": None,
                "reason": r.reason,
                "source": "policy" if r.action == "held" else "operator",
                "at": _iso_ms(r.at),
                "state": None,
                "actor": r.actor,
                "processor": r.processor,
                "change_id": r.change_id,
            },
        )
        for r in (row.trail if row else ())
    ]
    trail = [entry for _, entry in sorted(timed, key=lambda t: -t[0])]
    bucket = {
        "visible": bucket_state.visible,
        "version_id": bucket_state.version_id,
        "etag": bucket_state.etag,
        "size": bucket_state.size,
    }
    if row is not None and row.present:
        agrees = bucket_state.visible and (row.version_id, row.etag) == (
            bucket_state.version_id,
            bucket_state.etag,
        )
    else:
        agrees = not bucket_state.visible
    verdict = (
        "ledger agrees with the bucket"
        if agrees
        else (
            "ledger differs from the bucket: an event may be in flight, lost (run reconcile), "
            "or in the DLQ"
        )
    )
    return {
        "ledger": ledger,
        "bucket": bucket,
        "agrees": agrees,
        "verdict": verdict,
        "history": history,
        "trail": trail,
        "effect": effect,
        "effects": effects,
        "skipped_rule": "an event whose sequencer is lower than the row's is stale, an equal "
        "one a duplicate; both leave the row as it is (see the log line of "
        "each record for its outcome)",
    }


def _iso_ms(value: Any) -> str | None:
    return datetime.fromtimestamp(value / 1000, UTC).isoformat() if isinstance(value, int) else None


def _iso_s(value: Any) -> str | None:
    return datetime.fromtimestamp(value, UTC).isoformat() if isinstance(value, int) else None


# -- status --------------------------------------------------------------------------------------


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

    queue: dict[str, Any] = dict(depth(outputs["QueueUrl"]))
    queue_name = outputs["QueueUrl"].rsplit("/", 1)[-1]
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
    if "BackfillStateMachineArn" in outputs:
        backfills = [
            e["executionArn"]
            for e in sfn.list_executions(
                stateMachineArn=outputs["BackfillStateMachineArn"], statusFilter="RUNNING"
            ).get("executions", [])
        ]
        newest = sfn.list_executions(
            stateMachineArn=outputs["BackfillStateMachineArn"], maxResults=1
        ).get("executions", [])
        if newest:
            last_backfill = {"arn": newest[0]["executionArn"], "status": newest[0]["status"]}
    delivery: bool | None = None
    if "BucketName" in outputs:
        try:
            delivery = eventbridge_delivery_enabled(s3, outputs["BucketName"])
        except TransientError:  # e.g. no s3:GetBucketNotification: shown as unknown
            delivery = None
    # ListReplays' filters are exclusive (one at most, else ValidationException:
    # https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_ListReplays.html): the
    # archive's replays, their state read here
    replays = (
        [
            r["ReplayName"]
            for r in events.list_replays(EventSourceArn=outputs["ArchiveArn"]).get("Replays", [])
            if r.get("State") in ("STARTING", "RUNNING")
        ]
        if "ArchiveArn" in outputs
        else []
    )
    out: dict[str, Any] = {
        "queue": queue,
        "dead_letter_queue": depth(outputs["DeadLetterQueueUrl"]),
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
    if "EventTargetDeadLetterQueueUrl" in outputs:
        out["target_dead_letter_queue"] = depth(outputs["EventTargetDeadLetterQueueUrl"])
    if "ChangeDeadLetterQueueUrl" in outputs:
        # changes the relay can never publish, and batches it gave up on (docs/runbook.md)
        out["change_dead_letter_queue"] = depth(outputs["ChangeDeadLetterQueueUrl"])
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
    if last_backfill and last_backfill["status"] in FAILED_EXECUTION:
        problems.append(f"the newest backfill ended {last_backfill['status']}")
    names = [n for n in outputs.get("ProcessorNames", "").split(",") if n]
    if names:
        out["processors"] = processor_effects(cloudwatch, stack, names, now)
        for name, counts in out["processors"].items():
            if counts["failed"] and not counts["done"]:
                problems.append(
                    f"processor {name!r} failed {counts['failed']} time(s) in the last hour "
                    "and completed none (its changes wait, then dead-letter: docs/runbook.md)"
                )
    return {"healthy": not problems, "problems": problems, **out}


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


def to_json(doc: Any) -> str:
    """JSON for ``--json`` output (datetimes as ISO-8601)."""
    return json.dumps(doc, default=lambda o: o.isoformat() if isinstance(o, datetime) else str(o))
