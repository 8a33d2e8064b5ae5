"""The ports: what the core needs from the outside world, as Protocols.

The adapters (:mod:`s3ingest_fn.adapters`) implement them over AWS; ``tests/fakes`` implement
them in memory. Nothing here imports boto3 or botocore.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, TypedDict

from s3ingest_fn.core.model import InventoryRow, ObjectState
from s3ingest_fn.core.row import Claim, Hold, LedgerRow, Review, RowState, WriteMeta, WriteResult


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

    def reset_sequencer(
        self,
        state: RowState,
        meta: WriteMeta,
        expected_rev: int,
        claim: Claim | None = None,
        *,
        same_change: bool = False,
    ) -> WriteResult:
        """Record the bucket's ``state`` with the row's sequencer removed (one S3 cannot have
        sent, :func:`~s3ingest_fn.core.sequencer.contradicted`) when the revision is still
        ``expected_rev``: a new change, or (``same_change``) only the bookkeeping of a row
        holding ``state``. The row becomes an observed row (C7)."""
        ...

    def reclaim(
        self, bucket: str, key: str, old_token: int, claim: Claim, processor: str = ...
    ) -> WriteResult:
        """Take over ``processor``'s effect (a pending one whose lease expired, or a superseded
        one) while ``old_token`` still holds it; the new token is
        :func:`~s3ingest_fn.core.row.fencing_token` of the row's new revision and the claim's
        time."""
        ...

    def finish(
        self,
        bucket: str,
        key: str,
        token: int,
        status: str = ...,
        *,
        processor: str = ...,
        change_id: str | None = None,
        more: bool = False,
        version: int = 1,
        at: int | None = None,
    ) -> bool:
        """Commit ``processor``'s effect (``done`` or ``superseded``) for ``change_id`` if
        ``token`` still holds the claim (``done`` records the processor's ``version``, and
        ``at``, epoch ms, for the change stream's ``Effect Done``);
        ``more``: an every-change queue goes on after it."""
        ...

    def claim_behind(
        self,
        bucket: str,
        key: str,
        processor: str,
        change_id: str | None,
        old_token: int | None,
        claim: Claim,
        version: int = 1,
    ) -> WriteResult:
        """Claim ``processor``'s effect of the row's change ``change_id`` (a reprocess run) while
        the row is present, still holds that change, and the effect is as read: absent
        (``old_token`` None), or held by ``old_token`` and done under a version below
        ``version``, superseded or pending with an expired lease."""
        ...

    def forget(self, bucket: str, key: str, processor: str) -> bool:
        """Remove ``processor``'s effect state from the row; False when it has none."""
        ...

    def close(self, bucket: str, key: str, token: int, processor: str) -> bool:
        """Remove ``processor``'s effect state (but its last done change) if ``token`` holds
        it: nothing is due for the row's change."""
        ...

    def release(self, bucket: str, key: str, token: int, processor: str = ...) -> bool:
        """End ``processor``'s pending claim's lease now (the processor failed)."""
        ...

    def hold(
        self, bucket: str, key: str, token: int, processor: str, hold: Hold, review: Review | None
    ) -> bool:
        """Record ``processor``'s claimed effect as held (``hold``), instead of its commit, if
        ``token`` still holds the claim; push ``review`` onto the trail
        (:mod:`s3ingest_fn.core.hold`)."""
        ...

    def review(self, bucket: str, key: str, review: Review, *, queued: int = 0) -> WriteResult:
        """Approve or reject ``review.processor``'s held change ``review.change_id``, if the
        effect still holds it and its queue still holds ``queued`` changes (as read)."""
        ...

    def rank(self, name: str, window: int, member: str, above: int, ttl_seconds: int) -> int:
        """The mass-delete breaker's counter: ``member``'s rank in the window (the same on
        every call), or ``above + 1`` once ``above`` members have one."""
        ...


class Bucket(Protocol):
    """What the bucket holds for a key now (HeadObject)."""

    def current(self, bucket: str, key: str) -> ObjectState: ...


@dataclass(frozen=True)
class PresignedGet:
    """A GET of one pinned object that needs no credentials of the reader's own: the URL and the
    headers the reader must send with it (``If-Match`` when the pin is an ETag; empty when the
    URL names the version), valid until ``expires_at_ms`` (epoch ms)."""

    url: str
    headers: dict[str, str]
    expires_at_ms: int


class ContentReader(Protocol):
    """The bytes of a pinned object. ``read`` and ``stream`` raise
    :class:`~s3ingest_fn.core.effects.SupersededError` when the pin no longer holds (412, 404)
    and :class:`~s3ingest_fn.core.model.TransientError` on any other failure."""

    def read(self, pin: Pin) -> bytes: ...

    def stream(self, pin: Pin, chunk_size: int) -> Iterator[bytes]: ...

    def presign(self, pin: Pin, seconds: int) -> PresignedGet:
        """A presigned GET of the pinned bytes, valid ``seconds`` from now: a read through it
        answers 412 (ETag pin) or 404 (version gone) when the pin no longer holds. Raises
        :class:`~s3ingest_fn.core.model.TransientError` when it cannot be signed."""
        ...


class DeadLetters(Protocol):
    """Where a message that can never be ingested goes, with its reason."""

    def send(self, body: str, reason: str, detail: str, message_id: str) -> None: ...


class LedgerScanner(Protocol):
    """Every row of one bucket's ledger, in pages (one request each). Raises
    :class:`~s3ingest_fn.core.model.TransientError` when a page cannot be read."""

    def pages(self, bucket: str, segment: int, total: int) -> Iterator[list[LedgerRow]]: ...


class SegmentPage(NamedTuple):
    """One Scan page of a ledger segment: full rows (every processor's effect, its version and
    fencing token), the cursor of the next page (None: the segment is done), ``after[i]`` the
    cursor that resumes the segment after ``rows[i]`` (a page cut short), and the items the
    request ``read`` (billed: those a filter left out included)."""

    rows: list[LedgerRow]
    cursor: str | None
    after: tuple[str, ...] = ()
    read: int = 0


class LedgerSegments(Protocol):
    """The ledger read by parallel Scan segments, page by page, resumable from a cursor (the
    reprocess run, :mod:`s3ingest_fn.services.reprocess`). Raises
    :class:`~s3ingest_fn.core.model.TransientError` when a page cannot be read."""

    def page(
        self, segment: int, total: int, cursor: str | None, *, prefix: str = "", limit: int = 500
    ) -> SegmentPage:
        """Rows of ``segment`` of ``total`` whose partition key (``<bucket>/<key>``) starts
        with ``prefix``, from ``cursor`` (None: the start)."""
        ...


class ListingPage(NamedTuple):
    """One listing request's rows and where the next one starts.

    ``marker`` is JSON-ready and opaque to the caller (the adapter's continuation: a key marker,
    a version-id marker); None when this page is the listing's last. Given back to
    :meth:`BucketListing.pages`, it resumes the listing after this page, also in another
    process.
    """

    rows: list[InventoryRow]
    marker: dict[str, Any] | None


class BucketListing(Protocol):
    """What a bucket holds now, listed (reconciliation's ``listing`` source, CONTRACT C12)."""

    def pages(
        self, bucket: str, prefix: str, marker: dict[str, Any] | None, page_size: int
    ) -> Iterator[ListingPage]:
        """The listing of :meth:`rows`, one request per page of at most ``page_size`` entries,
        from ``marker`` (a page's :attr:`ListingPage.marker`; None: from the start), in the
        bucket's key order (UTF-8 binary order; a key's versions newest first, so its latest
        entry is on the first page that shows the key). Raises
        :class:`~s3ingest_fn.core.model.TransientError` when the bucket cannot be listed."""
        ...

    def rows(self, bucket: str, prefix: str) -> Iterator[InventoryRow]:
        """Every key under ``prefix`` as inventory rows: every version and delete marker when
        the bucket's versioning is (or was) enabled, else the current objects (``version_id``
        None, ``is_latest`` True). Raises
        :class:`~s3ingest_fn.core.model.TransientError` when the bucket cannot be listed."""
        ...


@dataclass(frozen=True)
class VersionPage:
    """One ListObjectVersions page: its entries (versions and delete markers) as inventory rows
    in the listing's order (key, then newest version first), and where the next page starts
    (None when this was the last)."""

    rows: list[InventoryRow]
    next_key_marker: str | None
    next_version_marker: str | None


class ShardListing(Protocol):
    """A bucket listed by key range, one request per call (the listing backfill). Both raise
    :class:`~s3ingest_fn.core.model.TransientError` when S3 refuses or does not answer."""

    def versions(
        self,
        bucket: str,
        prefix: str,
        key_marker: str | None,
        version_marker: str | None,
        max_keys: int,
    ) -> VersionPage:
        """The page of ListObjectVersions after (``key_marker``, ``version_marker``): every
        version and delete marker, in versioned and unversioned buckets alike (an unversioned
        bucket's objects are the null version, ``is_latest`` True)."""
        ...

    def keys_after(
        self, bucket: str, prefix: str, start_after: str | None, max_keys: int
    ) -> tuple[list[str], bool]:
        """The current keys after ``start_after`` (ListObjectsV2, at most ``max_keys``) and
        whether more follow: the planner's probes."""
        ...


class EventDelivery(Protocol):
    """Whether a bucket still sends its events to EventBridge (the scheduled delivery check)."""

    def enabled(self, bucket: str) -> bool:
        """True when the bucket's notification configuration has EventBridge on. Raises
        :class:`~s3ingest_fn.core.model.TransientError` when it cannot be read."""
        ...


class InventoryStore(Protocol):
    """Objects that are not the landing bucket's data: S3 Inventory manifests and data files,
    Batch Operations completion reports, and the fan-out reconciliation's work shards.

    Every method raises :class:`~s3ingest_fn.core.model.TransientError` when the store fails
    in another way than the one the method answers for.
    """

    def read(self, bucket: str, key: str) -> bytes:
        """The whole object."""
        ...

    def read_if_exists(self, bucket: str, key: str) -> bytes | None:
        """The whole object, or None when the key does not exist."""
        ...

    def exists(self, bucket: str, key: str) -> bool:
        """Whether the object can be read now (False for any refusal: a report still being
        written, a missing key)."""
        ...

    def etag(self, bucket: str, key: str) -> str:
        """The object's ETag, without quotes."""
        ...

    def folders(self, bucket: str, prefix: str) -> list[str]:
        """The folders (``<prefix><name>/``) directly under ``prefix``, in the store's order."""
        ...

    def keys(self, bucket: str, prefix: str) -> Iterator[str]:
        """The keys under ``prefix``, in the store's (lexicographic) order."""
        ...

    def put(self, bucket: str, key: str, body: bytes) -> None:
        """Write the object (replacing it)."""
        ...


class RepairQueue(Protocol):
    """Where reconciliation sends its repair events: the ingest queue (CONTRACT C12)."""

    def send(self, bodies: Sequence[str]) -> int:
        """Send each body as one message, in order; return how many were sent (all of them).

        Raises :class:`~s3ingest_fn.core.model.TransientError` naming how many were sent before
        the queue refused (a refused request, or any entry the queue did not accept)."""
        ...


class ChangeEntry(TypedDict):
    """One change event as the change bus takes it (the PutEvents request entry's fields):
    ``Detail`` is a JSON object's text."""

    Source: str
    DetailType: str
    EventBusName: str
    Detail: str
    Resources: list[str]


class PublishOutcome(NamedTuple):
    """What the change bus made of a sequence of entries.

    ``refused``: index -> reason of each entry before ``stopped`` that can never be published
    (too large, or refused for its content); every other entry before ``stopped`` was
    published. ``stopped``: the index of the first entry neither published nor refused (the
    bus refused it for now, or refused the publisher), or None when each was one or the other.
    """

    refused: dict[int, str]
    stopped: int | None


class ChangePublisher(Protocol):
    """Publishes change events to the change bus, in order (CONTRACT C11)."""

    def publish(self, entries: Sequence[ChangeEntry]) -> PublishOutcome:
        """Publish ``entries`` in order, setting aside those that can never be published and
        stopping at the first one the bus did not accept for now. Never raises for a refusal:
        the caller dead-letters the refused ones and retries from ``stopped``."""
        ...
