"""Downstream effects, effectively once (CONTRACT C8, C11).

A team's *processor* runs for every change the ledger applies (never for a duplicate or a stale
event). A stack may have several (:class:`ProcessorSpec`: a name, a mode, key filters), each
with its own effect state on the row, run concurrently; a processor function (its own Lambda)
is called through :mod:`s3ingest_fn.adapters.processor_function`; the modes (``latest``,
``every-change`` with its queue of waiting changes) are in ``docs/effects.md``. An in-process
processor is named ``"package.module:function"`` and called as::

    process(change: AppliedChange, content: PinnedContent | None) -> None

``content`` is given for creates only; it reads the bytes *of that change*: GetObject by
``versionId`` in a versioned bucket, or with ``If-Match`` on the change's normalised ETag in an
unversioned one. A mismatch (a newer write exists, or the version is gone) raises
:class:`SupersededError`, which ends the record ``superseded``: a later change will run its own
effect (C8).

The protocol around the call, on the ledger row of the key (:class:`~s3ingest_fn.core.row.Effect`):

1. **Claim**, in the same conditional write that applies the change (no extra request): the row
   records its effect as ``pending``, a *fencing token* (the row's new revision plus the
   claim's second, :func:`~s3ingest_fn.core.row.fencing_token`: increasing per key, also
   across a restored or recreated table) and a *lease* (epoch ms) that lasts as long as this Lambda
   invocation can still run (its remaining time plus :data:`LEASE_SKEW_MS`). While a lease is
   live no other change of the key can be applied: a newer event is retried, so an older effect
   can never finish after a newer one started.
2. **Effect**: the processor runs.
3. **Commit**: the effect ``done`` and the lease removed, conditional on the fencing token still
   being this claim's token. A worker whose lease expired and whose row was claimed again cannot
   commit.

A crash between 2 and 3 leaves the row ``pending``; when its lease has expired, the next delivery
of that key (the retried message, a duplicate, or a stale event) re-claims the row with a new token
and re-runs the pending effect: it is never skipped while its change is the key's newest. A newer
change that arrives after the lease expired takes the row over: the older effect is then obsolete
and is not re-run over the newer one. Applied paths cost two writes (apply+claim, commit) and no
read; duplicates and stale events one write (the rejected conditional write).
"""

from __future__ import annotations

import hashlib
import importlib
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any, Protocol, cast

from s3ingest_fn.contract import CANARY_PREFIX
from s3ingest_fn.core.hold import RUN, HoldCounter, HoldPolicy, Verdict
from s3ingest_fn.core.model import EffectNotStarted, TransientError
from s3ingest_fn.core.ports import ContentReader, Pin
from s3ingest_fn.core.row import (
    DEFAULT_PROCESSOR,
    DONE,
    PENDING,
    SUPERSEDED,
    Claim,
    LedgerRow,
    QueuedChange,
)

#: Added to the lease beyond the invocation's remaining time: clock skew between Lambda hosts.
LEASE_SKEW_MS = 2_000
#: An effect is not started with less time left than this: the record is retried instead.
MIN_EFFECT_MS = 3_000
#: Remaining time assumed when no Lambda context is bound (local runtime, tests), ms.
DEFAULT_REMAINING_MS = 60_000


#: A processor's delivery mode: ``latest`` drops an older change's unfinished effect when a newer
#: change of the key is applied; ``every-change`` runs each applied change's effect, in
#: sequencer order per key (a newer change's effect waits until the older ones are done).
LATEST, EVERY_CHANGE = "latest", "every-change"
MODES = (LATEST, EVERY_CHANGE)
#: A processor's name: it names attributes of the ledger row (``docs/effects.md``).
_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,31}$")
#: An applied change's kind, as :attr:`AppliedChange.kind` and a processor's ``kinds`` filter.
CREATED, REMOVED = "created", "removed"
KINDS = (CREATED, REMOVED)


