"""The ports: what the core needs from the outside world, as Protocols.

The adapters (:mod:`s3ingest_fn.adapters`) implement them over AWS; ``tests/fakes`` implement
them in memory. Nothing here imports boto3 or botocore.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from s3ingest_fn.core.model import ObjectState
from s3ingest_fn.core.row import Claim, LedgerRow, RowState, WriteMeta, WriteResult


@dataclass(frozen=True)
class Pin:
    """One object's bytes pinned to a change: by ``version_id`` (versioned bucket) or by
    ``etag`` (``If-Match``; unversioned bucket). Exactly one is set."""

    bucket: str
    key: str
    version_id: str | None = None
    etag: str | None = None


class Ledger(Protocol):
    """The per-key ledger, as the decision's named operations (CONTRACT C2-C7, C11).

    Every write is one conditional write. A write that is refused returns
    ``WriteResult(applied=False, old=<the row that refused it>)`` (no second read); an applied
    write returns the change id it created and, when it claimed an effect, the claim's fencing
    token. Every method raises :class:`~s3ingest_fn.core.model.TransientError` on a failure
    worth retrying (throttling, a service error).
    """

    def get(self, bucket: str, key: str) -> LedgerRow | None:
        """The row, read strongly consistent, or None."""
        ...

    def apply_if_newer(
        self, state: RowState, meta: WriteMeta, claim: Claim | None = None
    ) -> WriteResult:
        """Apply an event's own state: when the row is absent, or its sequencer is absent or
        older than ``meta.sequencer``, and the row holds no observed state (C7)."""
        ...

    def apply_verified(
        self,
        state: RowState,
        meta: WriteMeta,
        *,
        observed: bool,
        expected_rev: int,
        claim: Claim | None = None,
    ) -> WriteResult:
        """Apply a state verified against the bucket over an observed row: when the row's
        sequencer is absent or older and its revision is still ``expected_rev``."""
        ...

    def apply_observed_at(
        self, state: RowState, meta: WriteMeta, claim: Claim | None = None
    ) -> WriteResult:
        """Record a state read from the bucket at an event's sequencer (a version removal,
        C4), as a new change: when the sequencer is newer and the row does not hold
        ``state`` already."""
        ...

    def advance_sequencer(
        self,
        state: RowState,
        meta: WriteMeta,
        *,
        observed: bool,
        expected_rev: int | None = None,
    ) -> WriteResult:
        """Move only the sequencer and the bookkeeping of a row that already holds ``state``
        (no new change, no effect: ``op`` is not ``apply``): when the sequencer is newer and
        either the revision is still ``expected_rev`` or (None) the row holds ``state``."""
        ...

    def record_observation(
        self,
        state: RowState,
        meta: WriteMeta,
        expected_rev: int | None,
        claim: Claim | None = None,
    ) -> WriteResult:
        """Record an observed state (C7) when the row's revision is still ``expected_rev``
        (None: the row did not exist). The row's sequencer is kept."""
        ...

    def reclaim(self, bucket: str, key: str, old_token: int, claim: Claim) -> WriteResult:
        """Take over the row's effect (a pending one whose lease expired, or a superseded one)
        while ``old_token`` still holds it; the new token is the row's new revision."""
        ...

    def finish(self, bucket: str, key: str, token: int, status: str) -> bool:
        """Commit an effect (``done`` or ``superseded``) if ``token`` still holds the claim."""
        ...

    def release(self, bucket: str, key: str, token: int) -> bool:
        """End a pending claim's lease now (the processor failed)."""
        ...


class Bucket(Protocol):
    """What the bucket holds for a key now (HeadObject)."""

    def current(self, bucket: str, key: str) -> ObjectState: ...


class ContentReader(Protocol):
    """The bytes of a pinned object. Both raise
    :class:`~s3ingest_fn.core.effects.SupersededError` when the pin no longer holds (412, 404)
    and :class:`~s3ingest_fn.core.model.TransientError` on any other failure."""

    def read(self, pin: Pin) -> bytes: ...

    def stream(self, pin: Pin, chunk_size: int) -> Iterator[bytes]: ...


class DeadLetters(Protocol):
    """Where a message that can never be ingested goes, with its reason."""

    def send(self, body: str, reason: str, detail: str, message_id: str) -> None: ...


class LedgerScanner(Protocol):
    """Every row of one bucket's ledger, in pages (one request each)."""

    def pages(self, bucket: str, segment: int, total: int) -> Iterator[list[LedgerRow]]: ...
