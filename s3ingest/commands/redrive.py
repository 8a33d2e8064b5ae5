"""``s3ingest redrive``: inspect the ingest dead-letter queue and move its messages back."""

from __future__ import annotations

from typing import Any

from s3ingest import operations

#: At most this many DLQ messages are sampled to classify them (the move is bounded by ``--max``).
INSPECT_LIMIT = 100


def redrive(
    sqs: Any,
    dlq_url: str,
    queue_url: str,
    *,
    dry_run: bool,
    max_messages: int,
    include_invalid: bool,
) -> dict[str, Any]:
    """Classify the dead-letter queue, then move its messages back to the ingest queue.

    With no invalid message sampled (or ``include_invalid``), every message moves with an SQS
    message-move task; otherwise the valid ones move one by one and the invalid ones stay.
    Nothing moves with ``dry_run`` or an empty queue. The classification peeks at the messages:
    with ``dry_run`` they stay hidden for the peek's visibility timeout (30 s), before a move
    they are visible again at once.

    Returns
    -------
    dict
        ``{"dlq": <operations.inspect_dlq>}``, plus ``"task"`` (the move task's handle) and
        ``"progress"`` (:func:`s3ingest.operations.move_task_status`) after a message-move task,
        or ``"moved": {"moved": n, "kept_invalid": n}`` after a one-by-one move.
    """
    summary = operations.inspect_dlq(
        sqs,
        dlq_url,
        max_messages=min(max_messages, INSPECT_LIMIT),
        # a peek hides what it received for its visibility timeout: before a move it must not,
        # or the move that follows finds nothing to receive
        **({} if dry_run else {"peek_visibility": 0}),
    )
    result: dict[str, Any] = {"dlq": summary}
    if dry_run or not summary["approximate"]:
        return result
    if include_invalid or not summary["invalid_ids"]:
        dlq_arn, queue_arn = (
            sqs.get_queue_attributes(QueueUrl=u, AttributeNames=["QueueArn"])["Attributes"][
                "QueueArn"
            ]
            for u in (dlq_url, queue_url)
        )
        result["task"] = operations.redrive_all(sqs, dlq_arn, queue_arn)
        result["progress"] = operations.move_task_status(sqs, dlq_arn)
    else:
        result["moved"] = operations.redrive_valid(
            sqs, dlq_url, queue_url, max_messages=max_messages
        )
    return result
