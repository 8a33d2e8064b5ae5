"""One SQS message in, one outcome out: parsing, the decision, dead-lettering of invalid input.

This is the layer between the thin Lambda handler and the decision logic. It never raises for a
message: every message ends as exactly one :class:`~s3ingest_fn.core.model.Outcome` (CONTRACT C9).
``retried`` is the only outcome the handler reports as a batch item failure.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from s3ingest_fn.core.decide import IngestService, result_of
from s3ingest_fn.core.events import parse_body
from s3ingest_fn.core.model import InvalidMessageError, Outcome, Result, TransientError
from s3ingest_fn.core.ports import DeadLetters
from s3ingest_fn.core.scope import Scope


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
    """

    service: IngestService
    dead_letter: DeadLetters
    on_result: Callable[[Result], None] | None = None

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
            parsed = parse_body(body)
        except InvalidMessageError as exc:
            return [self._invalid(body, message_id, exc)]
        if parsed.ignored_reason is not None:
            return [Result(outcome=Outcome.IGNORED, reason=parsed.ignored_reason)]
        results = []
        for change in parsed.changes:
            try:
                results.append(self.service.handle(change))
            except TransientError as exc:
                retried = result_of(change, Outcome.RETRIED, str(exc))
                retried.extra.update(exc.extra)
                results.append(retried)
        return results

    def _invalid(self, body: Any, message_id: str, exc: InvalidMessageError) -> Result:
        text = body if isinstance(body, str) else json.dumps(body, default=str)
        try:
            self.dead_letter.send(text, exc.reason, exc.detail, message_id)
        except TransientError as send_error:
            return Result(outcome=Outcome.RETRIED, reason=f"dead-letter failed: {send_error}")
        return Result(outcome=Outcome.INVALID, reason=exc.reason, extra={"detail": exc.detail})


@dataclass(frozen=True)
class FunctionSettings:
    """The ingest function's environment, validated at cold start.

    Attributes
    ----------
    ledger_table_name : str
        ``LEDGER_TABLE_NAME``
    dead_letter_queue_url : str
        ``DEAD_LETTER_QUEUE_URL``
    tombstone_ttl_seconds : int
        ``TOMBSTONE_TTL_SECONDS`` (0: tombstones never expire)
    record_concurrency : int
        ``RECORD_CONCURRENCY``: records of one batch processed at once (1-64)
    bucket_name : str or None
        ``BUCKET_NAME``: the first (default) bucket; alone, without ``SCOPE``, the only one
        ingested
    scope_json : str or None
        ``SCOPE``: the buckets and key filters ingested (:meth:`Scope.to_json`)
    """

    ledger_table_name: str
    dead_letter_queue_url: str
    tombstone_ttl_seconds: int
    record_concurrency: int
    bucket_name: str | None
    scope_json: str | None = None

    @property
    def scope(self) -> Scope:
        """What the functions track: ``SCOPE``, else ``BUCKET_NAME`` alone, else everything."""
        env = {"SCOPE": self.scope_json or "", "BUCKET_NAME": self.bucket_name or ""}
        return Scope.from_env(env)

    @classmethod
    def from_env(cls, env: Any = None) -> FunctionSettings:
        """Read and validate the environment.

        Raises
        ------
        ValueError
            Naming every missing or malformed variable.
        """
        env = os.environ if env is None else env
        problems = [
            f"{name} is not set"
            for name in ("LEDGER_TABLE_NAME", "DEAD_LETTER_QUEUE_URL")
            if not env.get(name)
        ]
        ints = {}
        for name, default, lo, hi in (
            ("TOMBSTONE_TTL_SECONDS", "0", 0, 10 * 365 * 86400),
            ("RECORD_CONCURRENCY", "8", 1, 64),
        ):
            raw = env.get(name, default)
            text = str(raw)
            if not (text.isascii() and text.isdigit()) or not lo <= int(text) <= hi:
                problems.append(f"{name}={raw!r} is not a whole number in {lo}..{hi}")
            else:
                ints[name] = int(raw)
        scope_json = env.get("SCOPE") or None
        try:
            Scope.from_env({"SCOPE": scope_json or ""})
        except ValueError as exc:
            problems.append(str(exc))
        if problems:
            raise ValueError("ingest function misconfigured: " + "; ".join(problems))
        return cls(
            ledger_table_name=env["LEDGER_TABLE_NAME"],
            dead_letter_queue_url=env["DEAD_LETTER_QUEUE_URL"],
            tombstone_ttl_seconds=ints["TOMBSTONE_TTL_SECONDS"],
            record_concurrency=ints["RECORD_CONCURRENCY"],
            bucket_name=env.get("BUCKET_NAME") or None,
            scope_json=scope_json,
        )
