"""The reprocess run: one processor brought up to date with every visible key (CONTRACT C11).

A processor added to a running stack has no effect state on the rows written before it, and a
processor whose ``version`` was raised has done effects of an older version: both are *behind*
(:meth:`~s3ingest_fn.core.effects.EffectTarget.behind`). Reconciliation only counts them
(``effects_behind`` per processor); this run does the work, as three Lambda steps of the
reprocess state machine (:mod:`s3ingest_fn.handlers.reprocess`):

* :meth:`Reprocessor.plan` stores the run's request (processor, its version, bucket, prefix,
  rate, dry run or removal) and splits the ledger into ``total`` parallel Scan segments
  (`Parallel Scan <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Scan.html#Scan.ParallelScan>`_);
* :meth:`Reprocessor.segment` scans one segment page by page; each row behind for the
  processor is claimed (a conditional write on the row's change id and the processor's effect
  as read), run pinned to the row's change and committed under the fencing token
  (:meth:`~s3ingest_fn.core.decide.IngestService.reprocess`); a row whose change moved on
  meanwhile is skipped (the newer change's own write claimed the processor). After each page
  the cursor is checkpointed; the call returns ``done: false`` before the Lambda runs out of
  time, and the next call resumes there. A row the call cannot start (no time left for its
  claim, or the claim's write failed) cuts the page before it: the cursor stops at the last
  row before it, and the next call scans from there;
* :meth:`Reprocessor.summarize` totals the checkpoints and prices the run.

Why the ledger's segments and not the listing's shards: the ledger row already says whether a
key is behind (its effect state and version), so a key costs its share of one Scan page (1 MB
per request) instead of a list entry plus a GetItem; and the visible keys are the ledger's
present rows once it has converged (C15).

Checkpoints live in the checkpoint bucket under ``reprocess/<run>/``: ``plan.json``
(``request``, ``version``, ``owner``: the execution running the run) and ``<segment>.json``
(``cursor``, ``done``, ``counts``, ``requests``, ``failures``, ``memory_mb``). A segment call
of an execution that no longer owns the run stops (:class:`RunTakenOver`).
"""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from s3ingest_fn.core.context import in_caller_context
from s3ingest_fn.core.decide import IngestService
from s3ingest_fn.core.model import EffectNotStarted, TransientError
from s3ingest_fn.core.ports import InventoryStore, LedgerSegments, SegmentPage
from s3ingest_fn.core.row import LedgerRow
from s3ingest_fn.services.counting import CountedLedger, Requests

#: Where the runs' plans and checkpoints live in the checkpoint bucket.
CHECKPOINT_PREFIX = "reprocess"
#: Parallel Scan segments of a run when the request names none.
DEFAULT_SEGMENTS = 16
#: DynamoDB allows 1 to 1,000,000 segments; a plan's payload stays small below this.
MAX_SEGMENTS = 1000
#: Time a segment call keeps for its checkpoint after the last row it starts, ms (besides the
#: row's claim and processor: :meth:`~s3ingest_fn.core.effects.EffectRunner.time_needed_ms`).
CHECKPOINT_MS = 5_000
#: Failed keys a segment's checkpoint keeps (bucket, key, error), and a run's summary.
FAILURE_SAMPLES = 5

#: What became of each row, per segment (every key present in every checkpoint):
#: ``scanned`` rows read; ``behind`` rows behind for the processor (in a dry run: what would
#: run); ``run`` effects run and committed ``done``; ``superseded`` run and found newer bytes;
#: ``held`` held by the hold policy; ``skipped`` rows whose change or effect moved on between
#: the Scan and the claim (a newer change claimed the processor itself), or that the hold
#: policy skips; ``busy`` another worker's live lease; ``failed`` the processor raised, or its
#: worker was killed (the effect stays pending: a new run, or reconciliation once its lease
#: ends, takes it up); ``removed`` rows whose state of a removed processor was cleaned
#: (``--remove``); ``pages`` Scan requests.
COUNTS = (
    "scanned",
    "behind",
    "run",
    "superseded",
    "held",
    "skipped",
    "busy",
    "failed",
    "removed",
    "pages",
)
#: Requests by kind: ledger ``scan`` pages and the items they ``read`` (billed, those a
#: prefix's filter left out included), ledger ``write`` (claims, commits, releases, holds,
#: removals, refused ones included), processor ``invoke`` (effects started), ``checkpoint``
#: writes, and the segment step's Lambda ``calls`` with their wall time (``elapsed_ms``).
REQUESTS = ("scan", "read", "write", "invoke", "checkpoint", "calls", "elapsed_ms")
#: Outcomes of a row whose processor was invoked.
_INVOKED = frozenset({"run", "superseded", "failed"})

