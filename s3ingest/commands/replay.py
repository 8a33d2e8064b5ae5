"""``s3ingest replay``: replay the archived S3 events of a time window to the ingest rule."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from s3ingest import operations

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
    default bus, filtered to the ingest rule; with ``dry_run`` only count the archive's events.

    Returns
    -------
    dict
        ``{"from", "to" (ISO-8601), "archive", "rule"}`` plus ``"replay"`` (the replay's name),
        or with ``dry_run`` ``"archive_event_count"`` and ``"dry_run": True``.

    Raises
    ------
    s3ingest.operations.OperationError
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
        result["dry_run"] = True
        return result
    target = operations.ReplayTarget(archive_arn=archive_arn, bus_arn=bus, rule_arn=rule_arn)
    result["replay"] = operations.start_replay(events, target, *window)
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
    s3ingest.operations.OperationError
        The replay failed, was cancelled or did not end in time.
    """
    desc = operations.wait_replay(events, name, on_state=on_state)
    return {
        "state": desc["State"],
        "outcomes_so_far": operations.replay_outcomes(
            cloudwatch, stack, desc["ReplayStartTime"], datetime.now(UTC)
        ),
        "note": DRAINING_NOTE,
    }
