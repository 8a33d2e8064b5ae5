"""The listing backfill: a live listing of a bucket (or of its key filters) into the ledger,
without waiting for an S3 Inventory (issue 15; the engine ``listing``).

Three steps, each a Lambda handler of the listing backfill state machine
(:mod:`s3ingest_fn.handlers.listing_backfill`):

* :meth:`ListingBackfill.plan` splits the bucket's scope (its prefixes, or the whole bucket)
  into contiguous key ranges (*shards*) with cheap probes: ListObjectsV2 pages that show how
  keys spread over the next character after a common prefix. The plan is stored with the run,
  so planning the same run again gives the same shards (and leaves out the finished ones).
* :meth:`ListingBackfill.list_shard` lists one shard with ListObjectVersions pages (versioned
  and unversioned buckets alike) and records each page's latest entries through the ingest
  service concurrently (a bounded thread pool): a key the ledger has never seen is written from
  the listed state without a HEAD (:attr:`~s3ingest_fn.core.model.Kind.LISTED`,
  ``docs/backfill-listing.md``). After each page the marker is checkpointed to S3; the call
  returns ``done: false`` before the Lambda runs out of time, and the next call resumes there.
* :meth:`ListingBackfill.summarize` totals the shards' checkpoints.

Checkpoints live in the checkpoint bucket under ``backfill-listing/<bucket>/<run>/``:
``plan.json`` (the shards) and ``<shard id>.json`` (``marker``, ``done``, ``counts``).

Key ranges: a shard holds the keys ``k`` with ``start_after < k < end_before`` (either bound
absent: open) under the listing ``prefix``. S3 lists keys in UTF-8 byte order, which is Python's
code-point order of ``str``. A range starting at a string ``b`` (every key ``>= b``) is written
with ``start_after = before(b)``, a marker just below ``b``, so consecutive shards never leave
a gap (they overlap only on keys holding U+10FFFF at the boundary: see :func:`before`).
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from s3ingest_fn.core.context import in_caller_context
from s3ingest_fn.core.decide import IngestService
from s3ingest_fn.core.model import (
    Change,
    Format,
    InventoryRow,
    Kind,
    Outcome,
    TransientError,
)
from s3ingest_fn.core.ports import InventoryStore, ShardListing
from s3ingest_fn.core.scope import Scope
from s3ingest_fn.services.counting import CountedLedger, Requests

#: Where the runs' plans and checkpoints live in the checkpoint bucket.
CHECKPOINT_PREFIX = "backfill-listing"
#: The greatest code point.
_MAX_CHAR = "\U0010ffff"
#: Step Functions' state payload limit is 256 KiB: a plan's shards are merged pairwise until
#: their JSON stays below this many bytes (a boundary can be as long as a key, 1,024 bytes).
PLAN_PAYLOAD_BYTES = 200_000

#: The per-shard counts, all present in every checkpoint.
COUNTS = (
    "listed",
    "recorded_without_head",
    "observed_with_head",
    "duplicate",
    "out_of_scope",
    "not_visible",
    "effects_pending",
    "pages",
)
#: Requests by kind: S3 ``list`` (pages and probes), ledger ``write`` (PutItem/UpdateItem) and
#: ``get`` (GetItem), S3 ``head``, and the ``checkpoint`` writes.
REQUESTS = ("list", "write", "get", "head", "checkpoint")


# -- key ranges --------------------------------------------------------------------------------


#: S3's longest key, UTF-8 bytes; a listing marker is no longer.
MAX_KEY_BYTES = 1024


def before(bound: str) -> str:
    """A short marker just below ``bound``: every key ``k >= bound`` sorts after it, and the
    keys between them all start with ``bound`` less its last character, lowered by one, and
    then U+10FFFF (the greatest code point): ``"data/2"`` gives ``"data/1\U0010ffff"``.

    A range starting at ``bound`` is listed after this marker. The keys between the marker and
    ``bound`` (only keys holding U+10FFFF right there) also belong to the range before, so they
    are listed twice, recorded once and then counted as a duplicate: never lost. The exact
    bound (the marker filled with U+10FFFF up to S3's 1,024-byte key limit) would make a plan
    of a few hundred shards outgrow Step Functions' 256 KiB payload.

    Raises
    ------
    ValueError
        For an empty bound (nothing sorts below it).
    """
    if not bound:
        raise ValueError("nothing sorts below the empty string")
    head, last = bound[:-1], ord(bound[-1])
    if last == 0:
        return head  # exact: the keys below head + NUL are head and the keys below head
    prev = last - 1
    if 0xD800 <= prev <= 0xDFFF:  # surrogates are no characters of a key
        prev = 0xD7FF
    marker = head + chr(prev) + _MAX_CHAR
    if len(marker.encode()) > MAX_KEY_BYTES:
        # S3 takes no marker longer than a key: ``head`` also sorts below ``bound`` (more keys
        # listed twice, none lost)
        return head
    return marker


def upper(prefix: str) -> str | None:
    """The least string above every string that starts with ``prefix`` (None: there is none,
    the prefix is empty or only greatest code points)."""
    stem = prefix.rstrip(_MAX_CHAR)
    if not stem:
        return None
    nxt = ord(stem[-1]) + 1
    if 0xD800 <= nxt <= 0xDFFF:
        nxt = 0xE000
    return stem[:-1] + chr(nxt)


@dataclass(frozen=True)
class Shard:
    """One key range of a bucket: keys ``start_after < k < end_before`` under ``prefix``."""

    id: str
    bucket: str
    prefix: str = ""
    start_after: str | None = None
    end_before: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """``{"id", "bucket", "prefix", "start_after", "end_before"}``."""
        return dataclasses.asdict(self)

    @classmethod
    def of(cls, value: dict[str, Any]) -> Shard:
        """From :meth:`as_dict`'s shape.

        Raises
        ------
        ValueError
            When ``id`` or ``bucket`` is missing.
        """
        if not value.get("id") or not value.get("bucket"):
            raise ValueError(f"a shard needs an id and a bucket: {value!r}")
        return cls(
            id=str(value["id"]),
            bucket=str(value["bucket"]),
            prefix=str(value.get("prefix") or ""),
            start_after=value.get("start_after") or None,
            end_before=value.get("end_before") or None,
        )

    def holds(self, key: str) -> bool:
        """Whether ``key`` lies in this range (and under its prefix)."""
        return (
            key.startswith(self.prefix)
            and (self.start_after is None or key > self.start_after)
            and (self.end_before is None or key < self.end_before)
        )


@dataclass
class _Range:
    """A range being planned: keys in (``start_after``, ``end_before``) that all start with
    ``group``; ``open`` when it may hold more keys than one probe showed."""

    group: str
    start_after: str | None
    end_before: str | None
    count: int = 0
    open: bool = True


# -- counting the requests of a shard ------------------------------------------------------------


class _CountedBucket:
    """The bucket port, counting ``head`` requests."""

    def __init__(self, inner: Any, requests: Requests) -> None:
        self._inner = inner
        self._requests = requests

    def current(self, bucket: str, key: str) -> Any:
        self._requests.add("head")
        return self._inner.current(bucket, key)


# -- the service -------------------------------------------------------------------------------


@dataclass
class ListingBackfill:
    """Plans, lists and summarizes listing backfill runs.

    Parameters
    ----------
    listing : ShardListing
        The landing buckets, listed by key range.
    store : InventoryStore
        The checkpoint bucket's objects (plans and checkpoints).
    checkpoint_bucket : str
        ``CHECKPOINT_BUCKET_NAME``.
    service : IngestService
        The ingest decision; its scope says which keys are recorded.
    record_concurrency : int
        Entries of a page recorded at once (the ingest settings' ``RECORD_CONCURRENCY``).
    page_size : int
        ListObjectVersions ``MaxKeys`` (S3 answers at most 1,000).
    probe_size : int
        ListObjectsV2 ``MaxKeys`` of the planner's probes: a range showing no more keys than
        this is not split further.
    max_shards : int
        The planner stops splitting at this many shards.
    max_probes : int
        The planner's request budget per scope prefix.
    shard_keys : int
        Adjacent small ranges are merged up to about this many keys.
    margin_ms : int
        :meth:`list_shard` returns ``done: false`` once the invocation has less than this left.
    """

    listing: ShardListing
    store: InventoryStore
    checkpoint_bucket: str
    service: IngestService
    record_concurrency: int = 8
    page_size: int = 1000
    probe_size: int = 1000
    max_shards: int = 256
    max_probes: int = 400
    shard_keys: int = 10_000
    margin_ms: int = 60_000
    _pool: ThreadPoolExecutor | None = field(default=None, init=False, repr=False)

    @property
    def scope(self) -> Scope:
        """The scope the ingest service checks."""
        return self.service.tracked

    # -- plan ----------------------------------------------------------------------------------

    def plan(self, bucket: str, run: str) -> dict[str, Any]:
        """Shards of ``bucket`` for ``run``: ``{"bucket", "run", "shards": [shard], "done": n,
        "probes": n}``, leaving out the ``done`` shards already finished in this run's
        checkpoints (a shard with a checkpoint resumes from its marker).

        Raises
        ------
        ValueError
            When ``bucket`` is not one of the pipeline's or ``run`` is not a plain name.
        TransientError
            When S3 refuses a probe or a checkpoint.
        """
        _check_run(run)
        prefixes = self.prefixes(bucket)
        stored = self.store.read_if_exists(self.checkpoint_bucket, _plan_key(bucket, run))
        probes = 0
        if stored is not None:
            shards = [Shard.of(s) for s in json.loads(stored)["shards"]]
        else:
            shards = []
            for prefix in prefixes:
                ranges, used = self._ranges(bucket, prefix)
                probes += used
                for r in ranges:
                    shards.append(
                        Shard(
                            id=f"{len(shards):04d}",
                            bucket=bucket,
                            prefix=prefix,
                            start_after=r.start_after,
                            end_before=r.end_before,
                        )
                    )
            shards = _fit(shards)
            body = {"bucket": bucket, "run": run, "shards": [s.as_dict() for s in shards]}
            self.store.put(self.checkpoint_bucket, _plan_key(bucket, run), _json(body))
        pending, done = [], 0
        for shard in shards:
            checkpoint = self._checkpoint(bucket, run, shard.id)
            if checkpoint is not None and checkpoint.get("done"):
                done += 1
            else:
                pending.append(shard.as_dict())
        return {"bucket": bucket, "run": run, "shards": pending, "done": done, "probes": probes}

    def prefixes(self, bucket: str) -> list[str]:
        """The listing prefixes of ``bucket``: its scope's prefixes (none nested in another),
        or ``[""]`` (the whole bucket).

        Raises
        ------
        ValueError
            When ``bucket`` is not one of the pipeline's.
        """
        scope = self.scope
        if scope.buckets and scope.bucket(bucket) is None:
            raise ValueError(f"bucket {bucket!r} is not one of the pipeline's {scope.names}")
        found = scope.bucket(bucket)
        prefixes = sorted(set(found.prefixes)) if found is not None and found.prefixes else [""]
        return [p for p in prefixes if not any(p != q and p.startswith(q) for q in prefixes)]

    def _ranges(self, bucket: str, prefix: str) -> tuple[list[_Range], int]:
        """Contiguous ranges covering every key under ``prefix``, and the probes made."""
        ranges = [_Range(group=prefix, start_after=None, end_before=None)]
        probes = 0
        while any(r.open for r in ranges) and len(ranges) < self.max_shards:
            split: list[_Range] = []
            grew = False
            for r in ranges:
                if not r.open or probes >= self.max_probes or len(split) >= self.max_shards:
                    split.append(r)
                    continue
                pieces, used = self._split(bucket, r)
                probes += used
                grew = grew or len(pieces) != 1 or pieces[0].group != r.group
                split.extend(pieces)
            ranges = split
            if not grew or probes >= self.max_probes:
                break
        return self._merge(ranges), probes

    def _split(self, bucket: str, r: _Range) -> tuple[list[_Range], int]:
        """The pieces of ``r`` by the next character after ``r.group`` (contiguous, covering
        ``r``), each closed when one probe showed all its keys."""
        group, probes = r.group, 0
        firsts: list[tuple[str, int, bool, str]] = []  # (char, count, open, first key)
        marker = r.start_after
        page: list[str] = []
        while True:
            keys, truncated = self.listing.keys_after(bucket, group, marker, self.probe_size)
            probes += 1
            inside = [k for k in keys if r.end_before is None or k < r.end_before]
            if len(inside) < len(keys):
                truncated = False
            if not page:
                page = inside
            for k in inside:
                char = k[len(group)] if len(k) > len(group) else ""
                if firsts and firsts[-1][0] == char:
                    c, n, o, f = firsts[-1]
                    firsts[-1] = (c, n + 1, o, f)
                else:
                    firsts.append((char, 1, False, k))
            if not inside or not truncated:
                break
            char, n, _, first = firsts[-1]
            if char == "":
                marker = inside[-1]
                continue
            firsts[-1] = (char, n, True, first)
            nxt = upper(group + char)
            if nxt is None or (r.end_before is not None and nxt >= r.end_before):
                break
            marker = before(nxt)
        if not firsts:
            return [dataclasses.replace(r, open=False, count=0)], probes
        if len(firsts) == 1 and firsts[0][2] and firsts[0][0]:
            # one child holds every key: find the range's longest common prefix (a binary
            # search over the first key's prefixes, a probe each: does any key of the range lie
            # past every key with this prefix?) rather than going one character deeper a round
            first = page[0]
            lo, hi = len(group) + 1, len(first)
            while lo < hi:
                mid = (lo + hi + 1) // 2
                nxt = upper(first[:mid])
                beyond = self.listing.keys_after(bucket, group, before(nxt), 1)[0] if nxt else []
                probes += 1
                if [k for k in beyond if r.end_before is None or k < r.end_before]:
                    hi = mid - 1
                else:
                    lo = mid
            deeper = first[:lo]
            return [dataclasses.replace(r, group=deeper, count=firsts[0][1], open=True)], probes
        pieces = []
        for i, (char, count, is_open, _) in enumerate(firsts):
            start = r.start_after if i == 0 else before(group + char)
            end = r.end_before if i == len(firsts) - 1 else group + firsts[i + 1][0]
            pieces.append(_Range(group + char, start, end, count=count, open=is_open))
        return pieces, probes

    def _merge(self, ranges: list[_Range]) -> list[_Range]:
        """Adjacent closed ranges merged while their keys stay within ``shard_keys``."""
        merged: list[_Range] = []
        for r in ranges:
            last = merged[-1] if merged else None
            if (
                last is not None
                and not last.open
                and not r.open
                and last.count + r.count <= self.shard_keys
            ):
                merged[-1] = _Range(
                    last.group, last.start_after, r.end_before, last.count + r.count, False
                )
            else:
                merged.append(r)
        return merged

    # -- list one shard ------------------------------------------------------------------------

    def list_shard(
        self,
        run: str,
        shard: Shard,
        remaining_ms: Callable[[], int] | None = None,
    ) -> dict[str, Any]:
        """List ``shard`` from its checkpoint on and record its keys, page by page.

        Parameters
        ----------
        run : str
        shard : Shard
        remaining_ms : callable, optional
            The invocation's remaining time (Lambda's ``get_remaining_time_in_millis``); the
            call returns ``done: false`` once it is below ``margin_ms``. None: no limit.

        Returns
        -------
        dict
            ``{"run", "shard", "done", "counts": {...}, "requests": {...}, "added": {...}}``:
            the shard's totals so far (this call's included), and this call's counts.

        Raises
        ------
        TransientError
            When S3 or the ledger kept failing: the page was not checkpointed, and the next call
            (the state machine's retry) lists it again (its recorded keys count as duplicates).
        """
        _check_run(run)
        checkpoint = self._checkpoint(shard.bucket, run, shard.id) or {}
        counts: Counter[str] = Counter({k: 0 for k in COUNTS})
        counts.update(checkpoint.get("counts") or {})
        requests = Requests()
        requests.counts.update({k: 0 for k in REQUESTS})
        requests.counts.update(checkpoint.get("requests") or {})
        marker = checkpoint.get("marker") or {}
        key_marker = marker.get("key") or shard.start_after
        version_marker = marker.get("version_id")
        done = bool(checkpoint.get("done"))
        start = Counter(counts)
        service = dataclasses.replace(
            self.service,
            ledger=CountedLedger(self.service.ledger, requests),
            bucket=_CountedBucket(self.service.bucket, requests),
        )
        first = True
        while not done:
            # at least one page per call, however short the time: every call makes progress
            if not first and remaining_ms is not None and remaining_ms() < self.margin_ms:
                break
            first = False
            page = self.listing.versions(
                shard.bucket, shard.prefix, key_marker, version_marker, self.page_size
            )
            requests.add("list")
            latest = []
            for row in page.rows:
                if shard.end_before is not None and row.key >= shard.end_before:
                    done = True
                    break
                if row.is_latest:
                    latest.append(row)
            self._record(service, run, latest, counts)
            counts["pages"] += 1
            if page.next_key_marker is None:
                done = True
            key_marker, version_marker = page.next_key_marker, page.next_version_marker
            if not done and key_marker is None:  # pragma: no cover - S3 always gives one
                done = True
            body = {
                "shard": shard.as_dict(),
                "marker": {"key": key_marker, "version_id": version_marker},
                "done": done,
                "counts": dict(counts),
                "requests": dict(requests.counts),
            }
            requests.add("checkpoint")
            body["requests"] = dict(requests.counts)
            self.store.put(
                self.checkpoint_bucket, _shard_key(shard.bucket, run, shard.id), _json(body)
            )
        return {
            "run": run,
            "shard": shard.as_dict(),
            "done": done,
            "counts": dict(counts),
            "requests": dict(requests.counts),
            "added": {k: counts[k] - start[k] for k in COUNTS},
        }

    def _record(
        self, service: IngestService, run: str, rows: list[InventoryRow], counts: Counter[str]
    ) -> None:
        """Record a page's latest entries concurrently; count what became of each."""
        counts["listed"] += len(rows)
        changes = []
        for row in rows:
            if row.is_delete_marker:
                counts["not_visible"] += 1
            elif not self.scope.contains(row.bucket, row.key):
                counts["out_of_scope"] += 1
            else:
                changes.append(_change(row, run))
        if not changes:
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                max_workers=self.record_concurrency, thread_name_prefix="listing"
            )

        def one(change: Change) -> str | TransientError:
            try:
                return _count_of(service.handle(change))
            except TransientError as exc:
                # the row written and a processor failed after it is not the page's failure (the
                # effect waits for reprocess or reconciliation, docs/backfill-listing.md)
                return "effects_pending" if exc.effects_pending else exc

        results = list(self._pool.map(in_caller_context(one), changes))
        failed = [c for c, r in zip(changes, results, strict=True) if isinstance(r, Exception)]
        if failed:  # one more try each, one after another, before the page fails
            retried = [one(c) for c in failed]
            errors = [r for r in retried if isinstance(r, Exception)]
            if errors:
                raise TransientError(f"{len(errors)} listed keys failed to record: {errors[0]}")
            results += retried
        counts.update(r for r in results if isinstance(r, str))

    # -- summarize -----------------------------------------------------------------------------

    def summarize(self, bucket: str, run: str) -> dict[str, Any]:
        """``{"bucket", "run", "shards", "done", "counts", "requests"}``: the totals of the
        run's checkpoints (``shards`` from its plan; a shard without a checkpoint counts as
        not done).

        Raises
        ------
        TransientError
            When the checkpoint bucket cannot be read.
        """
        _check_run(run)
        stored = self.store.read_if_exists(self.checkpoint_bucket, _plan_key(bucket, run))
        planned = len(json.loads(stored)["shards"]) if stored is not None else 0
        counts: Counter[str] = Counter({k: 0 for k in COUNTS})
        requests: Counter[str] = Counter({k: 0 for k in REQUESTS})
        done = 0
        folder = f"{_run_folder(bucket, run)}/"
        for key in self.store.keys(self.checkpoint_bucket, folder):
            if key == _plan_key(bucket, run) or not key.endswith(".json"):
                continue
            body = json.loads(self.store.read(self.checkpoint_bucket, key))
            counts.update(body.get("counts") or {})
            requests.update(body.get("requests") or {})
            done += 1 if body.get("done") else 0
        return {
            "bucket": bucket,
            "run": run,
            "shards": planned,
            "done": done,
            "counts": dict(counts),
            "requests": dict(requests),
        }

    def _checkpoint(self, bucket: str, run: str, shard_id: str) -> dict[str, Any] | None:
        raw = self.store.read_if_exists(self.checkpoint_bucket, _shard_key(bucket, run, shard_id))
        return json.loads(raw) if raw is not None else None

    def close(self) -> None:
        """End the record pool's threads."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


def _fit(shards: list[Shard]) -> list[Shard]:
    """``shards``, neighbours merged pairwise (within one listing prefix) until their JSON fits
    :data:`PLAN_PAYLOAD_BYTES`; ids renumbered."""
    while len(shards) > 1 and len(_json({"shards": [s.as_dict() for s in shards]})) > (
        PLAN_PAYLOAD_BYTES
    ):
        merged: list[Shard] = []
        i = 0
        while i < len(shards):
            a = shards[i]
            b = shards[i + 1] if i + 1 < len(shards) else None
            if b is not None and a.prefix == b.prefix:
                merged.append(dataclasses.replace(a, end_before=b.end_before))
                i += 2
            else:
                merged.append(a)
                i += 1
        if len(merged) == len(shards):
            break
        shards = merged
    return [dataclasses.replace(s, id=f"{i:04d}") for i, s in enumerate(shards)]


def _change(row: InventoryRow, run: str) -> Change:
    return Change(
        bucket=row.bucket,
        key=row.key,
        raw_key=row.key,
        kind=Kind.LISTED,
        event_name=f"Listing/{run}",
        fmt=Format.LISTING,
        version_id=row.version_id,
        etag=row.etag,
        size=row.size,
        last_modified_ms=row.last_modified_ms,
    )


def _count_of(result: Any) -> str:
    """The count a recorded entry adds to (see :data:`COUNTS`)."""
    how = result.extra.get("listing")
    if result.outcome is Outcome.IGNORED:
        return "out_of_scope" if result.reason == "out-of-scope" else "not_visible"
    if how == "recorded-without-head":
        return "recorded_without_head"
    if how == "duplicate" or result.outcome is Outcome.DUPLICATE:
        return "duplicate"
    return "observed_with_head"


def _check_run(run: str) -> None:
    if not run or "/" in run or run in (".", ".."):
        raise ValueError(f"run must be a plain name, not {run!r}")


def _run_folder(bucket: str, run: str) -> str:
    return f"{CHECKPOINT_PREFIX}/{bucket}/{run}"


def _plan_key(bucket: str, run: str) -> str:
    return f"{_run_folder(bucket, run)}/plan.json"


def _shard_key(bucket: str, run: str, shard_id: str) -> str:
    return f"{_run_folder(bucket, run)}/{shard_id}.json"


def _json(body: dict[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def totals(results: Iterable[dict[str, Any]]) -> dict[str, int]:
    """The sum of several :meth:`ListingBackfill.list_shard` results' ``counts``."""
    total: Counter[str] = Counter({k: 0 for k in COUNTS})
    for result in results:
        total.update(result.get("counts") or {})
    return dict(total)
