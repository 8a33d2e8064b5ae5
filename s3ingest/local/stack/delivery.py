"""A flush's events on the bus when delivery fails: what the local runtime's flush publishes.

:func:`publish_flush` publishes under a flush's chaos: ``drop`` (never reach the bus: lost for
good) and ``undelivered`` (reach the bus and the archive while the ingest rule delivers nothing,
then the rule is as it was: a replay brings them back). While the ingest route is down
(:func:`route_down`: the rule disabled, the queue policy denying EventBridge), every event of a
flush is undelivered that way (its other chaos does not apply). Delivery is stopped in the
emulator itself (:mod:`s3ingest.local.emulator.moto_delivery`); the archive's own rule keeps
archiving.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from s3ingest.local.emulator.chaos import Chaos
from s3ingest.local.emulator.moto_delivery import denies_eventbridge
from s3ingest.local.stack.sources import publish_s3_events

if TYPE_CHECKING:
    from s3ingest.local.stack.provisioning import Resources


def route_down(events: Any, sqs: Any, resources: Resources) -> bool:
    """Whether the ingest rule delivers nothing now: disabled, or its queue's policy denies
    EventBridge."""
    if events.describe_rule(Name=resources.rule).get("State") == "DISABLED":
        return True
    policy = (
        sqs.get_queue_attributes(QueueUrl=resources.queue_url, AttributeNames=["Policy"])
        .get("Attributes", {})
        .get("Policy")
    )
    return denies_eventbridge(policy)


def publish_flush(
    events: Any,
    sqs: Any,
    resources: Resources,
    chaos: Chaos,
    pending: list[dict[str, Any]],
    dropped: list[dict[str, Any]],
    undelivered: list[dict[str, Any]],
    senders: Callable[[str], Any] | None = None,
) -> int:
    """Publish ``pending`` (S3 events, EventBridge shape) under ``chaos``; append the dropped
    and undelivered ones to those lists; return how many reached the bus (each from its
    bucket owner's account with ``senders``,
    :func:`~s3ingest.local.stack.sources.publish_s3_events`).

    Raises
    ------
    RuntimeError
        When the bus refuses an entry.
    """
    rest: list[dict[str, Any]]
    if route_down(events, sqs, resources):
        rest, withheld = [], list(pending)
    else:
        rest, withheld = chaos.split_undelivered(pending)
    deliver, lost = chaos.schedule(rest)
    dropped.extend(lost)
    sent = publish_s3_events(events, deliver, senders)
    if withheld:
        enabled = events.describe_rule(Name=resources.rule).get("State") != "DISABLED"
        if enabled:
            events.disable_rule(Name=resources.rule)
        try:
            sent += publish_s3_events(events, withheld, senders)
        finally:
            if enabled:
                events.enable_rule(Name=resources.rule)
        undelivered.extend(withheld)
    return sent
