"""The local runtime's oracles: what a run is checked against once delivery is quiet.

* :meth:`Oracles.compare` is the convergence check (CONTRACT C15): the ledger against every
  landing bucket, in scope only (keys outside a bucket's filters, and buckets that are not the
  pipeline's, must have no row);
* :meth:`Oracles.check_effects` checks the processor's runs against the ledger (CONTRACT C11),
  :meth:`Oracles.check_sidecars` the example processor's output against the bucket, and
  :meth:`Oracles.effects_report` sums both up with the change events a subscriber received;
* the readers (:meth:`Oracles.ledger_rows`, :meth:`Oracles.bucket_objects`,
  :meth:`Oracles.dlq_messages`, :meth:`Oracles.dead_letters`) read state for those checks and
  for reports, never changing it.

:class:`EffectRecorder` wraps the team's processor and records every completed run as an
:class:`EffectRun`, the evidence :meth:`Oracles.check_effects` reads.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from s3ingest.local.emulator.s3faithful import MAX_KEY_BYTES
from s3ingest.local.stack.provisioning import Resources
from s3ingest_fn.contract import CANARY_PREFIX
from s3ingest_fn.core.effects import (
    LATEST,
    AppliedChange,
    PinnedContent,
    Processor,
    ProcessorSpec,
)
from s3ingest_fn.core.events import normalize_etag, normalize_version
from s3ingest_fn.core.row import DEFAULT_PROCESSOR, LedgerRow
from s3ingest_fn.core.sequencer import normalize

#: The repository's example processor (JSON sidecars), which local demos and scenarios run.
EXAMPLE_PROCESSOR = "s3ingest_examples.sidecar:process"


class RowReader(Protocol):
    """Reads every ledger row (``DynamoLedgerScanner.all_rows``)."""

    def all_rows(self) -> Iterable[LedgerRow]: ...


@dataclass
class EffectRun:
    """One completed run of the processor: the change it ran for, and whether the worker was
    then killed before committing (so the effect must run again)."""

    change_id: str
    key: str
    kind: str
    sequencer: str | None
    version_id: str | None
    etag: str | None
    token: int
    step: int | None
    crashed_before_commit: bool = False
    bucket: str | None = None
    processor: str = DEFAULT_PROCESSOR
    #: The processor's version when it ran (``ProcessorSpec.version``).
    version: int = 1
    #: How many times the processor's state had been removed from the rows before it ran
    #: (``reprocess --remove``): a run after a removal is a first run again.
    epoch: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "processor": self.processor,
            "version": self.version,
            "id": self.change_id,
            "bucket": self.bucket,
            "key": self.key,
            "kind": self.kind,
            "sequencer": self.sequencer,
            "versionId": self.version_id,
            "etag": self.etag,
            "token": self.token,
            "step": self.step,
            "crashed_before_commit": self.crashed_before_commit,
        }


class ProcessorOutage(RuntimeError):
    """A processor failing, as a team's code raising while its downstream is down."""


class EffectRecorder:
    """Records the processor's completed runs, in completion order (CONTRACT C11).

    Parameters
    ----------
    step : callable
        Returns the scenario step in progress (None outside a scenario), stamped on each run.
    """

    def __init__(self, step: Callable[[], int | None]) -> None:
        self.runs: list[EffectRun] = []
        self._step = step
        self._lock = threading.Lock()
        self._epochs: dict[str, int] = {}
        #: Processors failing now (``"*"``: every one): each call raises ProcessorOutage before
        #: the team's code runs (a scenario's ``fail_processor`` window).
        self.failing: frozenset[str] = frozenset()

    def wrap(
        self,
        processor: Processor,
        name: str = DEFAULT_PROCESSOR,
        version: Callable[[], int] = lambda: 1,
    ) -> Processor:
        """The team's processor ``name``, called exactly as given (``processor(change,
        content)``), and recorded when it returns with its ``version()`` then; a run that
        raises is not recorded."""

        def run(change: AppliedChange, content: PinnedContent | None) -> None:
            if name in self.failing or "*" in self.failing:
                raise ProcessorOutage(f"processor {name} is failing (a fail_processor window)")
            processor(change, content)
            with self._lock:  # processors of one change run on threads of their own
                self._record(change, version())

        return run

    def forgot(self, processor: str) -> None:
        """``processor``'s state was removed from the rows (``reprocess --remove``): its later
        runs are first runs again."""
        with self._lock:
            self._epochs[processor] = self._epochs.get(processor, 0) + 1

    def _record(self, change: AppliedChange, version: int = 1) -> None:
        self.runs.append(
            EffectRun(
                change_id=change.change_id,
                key=change.key,
                kind=change.kind,
                sequencer=change.sequencer,
                version_id=change.version_id,
                etag=change.etag,
                token=change.token,
                step=self._step(),
                bucket=change.bucket,
                processor=change.processor,
                version=version,
                epoch=self._epochs.get(change.processor, 0),
            )
        )

    def mark_crashed(self, change: AppliedChange) -> None:
        """Mark the latest run of ``change`` by its processor under its claim token as killed
        before commit."""
        for run in reversed(self.runs):
            if (run.change_id, run.token, run.processor) == (
                change.change_id,
                change.token,
                change.processor,
            ):
                run.crashed_before_commit = True
                return


