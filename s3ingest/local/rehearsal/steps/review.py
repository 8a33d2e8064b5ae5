"""Review of held changes (``docs/hold.md``): ``approve``, ``reject``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from s3ingest.local.rehearsal.steps.base import Run, ScenarioError, Step, check_key


@dataclass
class _Review(Step):
    """Decide the key's held changes (optional ``bucket``, ``change`` (a change id) and
    ``processor``; default every held change of the key), as ``s3ingest approve``/``reject``
    do; then the queue is drained."""

    report = "reviews"
    #: The decision the step writes.
    decision: ClassVar[str]

    key: str
    bucket: str | None = None
    change: str | None = None
    processor: str | None = None

    @classmethod
    def check(cls, lineno: int, doc: dict[str, Any]) -> None:
        check_key(lineno, doc["key"])
        for name in ("change", "processor"):
            if name in doc and not isinstance(doc[name], str):
                raise ScenarioError(f"line {lineno}: {cls.op} {name} must be a string")

    def run(self, run: Run, lineno: int) -> None:
        decided = run.rt.review(
            self.key,
            self.decision,
            bucket=self.bucket,
            processor=self.processor,
            change_id=self.change,
        )
        run.record(self, lineno, {"op": self.op, "key": self.key, "decided": decided})


@dataclass
class Approve(_Review):
    """``{"op": "approve", "key": K}``: approve the key's held changes."""

    op = "approve"
    decision = "approved"


@dataclass
class Reject(_Review):
    """``{"op": "reject", "key": K}``: reject the key's held changes."""

    op = "reject"
    decision = "rejected"
