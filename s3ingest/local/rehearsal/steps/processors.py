"""Processors over time (``docs/reprocess.md``): ``configure``, ``reprocess``."""

from __future__ import annotations

from dataclasses import dataclass
from types import EllipsisType
from typing import Any

from s3ingest.commands.reprocess import cause_text
from s3ingest.local.emulator.chaos import Chaos
from s3ingest.local.machines import REPROCESS
from s3ingest.local.rehearsal.steps.base import (
    Run,
    ScenarioError,
    Step,
    check_crash_chaos,
    check_effects_setup,
)
from s3ingest.local.rehearsal.steps.during import During, check_during_in_order, parse_during


@dataclass
class Configure(Step):
    """``{"op": "configure", "processors": [...], "hold": {...}}``: another processor
    configuration deployed (:meth:`~s3ingest.local.stack.runtime.LocalRuntime.configure`; ``hold``
    by default the one in force)."""

    op = "configure"
    report = "configurations"

    processors: list[dict[str, Any]]
    #: ``...``: the hold policy in force.
    hold: dict[str, Any] | EllipsisType | None = ...

    @classmethod
    def check(cls, lineno: int, doc: dict[str, Any]) -> None:
        check_effects_setup(lineno, doc)

    def run(self, run: Run, lineno: int) -> None:
        rt = run.rt
        rt.configure(self.processors, rt.settings.hold if self.hold is ... else self.hold)
        if run.clock is not None:  # the new effect runner reads the scenario's clock too
            run.clock.install(rt)
        run.record(self, lineno, {"processors": [dict(p) for p in self.processors]})


@dataclass
class Reprocess(Step):
    """``{"op": "reprocess", "processor": P, "bucket": B, "prefix": X, "rate": N, "dry_run":
    false, "remove": false, "chaos": {"seed": S, "crash": P}}``: an execution of the stack's
    reprocess machine, as ``s3ingest reprocess`` starts it."""

    op = "reprocess"
    report = "reprocesses"

    processor: str
    bucket: str | None = None
    prefix: str = ""
    rate: float | None = None
    dry_run: bool = False
    remove: bool = False
    chaos: dict[str, Any] | None = None
    during: list[dict[str, Any]] | None = None

    @classmethod
    def check(cls, lineno: int, doc: dict[str, Any]) -> None:
        if "during" in doc:
            parse_during(lineno, cls.op, doc["during"])
        if not isinstance(doc["processor"], str) or not doc["processor"]:
            raise ScenarioError(f"line {lineno}: reprocess processor must be a processor's name")
        for name in ("bucket", "prefix"):
            if name in doc and not isinstance(doc[name], str):
                raise ScenarioError(f"line {lineno}: reprocess {name} must be a string")
        if doc.get("prefix") and "bucket" not in doc:
            raise ScenarioError(f"line {lineno}: reprocess prefix needs bucket (as --prefix does)")
        for name in ("dry_run", "remove"):
            if name in doc and not isinstance(doc[name], bool):
                raise ScenarioError(f"line {lineno}: reprocess {name} must be true or false")
        check_crash_chaos(lineno, cls.op, doc)
        rate = doc.get("rate")
        if rate is not None and (
            isinstance(rate, bool) or not isinstance(rate, (int, float)) or rate <= 0
        ):
            raise ScenarioError(f"line {lineno}: reprocess rate must be a positive number (keys/s)")

    def check_in_order(self, lineno: int, versioning: str | None, puts: dict[int, str]) -> None:
        check_during_in_order(lineno, self.during or [], versioning, puts)

    def run(self, run: Run, lineno: int) -> None:
        rt = run.rt
        during = During(run, lineno, self.during, REPROCESS) if self.during is not None else None
        with rt.crashing(Chaos.from_json(self.chaos) if self.chaos is not None else None):
            summary = rt.reprocess(
                self.processor,
                bucket=self.bucket,
                prefix=self.prefix,
                rate=self.rate,
                dry_run=self.dry_run,
                remove=self.remove,
                between=during,
            )
        if during is not None:
            summary = {**summary, "during": during.finish()}
        run.record(self, lineno, summary)
        execution = summary["execution"]
        if execution["status"] != "SUCCEEDED":
            why = cause_text(execution.get("cause")) or execution.get("error")
            raise ValueError(f"execution {execution['status']}: {why}")
