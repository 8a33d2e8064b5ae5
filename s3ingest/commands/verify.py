"""``s3ingest verify``: a deploy check that sends one canary object through the whole pipeline.

The canary is written under the reserved prefix :data:`~s3ingest_fn.contract.CANARY_PREFIX`
(ingested like any key, never handed to a processor), its ledger row is awaited, and its change
event when the change stream is on; then it is deleted and the tombstone (and its change event)
awaited. Each hop's latency is measured from the S3 call that caused it. Finally every version
of the canary is removed, so nothing is left behind.

The same steps run against a deployed stack (:class:`DeployedPipeline`: S3, the ledger table,
the change stream's audit log group) and against the local runtime (:class:`LocalPipeline`).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from s3ingest.outputs import (
    BUCKET_NAME,
    BUCKET_OWNERS,
    CHANGE_AUDIT_LOG_GROUP_NAME,
    LEDGER_TABLE_NAME,
)
from s3ingest_fn.contract import CANARY_PREFIX

if TYPE_CHECKING:
    from s3ingest_fn.core.row import LedgerRow

#: Change-stream detail types of a created and a removed object.
INGESTED, TOMBSTONED = "Object Ingested", "Object Tombstoned"


class Pipeline(Protocol):
    """What the check needs of a deployment."""

    #: Whether the change stream is on (its hops are checked only then).
    change_stream: bool

    def put(self, key: str, body: bytes) -> str:
        """PutObject; return the ETag without quotes."""
        ...

    def delete(self, key: str) -> None:
        """DeleteObject (a delete marker in a versioned bucket)."""
        ...

    def purge(self, key: str) -> None:
        """Remove every version and delete marker of ``key``."""
        ...

    def ledger_row(self, key: str) -> LedgerRow | None:
        """The key's ledger row, or None."""
        ...

    def change_events(self, key: str) -> set[str]:
        """The change-stream detail types published so far for ``key``."""
        ...

    def advance(self) -> None:
        """Let the pipeline work for a moment (deployed: wait; local: deliver and drain)."""
        ...


@dataclass
class Hop:
    """One awaited step: its name and the milliseconds from the S3 call to it (None: timed
    out)."""

    name: str
    ms: int | None


@dataclass
class VerifyReport:
    """The check's result: ``ok`` when every hop was seen within the timeout."""

    key: str
    hops: list[Hop] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether every hop arrived."""
        return all(h.ms is not None for h in self.hops)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: ``{"ok", "key", "hops": [{"name", "ms"}]}``."""
        return {
            "ok": self.ok,
            "key": self.key,
            "hops": [{"name": h.name, "ms": h.ms} for h in self.hops],
        }


def verify(
    pipeline: Pipeline,
    *,
    timeout_seconds: float = 120.0,
    clock: Callable[[], float] = time.monotonic,
    on_hop: Callable[[Hop], None] | None = None,
) -> VerifyReport:
    """Send one canary through ``pipeline`` and time each hop.

    Parameters
    ----------
    pipeline : Pipeline
    timeout_seconds : float
        How long each hop may take; a hop that does not arrive ends the check (``ok`` False).
    clock : callable
        Monotonic seconds.
    on_hop : callable, optional
        Called with each hop as it completes (progress output).

    Returns
    -------
    VerifyReport
    """
    key = f"{CANARY_PREFIX}{uuid.uuid4().hex}"
    report = VerifyReport(key=key)

    def await_hop(name: str, since: float, arrived: Callable[[], bool]) -> bool:
        deadline = clock() + timeout_seconds  # each hop its own budget; latency from ``since``
        while not arrived():
            if clock() > deadline:
                report.hops.append(Hop(name, None))
                if on_hop:
                    on_hop(report.hops[-1])
                return False
            pipeline.advance()
        report.hops.append(Hop(name, int((clock() - since) * 1000)))
        if on_hop:
            on_hop(report.hops[-1])
        return True

    def row_is(state: str, etag: str | None = None) -> Callable[[], bool]:
        def check() -> bool:
            row = pipeline.ledger_row(key)
            return row is not None and row.state == state and (etag is None or row.etag == etag)

        return check

    try:
        started = clock()
        etag = pipeline.put(key, b"s3ingest verify canary\n")
        if not await_hop("put -> ledger row", started, row_is("present", etag)):
            return report
        if pipeline.change_stream and not await_hop(
            "put -> change event", started, lambda: INGESTED in pipeline.change_events(key)
        ):
            return report
        deleted = clock()
        pipeline.delete(key)
        if not await_hop("delete -> tombstone", deleted, row_is("deleted")):
            return report
        if pipeline.change_stream:
            await_hop(
                "delete -> change event", deleted, lambda: TOMBSTONED in pipeline.change_events(key)
            )
        return report
    finally:
        pipeline.purge(key)