#: On-demand prices (us-east-1, USD) the run's estimate uses: per million write request
#: units, per million read request units, per million Lambda requests and per GB-second
#: (arm64), per 1,000 state transitions (Standard workflows).
#: https://aws.amazon.com/dynamodb/pricing/on-demand/ , https://aws.amazon.com/lambda/pricing/ ,
#: https://aws.amazon.com/step-functions/pricing/
PRICES = {
    "write_per_million": 0.625,
    "read_per_million": 0.125,
    "lambda_request_per_million": 0.20,
    "lambda_gb_second": 0.0000133334,
    "transition_per_thousand": 0.025,
}
#: State transitions of one segment call (the Map iteration's task and choice), and of a run's
#: plan, Map and summary.
TRANSITIONS_PER_CALL, TRANSITIONS_PER_RUN = 3, 8

_RUN_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}$")


@dataclass(frozen=True)
class ReprocessRequest:
    """What a run does: ``processor`` (a configured one, or with ``remove`` one no longer
    configured) over the rows of ``bucket`` (None: every bucket of the scope) whose key starts
    with ``prefix``; ``rate`` keys per second at most over the whole run (None: no limit);
    ``dry_run`` counts what would run and writes nothing; ``segments`` parallel Scan segments."""

    run: str
    processor: str
    bucket: str | None = None
    prefix: str = ""
    rate: float | None = None
    dry_run: bool = False
    remove: bool = False
    segments: int = DEFAULT_SEGMENTS
    concurrency: int = DEFAULT_SEGMENTS

    @classmethod
    def of(cls, value: dict[str, Any]) -> ReprocessRequest:
        """From the state machine's input (``{"run", "processor", "bucket"?, "prefix"?,
        "rate"?, "dry_run"?, "remove"?, "segments"?, "concurrency"?}``).

        Raises
        ------
        ValueError
            A missing or malformed field.
        """
        run = str(value.get("run") or "")
        _check_run(run)
        processor = str(value.get("processor") or "")
        if not processor:
            raise ValueError("reprocess: no processor given")
        segments = int(value.get("segments") or DEFAULT_SEGMENTS)
        if not 1 <= segments <= MAX_SEGMENTS:
            raise ValueError(f"reprocess: segments {segments} is not 1 to {MAX_SEGMENTS}")
        concurrency = int(value.get("concurrency") or min(segments, DEFAULT_SEGMENTS))
        if concurrency < 1:
            raise ValueError("reprocess: concurrency must be at least 1")
        rate = value.get("rate")
        if rate is not None and float(rate) <= 0:
            raise ValueError(f"reprocess: rate {rate} is not a positive number of keys/s")
        return cls(
            run=run,
            processor=processor,
            bucket=str(value["bucket"]) if value.get("bucket") else None,
            prefix=str(value.get("prefix") or ""),
            rate=float(rate) if rate is not None else None,
            dry_run=bool(value.get("dry_run")),
            remove=bool(value.get("remove")),
            segments=segments,
            concurrency=min(concurrency, segments),
        )

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape :meth:`of` reads."""
        return {
            "run": self.run,
            "processor": self.processor,
            "bucket": self.bucket,
            "prefix": self.prefix,
            "rate": self.rate,
            "dry_run": self.dry_run,
            "remove": self.remove,
            "segments": self.segments,
            "concurrency": self.concurrency,
        }

    @property
    def segment_rate(self) -> float | None:
        """Keys per second one segment worker may run (the run's rate shared by the workers
        the Map runs at once)."""
        return self.rate_per_worker(self.concurrency)

    def rate_per_worker(self, workers: int) -> float | None:
        """The run's rate shared by ``workers`` segment workers at once, keys/s."""
        return None if self.rate is None else self.rate / max(workers, 1)


