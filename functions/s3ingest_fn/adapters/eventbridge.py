"""The EventBridge adapter: the change stream's events onto the change bus (CONTRACT C11).

Requests are grouped by count and by size (:func:`requests`); what PutEvents refuses is sorted
into refusals of the entry (it can never be published: the relay dead-letters it) and refusals
of the moment or of the relay (retried here, then left for the stream to retry).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from s3ingest_fn.core.ports import ChangeEntry, PublishOutcome

if TYPE_CHECKING:
    from mypy_boto3_events.client import EventBridgeClient  # pragma: no cover
else:
    EventBridgeClient = Any

#: PutEvents takes at most 10 entries per request
#: (https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutEvents.html).
PUT_EVENTS_MAX = 10
#: ... and at most 256 KB of entries per request, sized as :func:`entry_size` does
#: (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-putevent-size.html).
MAX_REQUEST_BYTES = 256 * 1024
#: Bytes a ``Time`` parameter counts for, when an entry has one (the page above).
TIME_BYTES = 14

#: ``ErrorCode`` s of a result entry that are about the entry itself: sending it again cannot
#: succeed, so the relay dead-letters it. PutEvents calls these, and the authorization codes,
#: non-retryable
#: (https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutEventsResultEntry.html);
#: an authorization refusal (``AccessDeniedException``, ``NotAuthorizedFor...``) is the relay's
#: or the bus policy's, would refuse every change alike, and so fails the batch instead.
ENTRY_ERRORS = frozenset({"InvalidArgument", "MalformedDetail", "RedactionFailure"})
#: The retryable ``ErrorCode`` s (the same page), and the error codes of a whole request worth
#: trying again (throttling, a fault on AWS's side).
TRANSIENT_ERRORS = frozenset(
    {
        "InternalFailure",
        "ThrottlingException",
        "InternalException",
        "ServiceUnavailable",
        "RequestLimitExceeded",
    }
)
#: Error codes of a whole request that, for a request of one entry, are that entry's fault.
REQUEST_ENTRY_ERRORS = frozenset({"ValidationException", *ENTRY_ERRORS})

#: Attempts per request before a transient refusal fails the batch, and the first pause between
#: attempts, seconds (doubled each time).
ATTEMPTS = 3
BACKOFF_SECONDS = 0.2


def entry_size(entry: ChangeEntry | dict[str, Any]) -> int:
    """The size PutEvents counts for ``entry``, bytes: ``Time`` (if any) 14; ``Source``,
    ``DetailType``, ``Detail`` and each of ``Resources`` their UTF-8 length
    (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-putevent-size.html;
    ``EventBusName`` does not count)."""
    data: dict[str, Any] = dict(entry)
    size = TIME_BYTES if data.get("Time") is not None else 0
    for name in ("Source", "DetailType", "Detail"):
        size += len(str(data.get(name) or "").encode("utf-8"))
    for resource in data.get("Resources") or ():
        size += len(str(resource).encode("utf-8"))
    return size


def requests(
    entries: Sequence[ChangeEntry], max_bytes: int = MAX_REQUEST_BYTES
) -> tuple[list[list[int]], dict[int, str]]:
    """Group ``entries`` into PutEvents requests, in order.

    Returns
    -------
    (groups, too_large)
        ``groups``: lists of entry indices, ascending, each at most :data:`PUT_EVENTS_MAX`
        entries of at most ``max_bytes`` together; ``too_large``: index -> reason of each entry
        over ``max_bytes`` alone (in no group: it can never be published).
    """
    groups: list[list[int]] = []
    too_large: dict[int, str] = {}
    group: list[int] = []
    used = 0
    for i, entry in enumerate(entries):
        size = entry_size(entry)
        if size > max_bytes:
            too_large[i] = (
                f"entry-too-large: {size} bytes, over PutEvents' {max_bytes}-byte request limit"
            )
            continue
        if group and (len(group) == PUT_EVENTS_MAX or used + size > max_bytes):
            groups.append(group)
            group, used = [], 0
        group.append(i)
        used += size
    if group:
        groups.append(group)
    return groups, too_large


def _error(exc: ClientError) -> tuple[str, str]:
    error: Any = exc.response.get("Error", {})
    return str(error.get("Code", "")), str(error.get("Message", ""))


class EventBridgePublisher:
    """The :class:`~s3ingest_fn.core.ports.ChangePublisher` port over PutEvents.

    Entries go out in order, in requests of at most 10 entries and 256 KB (:func:`requests`).
    PutEvents can accept some entries of a request and refuse others: a refused entry has an
    ``ErrorCode`` and no ``EventId`` in the answer, at its own index. Per entry:

    * over 256 KB alone, or refused with an :data:`ENTRY_ERRORS` code (or, alone in its request,
      with a ``ValidationException`` of the request): refused for good, with the reason;
    * refused with a :data:`TRANSIENT_ERRORS` code, unanswered, or in a request that failed as a
      whole with one (or with ``BotoCoreError``: a broken connection): sent again, up to
      :data:`ATTEMPTS` times with a doubling pause; still refused, publishing stops there;
    * refused otherwise (authorization, an unknown code): publishing stops there.

    A request of several entries refused as a whole for its content is sent again entry by
    entry. When publishing stops at an entry, entries of its request after it may have been
    published: the stream's retry re-publishes them, with the same ids.

    Parameters
    ----------
    client : EventBridgeClient
        Needs ``events:PutEvents`` on the change bus.
    attempts : int
        Attempts per request (:data:`ATTEMPTS`).
    backoff_seconds : float
        First pause between attempts, seconds (:data:`BACKOFF_SECONDS`).
    sleep : callable
        Pauses (``time.sleep``; tests pass one that does not).
    """

    def __init__(
        self,
        client: EventBridgeClient,
        *,
        attempts: int = ATTEMPTS,
        backoff_seconds: float = BACKOFF_SECONDS,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._events = client
        self._attempts = max(1, attempts)
        self._backoff = backoff_seconds
        self._sleep = sleep

    def publish(self, entries: Sequence[ChangeEntry]) -> PublishOutcome:
        """Publish in order; see the class for what is refused and where publishing stops.

        Returns
        -------
        PublishOutcome
            ``refused`` (index -> reason, for entries before ``stopped`` only) and ``stopped``
            (the first entry neither published nor refused, or None).
        """
        groups, refused = requests(entries)
        stopped: int | None = None
        for group in groups:
            stopped = self._send(entries, group, refused)
            if stopped is not None:
                break
        kept = {i: why for i, why in refused.items() if stopped is None or i < stopped}
        return PublishOutcome(refused=dict(sorted(kept.items())), stopped=stopped)

    def _send(
        self, entries: Sequence[ChangeEntry], group: list[int], refused: dict[int, str]
    ) -> int | None:
        """Send one request's entries until each is published or refused (adding to
        ``refused``); return the first index left neither, or None."""
        pending = list(group)
        for attempt in range(self._attempts):
            if attempt:
                self._sleep(self._backoff * 2 ** (attempt - 1))
            request: list[Any] = [dict(entries[i]) for i in pending]
            try:
                resp = self._events.put_events(Entries=request)
            except BotoCoreError:
                continue
            except ClientError as exc:
                code, message = _error(exc)
                if code in TRANSIENT_ERRORS:
                    continue
                if code not in REQUEST_ENTRY_ERRORS:
                    return pending[0]
                if len(pending) > 1:  # which entry is at fault: each alone
                    for i in pending:
                        stopped = self._send(entries, [i], refused)
                        if stopped is not None:
                            return stopped
                    return None
                refused[pending[0]] = f"put-events-refused: {code}: {message}"[:500]
                return None
            results = resp.get("Entries", [])
            retry: list[int] = []
            for j, i in enumerate(pending):
                result: Any = results[j] if j < len(results) else {}  # unanswered: again
                code = str(result.get("ErrorCode") or "")
                if result.get("EventId") and not code:
                    continue
                if code in ENTRY_ERRORS:
                    message = str(result.get("ErrorMessage") or "")
                    refused[i] = f"put-events-refused: {code}: {message}"[:500]
                elif code and code not in TRANSIENT_ERRORS:
                    return min([i, *retry])  # not the entry's fault, nor passing
                else:
                    retry.append(i)
            if not retry:
                return None
            pending = retry
        return pending[0]
