"""``s3ingest replay``: replay the archived S3 events of a time window to the ingest rule."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from s3ingest.commands.status import stack_metric

#: EventBridge archives events with a delay; a replay window must end this long before now
#: (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-replay-archived-event.html).
ARCHIVE_INGESTION_LAG = timedelta(minutes=10)
TERMINAL_REPLAY = ("COMPLETED", "CANCELLED", "FAILED")


class OperationError(RuntimeError):
    """An operation refused or failed, with a message for the operator."""


#: Said by a dry run: what it can count and what it cannot.
WINDOW_COUNT_NOTE = (
    "the window's event count is not known before a replay: EventBridge counts an archive's "
    "events in all, not by time (DescribeArchive's EventCount); archive_event_count is the "
    "whole archive's, every window's"
)

#: Said after a followed replay: its records are still going through the queue.
DRAINING_NOTE = (
    "replayed records are still being processed while the queue "
    "drains; run `s3ingest status` and look at the dashboard's "
    "replayed_* metrics for the final counts"
)


def replay_window(
    events: Any,
    *,
    archive_arn: str,
    rule_arn: str,
    window: tuple[datetime, datetime],
    dry_run: bool,
) -> dict[str, Any]:
    """Start a replay of ``window`` (timezone-aware start and end) from the archive to the
    default bus, filtered to the ingest rule; with ``dry_run`` only count the archive's events
    (all of them: the window's cannot be counted before a replay, :data:`WINDOW_COUNT_NOTE`).

    Returns
    -------
    dict
        ``{"from", "to" (ISO-8601), "archive", "rule"}`` plus ``"replay"`` (the replay's name),
        or with ``dry_run`` ``"archive_event_count"`` (the whole archive's),
        ``"window_event_count": None`` (not known), ``"note"`` and ``"dry_run": True``.

    Raises
    ------
    OperationError
        The window is empty or ends too close to now.
    """
    bus = events.describe_event_bus()["Arn"]
    result: dict[str, Any] = {
        "from": window[0].isoformat(),
        "to": window[1].isoformat(),
        "archive": archive_arn,
        "rule": rule_arn,
    }
    if dry_run:
        result["archive_event_count"] = events.describe_archive(
            ArchiveName=archive_arn.rsplit("/", 1)[-1]
        ).get("EventCount")
        result["window_event_count"] = None
        result["note"] = WINDOW_COUNT_NOTE
        result["dry_run"] = True
        return result
    target = ReplayTarget(archive_arn=archive_arn, bus_arn=bus, rule_arn=rule_arn)
    result["replay"] = start_replay(events, target, *window)
    return result


def follow_replay(
    events: Any,
    cloudwatch: Any,
    *,
    stack: str,
    name: str,
    on_state: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Wait for replay ``name`` to end (``on_state`` gets each DescribeReplay) and read the
    replayed records' outcomes so far from the stack's metrics.

    Returns
    -------
    dict
        ``{"state": "COMPLETED", "outcomes_so_far": {outcome: n}, "note": str}``.

    Raises
    ------
    OperationError
        The replay failed, was cancelled or did not end in time.
    """
    desc = wait_replay(events, name, on_state=on_state)
    return {
        "state": desc["State"],
        "outcomes_so_far": replay_outcomes(
            cloudwatch, stack, desc["ReplayStartTime"], datetime.now(UTC)
        ),
        "note": DRAINING_NOTE,
    }


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
