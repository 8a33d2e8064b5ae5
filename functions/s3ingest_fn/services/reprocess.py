"""The reprocess run: one processor brought up to date with every visible key (CONTRACT C11).

A processor added to a running stack has no effect state on the rows written before it, and a
processor whose ``version`` was raised has done effects of an older version: both are *behind*
(:meth:`~s3ingest_fn.core.row.LedgerRow.behind_for`). Reconciliation only counts them
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
  time, and the next call resumes there;
* :meth:`Reprocessor.summarize` totals the checkpoints and prices the run.

Why the ledger's segments and not the listing's shards: the ledger row already says whether a
key is behind (its effect state and version), so a key costs its share of one Scan page (1 MB
per request) instead of a list entry plus a GetItem; and the visible keys are the ledger's
present rows once it has converged (C15).

Checkpoints live in the checkpoint bucket under ``reprocess/<run>/``: ``plan.json`` and
``<segment>.json`` (``cursor``, ``done``, ``counts``, ``requests``).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from s3ingest_fn.config import carry_context
from s3ingest_fn.core.decide import IngestService
from s3ingest_fn.core.model import TransientError
from s3ingest_fn.core.ports import InventoryStore, LedgerSegments
from s3ingest_fn.core.row import LedgerRow

#: Where the runs' plans and checkpoints live in the checkpoint bucket.
CHECKPOINT_PREFIX = "reprocess"
#: Parallel Scan segments of a run when the request names none.
DEFAULT_SEGMENTS = 16
#: DynamoDB allows 1 to 1,000,000 segments; a plan's payload stays small below this.
MAX_SEGMENTS = 1000

#: What became of each row, per segment (every key present in every checkpoint):
#: ``scanned`` rows read; ``behind`` rows behind for the processor (in a dry run: what would
#: run); ``run`` effects run and committed ``done``; ``superseded`` run and found newer bytes;
#: ``held`` held by the hold policy; ``skipped`` rows whose change or effect moved on between
#: the Scan and the claim (a newer change claimed the processor itself); ``busy`` another
#: worker's live lease; ``failed`` the processor raised (the effect stays pending: the next
#: run or reconciliation takes it up); ``removed`` rows whose state of a removed processor was
#: cleaned (``--remove``).
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
#: Requests by kind: ledger ``scan`` pages, ledger ``write`` (claims, commits, releases,
#: removals), processor ``invoke`` (effects started), ``checkpoint`` writes, and the
#: segment step's Lambda ``calls`` with their wall time (``elapsed_ms``).
REQUESTS = ("scan", "write", "invoke", "checkpoint", "calls", "elapsed_ms")

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
        return None if self.rate is None else self.rate / self.concurrency


class _Requests:
    """Thread-safe request counts by kind."""

    def __init__(self, start: dict[str, int] | None = None) -> None:
        self.counts: Counter[str] = Counter({k: 0 for k in REQUESTS})
        self.counts.update(start or {})
        self._lock = threading.Lock()

    def add(self, kind: str, n: int = 1) -> None:
        with self._lock:
            self.counts[kind] += n


class _Pacer:
    """At most ``rate`` starts per second (None: no limit), spread evenly."""

    def __init__(
        self, rate: float | None, clock: Callable[[], float], sleep: Callable[[float], None]
    ) -> None:
        self._gap = None if rate is None else 1.0 / rate
        self._clock, self._sleep = clock, sleep
        self._next = clock()
        self._lock = threading.Lock()

    def wait(self) -> None:
        if self._gap is None:
            return
        with self._lock:
            now = self._clock()
            at = max(self._next, now)
            self._next = at + self._gap
        if at > now:
            self._sleep(at - now)


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
        :meth:`segment` returns ``done: false`` once the invocation has less than this left,
        plus twice its slowest page so far.
    """

    segments: LedgerSegments
    store: InventoryStore
    checkpoint_bucket: str
    service: IngestService
    concurrency: int = 8
    page_size: int = 500
    margin_ms: int = 60_000
    #: The segment function's memory (the estimate's GB-seconds).
    memory_mb: int = 1024
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    _pool: ThreadPoolExecutor | None = field(default=None, init=False, repr=False)

    # -- plan ----------------------------------------------------------------------------------

    def plan(self, value: dict[str, Any]) -> dict[str, Any]:
        """Store the run's request and return its segments: ``{**request, "version",
        "segments": [{"run", "segment", "total"}], "total", "done"}``, leaving out the
        segments this run already finished (planning a run again resumes it).

        Raises
        ------
        ValueError
            A malformed request; a processor not configured (without ``remove``); with
            ``remove``, a processor still configured; a bucket not in the scope.
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
        stored = self.store.read_if_exists(self.checkpoint_bucket, _plan_key(request.run))
        if stored is not None:
            plan = json.loads(stored)
            if plan["request"] != request.as_dict():
                raise ValueError(
                    f"reprocess: run {request.run!r} exists with another request; "
                    "give a new run name"
                )
        else:
            plan = {"request": request.as_dict(), "version": self._version(request)}
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
            "version": plan["version"],
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

    # -- one segment ---------------------------------------------------------------------------

    def segment(
        self, run: str, segment: int, remaining_ms: Callable[[], int] | None = None
    ) -> dict[str, Any]:
        """Scan ``segment`` of ``run`` from its checkpoint on and bring its rows up to date.

        Returns
        -------
        dict
            ``{"run", "segment", "done", "counts", "requests", "added"}``: the segment's
            totals so far, and this call's counts.

        Raises
        ------
        ValueError
            An unknown run (no plan) or segment.
        TransientError
            When the ledger or the checkpoint bucket kept failing: the page was not
            checkpointed and the next call scans it again (its rows are no longer behind).
        """
        _check_run(run)
        stored = self.store.read_if_exists(self.checkpoint_bucket, _plan_key(run))
        if stored is None:
            raise ValueError(f"reprocess: run {run!r} has no plan")
        plan = json.loads(stored)
        request = ReprocessRequest.of(plan["request"])
        if not 0 <= segment < request.segments:
            raise ValueError(f"reprocess: segment {segment} is not 0 to {request.segments - 1}")
        checkpoint = self._checkpoint(run, segment) or {}
        counts: Counter[str] = Counter({k: 0 for k in COUNTS})
        counts.update(checkpoint.get("counts") or {})
        start = Counter(counts)
        requests = _Requests(checkpoint.get("requests"))
        cursor = checkpoint.get("cursor")
        done = bool(checkpoint.get("done"))
        pacer = _Pacer(request.segment_rate, self.clock, self.sleep)
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
            first = False
            page_started = self.clock()
            page = self.segments.page(
                segment, request.segments, cursor, prefix=prefix, limit=self.page_size
            )
            requests.add("scan")
            rows = [r for r in page.rows if self._selected(request, r)]
            counts["scanned"] += len(page.rows)
            counts["pages"] += 1
            self._run_rows(request, rows, counts, requests, pacer)
            cursor = page.cursor
            done = cursor is None
            body = {
                "segment": segment,
                "cursor": cursor,
                "done": done,
                "counts": dict(counts),
                "requests": dict(requests.counts),
            }
            slowest_page_ms = max(slowest_page_ms, int((self.clock() - page_started) * 1000))
            requests.add("checkpoint")
            requests.add("elapsed_ms", int((self.clock() - started) * 1000))
            started = self.clock()
            body["requests"] = dict(requests.counts)
            self.store.put(self.checkpoint_bucket, _segment_key(run, segment), _json(body))
        return {
            "run": run,
            "segment": segment,
            "done": done,
            "counts": dict(counts),
            "requests": dict(requests.counts),
            "added": {k: counts[k] - start[k] for k in COUNTS},
        }

    def _selected(self, request: ReprocessRequest, row: LedgerRow) -> bool:
        """The row belongs to the run's bucket and prefix, and to the pipeline's scope."""
        if request.bucket is not None and row.bucket != request.bucket:
            return False
        if request.prefix and not row.key.startswith(request.prefix):
            return False
        return request.remove or self.service.tracked.contains(row.bucket, row.key)

    def _run_rows(
        self,
        request: ReprocessRequest,
        rows: list[LedgerRow],
        counts: Counter[str],
        requests: _Requests,
        pacer: _Pacer,
    ) -> None:
        if request.remove:
            for row in rows:
                if row.effect_of(request.processor) is None:
                    continue
                if request.dry_run:
                    counts["behind"] += 1
                    continue
                requests.add("write")
                if self.service.ledger.forget(row.bucket, row.key, request.processor):
                    counts["removed"] += 1
            return
        service = self.service
        due = [r for r in rows if service.behind(r, request.processor)]
        counts["behind"] += len(due)
        if request.dry_run or not due:
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                max_workers=self.concurrency, thread_name_prefix="reprocess"
            )

        def one(row: LedgerRow) -> str:
            pacer.wait()
            try:
                outcome = service.reprocess(row, request.processor)
            except TransientError:
                outcome = "failed"
            return outcome

        for outcome in self._pool.map(carry_context(one), due):
            counts[outcome] += 1
            # a claim and a commit (a release when it failed); a skipped row's refused claim
            requests.add("write", 1 if outcome in ("skipped", "busy") else 2)
            if outcome not in ("skipped", "busy"):
                requests.add("invoke")

    # -- summarize -----------------------------------------------------------------------------

    def summarize(self, run: str) -> dict[str, Any]:
        """``{**request, "version", "segments", "done", "counts", "requests",
        "estimated_cost_usd"}``: the totals of the run's checkpoints (a segment without one
        counts as not done) and their price (:func:`estimate_cost`).

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
        done = 0
        for i in range(int(plan["request"]["segments"])):
            body = self._checkpoint(run, i)
            if body is None:
                continue
            counts.update(body.get("counts") or {})
            requests.update(body.get("requests") or {})
            done += 1 if body.get("done") else 0
        return {
            **plan["request"],
            "version": plan["version"],
            "segments": int(plan["request"]["segments"]),
            "done": done,
            "counts": dict(counts),
            "requests": dict(requests),
            "estimated_cost_usd": estimate_cost(dict(counts), dict(requests), self.memory_mb),
        }

    def _checkpoint(self, run: str, segment: int) -> dict[str, Any] | None:
        raw = self.store.read_if_exists(self.checkpoint_bucket, _segment_key(run, segment))
        return json.loads(raw) if raw is not None else None

    def close(self) -> None:
        """End the pool's threads."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


def estimate_cost(counts: dict[str, int], requests: dict[str, int], memory_mb: int = 1024) -> float:
    """The run's cost in USD at :data:`PRICES`: a ledger write of a row up to 1 KB is one write
    unit; a Scan reads each row (up to 1 KB) at half a read unit per 4 KB (eventually
    consistent); the segment calls' Lambda requests and GB-seconds (their wall time at
    ``memory_mb``); their state transitions. The processor's own requests (its reads, its
    output) are not included: they are the processor's cost, whoever runs it."""
    writes = requests.get("write", 0) * PRICES["write_per_million"] / 1e6
    reads = counts.get("scanned", 0) / 8 * PRICES["read_per_million"] / 1e6
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
