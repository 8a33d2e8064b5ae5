"""The SQS adapter: dead-lettering an invalid message with its reason (CONTRACT C9)."""

from __future__ import annotations

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
