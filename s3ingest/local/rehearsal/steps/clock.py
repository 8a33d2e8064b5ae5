"""Time passing: ``advance`` (:mod:`s3ingest.local.rehearsal.clock`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from s3ingest.local.rehearsal.clock import ScenarioClock
from s3ingest.local.rehearsal.steps.base import Run, ScenarioError, Step


@dataclass
class Advance(Step):
    """``{"op": "advance", "seconds": N}``: the scenario's clock moves ``N`` seconds forward
    (what reads it: :mod:`s3ingest.local.rehearsal.clock`); its entry (the offset so far) is in
    ``clock``."""

    op = "advance"
    report = "clock"

    seconds: float

    @classmethod
    def check(cls, lineno: int, doc: dict[str, Any]) -> None:
        seconds = doc["seconds"]
        if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or seconds <= 0:
            raise ScenarioError(f"line {lineno}: advance seconds must be a positive number")

    def run(self, run: Run, lineno: int) -> None:
        if run.clock is None:
            run.clock = ScenarioClock()
        run.clock.advance(float(self.seconds))
        run.clock.install(run.rt)
        run.record(self, lineno, {"seconds": self.seconds, "offset": run.clock.offset})
