"""One SQS message in, one outcome out: parsing, the decision, dead-lettering of invalid input.

This is the layer between the thin Lambda handler and the decision logic. It never raises for a
message: every message ends as exactly one :class:`~s3ingest_fn.core.model.Outcome` (CONTRACT C9).
``retried`` is the only outcome the handler reports as a batch item failure.

Owners, not names: an EventBridge event names the account of the bucket's owner (``account``,
https://docs.aws.amazon.com/AmazonS3/latest/userguide/ev-events.html; EventBridge sets it, a
sender cannot, and a rule forwarding to another account's bus keeps it). When ``owners``
(``BUCKET_OWNERS``) names the bucket's owner, an EventBridge event whose ``account`` is another
(or missing) is ``invalid`` with the reason ``wrong-account`` and dead-lettered, whatever it
wraps (an SNS envelope included). An S3 event notification record (direct to SQS, or in SNS)
carries no account of the bucket's owner (``ownerIdentity`` is a canonical user id, an SNS
``TopicArn`` the topic's account): it is not checked here; the ingest rule's pattern and the
reads' ``ExpectedBucketOwner`` keep another account's bucket out (``docs/payloads.md``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from s3ingest_fn.config import IngestConfig
from s3ingest_fn.core.decide import IngestService, result_of
from s3ingest_fn.core.events import parse_body
from s3ingest_fn.core.model import Change, InvalidMessageError, Outcome, Result, TransientError
from s3ingest_fn.core.ports import DeadLetters

#: The reason of an event whose ``account`` is not its bucket's owner (CONTRACT C9).
WRONG_ACCOUNT = "wrong-account"


@dataclass
class MessageProcessor:
    """Processes one SQS message body end to end.

    Parameters
    ----------
    service : IngestService
    dead_letter : DeadLetters
        Where invalid messages go (:class:`s3ingest_fn.adapters.sqs.DeadLetter`).
    on_result : callable, optional
        Called with every :class:`Result` (the local runtime counts outcomes with it).
    clock : callable
        Unix seconds, for the sequencer's skew check (:func:`~s3ingest_fn.core.events.parse_body`).
    """

    service: IngestService
    dead_letter: DeadLetters
    on_result: Callable[[Result], None] | None = None
    clock: Callable[[], float] = time.time
    #: Bucket name -> the account that owns it (``BUCKET_OWNERS``); empty: nothing checked.
    owners: Mapping[str, str] = field(default_factory=dict)

    def bind_context(self, context: Any) -> None:
        """Pass the Lambda context on (effect leases last as long as the invocation)."""
        self.service.bind_context(context)

    def process(self, body: Any, message_id: str = "") -> list[Result]:
        """Process one message; return one Result per S3 record it held (at least one).

        A message holding several records is retried whole if any record needs a retry.
        """
        results = self._process(body, message_id)
        if self.on_result is not None:
            for r in results:
                self.on_result(r)
        return results

    def _process(self, body: Any, message_id: str) -> list[Result]:
        try:
            parsed = parse_body(body, now_s=self.clock())
        except InvalidMessageError as exc:
            return [self._invalid(body, message_id, exc)]
        if parsed.ignored_reason is not None:
            return [Result(outcome=Outcome.IGNORED, reason=parsed.ignored_reason)]
        wrong = self._wrong_account(parsed.changes)
        if wrong is not None:
            return [self._invalid(body, message_id, wrong)]
        results = []
        for change in parsed.changes:
            try:
                results.append(self.service.handle(change))
            except TransientError as exc:
                retried = result_of(change, Outcome.RETRIED, str(exc))
                retried.extra.update(exc.extra)
                results.append(retried)
        return results

    def _wrong_account(self, changes: list[Change]) -> InvalidMessageError | None:
        """``wrong-account`` for the first change whose ``account`` (EventBridge's) is not its
        bucket's owner; None when every owner matches or is not known."""
        for change in changes:
            owner = self.owners.get(change.bucket)
            if owner is not None and change.account is not None and change.account != owner:
                shown = change.account or "no account"
                return InvalidMessageError(
                    WRONG_ACCOUNT, f"{shown}: bucket {change.bucket} belongs to {owner}"
                )
        return None

    def _invalid(self, body: Any, message_id: str, exc: InvalidMessageError) -> Result:
        text = body if isinstance(body, str) else json.dumps(body, default=str)
        try:
            self.dead_letter.send(text, exc.reason, exc.detail, message_id)
        except TransientError as send_error:
            return Result(outcome=Outcome.RETRIED, reason=f"dead-letter failed: {send_error}")
        return Result(outcome=Outcome.INVALID, reason=exc.reason, extra={"detail": exc.detail})


#: The ingest function's environment, validated at cold start: its home is
#: :class:`s3ingest_fn.config.IngestConfig` (this name is kept for callers).
FunctionSettings = IngestConfig