@dataclass
class Comparison:
    """Ledger against bucket (CONTRACT C15)."""

    converged: bool
    bucket: list[dict[str, Any]]
    ledger: list[LedgerRow]
    differences: list[str] = field(default_factory=list)


def row_matches(row: LedgerRow, obj: dict[str, Any] | None) -> bool:
    """Whether a ledger row records what the bucket shows: present with the visible object's
    version id and ETag, or a tombstone of a key that is not visible (``obj`` None)."""
    if obj is None:
        return not row.present
    return row.present and (row.version_id, row.etag) == (
        obj["version_id"],
        obj["etag"],
    )


class Oracles:
    """The checks and readers of one local deployment.

    Parameters
    ----------
    s3, sqs : boto3 clients
        On the emulator.
    scanner : RowReader
        Reads every ledger row (built by ``wiring.ledger_scanner``).
    resources : Resources
        The provisioned deployment (bucket, output bucket, dead-letter queue).
    processor : str or None
        The configured processor spec; the sidecar check applies to :data:`EXAMPLE_PROCESSOR`.
    spec_of : callable, optional
        ``spec_of(processor)``: the processor's :class:`~s3ingest_fn.core.effects.ProcessorSpec`
        (its mode, key filters and kinds), or None: a ``latest`` processor of every change.
    configured : callable, optional
        The names of the processors configured now: every visible key's effect must be current
        for each of them, at its version.
    """

    def __init__(
        self,
        *,
        s3: Any,
        sqs: Any,
        scanner: RowReader,
        resources: Resources,
        processor: str | None,
        spec_of: Callable[[str], ProcessorSpec | None] | None = None,
        configured: Callable[[], Sequence[str]] | None = None,
    ) -> None:
        self.s3 = s3
        self.sqs = sqs
        self.scanner = scanner
        self.resources = resources
        self.processor = processor
        self.spec_of = spec_of or (lambda processor: None)
        self.configured = configured or (lambda: ())
        #: Landing buckets whose name another account holds now (a scenario's ``squat``):
        #: nothing of theirs is the pipeline's, so the ledger must hold nothing of them.
        self.foreign: set[str] = set()

    # -- readers -------------------------------------------------------------------------

    def ledger_rows(self) -> list[LedgerRow]:
        """Every ledger row, sorted by key (then bucket)."""
        return sorted(self.scanner.all_rows(), key=lambda r: (r.key, r.bucket))

    def all_objects(self) -> list[dict[str, Any]]:
        """Visible objects of every landing bucket in the pipeline's scope (key filters
        applied), each with ``"bucket"``, sorted by key then bucket."""
        out: list[dict[str, Any]] = []
        for landing in self.resources.buckets or (self.resources.landing(),):
            out.extend(o for o in self.bucket_objects(landing.name) if landing.contains(o["key"]))
        return sorted(out, key=lambda o: (o["key"], o["bucket"]))

    def bucket_objects(self, name: str | None = None) -> list[dict[str, Any]]:
        """Visible objects of landing bucket ``name`` (the first when None), all keys: bucket,
        key, current version id (None when unversioned or the null version) and ETag without
        quotes, sorted by key."""
        landing = self.resources.landing(name)
        bucket = landing.name
        visible: list[dict[str, Any]] = []
        if bucket in self.foreign:  # another account's bucket of that name: not the truth
            return visible
        if landing.versioning:
            pages = self.s3.get_paginator("list_object_versions").paginate(Bucket=bucket)
            latest: dict[str, dict[str, Any]] = {}
            for page in pages:
                for v in page.get("Versions", []):
                    if v.get("IsLatest"):
                        latest[v["Key"]] = {
                            "bucket": bucket,
                            "key": v["Key"],
                            "version_id": normalize_version(v.get("VersionId")),
                            "etag": normalize_etag(v.get("ETag")),
                        }
                for m in page.get("DeleteMarkers", []):
                    if m.get("IsLatest"):
                        latest.pop(m["Key"], None)
            visible = list(latest.values())
        else:
            for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
                visible.extend(
                    {
                        "bucket": bucket,
                        "key": o["Key"],
                        "version_id": None,
                        "etag": normalize_etag(o.get("ETag")),
                    }
                    for o in page.get("Contents", [])
                )
        return sorted(visible, key=lambda o: o["key"])

    def dlq_messages(self) -> list[dict[str, Any]]:
        """Everything in the dead-letter queue (received without deleting, then visible again
        at once, so a redrive can follow)."""
        out: list[dict[str, Any]] = []
        seen: set[str] = set()
        for _ in range(100):
            msgs = self.sqs.receive_message(
                QueueUrl=self.resources.dlq_url,
                MaxNumberOfMessages=10,
                VisibilityTimeout=30,
                MessageAttributeNames=["All"],
            ).get("Messages", [])
            fresh = [m for m in msgs if m["MessageId"] not in seen]
            if not fresh:
                break
            seen.update(m["MessageId"] for m in fresh)
            out.extend(fresh)
        for m in out:
            self.sqs.change_message_visibility(
                QueueUrl=self.resources.dlq_url,
                ReceiptHandle=m["ReceiptHandle"],
                VisibilityTimeout=0,
            )
        return out

    def dead_letters(self) -> list[dict[str, Any]]:
        """The dead-letter queue's messages as ``{"reason", "body"}`` (body cut to 200 chars);
        ``retries-exhausted`` for a message that used up its receives."""
        # A message SQS moved there after maxReceiveCount receives carries no reason of ours.
        return [
            {
                "reason": m.get("MessageAttributes", {})
                .get("s3ingest-reason", {})
                .get("StringValue")
                or "retries-exhausted",
                "body": m["Body"][:200],
            }
            for m in self.dlq_messages()
        ]

    # -- checks --------------------------------------------------------------------------

    def compare(self) -> Comparison:
        """Whether the ledger equals the buckets: every visible key in scope present with its
        current version id and ETag; every other row a tombstone (CONTRACT C15); and no row at
        all for a key out of scope (another bucket, or outside its bucket's key filters).
        Differences name the bucket when the deployment has several."""
        objects = self.all_objects()
        rows = self.ledger_rows()
        scope = self.resources.scope()
        several = len(scope.buckets) > 1

        def name(bucket: str, key: str) -> str:
            return f"{bucket}/{key!r}" if several else repr(key)

        by_key = {(r.bucket, r.key): r for r in rows}
        diffs: list[str] = [
            f"out of scope in ledger ({scope.reason(r.bucket, r.key)}): {r.bucket}/{r.key!r}"
            for r in rows
            if not scope.contains(r.bucket, r.key)
        ]
        for obj in objects:
            label = name(obj["bucket"], obj["key"])
            row = by_key.get((obj["bucket"], obj["key"]))
            if row is None:
                diffs.append(f"missing in ledger: {label}")
            elif not row.present:
                diffs.append(f"tombstoned but visible: {label}")
            elif not row_matches(row, obj):
                diffs.append(
                    f"content mismatch: {label} ledger "
                    f"{row.version_id}/{row.etag} bucket "
                    f"{obj['version_id']}/{obj['etag']}"
                )
        visible = {(o["bucket"], o["key"]) for o in objects}
        diffs.extend(
            f"present in ledger but not visible: {name(r.bucket, r.key)}"
            for r in rows
            if r.present and (r.bucket, r.key) not in visible and scope.contains(r.bucket, r.key)
        )
        return Comparison(converged=not diffs, bucket=objects, ledger=rows, differences=diffs)

    def check_effects(self, effects: Sequence[EffectRun]) -> list[str]:
        """Effects against the ledger (CONTRACT C11), per processor: per key, the runs in claim
        order (an ``every-change`` claim runs several changes under one token, in sequencer
        order) with only crash-caused repeats, the last one for the change the row records as
        done; a ``latest`` processor the row's change concerns done for that very change; no
        effect pending, waiting or behind the row (:attr:`LedgerRow.effect_behind`). Returns
        the problems found."""
        problems: list[str] = []
        first = self.resources.bucket
        rows = {(r.bucket, r.key): r for r in self.ledger_rows()}
        by_key: dict[tuple[str, str, str], list[EffectRun]] = {}
        for run in effects:
            by_key.setdefault((run.bucket or first, run.key, run.processor), []).append(run)
        for (bucket, key, processor), runs in by_key.items():
            name = "" if processor == DEFAULT_PROCESSOR else f"{processor}: "
            tokens = [r.token for r in runs]
            if any(
                after.token < before.token
                or (after.token == before.token and after.change_id == before.change_id)
                for before, after in itertools.pairwise(runs)
            ):
                problems.append(f"{name}{key!r}: effects not in claim order: tokens {tokens}")
            for before, after in itertools.pairwise(runs):
                if (
                    before.change_id == after.change_id
                    and not before.crashed_before_commit
                    and before.version >= after.version
                    and before.epoch == after.epoch
                ):
                    problems.append(
                        f"{name}{key!r}: effect {before.change_id} ran twice without a crash"
                    )
                if (
                    before.token == after.token
                    and before.sequencer
                    and after.sequencer
                    and (normalize(after.sequencer) or "") <= (normalize(before.sequencer) or "")
                ):
                    problems.append(f"{name}{key!r}: waiting changes ran out of sequencer order")
            row = rows.get((bucket, key))
            effect = row.effect_of(processor) if row is not None else None
            done = effect.done_change_id if effect is not None else None
            if effect is not None and effect.status == "done" and runs[-1].change_id != done:
                problems.append(
                    f"{name}{key!r}: last effect {runs[-1].change_id} is not the change "
                    f"{done} the row records as done"
                )
        visible = {(o["bucket"], o["key"]): o for o in self.all_objects()}
        problems.extend(self.effects_not_current(list(rows.values()), visible))
        for (bucket, key), row in rows.items():
            kind = "created" if row.present else "removed"
            for processor, effect in row.effects().items():
                name = "" if processor == DEFAULT_PROCESSOR else f"{processor}: "
                spec = self.spec_of(processor)
                concerned = spec is None or spec.concerns(key, kind)
                if effect.status == "pending":
                    problems.append(f"{name}{key!r}: effect still pending after quiescence")
                elif effect.status in ("held", "rejected"):
                    continue  # waiting for a review, or decided: listed apart (``held``)
                elif effect.queue:
                    problems.append(f"{name}{key!r}: {len(effect.queue)} change(s) still waiting")
                elif (
                    effect.status == "done"
                    and concerned
                    and (spec is None or spec.mode == LATEST)
                    and effect.done_change_id != row.change_id
                ):
                    problems.append(
                        f"{name}{key!r}: effect done for {effect.done_change_id}, not for the "
                        f"row's change {row.change_id}"
                    )
                elif (
                    effect.status == "superseded"
                    and concerned
                    and row_matches(row, visible.get((bucket, key)))
                ):
                    # (a row that differs from the bucket is ledger drift, reported by
                    # compare(); its repair records a new change, which runs its own effect)
                    problems.append(
                        f"{name}{key!r}: effect superseded for the row's change "
                        f"{row.change_id} and no newer change came (a reconciliation "
                        "re-runs it)"
                    )
        return problems

    def effects_not_current(
        self,
        rows: Sequence[LedgerRow] | None = None,
        visible: dict[tuple[str, str], dict[str, Any]] | None = None,
    ) -> list[str]:
        """Every visible key whose effect is not current for a configured processor at its
        version: none at all (a processor configured after the key's change), or done under
        a lower version (``s3ingest reprocess`` brings them up to date). ``rows`` and
        ``visible`` (by bucket and key) are read when not given."""
        if visible is None:
            visible = {(o["bucket"], o["key"]): o for o in self.all_objects()}
        problems = []
        for row in self.ledger_rows() if rows is None else rows:
            problems.extend(self._not_current(row, visible.get((row.bucket, row.key))))
        return problems

    def _not_current(self, row: LedgerRow, obj: dict[str, Any] | None) -> list[str]:
        if not row.present or not row_matches(row, obj) or row.key.startswith(CANARY_PREFIX):
            return []
        problems = []
        for processor in self.configured():
            spec = self.spec_of(processor)
            if spec is None or not spec.concerns(row.key, "created"):
                continue
            effect = row.effect_of(processor)
            name = "" if processor == DEFAULT_PROCESSOR else f"{processor}: "
            if effect is None:
                problems.append(
                    f"{name}{row.key!r}: no effect for the row's change {row.change_id}"
                )
            elif effect.status == "done" and effect.version < spec.version:
                problems.append(
                    f"{name}{row.key!r}: effect done under version {effect.version}, the "
                    f"processor is at version {spec.version}"
                )
        return problems

    def check_sidecars(self) -> list[str]:
        """For the example processor: every visible object has a sidecar describing its current
        version/ETag, and no other key has one. Empty when another processor is configured."""
        if self.processor != EXAMPLE_PROCESSOR or not self.resources.output_bucket:
            return []
        from s3ingest_examples.sidecar import DEFAULT_PREFIX

        out = self.resources.output_bucket
        sidecars: dict[tuple[str, str], dict[str, Any]] = {}
        names: list[str] = []  # the emulator stores keys S3 would refuse: check their length
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=out):
            for obj in page.get("Contents", []):
                names.append(obj["Key"])
                doc = json.loads(self.s3.get_object(Bucket=out, Key=obj["Key"])["Body"].read())
                sidecars[(doc.get("bucket") or self.resources.bucket, doc["key"])] = doc
        problems = []
        # a key whose effect is held (or was rejected) keeps the sidecar of its last run
        reviewed = {
            (r.bucket, r.key)
            for r in self.ledger_rows()
            if r.effect is not None and r.effect.status in ("held", "rejected")
        }
        for held in reviewed:
            sidecars.pop(held, None)
        for obj in self.all_objects():
            if (obj["bucket"], obj["key"]) in reviewed:
                continue
            doc = sidecars.pop((obj["bucket"], obj["key"]), None)
            if doc is None:
                problems.append(f"no sidecar for visible {obj['key']!r}")
            elif (doc["versionId"], doc["etag"]) != (obj["version_id"], obj["etag"]):
                problems.append(
                    f"sidecar of {obj['key']!r} describes {doc['versionId']}/"
                    f"{doc['etag']}, the bucket holds {obj['version_id']}/"
                    f"{obj['etag']}"
                )
        problems.extend(
            f"sidecar left for deleted {k!r} (under {DEFAULT_PREFIX})" for _, k in sidecars
        )
        problems.extend(
            f"sidecar key of {len(k.encode())} bytes: S3 refuses keys over {MAX_KEY_BYTES} bytes"
            for k in names
            if len(k.encode()) > MAX_KEY_BYTES
        )
        return problems

    def effects_report(
        self, effects: Sequence[EffectRun], changes: Sequence[dict[str, Any]]
    ) -> dict[str, Any]:
        """Effects and change events of a run, with every problem :meth:`check_effects` and
        :meth:`check_sidecars` found (empty lists when all is well)."""
        ids = [c["detail"]["id"] for c in changes]
        return {
            "processor": self.processor,
            "effects_run": len(effects),
            "crashes_injected": sum(r.crashed_before_commit for r in effects),
            "change_events": len(changes),
            "change_events_unique": len(set(ids)),
            "change_events_by_type": dict(
                sorted(Counter(str(c["detail-type"]) for c in changes).items())
            ),
            "problems": self.check_effects(effects),
            "sidecar_differences": self.check_sidecars(),
        }