class LocalPipeline:
    """The check against the local runtime: each :meth:`advance` delivers the S3 events so far
    and drains the queue (and the change stream) through the real handlers."""

    def __init__(self, runtime: Any) -> None:
        self.rt = runtime
        self.change_stream = bool(runtime.settings.change_stream)

    def put(self, key: str, body: bytes) -> str:
        op = self.rt.faithful.put(key, body)
        return str(op.event["detail"]["object"]["etag"])

    def delete(self, key: str) -> None:
        self.rt.faithful.delete(key)

    def purge(self, key: str) -> None:
        _purge(self.rt.s3, self.rt.resources.bucket, key)

    def ledger_row(self, key: str) -> LedgerRow | None:
        row: LedgerRow | None = self.rt.ledger.get(self.rt.resources.bucket, key)
        return row

    def change_events(self, key: str) -> set[str]:
        return {str(c["detail-type"]) for c in self.rt.changes if c["detail"]["key"] == key}

    def advance(self) -> None:
        self.rt.flush()
        self.rt.drain()


class DeployedPipeline:
    """The check against a deployed stack, with the operator's credentials: S3 PutObject and
    DeleteObject (and ListBucketVersions, DeleteObjectVersion for the clean-up) on the landing
    bucket, GetItem on the ledger, and FilterLogEvents on the change stream's audit log group.
    """

    def __init__(self, session: Any, outputs: dict[str, str], *, poll_seconds: float = 1.0) -> None:
        from s3ingest_fn import wiring
        from s3ingest_fn.adapters.bucket_owners import expect_owners

        self.bucket = outputs[BUCKET_NAME]
        # every call names the bucket's owner (ExpectedBucketOwner, output BucketOwners)
        owners = json.loads(outputs.get(BUCKET_OWNERS) or "{}")
        self._s3 = expect_owners(session.client("s3"), owners)
        self._ledger = wiring.ledger(session.client("dynamodb"), outputs[LEDGER_TABLE_NAME], 0)
        self._audit = outputs.get(CHANGE_AUDIT_LOG_GROUP_NAME)
        self._logs = session.client("logs") if self._audit else None
        self.change_stream = self._audit is not None
        self._poll = poll_seconds
        self._since_ms = int(time.time() * 1000) - 60_000

    def put(self, key: str, body: bytes) -> str:
        return str(self._s3.put_object(Bucket=self.bucket, Key=key, Body=body)["ETag"]).strip('"')

    def delete(self, key: str) -> None:
        self._s3.delete_object(Bucket=self.bucket, Key=key)

    def purge(self, key: str) -> None:
        _purge(self._s3, self.bucket, key)

    def ledger_row(self, key: str) -> LedgerRow | None:
        return self._ledger.get(self.bucket, key)

    def change_events(self, key: str) -> set[str]:
        import json

        assert self._logs is not None
        found: set[str] = set()
        pages = self._logs.get_paginator("filter_log_events").paginate(
            logGroupName=self._audit, startTime=self._since_ms, filterPattern=f'"{key}"'
        )
        for page in pages:
            for event in page.get("events", []):
                doc = json.loads(event["message"])
                if doc.get("detail", {}).get("key") == key:
                    found.add(str(doc.get("detail-type")))
        return found

    def advance(self) -> None:
        time.sleep(self._poll)


def _purge(s3: Any, bucket: str, key: str) -> None:
    """Delete every version and delete marker of ``key`` (or the object, unversioned)."""
    versions = s3.list_object_versions(Bucket=bucket, Prefix=key)
    found = [
        v
        for v in (*versions.get("Versions", []), *versions.get("DeleteMarkers", []))
        if v["Key"] == key
    ]
    for v in found:
        s3.delete_object(Bucket=bucket, Key=key, VersionId=v["VersionId"])
    if not found:
        s3.delete_object(Bucket=bucket, Key=key)


def verify_pipeline(
    pipeline: Pipeline,
    *,
    timeout_seconds: float,
    on_hop: Callable[[Hop], None] | None = None,
) -> VerifyReport:
    """Send the canary through ``pipeline`` (a deployed stack's or the local runtime's, from
    :mod:`s3ingest.commands.context`) and time each hop (``on_hop`` gets each one as it ends);
    each hop may take ``timeout_seconds``. The canary's versions are removed at the end."""
    return verify(pipeline, timeout_seconds=timeout_seconds, on_hop=on_hop)
