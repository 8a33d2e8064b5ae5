"""The SQS adapter: dead-lettering an invalid message with its reason (CONTRACT C9), and
reconciliation's repair events to the ingest queue (CONTRACT C12)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from s3ingest_fn.core.model import TransientError

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient  # pragma: no cover
else:
    SQSClient = Any

#: Message attribute names put on a dead-lettered invalid message.
REASON_ATTRIBUTE = "s3ingest-reason"
DETAIL_ATTRIBUTE = "s3ingest-detail"
SOURCE_ID_ATTRIBUTE = "s3ingest-source-message-id"


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
        attrs: dict[str, Any] = {
            REASON_ATTRIBUTE: {"DataType": "String", "StringValue": reason},
            SOURCE_ID_ATTRIBUTE: {"DataType": "String", "StringValue": message_id or "unknown"},
        }
        if detail:
            attrs[DETAIL_ATTRIBUTE] = {"DataType": "String", "StringValue": detail[:1000]}
        try:
            self._sqs.send_message(
                QueueUrl=self._url, MessageBody=body or "<empty body>", MessageAttributes=attrs
            )
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
