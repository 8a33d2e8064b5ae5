"""``attest``: a completeness attestation of a bucket (issue 38, docs/attestation.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from s3ingest.local.rehearsal.steps.base import Run, ScenarioError, Step

#: ``attest`` sources, as reconciliation's.
ATTEST_SOURCES = ("listing", "inventory")


@dataclass
class Attest(Step):
    """``{"op": "attest", "source": "listing" | "inventory", "bucket": B, "processors": [P]}``:
    what ``s3ingest attest --json`` does (:func:`~s3ingest.commands.attest.attest_bucket`) on
    the scenario's deployment, then ``s3ingest attest verify`` of the stored document; its
    entry (``document``, ``location``, ``document_sha256``, ``verified``) is in
    ``attestations``. Repairs nothing: differing roots name the keys, the step does not fail."""

    op = "attest"
    report = "attestations"

    source: str = "listing"
    bucket: str | None = None
    processors: list[str] | None = None

    @classmethod
    def check(cls, lineno: int, doc: dict[str, Any]) -> None:
        if doc.get("source", "listing") not in ATTEST_SOURCES:
            raise ScenarioError(f"line {lineno}: attest source must be listing or inventory")
        names = doc.get("processors")
        if names is not None and (
            not isinstance(names, list) or not all(isinstance(n, str) for n in names)
        ):
            raise ScenarioError(f"line {lineno}: attest processors must be a list of names")

    def run(self, run: Run, lineno: int) -> None:
        from s3ingest.commands.attest import attest_bucket, verify_document

        rt = run.rt
        manifest = rt.write_inventory(self.bucket) if self.source == "inventory" else None
        made = attest_bucket(
            rt.reconciler(self.bucket),
            rt.s3,
            store_bucket=rt.resources.attestation_store,
            stack=rt.metrics_stack,
            source=self.source,
            prefix="",
            processors=self.processors,
            margin_seconds=0,  # locally nothing changes after the snapshot
            manifest=manifest,
        )
        made["verified"] = verify_document(made["document"], rt.s3)
        run.record(self, lineno, made)
