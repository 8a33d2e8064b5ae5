"""The SQS adapter: dead-lettering an invalid message with its reason (CONTRACT C9), and
reconciliation's repair events to the ingest queue (CONTRACT C12)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from s3ingest_fn.core.events import MAX_BODY_BYTES
from s3ingest_fn.core.model import TransientError

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient  # pragma: no cover
else:
    SQSClient = Any

#: Message attribute names put on a dead-lettered invalid message.
REASON_ATTRIBUTE = "s3ingest-reason"
DETAIL_ATTRIBUTE = "s3ingest-detail"
SOURCE_ID_ATTRIBUTE = "s3ingest-source-message-id"
#: Bounds of the attribute values, UTF-8 bytes (values are cut at a character boundary).
MAX_REASON_BYTES = 256
MAX_DETAIL_BYTES = 1000
MAX_SOURCE_ID_BYTES = 128
#: The value sent for an empty body (SQS refuses an empty one).
EMPTY_BODY = "<empty body>"

#: The dead-letter queue's ``MaximumMessageSize``, bytes: SQS's largest (1 MiB,
#: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SetQueueAttributes.html).
DEAD_LETTER_MAX_MESSAGE_BYTES = 1_048_576
#: The most the attributes of a forward add, bytes: SQS counts each attribute's name, data type
#: and value toward the message size
#: (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-message-metadata.html).
FORWARD_ATTRIBUTES_MAX_BYTES = (
    len(REASON_ATTRIBUTE) + len("String") + MAX_REASON_BYTES
    + len(SOURCE_ID_ATTRIBUTE) + len("String") + MAX_SOURCE_ID_BYTES
    + len(DETAIL_ATTRIBUTE) + len("String") + MAX_DETAIL_BYTES
)  # fmt: skip
#: The ingest queue's ``MaximumMessageSize``, bytes: the parser's
#: :data:`~s3ingest_fn.core.events.MAX_BODY_BYTES` (256 KiB: the largest EventBridge event,
#: https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-putevent-size.html; S3
#: notifications are at most 64 KB). Any body the queue accepts plus
#: :data:`FORWARD_ATTRIBUTES_MAX_BYTES` fits :data:`DEAD_LETTER_MAX_MESSAGE_BYTES`, so every
#: invalid message reaches the DLQ with its reason (CONTRACT C9).
INGEST_QUEUE_MAX_MESSAGE_BYTES = MAX_BODY_BYTES


def _cut(text: str, max_bytes: int) -> str:
    """``text`` cut to at most ``max_bytes`` UTF-8 bytes, at a character boundary (a lone
    surrogate counts as a replacement character)."""
    data = text.encode("utf-8", "replace")
    return text if len(data) <= max_bytes else data[:max_bytes].decode("utf-8", "ignore")


def forward(body: str, reason: str, detail: str, message_id: str) -> dict[str, Any]:
    """The ``MessageBody`` and ``MessageAttributes`` that forward ``body`` to the DLQ, each
    attribute value within its bound."""
    attrs: dict[str, Any] = {
        REASON_ATTRIBUTE: {"DataType": "String", "StringValue": _cut(reason, MAX_REASON_BYTES)},
        SOURCE_ID_ATTRIBUTE: {
            "DataType": "String",
            "StringValue": _cut(message_id or "unknown", MAX_SOURCE_ID_BYTES),
        },
    }
    if detail:
        attrs[DETAIL_ATTRIBUTE] = {
            "DataType": "String",
            "StringValue": _cut(detail, MAX_DETAIL_BYTES),
        }
    return {"MessageBody": body or EMPTY_BODY, "MessageAttributes": attrs}


def message_size(body: str, attributes: dict[str, Any]) -> int:
    """A message's size as SQS counts it toward ``MaximumMessageSize``: the body's UTF-8 bytes
    and, per attribute, its name, data type and value."""
    size = len(body.encode("utf-8", "replace"))
    for name, value in attributes.items():
        size += len(name.encode()) + len(value["DataType"].encode())
        size += len(value.get("StringValue", "").encode("utf-8", "replace"))
        size += len(value.get("BinaryValue", b""))
    return size


class DeadLetter:
    """Sends invalid messages to the ingest queue's dead-letter queue, with their reason.

    Invalid messages are not left to fail ``maxReceiveCount`` times: they go to the DLQ at once
    with a ``s3ingest-reason`` message attribute and are acknowledged (CONTRACT C9).

    Parameters
    ----------
    client : SQSClient
    queue_url : str
        The dead-letter queue's URL.
    """

    def __init__(self, client: SQSClient, queue_url: str) -> None:
        self._sqs = client
        self._url = queue_url

    def send(self, body: str, reason: str, detail: str, message_id: str) -> None:
        """Send ``body`` unchanged to the DLQ.

        Raises
        ------
        TransientError
            When SQS refused: the message is retried instead, so nothing is lost.
        """
        try:
            self._sqs.send_message(QueueUrl=self._url, **forward(body, reason, detail, message_id))
        except (ClientError, BotoCoreError) as exc:
            raise TransientError(f"sqs send_message to DLQ: {exc}") from exc


#: SendMessageBatch takes at most 10 entries per request
#: (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessageBatch.html).
SEND_BATCH_MAX = 10


class SqsRepairQueue:
    """The :class:`~s3ingest_fn.core.ports.RepairQueue` port over SendMessageBatch.

    Parameters
    ----------
    client : SQSClient
        Needs ``sqs:SendMessage`` on the queue.
    queue_url : str
        The ingest queue: repairs are ingested like any event.
    """

    def __init__(self, client: SQSClient, queue_url: str) -> None:
        self._sqs = client
        self.queue_url = queue_url

    def send(self, bodies: Sequence[str]) -> int:
        """Send the bodies in order, ten per request (entry ids ``"0"`` to ``"9"``); return
        the count.

        Raises
        ------
        TransientError
            ``queueing repairs failed after <n>: ...`` when a request fails, ``SQS refused
            repairs: [...]`` (the ``Failed`` entries) when SQS did not accept every entry of a
            request. Entries accepted before stay sent.
        """
        sent = 0
        for i in range(0, len(bodies), SEND_BATCH_MAX):
            chunk = bodies[i : i + SEND_BATCH_MAX]
            entries: list[Any] = [
                {"Id": str(j), "MessageBody": body} for j, body in enumerate(chunk)
            ]
            try:
                resp = self._sqs.send_message_batch(QueueUrl=self.queue_url, Entries=entries)
            except (ClientError, BotoCoreError) as exc:
                raise TransientError(f"queueing repairs failed after {sent}: {exc}") from exc
            if resp.get("Failed"):
                raise TransientError(f"SQS refused repairs: {resp['Failed']}")
            sent += len(chunk)
        return sent