class _Pacer:
    """At most ``rate`` starts per second (None: no limit), spread evenly."""

    def __init__(
        self, rate: float | None, clock: Callable[[], float], sleep: Callable[[float], None]
    ) -> None:
        self._gap = None if rate is None else 1.0 / rate
        self._clock, self._sleep = clock, sleep
        self._next = clock()
        self._lock = threading.Lock()

    def book(self) -> float:
        """Book the next start; the seconds until it (0: now)."""
        if self._gap is None:
            return 0.0
        with self._lock:
            now = self._clock()
            at = max(self._next, now)
            self._next = at + self._gap
        return at - now

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (a booked start's)."""
        if seconds > 0:
            self._sleep(seconds)


class RunTakenOver(ValueError):
    """Raised by a segment call of an execution that no longer owns its run: a later execution
    of the same run planned it again (``--run`` given twice), and its segments go on."""


@dataclass
class Reprocessor:
    """Plans, runs and summarizes reprocess runs.

    Parameters
    ----------
    segments : LedgerSegments
        The ledger by Scan segments.
    store : InventoryStore
        The checkpoint bucket's objects.
    checkpoint_bucket : str
        ``CHECKPOINT_BUCKET_NAME``.
    service : IngestService
        The ingest decision with the stack's processors (its effect runner names them and
        their versions).
    concurrency : int
        Rows of a page run at once.
    page_size : int
        Scan ``Limit``.
    margin_ms : int
        :meth:`segment` scans no further page once the invocation has less than this left,
        plus twice its slowest page so far.
    memory_mb : int
        The segment function's memory (the estimate's GB-seconds) when a call names none.
    """

    segments: LedgerSegments
    store: InventoryStore
    checkpoint_bucket: str
    service: IngestService
    concurrency: int = 8
    page_size: int = 500
    margin_ms: int = 60_000
    memory_mb: int = 1024
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    _pool: ThreadPoolExecutor | None = field(default=None, init=False, repr=False)

    # -- plan ----------------------------------------------------------------------------------

    def plan(
        self, value: dict[str, Any], owner: str | None = None, limit: int | None = None
    ) -> dict[str, Any]:
        """Store the run's request and return its segments: ``{**request, "version",
        "segments": [{"run", "segment", "total"}], "total", "done"}``, leaving out the
        segments this run already finished (planning a run again resumes it). ``owner`` (the
        execution's id) becomes the run's owner: an earlier execution's segments stop.
        ``limit`` (the segment function's reserved concurrency) caps ``concurrency``.

        Raises
        ------
        ValueError
            A malformed request; a processor not configured (without ``remove``); with
            ``remove``, a processor still configured; a bucket not in the scope; a run that
            exists with another request or another version of the processor.
        TransientError
            When the checkpoint bucket refuses the plan.
        """
        request = ReprocessRequest.of(value)
        effects = self.service.effects
        names = effects.names if effects is not None else ()
        if request.remove:
            if request.processor in names:
                raise ValueError(
                    f"reprocess --remove: processor {request.processor!r} is still configured; "
                    "remove it from the configuration and deploy first"
                )
        elif request.processor not in names:
            raise ValueError(
                f"reprocess: processor {request.processor!r} is not configured "
                f"(configured: {', '.join(names) or 'none'})"
            )
        if request.bucket is not None and request.bucket not in self.service.tracked.names:
            raise ValueError(f"reprocess: bucket {request.bucket!r} is not one of the pipeline's")
        version = self._version(request)
        workers = min(request.concurrency, limit or request.concurrency)
        stored = self.store.read_if_exists(self.checkpoint_bucket, _plan_key(request.run))
        plan = {"request": request.as_dict(), "version": version, "owner": owner}
        plan["concurrency"] = workers
        if stored is not None:
            earlier = json.loads(stored)
            if earlier["request"] != request.as_dict():
                raise ValueError(
                    f"reprocess: run {request.run!r} exists with another request; "
                    "give a new run name"
                )
            if earlier["version"] != version:
                raise ValueError(
                    f"reprocess: run {request.run!r} was planned for version "
                    f"{earlier['version']} of {request.processor!r}, now {version}; "
                    "give a new run name"
                )
        if stored is None or json.loads(stored) != plan:
            self.store.put(self.checkpoint_bucket, _plan_key(request.run), _json(plan))
        done = 0
        segments = []
        for i in range(request.segments):
            checkpoint = self._checkpoint(request.run, i)
            if checkpoint is not None and checkpoint.get("done"):
                done += 1
                continue
            segments.append({"run": request.run, "segment": i, "total": request.segments})
        return {
            **request.as_dict(),
            "concurrency": workers,
            "version": version,
            "segments": segments,
            "total": request.segments,
            "done": done,
        }

    def _version(self, request: ReprocessRequest) -> int | None:
        effects = self.service.effects
        if request.remove or effects is None:
            return None
        spec = effects.spec(request.processor)
        return spec.version if spec is not None else None

    def _plan(self, run: str, owner: str | None) -> dict[str, Any]:
        """The stored plan of ``run``, owned by ``owner`` when one is given.

        Raises
        ------
        ValueError
            An unknown run; a processor whose version changed since the plan.
        RunTakenOver
            Another execution owns the run.
        """
        stored = self.store.read_if_exists(self.checkpoint_bucket, _plan_key(run))
        if stored is None:
            raise ValueError(f"reprocess: run {run!r} has no plan")
        plan: dict[str, Any] = json.loads(stored)
        if owner is not None and plan.get("owner") not in (None, owner):
            raise RunTakenOver(
                f"reprocess: run {run!r} is now run by execution {plan.get('owner')}; "
                "this one stops"
            )
        request = ReprocessRequest.of(plan["request"])
        if not request.remove and self._version(request) != plan["version"]:
            now = self._version(request)
            raise ValueError(
                f"reprocess: {request.processor!r} is no longer configured since run {run!r} "
                "was planned"
                if now is None
                else f"reprocess: {request.processor!r} is at version {now} since run "
                f"{run!r} was planned for version {plan['version']}; start a new run"
            )
        return plan

    # -- one segment ---------------------------------------------------------------------------

    def segment(
        self,
        run: str,
        segment: int,
        remaining_ms: Callable[[], int] | None = None,
        *,
        owner: str | None = None,
        memory_mb: int | None = None,
    ) -> dict[str, Any]:
        """Scan ``segment`` of ``run`` from its checkpoint on and bring its rows up to date
        (``owner``: the execution calling, checked against the plan's when the call starts and
        before each checkpoint it writes; ``memory_mb``: the calling function's memory,
        recorded for the estimate).

        Returns
        -------
        dict
            ``{"run", "segment", "done", "counts", "requests", "added"}``: the segment's
            totals so far, and this call's counts.

        Raises
        ------
        ValueError
            An unknown run (no plan) or segment; the processor's version changed since the
            plan.
        RunTakenOver
            A later execution of the run owns it now.
        TransientError
            When the ledger or the checkpoint bucket kept failing, or the call could start
            no row at all: the page was not checkpointed and the next call scans it again
            (its rows already run are no longer behind).
        """
        _check_run(run)
        plan = self._plan(run, owner)
        request = ReprocessRequest.of(plan["request"])
        workers = int(plan.get("concurrency") or request.concurrency)
        if not 0 <= segment < request.segments:
            raise ValueError(f"reprocess: segment {segment} is not 0 to {request.segments - 1}")
        checkpoint = self._checkpoint(run, segment) or {}
        counts: Counter[str] = Counter({k: 0 for k in COUNTS})
        counts.update(checkpoint.get("counts") or {})
        start = Counter(counts)
        requests = Requests({**{k: 0 for k in REQUESTS}, **(checkpoint.get("requests") or {})})
        failures: list[dict[str, str]] = list(checkpoint.get("failures") or [])
        # rows after a cut that an earlier call already brought to an outcome (counted then)
        settled: set[str] = set(checkpoint.get("settled") or [])
        cursor = checkpoint.get("cursor")
        done = bool(checkpoint.get("done"))
        service = dataclasses.replace(
            self.service, ledger=CountedLedger(self.service.ledger, requests)
        )
        page_run = _PageRun(
            service=service,
            request=request,
            requests=requests,
            pacer=_Pacer(request.rate_per_worker(workers), self.clock, self.sleep),
            remaining_ms=remaining_ms,
            needed_ms=self._needed_ms(request),
            clock=self.clock,
        )
        prefix = f"{request.bucket}/{request.prefix}" if request.bucket else ""
        started = self.clock()
        requests.add("calls")
        first = True
        slowest_page_ms = 0
        while not done:
            # another page only while the invocation has time for it: the margin, and twice the
            # slowest page so far (a slow processor makes a page slow)
            if (
                not first
                and remaining_ms is not None
                and remaining_ms() < self.margin_ms + 2 * slowest_page_ms
            ):
                break
            page_started = self.clock()
            page = self.segments.page(
                segment, request.segments, cursor, prefix=prefix, limit=self.page_size
            )
            requests.add("scan")
            requests.add("read", page.read or len(page.rows))
            counts["pages"] += 1
            cut, settled = self._run_page(page_run, page, counts, failures, settled)
            if cut is None:
                counts["scanned"] += len(page.rows)
                cursor = page.cursor
                done = cursor is None
            else:
                if first and cut == 0 and not page_run.finished:
                    # no row of this call could start: the step's retry, after its backoff
                    raise TransientError(
                        f"reprocess: segment {segment} could start no row: {page_run.cut_by}"
                    )
                counts["scanned"] += cut
                if cut:
                    cursor = page.after[cut - 1]
            first = False
            slowest_page_ms = max(slowest_page_ms, int((self.clock() - page_started) * 1000))
            requests.add("checkpoint")
            requests.add("elapsed_ms", int((self.clock() - started) * 1000))
            started = self.clock()
            body = {
                "segment": segment,
                "cursor": cursor,
                "done": done,
                "counts": dict(counts),
                "requests": dict(requests.counts),
                "failures": failures[-FAILURE_SAMPLES:],
                "settled": sorted(settled),
                "memory_mb": memory_mb or self.memory_mb,
            }
            self._plan(run, owner)  # a later execution owns the run: its checkpoint stands
            self.store.put(self.checkpoint_bucket, _segment_key(run, segment), _json(body))
            if cut is not None:
                break
        return {
            "run": run,
            "segment": segment,
            "done": done,
            "counts": dict(counts),
            "requests": dict(requests.counts),
            "added": {k: counts[k] - start[k] for k in COUNTS},
        }

    def _needed_ms(self, request: ReprocessRequest) -> int:
        """The time a row's claim and processor need in the invocation, ms, plus the
        checkpoint's (0 for a removal: no processor runs)."""
        effects = self.service.effects
        if request.remove or effects is None:
            return 0
        return effects.time_needed_ms(request.processor) + CHECKPOINT_MS

    def _selected(self, request: ReprocessRequest, row: LedgerRow) -> bool:
        """The row belongs to the run's bucket and prefix, and to the pipeline's scope."""
        if request.bucket is not None and row.bucket != request.bucket:
            return False
        if request.prefix and not row.key.startswith(request.prefix):
            return False
        return request.remove or self.service.tracked.contains(row.bucket, row.key)

    def _run_page(
        self,
        page_run: _PageRun,
        page: SegmentPage,
        counts: Counter[str],
        failures: list[dict[str, str]],
        settled: set[str],
    ) -> tuple[int | None, set[str]]:
        """Bring one page's rows up to date, counting each outcome, but of the ``settled``
        rows (cursors of rows an earlier call of the segment brought to an outcome after its
        cut). Returns the index of the first row not started (the page is cut there; None:
        every row was) and the settled rows from now on: those of this page after the cut
        that have an outcome, and earlier ones not on this page."""
        request = page_run.request
        rows = page.rows
        after = page.after or tuple("" for _ in rows)
        on_page = set(after) & settled
        picked = [
            (i, r)
            for i, r in enumerate(rows)
            if after[i] not in on_page and self._selected(request, r)
        ]
        left = settled - on_page
        if request.remove:
            for _, row in picked:
                if row.effect_of(request.processor) is None:
                    continue
                if request.dry_run:
                    counts["behind"] += 1
                    continue
                if page_run.service.ledger.forget(row.bucket, row.key, request.processor):
                    counts["removed"] += 1
            return None, left
        service = page_run.service
        due = [(i, r) for i, r in picked if service.behind(r, request.processor)]
        if request.dry_run or not due:
            counts["behind"] += len(due)
            return None, left
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                max_workers=self.concurrency, thread_name_prefix="reprocess"
            )
        cut: int | None = None
        ended: list[int] = []
        for (i, row), (outcome, error) in zip(
            due, self._pool.map(in_caller_context(page_run.one), [r for _, r in due]), strict=True
        ):
            if outcome is None:
                cut = i if cut is None else min(cut, i)
                continue
            ended.append(i)
            counts["behind"] += 1
            counts[outcome] += 1
            if outcome in _INVOKED:
                page_run.requests.add("invoke")
            if error is not None:
                failures.append({"bucket": row.bucket, "key": row.key, "error": error[:300]})
        if cut is None:
            return None, left
        # rows after the cut are scanned again by the next call: those that ended here are
        # not run or counted again there (settled), as those the cut left are
        past = {after[i] for i in ended if i > cut}
        kept = {c for c in on_page if after.index(c) > cut}
        return cut, left | past | kept

    # -- summarize -----------------------------------------------------------------------------

    def summarize(self, run: str) -> dict[str, Any]:
        """``{**request, "version", "segments", "done", "counts", "requests", "failures",
        "left_behind", "estimated_cost_usd"}``: the totals of the run's checkpoints (a segment
        without one counts as not done), up to :data:`FAILURE_SAMPLES` failed keys with their
        errors, the keys the run left behind and the command that finishes them
        (:func:`left_behind`), and the price (:func:`estimate_cost`).

        Raises
        ------
        ValueError
            An unknown run.
        """
        _check_run(run)
        stored = self.store.read_if_exists(self.checkpoint_bucket, _plan_key(run))
        if stored is None:
            raise ValueError(f"reprocess: run {run!r} has no plan")
        plan = json.loads(stored)
        counts: Counter[str] = Counter({k: 0 for k in COUNTS})
        requests: Counter[str] = Counter({k: 0 for k in REQUESTS})
        failures: list[dict[str, str]] = []
        memory_mb = 0
        done = 0
        for i in range(int(plan["request"]["segments"])):
            body = self._checkpoint(run, i)
            if body is None:
                continue
            counts.update(body.get("counts") or {})
            requests.update(body.get("requests") or {})
            failures.extend(body.get("failures") or [])
            memory_mb = max(memory_mb, int(body.get("memory_mb") or 0))
            done += 1 if body.get("done") else 0
        request = ReprocessRequest.of(plan["request"])
        return {
            **plan["request"],
            "version": plan["version"],
            "segments": int(plan["request"]["segments"]),
            "done": done,
            "counts": dict(counts),
            "requests": dict(requests),
            "failures": failures[:FAILURE_SAMPLES],
            "left_behind": left_behind(request, counts["failed"], failures),
            "estimated_cost_usd": estimate_cost(
                dict(counts), dict(requests), memory_mb or self.memory_mb
            ),
        }

    def _checkpoint(self, run: str, segment: int) -> dict[str, Any] | None:
        raw = self.store.read_if_exists(self.checkpoint_bucket, _segment_key(run, segment))
        return json.loads(raw) if raw is not None else None

    def close(self) -> None:
        """End the pool's threads."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


@dataclass
class _PageRun:
    """What one segment call runs each row with, and when it stops starting them: a row starts
    only while the invocation has ``needed_ms`` left plus the slowest row's time so far."""

    service: IngestService
    request: ReprocessRequest
    requests: Requests
    pacer: _Pacer
    remaining_ms: Callable[[], int] | None
    needed_ms: int
    clock: Callable[[], float]
    #: Rows that got an outcome in this call.
    finished: int = 0
    #: Why the first row not started was not (no row starts after it).
    cut_by: str = ""
    _slowest_ms: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def one(self, row: LedgerRow) -> tuple[str | None, str | None]:
        """``(outcome, error)`` of ``row``; ``(None, why)`` when it was not started."""
        if self.cut_by:
            return None, self.cut_by
        delay = self.pacer.book()  # the rate's slot: the time check is of the row's start
        if self.remaining_ms is not None:
            left = self.remaining_ms() - int(delay * 1000)
            if left < self.needed_ms + self._slowest_ms:
                return self._not_started(f"{left} ms left in the invocation at its start")
        self.pacer.sleep(delay)
        started = self.clock()
        error: str | None = None
        try:
            outcome = self.service.reprocess(row, self.request.processor)
        except EffectNotStarted as exc:
            return self._not_started(str(exc))
        except TransientError as exc:
            outcome, error = "failed", str(exc)
        with self._lock:
            self.finished += 1
            self._slowest_ms = max(self._slowest_ms, int((self.clock() - started) * 1000))
        return outcome, error

    def _not_started(self, why: str) -> tuple[None, str]:
        with self._lock:
            self.cut_by = self.cut_by or why
        return None, why


