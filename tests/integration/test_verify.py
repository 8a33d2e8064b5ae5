"""``s3ingest verify``: a canary through the whole pipeline, each hop timed; it never reaches the
processor and leaves nothing behind."""

from __future__ import annotations

from typing import Any

from s3ingest.commands.verify import LocalPipeline, verify
from s3ingest.local.emulator.chaos import Chaos
from s3ingest.local.stack.runtime import LocalRuntime, local_settings
from s3ingest_fn.contract import CANARY_PREFIX


def test_verify_times_every_hop_and_leaves_nothing_behind(emulator: Any) -> None:
    # GIVEN a local deployment with the example processor and the change stream
    rt = LocalRuntime(emulator, local_settings(), versioning="Enabled")
    # WHEN the check runs
    report = verify(LocalPipeline(rt), timeout_seconds=60)
    # THEN every hop arrived, in order, with a latency
    assert report.ok
    assert [h.name for h in report.hops] == [
        "put -> ledger row",
        "put -> change event",
        "delete -> tombstone",
        "delete -> change event",
    ]
    assert all(h.ms is not None and h.ms >= 0 for h in report.hops)
    # the canary is under the reserved prefix, never reached the processor, and is gone
    assert report.key.startswith(CANARY_PREFIX)
    assert rt.effects == []
    (row,) = rt.ledger_rows()
    assert row.key == report.key and row.state == "deleted" and row.effect is None
    listing = rt.s3.list_object_versions(Bucket=rt.resources.bucket)
    assert not listing.get("Versions") and not listing.get("DeleteMarkers")


class _LosingPipeline(LocalPipeline):
    """A deployment whose events never arrive (EventBridge delivery switched off)."""

    def advance(self) -> None:
        self.rt.flush(Chaos(drop=1.0))
        self.rt.drain()


def test_verify_fails_when_the_ledger_never_sees_the_canary(emulator: Any) -> None:
    rt = LocalRuntime(emulator, local_settings(change_stream=False), versioning=None)
    report = verify(_LosingPipeline(rt), timeout_seconds=0.5)
    assert not report.ok
    assert report.as_dict()["hops"] == [{"name": "put -> ledger row", "ms": None}]
    assert rt.bucket_objects() == []  # cleaned up all the same
