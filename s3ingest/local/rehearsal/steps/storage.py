"""What S3 does beyond a single PutObject or DeleteObject: ``multipart`` (a multipart upload),
``expire`` (a Lifecycle expiration) and ``restore`` (an archived object restored), each with
the events S3 sends (:class:`~s3ingest.local.emulator.s3faithful.FaithfulS3`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from s3ingest.local.emulator.s3faithful import MIN_PART_BYTES
from s3ingest.local.rehearsal.steps.base import Run, ScenarioError, Step, check_key
from s3ingest.local.rehearsal.steps.objects import Delete, created

#: Most whole parts a ``multipart`` line may ask for (each :data:`MIN_PART_BYTES`).
MAX_PARTS = 10


@dataclass
class Multipart(Step):
    """``{"op": "multipart", "key": K, "parts": N, "body": TEXT}``: a multipart upload of ``N``
    whole parts of 5 MiB (S3's smallest but the last) then ``body`` as the last part;
    S3's event (reason ``CompleteMultipartUpload``) is queued for a flush."""

    op = "multipart"
    refusal_is_file_error = True

    key: str
    parts: int = 1
    body: str = ""
    bucket: str | None = None

    @classmethod
    def check(cls, lineno: int, doc: dict[str, Any]) -> None:
        check_key(lineno, doc["key"])
        parts = doc.get("parts", 1)
        if not isinstance(parts, int) or isinstance(parts, bool) or not 0 <= parts <= MAX_PARTS:
            raise ScenarioError(f"line {lineno}: multipart parts must be 0 to {MAX_PARTS}")
        if not isinstance(doc.get("body", ""), str):
            raise ScenarioError(f"line {lineno}: multipart body must be a string")
        if parts == 0 and not doc.get("body"):
            raise ScenarioError(f"line {lineno}: a multipart upload needs a part")

    def check_in_order(self, lineno: int, versioning: str | None, puts: dict[int, str]) -> None:
        puts[lineno] = self.key

    def run(self, run: Run, lineno: int) -> None:
        s3 = run.rt.bucket(self.bucket)
        whole = [bytes([0x61 + n % 26]) * MIN_PART_BYTES for n in range(self.parts)]
        last = [self.body.encode()] if self.body else []
        created(run, lineno, s3.multipart(self.key, whole + last), s3.versioning)


@dataclass
class Expire(Delete):
    """``{"op": "expire", "key": K}``: S3 Lifecycle expires the key's current version (a delete
    marker in a versioned bucket); with ``"version_id": V`` (``"@N"``: the ``put`` on line N's) a
    noncurrent version is removed for good. The event is ``Object Deleted``, reason ``Lifecycle
    Expiration``, requester ``s3.amazonaws.com``. A key without a current version is a scenario
    error."""

    op = "expire"

    def run(self, run: Run, lineno: int) -> None:
        version = run.versions.resolve(lineno, self.version_id)
        s3 = run.rt.bucket(self.bucket)
        created(run, lineno, s3.expire(self.key, version), s3.versioning)


@dataclass
class Restore(Step):
    """``{"op": "restore", "key": K, "days": N}``: RestoreObject of an archived object (put with
    ``"storage_class": "GLACIER"``), completed at once: S3's ``Object Restore Initiated`` and
    ``Object Restore Completed`` events (no sequencer) are queued for a flush. Their report
    entry is in ``restores``."""

    op = "restore"
    report = "restores"
    refusal_is_file_error = True

    key: str
    days: int = 1
    bucket: str | None = None

    @classmethod
    def check(cls, lineno: int, doc: dict[str, Any]) -> None:
        check_key(lineno, doc["key"])
        days = doc.get("days", 1)
        if not isinstance(days, int) or isinstance(days, bool) or days < 1:
            raise ScenarioError(f"line {lineno}: restore days must be a whole number, at least 1")

    def run(self, run: Run, lineno: int) -> None:
        s3 = run.rt.bucket(self.bucket)
        events = [op.event for op in s3.restore(self.key, self.days)]
        run.record(
            self,
            lineno,
            {
                "bucket": s3.bucket,
                "key": self.key,
                "events": [e["detail-type"] for e in events],
                "emitted": bool(s3.event_bridge),
            },
        )
