"""What repairs the ledger: ``reconcile``, ``backfill``, ``replay``, ``onboard``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from s3ingest.local.runtime import BACKFILL_ENGINES, BATCH_OPERATIONS
from s3ingest.local.steps.base import Run, ScenarioError, Step, json_name, parse_time

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

    @classmethod
    def check(cls, lineno: int, doc: dict[str, Any]) -> None:
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

    def run(self, run: Run, lineno: int) -> None:
        if self.source == "listing":
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


@dataclass
class Replay(Step):
    """``{"op": "replay", "from": ISO-8601, "to": ISO-8601}`` (both optional: everything
    archived so far): an EventBridge replay from the archive to the ingest rule, then a
    drain."""

    op = "replay"
    report = "replays"

    start: str | None = field(default=None, metadata=json_name("from"))
    end: str | None = field(default=None, metadata=json_name("to"))

    @classmethod
    def check(cls, lineno: int, doc: dict[str, Any]) -> None:
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
        run.record(self, lineno, run.rt.replay(start, end))


@dataclass
class Onboard(Step):
    """``{"op": "onboard", "bucket": N}``: what ``s3ingest onboard`` does
    (:mod:`s3ingest.onboard`): EventBridge delivery on, the listing backfill, a listing
    reconciliation; then pending events are delivered."""

    op = "onboard"
    report = "onboardings"

    bucket: str | None = None

    def run(self, run: Run, lineno: int) -> None:
        onboarded = run.rt.onboard(self.bucket)
        run.record(self, lineno, onboarded)
        if onboarded["status"] != "done":
            raise ValueError(f"onboarding {onboarded['status']}")