def finish_command(request: ReprocessRequest) -> str:
    """The command that runs what ``request``'s run left behind: a new run of the same
    processor over the same bucket and prefix at the same rate (``s3ingest reprocess``'s
    default run name is new each time). Rows the run finished are no longer behind, so it runs
    only the keys left pending (their processor's claim released, or their dead worker's lease
    ended) and those that fell behind since."""
    words = ["s3ingest", "reprocess", "--processor", request.processor]
    if request.bucket is not None:
        words += ["--bucket", request.bucket]
    if request.prefix:
        words += ["--prefix", request.prefix]
    if request.rate is not None:
        rate = request.rate
        words += ["--rate", str(int(rate)) if rate.is_integer() else repr(rate)]
    return shlex.join(words)


def left_behind(
    request: ReprocessRequest, count: int, failures: list[dict[str, str]]
) -> dict[str, Any]:
    """``{"count", "samples", "command"}``: the run's keys left behind (its ``failed``
    count: a processor that raised, or a worker killed before its commit; their effects stay
    pending), up to :data:`FAILURE_SAMPLES` of them as ``{"bucket", "key"}`` (logged as the
    ``logKeys`` setting says), and the command that finishes them (:func:`finish_command`;
    None when none is left, and for a dry run or a removal, which run no processor)."""
    samples = [{"bucket": f.get("bucket"), "key": f.get("key")} for f in failures]
    runs = not (request.dry_run or request.remove)
    return {
        "count": count,
        "samples": samples[:FAILURE_SAMPLES] if count else [],
        "command": finish_command(request) if count and runs else None,
    }


