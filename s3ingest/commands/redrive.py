"""``s3ingest redrive``: inspect the ingest dead-letter queue and move its messages back."""

from __future__ import annotations

from collections import Counter
from typing import Any

from s3ingest_fn.adapters.sqs import REASON_ATTRIBUTE
from s3ingest_fn.core.events import parse_body
from s3ingest_fn.core.model import InvalidMessageError

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
    Nothing moves with ``dry_run`` or an empty queue. The classification peeks at the messages
    and makes them visible again at once (:func:`inspect_dlq`), so a redrive right after a
    dry run finds them.

    Returns
    -------
    dict
        ``{"dlq": <inspect_dlq>}``, plus ``"task"`` (the move task's handle) and
        ``"progress"`` (:func:`s3ingest.move_task_status`) after a message-move task,
        or ``"moved": {"moved": n, "kept_invalid": n}`` after a one-by-one move.
    """
    summary = inspect_dlq(
        sqs,
        dlq_url,
        max_messages=min(max_messages, INSPECT_LIMIT),
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
        result["task"] = redrive_all(sqs, dlq_arn, queue_arn)
        result["progress"] = move_task_status(sqs, dlq_arn)
    else:
        result["moved"] = redrive_valid(sqs, dlq_url, queue_url, max_messages=max_messages)
    return result


def inspect_dlq(
    sqs: Any, dlq_url: str, *, max_messages: int = 100, peek_visibility: int = 30
) -> dict[str, Any]:
    """Count and classify what is in the dead-letter queue.

    Messages are received (not deleted) with a short visibility timeout, so one peek sees each
    message once, then made visible again at once (``ChangeMessageVisibilityBatch`` to 0,
    https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_ChangeMessageVisibilityBatch.html),
    so a move or another peek right after finds them. Receiving adds one to their receive count,
    as any peek at SQS does.

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
        _show_again(sqs, dlq_url, [m for m in fresh if m["MessageId"] not in seen])
    _show_again(sqs, dlq_url, list(seen.values()))
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


def _show_again(sqs: Any, queue_url: str, messages: list[dict[str, Any]]) -> None:
    """Make received ``messages`` visible again at once (visibility timeout 0), 10 a call."""
    for start in range(0, len(messages), 10):
        sqs.change_message_visibility_batch(
            QueueUrl=queue_url,
            Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
                for i, m in enumerate(messages[start : start + 10])
            ],
        )


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
