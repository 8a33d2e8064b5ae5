"""In-memory fakes of the core's ports (:mod:`s3ingest_fn.core.ports`).

:class:`FakeLedger` implements every ledger operation with the conditions the DynamoDB adapter
documents, claims included; ``tests/unit/test_ledger_parity.py`` runs the same checks against
both, so the fake cannot drift from the adapter it stands in for.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from s3ingest_fn.core.effects import SupersededError, change_id
from s3ingest_fn.core.model import InventoryRow, ObjectState, TransientError
from s3ingest_fn.core.ports import (
    ChangeEntry,
    Ledger,
    ListingPage,
    Pin,
    PresignedGet,
    PublishOutcome,
)
from s3ingest_fn.core.row import (
    APPROVED,
    DEFAULT_PROCESSOR,
    DELETED,
    DONE,
    HELD,
    HISTORY_SLOTS,
    OP_APPLY,
    OP_CLAIM,
    OP_COMMIT,
    OP_DONE,
    OP_FORGET,
    OP_RELEASE,
    OP_SEQ,
    PENDING,
    PRESENT,
    REJECTED,
    SUPERSEDED,
    TRAIL_SLOTS,
    Claim,
    Decision,
    Effect,
    Hold,
    LedgerRow,
    Review,
    RowState,
    WriteMeta,
    WriteResult,
    fencing_token,
)

NOW = 1000.0
TTL_SECONDS = 3600


class FakeLedger:
    """The :class:`~s3ingest_fn.core.ports.Ledger` port in memory.

    Rows are :class:`LedgerRow` values keyed by (bucket, key); every applied write adds 1 to
    ``rev``; a refusal returns the row as it is. Conditions, as the DynamoDB adapter's:

    * sequenced writes: the row is absent, or its ``seq`` is absent or lower; ``apply_if_newer``
      also needs a non-observed row, ``apply_verified`` an unchanged ``rev``,
      ``apply_observed_at`` a row not holding the state, ``advance_sequencer`` an unchanged
      ``rev`` or (no ``expected_rev``) a row holding the state;
    * a claiming write also needs no live lease on the row;
    * ``reclaim``, ``finish`` and ``release`` need the claim's fencing token (and ``reclaim`` an
      expired pending lease or a superseded effect, ``release`` a pending one);
    * a claim's token is :func:`~s3ingest_fn.core.row.fencing_token` of the new ``rev`` and
      ``claim.now_ms``, as the adapter's UpdateItem sets it.
    """

    def __init__(
        self, clock: Callable[[], float] = lambda: NOW, tombstone_ttl_seconds: int = TTL_SECONDS
    ) -> None:
        self.rows: dict[tuple[str, str], LedgerRow] = {}
        self.ranks: dict[str, dict[str, int]] = {}
        self.counts: Counter[tuple[str, int]] = Counter()
        self._clock = clock
        self._ttl = tombstone_ttl_seconds

    def get(self, bucket: str, key: str) -> LedgerRow | None:
        return self.rows.get((bucket, key))

    # -- sequenced writes --------------------------------------------------------------------

    def apply_if_newer(
        self, state: RowState, meta: WriteMeta, claim: Claim | None = None
    ) -> WriteResult:
        row = self._row(meta)
        ok = self._newer(row, meta) and (row is None or not row.observed)
        return self._write(row, state, meta, observed=False, ok=ok, claim=claim)

    def apply_verified(
        self,
        state: RowState,
        meta: WriteMeta,
        *,
        observed: bool,
        expected_rev: int,
        claim: Claim | None = None,
    ) -> WriteResult:
        row = self._row(meta)
        ok = self._newer(row, meta) and (row is None or row.rev == expected_rev)
        return self._write(row, state, meta, observed=observed, ok=ok, claim=claim)

    def apply_observed_at(
        self, state: RowState, meta: WriteMeta, claim: Claim | None = None
    ) -> WriteResult:
        row = self._row(meta)
        ok = self._newer(row, meta) and not (row is not None and row.holds(state))
        return self._write(row, state, meta, observed=True, ok=ok, claim=claim)

    def advance_sequencer(
        self,
        state: RowState,
        meta: WriteMeta,
        *,
        observed: bool,
        expected_rev: int | None = None,
    ) -> WriteResult:
        row = self._row(meta)
        ok = self._newer(row, meta)
        if expected_rev is not None:
            ok = ok and (row is None or row.rev == expected_rev)
        else:
            ok = ok and row is not None and row.holds(state)
        return self._write(row, state, meta, observed=observed, ok=ok, same_change=True)

    def record_observation(
        self,
        state: RowState,
        meta: WriteMeta,
        expected_rev: int | None,
        claim: Claim | None = None,
    ) -> WriteResult:
        return self._observe(state, meta, expected_rev, claim)

    def reset_sequencer(
        self,
        state: RowState,
        meta: WriteMeta,
        expected_rev: int,
        claim: Claim | None = None,
        *,
        same_change: bool = False,
    ) -> WriteResult:
        if meta.sequencer is not None:
            raise ValueError("a sequencer reset writes no sequencer")
        return self._observe(
            state, meta, expected_rev, claim, same_change=same_change, clear_sequencer=True
        )

    def _observe(
        self,
        state: RowState,
        meta: WriteMeta,
        expected_rev: int | None,
        claim: Claim | None,
        **write: bool,
    ) -> WriteResult:
        row = self._row(meta)
        ok = row is None if expected_rev is None else (row is not None and row.rev == expected_rev)
        change_key = (
            f"obs@{expected_rev + 1}"
            if expected_rev is not None
            else f"obs@new@{int(self._clock() * 1000)}"
        )
        return self._write(
            row, state, meta, observed=True, ok=ok, claim=claim, change_key=change_key, **write
        )

    # -- effects -----------------------------------------------------------------------------

    def reclaim(
        self,
        bucket: str,
        key: str,
        old_token: int,
        claim: Claim,
        processor: str = DEFAULT_PROCESSOR,
    ) -> WriteResult:
        _default_only(processor)
        row = self.rows.get((bucket, key))
        effect = row.effect if row is not None else None
        if (
            row is None
            or effect is None
            or effect.token != old_token
            or not (
                (effect.status == PENDING and (effect.lease_until_ms or 0) < claim.now_ms)
                or effect.status == SUPERSEDED
            )
        ):
            return WriteResult(applied=False, old=row)
        rev = row.rev + 1
        token = fencing_token(rev, claim.now_ms)
        self.rows[(bucket, key)] = dataclasses.replace(
            row,
            rev=rev,
            op=OP_CLAIM,
            effect=dataclasses.replace(
                effect, status=PENDING, token=token, lease_until_ms=claim.lease_until_ms
            ),
        )
        return WriteResult(applied=True, token=token)

    def finish(
        self,
        bucket: str,
        key: str,
        token: int,
        status: str = DONE,
        *,
        processor: str = DEFAULT_PROCESSOR,
        change_id: str | None = None,
        more: bool = False,
        version: int = 1,
        at: int | None = None,
    ) -> bool:
        _default_only(processor)
        if more:
            raise NotImplementedError("the in-memory ledger models latest processors only")
        row = self.rows.get((bucket, key))
        if row is None or row.effect is None or row.effect.token != token:
            return False
        done = (change_id or row.change_id) if status == DONE else row.effect.done_change_id
        self.rows[(bucket, key)] = dataclasses.replace(
            row,
            op=OP_DONE if status == DONE else OP_COMMIT,
            effect=dataclasses.replace(
                row.effect,
                status=status,
                lease_until_ms=None,
                done_change_id=done,
                hold=None,
                version=version if status == DONE else row.effect.version,
            ),
        )
        return True

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
        _default_only(processor)
        row = self.rows.get((bucket, key))
        if row is None or not row.present or row.change_id != change_id:
            return WriteResult(applied=False, old=row)
        effect = row.effect
        if old_token is None:
            ok = effect is None
        else:
            ok = (
                effect is not None
                and effect.token == old_token
                and (
                    (
                        effect.status == DONE
                        and (
                            effect.version < version
                            or (change_id is not None and effect.done_change_id != change_id)
                        )
                    )
                    or effect.status == SUPERSEDED
                    or (
                        effect.status == PENDING
                        and (effect.lease_until_ms or 0) < claim.now_ms
                        and not effect.queue
                    )
                )
            )
        if not ok:
            return WriteResult(applied=False, old=row)
        rev = row.rev + 1
        token = fencing_token(rev, claim.now_ms)
        claimed = Effect(PENDING, token=token, lease_until_ms=claim.lease_until_ms)
        if effect is not None:
            claimed = dataclasses.replace(
                effect, status=PENDING, token=token, lease_until_ms=claim.lease_until_ms
            )
        self.rows[(bucket, key)] = dataclasses.replace(row, rev=rev, op=OP_CLAIM, effect=claimed)
        return WriteResult(applied=True, token=token)

    def forget(self, bucket: str, key: str, processor: str) -> bool:
        _default_only(processor)
        row = self.rows.get((bucket, key))
        if row is None or row.effect is None:
            return False
        self.rows[(bucket, key)] = dataclasses.replace(row, op=OP_FORGET, effect=None)
        return True

    def hold(
        self, bucket: str, key: str, token: int, processor: str, hold: Hold, review: Review | None
    ) -> bool:
        _default_only(processor)
        row = self.rows.get((bucket, key))
        if row is None or row.effect is None or row.effect.token != token:
            return False
        trail = (review, *row.trail)[:TRAIL_SLOTS] if review is not None else row.trail
        self.rows[(bucket, key)] = dataclasses.replace(
            row,
            rev=row.rev + 1 if review is not None else row.rev,
            op="hold" if review is not None else OP_COMMIT,
            trail=trail,
            effect=dataclasses.replace(row.effect, status=HELD, lease_until_ms=None, hold=hold),
        )
        return True

    def review(self, bucket: str, key: str, review: Review, *, queued: int = 0) -> WriteResult:
        _default_only(review.processor)
        if queued:
            raise NotImplementedError("the in-memory ledger models latest processors only")
        row = self.rows.get((bucket, key))
        effect = row.effect if row is not None else None
        if (
            row is None
            or effect is None
            or effect.status != HELD
            or effect.hold is None
            or effect.hold.change_id != review.change_id
        ):
            return WriteResult(applied=False, old=row)
        if review.action == APPROVED:
            hold = dataclasses.replace(
                effect.hold,
                decision=APPROVED,
                actor=review.actor or "unknown",
                decided_at=review.at,
            )
            effect = dataclasses.replace(effect, status=PENDING, lease_until_ms=0, hold=hold)
        else:
            effect = dataclasses.replace(effect, status=REJECTED, lease_until_ms=None, hold=None)
        self.rows[(bucket, key)] = dataclasses.replace(
            row,
            rev=row.rev + 1,
            op="approve" if review.action == APPROVED else "reject",
            trail=(review, *row.trail)[:TRAIL_SLOTS],
            effect=effect,
        )
        return WriteResult(applied=True)

    def rank(self, name: str, window: int, member: str, above: int, ttl_seconds: int) -> int:
        kept = self.ranks.setdefault(name, {})
        if member in kept:
            return kept[member]
        if self.counts[(name, window)] >= above:
            return above + 1
        self.counts[(name, window)] += 1
        kept[member] = self.counts[(name, window)]
        return kept[member]

    def close(self, bucket: str, key: str, token: int, processor: str) -> bool:
        _default_only(processor)
        raise NotImplementedError("the in-memory ledger models latest processors only")

    def release(
        self, bucket: str, key: str, token: int, processor: str = DEFAULT_PROCESSOR
    ) -> bool:
        _default_only(processor)
        row = self.rows.get((bucket, key))
        if (
            row is None
            or row.effect is None
            or row.effect.token != token
            or row.effect.status != PENDING
        ):
            return False
        self.rows[(bucket, key)] = dataclasses.replace(
            row, op=OP_RELEASE, effect=dataclasses.replace(row.effect, lease_until_ms=0)
        )
        return True

    # -- the write ---------------------------------------------------------------------------

    def _row(self, meta: WriteMeta) -> LedgerRow | None:
        return self.rows.get((meta.bucket, meta.key))

    @staticmethod
    def _newer(row: LedgerRow | None, meta: WriteMeta) -> bool:
        if meta.sequencer is None:
            raise ValueError("a sequenced write needs a sequencer")
        return row is None or row.seq is None or row.seq < meta.sequencer

    def _write(
        self,
        row: LedgerRow | None,
        state: RowState,
        meta: WriteMeta,
        *,
        observed: bool,
        ok: bool,
        claim: Claim | None = None,
        same_change: bool = False,
        change_key: str | None = None,
        clear_sequencer: bool = False,
    ) -> WriteResult:
        if same_change and claim is not None:
            raise ValueError("a same-change write claims no effect")
        if claim is not None:
            for name in (*claim.processors, *claim.configured):
                _default_only(name)
        # a claiming write needs no lease on the row, or one that ended before now
        if claim is not None and row is not None and row.effect is not None:
            lease = row.effect.lease_until_ms
            if lease is not None and not lease < claim.now_ms:
                ok = False
        if not ok:
            return WriteResult(applied=False, old=row)
        now = self._clock()
        now_ms = int(now * 1000)
        rev = (row.rev if row is not None else 0) + 1
        decision = Decision(
            seq=meta.raw_sequencer or meta.sequencer or "-",
            event=meta.event_name[:200],
            reason=meta.reason,
            source=meta.source,
            at=now_ms,
            state=PRESENT if state.present else DELETED,
        )
        history = (decision, *(row.history if row is not None else ()))[:HISTORY_SLOTS]
        base = row if row is not None else LedgerRow(bucket=meta.bucket, key=meta.key, present=True)
        chg: str | None = None
        if same_change:
            change_id_, change_seq, effect, op = (
                base.change_id,
                base.change_seq,
                base.effect,
                OP_SEQ,
            )
        else:
            chg = change_id(
                meta.bucket,
                meta.key,
                change_key if change_key is not None else meta.sequencer,
                state.present,
                state.version_id,
                state.etag,
            )
            change_id_, op = chg, OP_APPLY
            change_seq = (meta.raw_sequencer or meta.sequencer) if meta.sequencer else None
            if claim is not None:
                done = base.effect.done_change_id if base.effect is not None else None
                effect = Effect(
                    status=PENDING,
                    token=fencing_token(rev, claim.now_ms),
                    lease_until_ms=claim.lease_until_ms,
                    done_change_id=done,
                )
            else:
                effect = None
        new = dataclasses.replace(
            base,
            raw_key=meta.raw_key,
            present=state.present,
            seq=meta.sequencer if meta.sequencer is not None else base.seq,
            raw_seq=(meta.raw_sequencer or meta.sequencer)
            if meta.sequencer is not None
            else base.raw_seq,
            observed=observed,
            version_id=state.version_id if state.present else None,
            etag=state.etag if state.present else None,
            size=state.size if state.present else None,
            rev=rev,
            event_name=decision.event,
            reason=meta.reason,
            source=meta.source,
            updated_at=now_ms,
            expires_at=int(now) + self._ttl if not state.present and self._ttl > 0 else None,
            history=history,
            op=op,
            change_id=change_id_,
            change_seq=change_seq,
            effect=effect,
        )
        if clear_sequencer:
            new = dataclasses.replace(new, seq=None, raw_seq=None)
        self.rows[(meta.bucket, meta.key)] = new
        token = fencing_token(rev, claim.now_ms) if claim is not None else None
        return WriteResult(applied=True, token=token, change_id=chg)


#: The ledger operations counted by :class:`CountingLedger`, by request kind: every ordered
#: write is one conditional UpdateItem (``write_sequenced``), an observation another.
_KIND = {
    "apply_if_newer": "write_sequenced",
    "apply_verified": "write_sequenced",
    "apply_observed_at": "write_sequenced",
    "advance_sequencer": "write_sequenced",
    "record_observation": "write_observation",
    "reset_sequencer": "write_observation",
    "finish": "finish_effect",
}


class CountingLedger:
    """Wraps a :class:`~s3ingest_fn.core.ports.Ledger` and counts requests by kind (C5: the
    common path costs one write)."""

    def __init__(self, inner: Ledger) -> None:
        self.inner = inner
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[_KIND.get(name, name)] += 1
            return method(*args, **kwargs)

        return counted


class FakeBucket:
    """The :class:`~s3ingest_fn.core.ports.Bucket` port: objects by (bucket, key); anything
    else is absent. ``fail`` makes every HEAD a transient failure; ``heads`` records them."""

    def __init__(
        self, objects: dict[tuple[str, str], ObjectState] | None = None, fail: bool = False
    ) -> None:
        self.objects = objects if objects is not None else {}
        self.fail = fail
        self.heads: list[tuple[str, str]] = []

    @property
    def requests(self) -> int:
        return len(self.heads)

    def put(self, bucket: str, key: str, version_id: str | None, etag: str, size: int = 5) -> None:
        self.objects[(bucket, key)] = ObjectState(
            visible=True, version_id=version_id, etag=etag, size=size
        )

    def hide(self, bucket: str, key: str) -> None:
        self.objects.pop((bucket, key), None)

    def current(self, bucket: str, key: str) -> ObjectState:
        self.heads.append((bucket, key))
        if self.fail:
            raise TransientError("s3 head_object: SlowDown")
        return self.objects.get((bucket, key), ObjectState(visible=False))


class FakeContentReader:
    """The :class:`~s3ingest_fn.core.ports.ContentReader` port: bytes by (bucket, key, version
    id or ETag); a pin that matches nothing is superseded."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], bytes] = {}
        #: The clock of :meth:`presign`'s expiry, epoch ms.
        self.now_ms = 0

    def put(self, bucket: str, key: str, pin: str, body: bytes) -> None:
        self.objects[(bucket, key, pin)] = body

    def read(self, pin: Pin) -> bytes:
        found = self.objects.get((pin.bucket, pin.key, str(pin.version_id or pin.etag)))
        if found is None:
            raise SupersededError(f"{pin.key!r}: 412")
        return found

    def stream(self, pin: Pin, chunk_size: int) -> Iterator[bytes]:
        body = self.read(pin)
        for i in range(0, len(body), chunk_size):
            yield body[i : i + chunk_size]

    def presign(self, pin: Pin, seconds: int) -> PresignedGet:
        """An ``https://<bucket>.s3.example/<key>`` URL naming the pin (the version in the
        query, or the ETag as the ``If-Match`` header), expiring ``seconds`` after
        :attr:`now_ms`."""
        query = f"?versionId={pin.version_id}" if pin.version_id else ""
        headers = {} if pin.version_id else {"If-Match": f'"{pin.etag}"'}
        return PresignedGet(
            url=f"https://{pin.bucket}.s3.example/{pin.key}{query}",
            headers=headers,
            expires_at_ms=self.now_ms + seconds * 1000,
        )