def estimate_cost(counts: dict[str, int], requests: dict[str, int], memory_mb: int = 1024) -> float:
    """The run's cost in USD at :data:`PRICES`: a ledger write of a row up to 1 KB is one write
    unit; a Scan reads each item (``read``, else the rows ``scanned``; up to 1 KB) at half a
    read unit per 4 KB (eventually consistent); the segment calls' Lambda requests and
    GB-seconds (their wall time at ``memory_mb``); their state transitions. The processor's own
    requests (its reads, its output) are not included: they are the processor's cost, whoever
    runs it."""
    writes = requests.get("write", 0) * PRICES["write_per_million"] / 1e6
    read = requests.get("read") or counts.get("scanned", 0)
    reads = read / 8 * PRICES["read_per_million"] / 1e6
    calls = requests.get("calls", 0)
    lam = calls * PRICES["lambda_request_per_million"] / 1e6
    lam += requests.get("elapsed_ms", 0) / 1000 * memory_mb / 1024 * PRICES["lambda_gb_second"]
    transitions = calls * TRANSITIONS_PER_CALL + TRANSITIONS_PER_RUN
    return round(writes + reads + lam + transitions * PRICES["transition_per_thousand"] / 1000, 6)


def _check_run(run: str) -> None:
    if not _RUN_RE.match(run):
        raise ValueError(f"reprocess: run {run!r} is not a name of letters, digits, '.', '_', '-'")


def _plan_key(run: str) -> str:
    return f"{CHECKPOINT_PREFIX}/{run}/plan.json"


def _segment_key(run: str, segment: int) -> str:
    return f"{CHECKPOINT_PREFIX}/{run}/{segment:04d}.json"


def _json(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()
