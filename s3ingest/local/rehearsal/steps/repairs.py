"""What repairs the ledger: ``reconcile``, ``backfill``, ``replay``, ``onboard``."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from s3ingest.local.emulator.chaos import Chaos
from s3ingest.local.machines import (
    BACKFILL_BATCH_OPERATIONS,
    BACKFILL_DISTRIBUTED_MAP,
    BACKFILL_LISTING,
)
from s3ingest.local.rehearsal.steps.base import (
    Run,
    ScenarioError,
    Step,
    check_crash_chaos,
    json_name,
    parse_time,
)
from s3ingest.local.rehearsal.steps.during import (
    During,
    check_during_in_order,
    parse_during,
    run_execution,
)
from s3ingest.local.stack.history import replay_changes
from s3ingest.local.stack.runtime import BACKFILL_ENGINES, BATCH_OPERATIONS, DISTRIBUTED_MAP

#: ``backfill`` sources: an inventory report (default) or a live listing.
BACKFILL_SOURCES = ("inventory", "listing")


@dataclass
class Reconcile(Step):
    """``{"op": "reconcile", "source": "listing" | "inventory", "fan_out": false}``: one
    reconciliation of the named bucket, or of every bucket in turn (as the schedule does), then
    the repairs are drained; ``fan_out`` (``inventory`` only) runs the fan-out state machine."""

    op = "reconcile"
    report = "reconciliations"

    source: str = "inventory"
    fan_out: bool = False
    bucket: str | None = None

    @classmethod
    def check(cls, lineno: int, doc: dict[str, Any]) -> None:
        source = doc.get("source", "inventory")
        if source not in ("listing", "inventory"):
            raise ScenarioError(f"line {lineno}: reconcile source must be listing or inventory")
        if not isinstance(doc.get("fan_out", False), bool):
            raise ScenarioError(f"line {lineno}: reconcile fan_out must be true or false")
        if doc.get("fan_out") and source != "inventory":
            raise ScenarioError(f"line {lineno}: the fan-out reconciliation reads an inventory")

    def run(self, run: Run, lineno: int) -> None:
        rt = run.rt
        if self.bucket is None:  # every bucket, as the schedule
            summary = rt.reconcile_every_bucket(self.source, fan_out=self.fan_out)
        elif self.fan_out:
            summary = rt.reconcile_fan_out(bucket=self.bucket)
        else:
            summary = rt.reconcile(self.source, bucket=self.bucket).as_dict()
        run.record(self, lineno, summary)


@dataclass
class Backfill(Step):
    """``{"op": "backfill", "engine": "batch-operations" | "distributed-map"}``: an S3
    Inventory report of the bucket, then a backfill over it; ``"source": "listing"``: the
    listing backfill state machine over a live listing instead."""

    op = "backfill"
    report = "backfills"

    engine: str = BATCH_OPERATIONS
    source: str = "inventory"
    bucket: str | None = None
    during: list[dict[str, Any]] | None = None
    chaos: dict[str, Any] | None = None

    @classmethod
    def check(cls, lineno: int, doc: dict[str, Any]) -> None:
        if "during" in doc:
            parse_during(lineno, cls.op, doc["during"])
        check_crash_chaos(lineno, cls.op, doc)
        if doc.get("source", "inventory") not in BACKFILL_SOURCES:
            raise ScenarioError(f"line {lineno}: backfill source must be inventory or listing")
        if doc.get("source") == "listing" and "engine" in doc:
            raise ScenarioError(
                f"line {lineno}: a listing backfill has one engine (the listing state "
                "machine); engine applies to an inventory backfill"
            )
        if doc.get("engine", BATCH_OPERATIONS) not in BACKFILL_ENGINES:
            raise ScenarioError(
                f"line {lineno}: backfill engine must be one of {', '.join(BACKFILL_ENGINES)}"
            )

    def check_in_order(self, lineno: int, versioning: str | None, puts: dict[int, str]) -> None:
        check_during_in_order(lineno, self.during or [], versioning, puts)

    def run(self, run: Run, lineno: int) -> None:
        with run.rt.crashing(Chaos.from_json(self.chaos) if self.chaos is not None else None):
            if self.during is not None:
                backfill = self._run_during(run, lineno, self.during)
            elif self.source == "listing":
                backfill = run.rt.backfill_listing(self.bucket)
            else:
                backfill = run.rt.backfill(engine=self.engine, bucket=self.bucket)
        run.record(self, lineno, backfill)
        execution = backfill.get("execution")
        if execution and execution["status"] != "SUCCEEDED":
            raise ValueError(
                f"execution {execution['status']}: {execution.get('error')}: "
                f"{execution.get('cause')}"
            )

    def _run_during(self, run: Run, lineno: int, lines: list[dict[str, Any]]) -> dict[str, Any]:
        """The backfill's execution started as :meth:`LocalRuntime.backfill` (or
        ``backfill_listing``) starts it, with the ``during`` lines run while it runs."""
        rt = run.rt
        if self.source == "listing":
            machine = BACKFILL_LISTING
            name = rt.resources.landing(self.bucket).name
            request: dict[str, Any] = {"bucket": name, "run": f"listing-{uuid.uuid4().hex[:16]}"}
        else:
            machine = (
                BACKFILL_DISTRIBUTED_MAP
                if self.engine == DISTRIBUTED_MAP
                else BACKFILL_BATCH_OPERATIONS
            )
            request = {"manifest": rt.write_inventory(self.bucket), "maxFailures": 0}
        during = During(run, lineno, lines, machine)
        execution = run_execution(run, machine, request, during)
        return {
            **(execution.output or {}),
            "execution": execution.summary(),
            "during": during.finish(),
        }


@dataclass
class Replay(Step):
    """``{"op": "replay", "from": ISO-8601, "to": ISO-8601, "archive": "ingest" | "changes"}``
    (all optional: everything archived so far, the ingest archive): an EventBridge replay from
    the ingest archive to the ingest rule, then a drain; or from the change bus's archive to
    the history rule (``historyTable``), then the history queue drained."""

    op = "replay"
    report = "replays"

    start: str | None = field(default=None, metadata=json_name("from"))
    end: str | None = field(default=None, metadata=json_name("to"))
    archive: str = "ingest"

    @classmethod
    def check(cls, lineno: int, doc: dict[str, Any]) -> None:
        if doc.get("archive", "ingest") not in ("ingest", "changes"):
            raise ScenarioError(f'line {lineno}: replay "archive" is "ingest" or "changes"')
        times = {
            name: parse_time(lineno, name, doc[name]) for name in ("from", "to") if name in doc
        }
        if len(times) == 2 and times["to"] <= times["from"]:
            raise ScenarioError(
                f'line {lineno}: replay "to" ({doc["to"]}) must be after "from" ({doc["from"]})'
            )

    def run(self, run: Run, lineno: int) -> None:
        start = parse_time(lineno, "from", self.start) if self.start is not None else None
        end = parse_time(lineno, "to", self.end) if self.end is not None else None
        if self.archive == "changes":
            run.record(self, lineno, replay_changes(run.rt, start, end))
            return
        run.record(self, lineno, run.rt.replay(start, end))


@dataclass
class Onboard(Step):
    """``{"op": "onboard", "bucket": N}``: what ``s3ingest onboard`` does
    (:mod:`s3ingest.onboard`): EventBridge delivery on, the listing backfill, a listing
    reconciliation; then pending events are delivered."""

    op = "onboard"
    report = "onboardings"

    bucket: str | None = None
    during: list[dict[str, Any]] | None = None
    chaos: dict[str, Any] | None = None

    @classmethod
    def check(cls, lineno: int, doc: dict[str, Any]) -> None:
        if "during" in doc:
            parse_during(lineno, cls.op, doc["during"])
        check_crash_chaos(lineno, cls.op, doc)

    def check_in_order(self, lineno: int, versioning: str | None, puts: dict[int, str]) -> None:
        check_during_in_order(lineno, self.during or [], versioning, puts)

    def run(self, run: Run, lineno: int) -> None:
        with run.rt.crashing(Chaos.from_json(self.chaos) if self.chaos is not None else None):
            if self.during is None:
                onboarded = run.rt.onboard(self.bucket)
            else:
                during = During(run, lineno, self.during, BACKFILL_LISTING)
                onboarded = run.rt.onboard(self.bucket, between=during)
                onboarded = {**onboarded, "during": during.finish()}
        run.record(self, lineno, onboarded)
        if onboarded["status"] != "done":
            raise ValueError(f"onboarding {onboarded['status']}")
