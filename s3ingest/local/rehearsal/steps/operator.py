"""The operator's checks and repairs, as the CLI runs them (:mod:`s3ingest.commands`): ``held``,
``repair``, ``verify``. Each step calls the command's own function, on the local deployment
seen as the CLI sees a stack (:func:`~s3ingest.local.rehearsal.incidents.local_deployed`), and its
report entry is what the command prints with ``--json``; a step whose command would exit 1 fails."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from s3ingest.local.rehearsal.steps.base import Run, ScenarioError, Step, check_key


def _plain(doc: Any) -> Any:
    """``doc`` as the CLI's ``--json`` prints it."""
    import json

    from s3ingest.cli.render import to_json

    return json.loads(to_json(doc))


@dataclass
class Held(Step):
    """``{"op": "held", "bucket": B, "prefix": P, "limit": N}``: ``s3ingest held --json`` (one
    page of held changes, ``{"held": [...], "next": token}``)."""

    op = "held"
    report = "held_pages"

    bucket: str | None = None
    prefix: str = ""
    limit: int = 100

    @classmethod
    def check(cls, lineno: int, doc: dict[str, Any]) -> None:
        if not isinstance(doc.get("prefix", ""), str):
            raise ScenarioError(f"line {lineno}: held prefix must be a string")
        if doc.get("prefix") and "bucket" not in doc:
            raise ScenarioError(f"line {lineno}: held prefix needs bucket (as --prefix does)")
        limit = doc.get("limit", 100)
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 1000:
            raise ScenarioError(f"line {lineno}: held limit must be 1 to 1000 (as --limit)")

    def run(self, run: Run, lineno: int) -> None:
        from s3ingest.cli.context import processor_names
        from s3ingest.commands.review import list_held
        from s3ingest.local.rehearsal.incidents import local_deployed

        rt = run.rt
        deployed = local_deployed(rt)
        page = list_held(
            rt.ddb,
            rt.resources.table,
            processor_names(deployed),
            bucket=self.bucket,
            prefix=self.prefix,
            limit=self.limit,
        )
        run.record(self, lineno, _plain(page))


@dataclass
class Repair(Step):
    """``{"op": "repair", "key": K, "bucket": B, "wait": S}``: ``s3ingest repair --json``: what
    is due, one repair event queued when anything is, and the row read until it settles; each
    wait between two reads drains the ingest queue here. Fails as the command exits 1 (the row
    did not settle or still differs from the bucket)."""

    op = "repair"
    report = "repairs"

    key: str
    bucket: str | None = None
    wait: int = 60

    @classmethod
    def check(cls, lineno: int, doc: dict[str, Any]) -> None:
        check_key(lineno, doc["key"])
        wait = doc.get("wait", 60)
        if not isinstance(wait, int) or isinstance(wait, bool) or wait < 0:
            raise ScenarioError(f"line {lineno}: repair wait must be a whole number of seconds")

    def run(self, run: Run, lineno: int) -> None:
        from s3ingest.commands.repair import repair_key
        from s3ingest.local.rehearsal.incidents import local_deployed
        from s3ingest_fn.adapters.sqs import SqsRepairQueue

        rt = run.rt
        deployed = local_deployed(rt)
        name = rt.resources.landing(self.bucket).name
        result = repair_key(
            deployed.ledger(),
            deployed.objects(),
            SqsRepairQueue(rt.sqs, rt.resources.queue_url),
            name,
            self.key,
            wait_seconds=self.wait,
            sleep=lambda _seconds: rt.drain(),
            clock=run.clock.time if run.clock is not None else time.time,
        )
        entry = _plain(result)
        run.record(self, lineno, entry)
        if entry["waited"] and not (entry["settled"] and entry["agrees"]):
            raise ValueError(f"{self.key!r} did not settle or still differs from the bucket")


@dataclass
class Verify(Step):
    """``{"op": "verify", "timeout": S}``: ``s3ingest verify --json`` against the local
    deployment (:class:`~s3ingest.commands.verify.LocalPipeline`): a canary through the first
    bucket, each hop timed; its advance delivers every pending event and drains. Fails as the
    command exits 1 (a hop did not arrive)."""

    op = "verify"
    report = "verifications"

    timeout: float = 120.0

    @classmethod
    def check(cls, lineno: int, doc: dict[str, Any]) -> None:
        timeout = doc.get("timeout", 120.0)
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout < 1:
            raise ScenarioError(f"line {lineno}: verify timeout must be at least 1 second")

    def run(self, run: Run, lineno: int) -> None:
        from s3ingest.commands.verify import LocalPipeline, verify_pipeline

        report = verify_pipeline(LocalPipeline(run.rt), timeout_seconds=float(self.timeout))
        run.record(self, lineno, report.as_dict())
        if not report.ok:
            missing = [h.name for h in report.hops if h.ms is None]
            raise ValueError(f"not verified: {', '.join(missing)} did not arrive")