class FakeDeadLetters:
    """The :class:`~s3ingest_fn.core.ports.DeadLetters` port: what was sent, in order."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, str, str]] = []

    def send(self, body: str, reason: str, detail: str, message_id: str) -> None:
        self.sent.append((body, reason, detail, message_id))


class FakeLedgerScanner:
    """The :class:`~s3ingest_fn.core.ports.LedgerScanner` port over a :class:`FakeLedger`'s rows:
    segment ``i`` of ``n`` holds every ``n``-th row, one page per segment."""

    def __init__(self, ledger: FakeLedger, page_rows: int | None = None) -> None:
        self.ledger = ledger
        #: Rows per page (None: one page per segment).
        self.page_rows = page_rows
        self.requests = 0

    def pages(self, bucket: str, segment: int, total: int) -> Iterator[list[LedgerRow]]:
        rows = [r for (b, _), r in sorted(self.ledger.rows.items()) if b == bucket]
        mine = rows[segment::total]
        size = self.page_rows or max(len(mine), 1)
        for i in range(0, max(len(mine), 1), size):
            self.requests += 1
            yield mine[i : i + size]


class FakeBucketListing:
    """The :class:`~s3ingest_fn.core.ports.BucketListing` port: the given rows, filtered by
    bucket and prefix, in order; ``fail`` makes the listing a transient failure."""

    def __init__(self, rows: list[InventoryRow] | None = None, fail: bool = False) -> None:
        self.listed: list[InventoryRow] = list(rows or [])
        self.fail = fail
        #: Pages served by :meth:`pages` before it fails (None: never), to interrupt a run.
        self.fail_after_pages: int | None = None
        self.pages_served = 0

    def rows(self, bucket: str, prefix: str) -> Iterator[InventoryRow]:
        if self.fail:
            raise TransientError(f"s3 listing of {bucket}: AccessDenied")
        for row in self.listed:
            if row.bucket == bucket and row.key.startswith(prefix):
                yield row

    def pages(
        self, bucket: str, prefix: str, marker: dict[str, Any] | None, page_size: int
    ) -> Iterator[ListingPage]:
        """:meth:`rows` in pages of ``page_size``, in the given order (give them in S3's);
        the marker is the offset of the next page."""
        rows = list(self.rows(bucket, prefix))
        start = int((marker or {}).get("offset", 0))
        while True:
            if self.fail_after_pages is not None and self.pages_served >= self.fail_after_pages:
                raise TransientError(f"s3 listing of {bucket}: connection reset")
            self.pages_served += 1
            end = start + page_size
            yield ListingPage(rows[start:end], {"offset": end} if end < len(rows) else None)
            if end >= len(rows):
                return
            start = end


class FakeInventoryStore:
    """The :class:`~s3ingest_fn.core.ports.InventoryStore` port: objects by (bucket, key).

    ``unreadable`` keys exist but HEAD refuses them (a report still being written); ``fail``
    makes every call a transient failure. ETags are the MD5 hex of the bytes, as S3's for a
    single-part upload.
    """

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], bytes] = {}
        self.unreadable: set[tuple[str, str]] = set()
        self.fail = False

    def _check(self, call: str) -> None:
        if self.fail:
            raise TransientError(f"s3 {call}: SlowDown")

    def read(self, bucket: str, key: str) -> bytes:
        self._check("get_object")
        found = self.objects.get((bucket, key))
        if found is None:
            raise TransientError("s3 get_object: NoSuchKey")
        return found

    def read_if_exists(self, bucket: str, key: str) -> bytes | None:
        self._check("get_object")
        return self.objects.get((bucket, key))

    def exists(self, bucket: str, key: str) -> bool:
        self._check("head_object")
        return (bucket, key) in self.objects and (bucket, key) not in self.unreadable

    def etag(self, bucket: str, key: str) -> str:
        return hashlib.md5(self.read(bucket, key)).hexdigest()

    def folders(self, bucket: str, prefix: str) -> list[str]:
        self._check("list_objects_v2")
        found = {
            prefix + key[len(prefix) :].split("/", 1)[0] + "/"
            for b, key in self.objects
            if b == bucket and key.startswith(prefix) and "/" in key[len(prefix) :]
        }
        return sorted(found)

    def keys(self, bucket: str, prefix: str) -> Iterator[str]:
        self._check("list_objects_v2")
        yield from sorted(k for b, k in self.objects if b == bucket and k.startswith(prefix))

    def put(self, bucket: str, key: str, body: bytes) -> None:
        self._check("put_object")
        self.objects[(bucket, key)] = body


class FakeRepairQueue:
    """The :class:`~s3ingest_fn.core.ports.RepairQueue` port: the bodies sent, in order;
    ``refuse_after`` makes the queue refuse once that many were sent."""

    def __init__(self, refuse_after: int | None = None) -> None:
        self.sent: list[str] = []
        self.refuse_after = refuse_after

    def send(self, bodies: Sequence[str]) -> int:
        for body in bodies:
            if self.refuse_after is not None and len(self.sent) >= self.refuse_after:
                raise TransientError(f"queueing repairs failed after {len(self.sent)}: refused")
            self.sent.append(body)
        return len(bodies)


class FakeChangePublisher:
    """The :class:`~s3ingest_fn.core.ports.ChangePublisher` port: the entries published, in
    order; ``accept`` is how many more it accepts before refusing (None: all)."""

    def __init__(self, accept: int | None = None) -> None:
        self.published: list[ChangeEntry] = []
        self.accept = accept

    def publish(self, entries: Sequence[ChangeEntry]) -> PublishOutcome:
        n = len(entries) if self.accept is None else min(self.accept, len(entries))
        if self.accept is not None:
            self.accept -= n
        self.published.extend(entries[:n])
        return PublishOutcome(refused={}, stopped=n if n < len(entries) else None)


class FakeEventDelivery:
    """The :class:`~s3ingest_fn.core.ports.EventDelivery` port: on for the buckets given."""

    def __init__(self, on: set[str]) -> None:
        self.on = on

    def enabled(self, bucket: str) -> bool:
        return bucket in self.on


def _default_only(processor: str) -> None:
    """The in-memory ledger models the single default processor; several processors and
    every-change queues are tested against :class:`DynamoLedger` on the emulator."""
    if processor != DEFAULT_PROCESSOR:
        raise NotImplementedError(f"the in-memory ledger has no processor {processor!r}")
