"""``s3ingest status``: one screen of a deployed stack's health."""

from __future__ import annotations

from typing import Any

from s3ingest import operations
from s3ingest.commands.context import Deployed


def stack_status(stack: Deployed, *, max_age_seconds: int) -> dict[str, Any]:
    """The stack's health, as :func:`s3ingest.operations.status` returns it (``healthy``,
    ``problems``, queue and dead-letter depths, delivery, drift, backfills, replays).

    Reads the outputs ``QueueUrl`` and ``DeadLetterQueueUrl`` (and the optional ones status
    knows); calls SQS, CloudWatch, Step Functions, EventBridge and S3 with the stack's clients.

    Raises
    ------
    s3ingest.deployed.StackNotFoundError
        The stack lacks a required output.
    """
    stack.require("QueueUrl", "DeadLetterQueueUrl")
    return operations.status(
        sqs=stack.client("sqs"),
        cloudwatch=stack.client("cloudwatch"),
        sfn=stack.client("stepfunctions"),
        events=stack.client("events"),
        s3=stack.client("s3"),
        outputs=stack.outputs,
        stack=stack.name,
        max_age_seconds=max_age_seconds,
    )
