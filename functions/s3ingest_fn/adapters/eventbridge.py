"""The EventBridge adapter: the change stream's events onto the change bus (CONTRACT C11)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from s3ingest_fn.core.ports import ChangeEntry

if TYPE_CHECKING:
    from mypy_boto3_events.client import EventBridgeClient  # pragma: no cover
else:
    EventBridgeClient = Any

#: PutEvents takes at most 10 entries per request
#: (https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutEvents.html).
PUT_EVENTS_MAX = 10


class EventBridgePublisher:
    """The :class:`~s3ingest_fn.core.ports.ChangePublisher` port over PutEvents.

    PutEvents can accept some entries of a request and refuse others: a refused entry has an
    ``ErrorCode`` and no ``EventId`` in the answer, at its own index. Entries go out ten per
    request, in order, and publishing stops at the first entry not accepted (the entries of a
    request after it may have been published too: the relay's retry re-publishes them, with the
    same ids).

    Parameters
    ----------
    client : EventBridgeClient
        Needs ``events:PutEvents`` on the change bus.
    """

    def __init__(self, client: EventBridgeClient) -> None:
        self._events = client

    def publish(self, entries: Sequence[ChangeEntry]) -> int:
        """Publish in order; return how many, from the first, EventBridge accepted.

        A request that fails as a whole (``ClientError``, ``BotoCoreError``: throttling, a
        broken connection) accepts none of its entries; an answer without an entry's result
        does not accept it either.
        """
        published = 0
        for i in range(0, len(entries), PUT_EVENTS_MAX):
            chunk = entries[i : i + PUT_EVENTS_MAX]
            request: list[Any] = [dict(entry) for entry in chunk]
            try:
                resp = self._events.put_events(Entries=request)
            except (ClientError, BotoCoreError):
                return published
            results = resp.get("Entries", [])
            for j in range(len(chunk)):
                result: Any = results[j] if j < len(results) else {}  # unanswered: not published
                if result.get("ErrorCode") or not result.get("EventId"):
                    return published
                published += 1
        return published