class WorkerLost(Exception):
    """An effect runner's worker ended after the effect and before its commit (a local
    emulation of a dead Lambda worker; nothing deployed raises it): the caller commits nothing
    and leaves the claim to its lease, and the invocation ends with ``error`` (a
    :class:`~s3ingest_fn.core.model.TransientError`: the change is ``killed``, the message
    retried; anything else propagates as it is)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


class SupersededError(Exception):
    """The pinned read found a newer write (or the version is gone): the ``superseded`` outcome.

    Raised by :meth:`PinnedContent.read` and :meth:`PinnedContent.stream`; a processor may raise
    it too.
    """


@dataclass(frozen=True)
class AppliedChange:
    """The change a processor is given: what the ledger applied, and how to fence its effect.

    Attributes
    ----------
    bucket, key : str
        Bucket name and decoded key (CONTRACT C1).
    kind : str
        ``"created"`` (the key is visible with this version/ETag) or ``"removed"`` (tombstone).
    sequencer : str or None
        The S3 sequencer as received of the event that made the change; None for observations
        without one (repairs, backfill), whose state was read from the bucket. A change recorded
        from a HEAD on behalf of an event (a version removal, a verification that found the
        bucket moved on) carries that event's sequencer.
    version_id, etag : str or None
        Version (None: unversioned, or the null version) and ETag without quotes.
    size : int or None
        Bytes.
    source : str
        ``live``, ``replay``, ``repair`` or ``backfill``.
    event_name : str
        What S3 reported (``ObjectCreated:Put``, ...).
    change_id : str
        Deterministic id of this change: the same change always has the same id (32 hex chars).
        Use it as an idempotency key downstream.
    token : int
        Fencing token of this claim (:func:`~s3ingest_fn.core.row.fencing_token`: the row's
        revision plus the claim's epoch second << 20): strictly increasing per key from claim
        to claim while the workers' clocks do not go back a second, and greater than every
        earlier token of the key for a claim made a second or more after them, also when the
        row was created again (an expired tombstone, a restored or recreated table). An
        ``every-change`` claim runs its waiting changes under one token, so a downstream store
        that keeps the highest token it has seen per key refuses a lower one (a stale writer),
        not an equal one.
    """

    bucket: str
    key: str
    kind: str
    sequencer: str | None
    version_id: str | None
    etag: str | None
    size: int | None
    source: str
    event_name: str
    change_id: str
    token: int
    #: The processor this run is for (:attr:`ProcessorSpec.name`).
    processor: str = DEFAULT_PROCESSOR
    #: Epoch ms until which this claim's lease runs; None when not known (tests).
    lease_until_ms: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """The change as JSON-ready values (camelCase, as in the change stream's detail)."""
        return {
            "id": self.change_id,
            "bucket": self.bucket,
            "key": self.key,
            "kind": self.kind,
            "sequencer": self.sequencer,
            "versionId": self.version_id,
            "etag": self.etag,
            "size": self.size,
            "source": self.source,
            "eventName": self.event_name,
            "token": self.token,
        }


def change_id(
    bucket: str,
    key: str,
    change_key: str | None,
    present: bool,
    version_id: str | None,
    etag: str | None,
) -> str:
    """Deterministic id of an applied change: (bucket, key, change key, state).

    32 hex characters of SHA-256 over the fields, NUL-separated (keys may hold any other
    character). ``change_key`` is the normalised sequencer of an event, or ``obs@<rev>`` for an
    observation (named by the row revision it creates).
    """
    parts = (
        bucket,
        key,
        change_key or "-",
        "present" if present else "deleted",
        version_id or "",
        etag or "",
    )
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


class PinnedContent:
    """The bytes of one created object version, pinned to the change (CONTRACT C8).

    Parameters
    ----------
    reader : ContentReader
        Reads one object pinned by version id or ETag (the S3 adapter:
        :class:`s3ingest_fn.adapters.s3_objects.S3ContentReader`, GetObject with ``VersionId`` or
        ``If-Match``).
    change : AppliedChange
    """

    def __init__(self, reader: ContentReader, change: AppliedChange) -> None:
        self._reader = reader
        self.change = change

    def _pin(self) -> Pin:
        if self.change.version_id:
            return Pin(self.change.bucket, self.change.key, version_id=self.change.version_id)
        if self.change.etag:
            return Pin(self.change.bucket, self.change.key, etag=self.change.etag)
        # An event may lack both (CONTRACT C3): an unpinned read could return newer bytes.
        # Reconciliation records the object's ETag later as a change of its own.
        raise SupersededError(
            f"{self.change.key!r}: the change names neither a version "
            "nor an ETag, so its bytes cannot be pinned"
        )

    def read(self) -> bytes:
        """The whole object.

        Raises
        ------
        SupersededError
            A newer write replaced it (412), or the version/key is gone (404).
        TransientError
            Any other S3 failure (the record is retried).
        """
        return self._reader.read(self._pin())

    def stream(self, chunk_size: int = 1 << 20) -> Iterator[bytes]:
        """The object in chunks of ``chunk_size`` bytes, for objects too large to hold.

        Raises
        ------
        SupersededError, TransientError
            As :meth:`read`.
        """
        yield from self._reader.stream(self._pin(), chunk_size)

    def presigned(self, seconds: int) -> dict[str, Any]:
        """A way to read the bytes of this change with no credentials: a presigned GET pinned to
        the change (to its version, or signed with the ``If-Match`` header of its ETag), as the
        ``content`` of a processor function's request
        (:mod:`s3ingest_fn.adapters.processor_function`).

        Parameters
        ----------
        seconds : int
            How long the URL is valid (S3 caps a presigned URL at the signing credentials'
            own expiry).

        Returns
        -------
        dict
            ``{"url": str, "headers": {name: value}, "expiresAt": epoch ms}``; ``headers`` are
            the ones the reader must send (``{"If-Match": "\"<etag>\""}``, or empty when the
            URL names the version).

        Raises
        ------
        SupersededError
            The change names neither a version nor an ETag (its bytes cannot be pinned).
        TransientError
            The URL cannot be signed.
        """
        get = self._reader.presign(self._pin(), seconds)
        return {"url": get.url, "headers": dict(get.headers), "expiresAt": get.expires_at_ms}


class Processor(Protocol):
    """A team's effect: ``process(change, content)``; return value ignored.

    Raise :class:`SupersededError` to end the record ``superseded``; any other exception makes
    the record ``retried`` (the claim is released so the retry can run at once).
    """

    def __call__(self, change: AppliedChange, content: PinnedContent | None) -> None: ...


@dataclass(frozen=True)
class EffectTarget:
    """What judges a processor's effects on rows without its code (reconciliation, the
    reprocess run): its name, version, key filters and kinds, as :class:`ProcessorSpec`."""

    name: str
    version: int = 1
    prefixes: tuple[str, ...] = ()
    suffixes: tuple[str, ...] = ()
    kinds: tuple[str, ...] = KINDS

    def concerns(self, key: str, kind: str) -> bool:
        """Whether a change of ``kind`` (:data:`KINDS`) to ``key`` runs this processor."""
        return (
            kind in self.kinds
            and (not self.prefixes or key.startswith(self.prefixes))
            and (not self.suffixes or key.endswith(self.suffixes))
        )

    def behind(self, row: LedgerRow, now_ms: int) -> bool:
        """Whether ``row``'s change has no completed effect of this processor at its version
        (CONTRACT C11): the row is present, its key concerns the processor, and the effect is
        absent (the row predates the processor), ``done`` under a lower version or for another
        change (one applied while the processor was not configured, or its filters left the
        key out), ``superseded``, or ``pending`` with a lease ended before ``now_ms`` and no
        waiting changes. Tombstones are never behind (a key deleted before the processor existed is
        not run), nor are effects held, rejected or skipped by a hold policy, nor ``s3ingest
        verify``'s canary keys."""
        if not row.present or row.key.startswith(CANARY_PREFIX):
            return False
        if not self.concerns(row.key, CREATED):
            return False
        effect = row.effects().get(self.name)
        if effect is None:
            return True
        if effect.status == DONE:
            return effect.version < self.version or (
                None not in (effect.done_change_id, row.change_id)
                and effect.done_change_id != row.change_id
            )
        if effect.status == SUPERSEDED:
            return True
        if effect.status == PENDING and not effect.queue:
            lease = effect.lease_until_ms
            return lease is not None and lease < now_ms
        return False


@dataclass(frozen=True)
class ProcessorSpec:
    """One named processor of a stack: what it runs, for which changes, in which mode.

    Attributes
    ----------
    name : str
        Unique per stack (``^[a-z][a-z0-9-]{0,31}$``); names its effect state on the row.
    call : Processor
        The effect: an in-process function, or a processor function invoked synchronously
        (:mod:`s3ingest_fn.adapters.processor_function`).
    mode : str
        :data:`LATEST` or :data:`EVERY_CHANGE`.
    prefixes, suffixes : tuple of str
        Key filters on the decoded key; empty: every key. A key matches when it starts with one
        of the prefixes (if any) and ends with one of the suffixes (if any).
    kinds : tuple of str
        The change kinds it runs for (:data:`KINDS`).
    timeout_ms : int or None
        A processor function's timeout: its effect is started only with at least this much
        (plus :data:`MIN_EFFECT_MS`) left in the invocation. None for in-process processors.
    version : int
        The processor's version (1 and up): a commit records it with a ``done`` effect, and a
        row done under a lower one is behind (:meth:`~s3ingest_fn.core.row.LedgerRow.behind_for`).
    """

    name: str
    call: Processor
    mode: str = LATEST
    prefixes: tuple[str, ...] = ()
    suffixes: tuple[str, ...] = ()
    kinds: tuple[str, ...] = KINDS
    timeout_ms: int | None = None
    version: int = 1

    def concerns(self, key: str, kind: str) -> bool:
        """Whether a change of ``kind`` (:data:`KINDS`) to ``key`` runs this processor."""
        return (
            kind in self.kinds
            and (not self.prefixes or key.startswith(self.prefixes))
            and (not self.suffixes or key.endswith(self.suffixes))
        )

    @property
    def target(self) -> EffectTarget:
        """The processor as :class:`EffectTarget`."""
        return EffectTarget(self.name, self.version, self.prefixes, self.suffixes, self.kinds)


def load_processor(spec: str) -> Processor:
    """Import ``"package.module:function"``.

    Raises
    ------
    ValueError
        When the spec is malformed, the module cannot be imported or the attribute is not
        callable: the function fails at cold start with this message.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"processor {spec!r} is not 'package.module:function'")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, or the team module failing while it loads
        raise ValueError(
            f"processor module {module_name!r} cannot be imported: {exc.__class__.__name__}: {exc}"
        ) from exc
    func: object = getattr(module, attr, None)
    if not callable(func):
        raise ValueError(f"processor {spec!r}: {attr!r} is not a callable in {module_name}")
    return cast(Processor, func)


class EffectRunner:
    """Runs the stack's processors for applied changes under a lease (see the module
    docstring).

    Parameters
    ----------
    processors : Processor or sequence of ProcessorSpec
        The processors; a bare callable is the single :data:`DEFAULT_PROCESSOR` (``latest``,
        every key and kind).
    content : ContentReader
        Reads the pinned bytes for :class:`PinnedContent`.
    clock_ms : callable, optional
        Epoch milliseconds; injectable (the local runtime advances it to expire a crashed
        worker's lease).
    holds : mapping of str to HoldPolicy, optional
        Each processor's hold policy, by name (:mod:`s3ingest_fn.core.hold`); none: every
        effect runs at once.

    Raises
    ------
    ValueError
        When two processors share a name, or a mode or kind is unknown.
    """

    def __init__(
        self,
        processors: Processor | Sequence[ProcessorSpec],
        content: ContentReader,
        *,
        clock_ms: Callable[[], int] | None = None,
        holds: Mapping[str, HoldPolicy] | None = None,
    ) -> None:
        if isinstance(processors, Sequence):
            specs = tuple(processors)
        else:
            specs = (ProcessorSpec(DEFAULT_PROCESSOR, processors),)
        names = [spec.name for spec in specs]
        if len(set(names)) != len(names):
            raise ValueError(f"processor names must be unique: {names}")
        for name in names:
            if not _NAME_RE.match(name):
                raise ValueError(f"processor name {name!r} is not ^[a-z][a-z0-9-]{{0,31}}$")
        for spec in specs:
            if spec.mode not in MODES:
                raise ValueError(f"processor {spec.name!r}: mode {spec.mode!r} is not {MODES}")
            if not set(spec.kinds) <= set(KINDS):
                raise ValueError(f"processor {spec.name!r}: kinds {spec.kinds} are not {KINDS}")
        self.specs = specs
        self._by_name = {spec.name: spec for spec in specs}
        unknown = set(holds or {}) - set(names)
        if unknown:
            raise ValueError(f"hold policies of processors not configured: {sorted(unknown)}")
        self.holds = {name: p for name, p in (holds or {}).items() if p.active}
        self._content = content
        self.clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        # per invocation: invocations of one graph may run at once in one process (the local
        # runtime's); each binds its own context in its own contextvars.Context
        self._remaining_of: ContextVar[Callable[[], int] | None] = ContextVar(
            f"s3ingest_remaining_{id(self)}", default=None
        )

    def _remaining(self) -> int:
        """Milliseconds left in the invocation (:data:`DEFAULT_REMAINING_MS` unbound)."""
        remaining = self._remaining_of.get()
        return int(remaining()) if remaining is not None else DEFAULT_REMAINING_MS

    @property
    def names(self) -> tuple[str, ...]:
        """Every processor's name, in configuration order."""
        return tuple(self._by_name)

    def spec(self, name: str) -> ProcessorSpec | None:
        """The processor named ``name``, or None (a name no longer configured)."""
        return self._by_name.get(name)

    def behind(self, row: LedgerRow, name: str) -> bool:
        """:meth:`EffectTarget.behind` for the processor ``name`` now (False for a name not
        configured)."""
        spec = self._by_name.get(name)
        return spec is not None and spec.target.behind(row, self.clock_ms())

    def version_of(self, name: str) -> int:
        """The version of the processor named ``name`` (1 for a name no longer configured)."""
        spec = self._by_name.get(name)
        return spec.version if spec is not None else 1

    def bind_context(self, context: Any) -> None:
        """Take the lease length from a Lambda context's ``get_remaining_time_in_millis``."""
        remaining = getattr(context, "get_remaining_time_in_millis", None)
        self._remaining_of.set(remaining if callable(remaining) else None)

    def claim(self, key: str, kind: str, only: Sequence[str] | None = None) -> Claim:
        """The claim of a write made now applying a change of ``kind`` (:data:`KINDS`) to
        ``key``: the processors it concerns (``only``: just these, for a re-claim), the
        ``every-change`` ones among them, and the lease.

        Raises
        ------
        EffectNotStarted
            When less than :data:`MIN_EFFECT_MS` is left in the invocation, or less than a
            concerned processor function's timeout plus that.
        """
        concerned = tuple(
            spec
            for spec in self.specs
            if (spec.name in only if only is not None else spec.concerns(key, kind))
        )
        remaining = int(self._remaining())
        needed = max((self.time_needed_ms(spec.name) for spec in concerned), default=MIN_EFFECT_MS)
        if remaining < needed:
            raise EffectNotStarted(
                f"only {remaining} ms left in the invocation, {needed} ms needed: "
                "effect not started"
            )
        now = self.clock_ms()
        return Claim(
            now_ms=now,
            lease_until_ms=now + remaining + LEASE_SKEW_MS,
            processors=tuple(spec.name for spec in concerned),
            queued=tuple(spec.name for spec in concerned if spec.mode == EVERY_CHANGE),
            configured=self.names,
            latest=tuple(spec.name for spec in self.specs if spec.mode == LATEST),
        )

    def time_needed_ms(self, processor: str) -> int:
        """The invocation time a claim of ``processor``'s effect needs, ms: :data:`MIN_EFFECT_MS`
        plus its function's timeout (none for an in-process processor). Raises
        :class:`KeyError` for a processor not configured."""
        return MIN_EFFECT_MS + (self._by_name[processor].timeout_ms or 0)

    def ensure_time(self, processor: str) -> None:
        """Check, before each further change a claim runs (an every-change queue), that the
        invocation still has time for ``processor``: :data:`MIN_EFFECT_MS` plus its timeout.

        Raises
        ------
        TransientError
            When it has not: the caller releases the claim and the rest waits for the retry.
        """
        needed = self.time_needed_ms(processor)
        remaining = int(self._remaining())
        if remaining < needed:
            raise TransientError(
                f"only {remaining} ms left in the invocation, {needed} ms needed: "
                f"{processor}'s next waiting change not started"
            )

    def verdict(self, change: AppliedChange, counter: HoldCounter) -> Verdict:
        """Whether ``change``'s effect for ``change.processor`` runs now, is held or skipped
        (:meth:`~s3ingest_fn.core.hold.HoldPolicy.decide`; ``counter`` keeps the breaker's
        counts).

        Raises
        ------
        TransientError
            The team's policy failed or answered something unknown.
        """
        policy = self.holds.get(change.processor)
        if policy is None:
            return Verdict(RUN)
        return policy.decide(change, counter, self.clock_ms() // 1000, change.processor)

    def run(self, change: AppliedChange) -> str:
        """Run ``change.processor`` for ``change``; return ``done`` or ``superseded``.

        The caller commits. Raises whatever the processor raised other than
        :class:`SupersededError`, and :class:`KeyError` for a processor not configured.
        """
        spec = self._by_name[change.processor]
        content = PinnedContent(self._content, change) if change.kind == CREATED else None
        try:
            spec.call(change, content)
        except SupersededError:
            return SUPERSEDED
        if self._remaining_of.get() is not None and self._remaining() <= 0:
            # Lambda would have stopped the invocation during the effect: nothing is committed
            # (only an in-process run can get here, the local runtime's)
            raise TransientError(
                f"{change.processor}: the invocation timed out during the effect; not committed"
            )
        return DONE


__all__ = [
    "CREATED",
    "DEFAULT_PROCESSOR",
    "DONE",
    "EVERY_CHANGE",
    "KINDS",
    "LATEST",
    "MODES",
    "PENDING",
    "REMOVED",
    "SUPERSEDED",
    "AppliedChange",
    "Claim",
    "EffectRunner",
    "PinnedContent",
    "Processor",
    "ProcessorSpec",
    "SupersededError",
    "WorkerLost",
    "change_id",
    "load_processor",
    "queued_changes",
    "row_change",
]


def row_change(
    row: LedgerRow, kind: str, token: int, processor: str, lease_until_ms: int
) -> AppliedChange:
    """The change ``row`` holds, for ``processor``'s effect claimed under ``token``: as it was
    applied, its own source and event, not those of a later write that only moved the row's
    sequencer (a live event of the version a repair applied)."""
    made = row.change_decision
    present = row.present
    return AppliedChange(
        bucket=row.bucket,
        key=row.key,
        kind=kind,
        sequencer=row.change_seq or None,
        version_id=(row.version_id or None) if present else None,
        etag=(row.etag or None) if present else None,
        size=row.size if present else None,
        source=made.source if made is not None else row.source,
        event_name=made.event if made is not None else row.event_name,
        change_id=row.change_id or "",
        token=token,
        processor=processor,
        lease_until_ms=lease_until_ms,
    )


def queued_changes(
    applied: AppliedChange, processor: str, queue: Sequence[QueuedChange] | None
) -> list[AppliedChange]:
    """An ``every-change`` processor's waiting changes (``queue``, oldest first) as the
    changes its claim runs, under ``applied``'s token and lease; ``applied`` alone (for
    ``processor``) without a queue."""
    if not queue:
        return [replace(applied, processor=processor)]
    return [
        replace(
            applied,
            processor=processor,
            kind=CREATED if q.present else REMOVED,
            sequencer=q.sequencer,
            version_id=q.version_id,
            etag=q.etag,
            size=q.size,
            source=q.source,
            event_name=q.event_name,
            change_id=q.change_id,
        )
        for q in queue
    ]
