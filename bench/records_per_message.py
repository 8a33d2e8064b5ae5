"""Cost of one record of a multi-record message, on the local runtime: the figure
:data:`s3ingest_fn.core.events.MAX_RECORDS_PER_MESSAGE` rests on (issue 24).

A message's records run one after another in :class:`~s3ingest_fn.services.ingest.MessageProcessor`
(only messages run concurrently, CONTRACT C10), so one message of N records takes about N times
a record's cost. Three messages of ``records`` notification records each go through the ingest
function's message processor on the emulator (moto in this process, so its CPU is counted: an
upper bound of what DynamoDB and S3 answer in): new keys (one conditional write each), a newer
version of each (a write over a row), and a delete marker of each (a write that tombstones).

Reported, not asserted: the machine is shared and noisy.
"""

from __future__ import annotations

import json
import time
from typing import Any

from s3ingest.local.emulator.server import Emulator
from s3ingest.local.stack.runtime import LocalRuntime
from s3ingest.settings import Settings
from s3ingest_fn.core.events import MAX_RECORDS_PER_MESSAGE


def _record(event: dict[str, Any]) -> dict[str, Any]:
    """The S3 notification record of a local runtime's EventBridge event."""
    obj = event["detail"]["object"]
    deleted = event["detail-type"] == "Object Deleted"
    name = "ObjectRemoved:DeleteMarkerCreated" if deleted else "ObjectCreated:Put"
    fields = {"key": obj["key"], "sequencer": obj["sequencer"]}
    if obj.get("version-id"):
        fields["versionId"] = obj["version-id"]
    if not deleted:
        fields.update(eTag=obj["etag"], size=obj["size"])
    return {
        "eventVersion": "2.1",
        "eventSource": "aws:s3",
        "eventName": name,
        "eventTime": event["time"],
        "s3": {"bucket": {"name": event["detail"]["bucket"]["name"]}, "object": fields},
    }


def _timed(rt: LocalRuntime, name: str) -> float:
    body = json.dumps({"Records": [_record(e) for e in rt.faithful.take_pending()]})
    started = time.perf_counter()
    results = rt.processor.process(body, name)
    elapsed = time.perf_counter() - started
    if {r.outcome.value for r in results} != {"applied"}:
        raise RuntimeError(f"{name}: {sorted({(r.outcome, r.reason) for r in results})}")
    return elapsed / len(results)


def run(records: int = MAX_RECORDS_PER_MESSAGE) -> dict[str, float]:
    """Time the three messages; print and return the seconds per record of each."""
    keys = [f"bench/{i:05d} part+{i}.csv" for i in range(records)]
    with Emulator() as emu:
        rt = LocalRuntime(emu, versioning="Enabled")
        for key in keys:
            rt.faithful.put(key, f"{key} v1\n")
        per_record = {"new key": _timed(rt, "creates")}
        for key in keys:
            rt.faithful.put(key, f"{key} v2\n")
        per_record["newer version"] = _timed(rt, "overwrites")
        for key in keys:
            rt.faithful.delete(key)
        per_record["delete marker"] = _timed(rt, "deletes")
    worst = max(per_record.values())
    timeout = Settings().ingest_timeout_seconds
    print(f"   one message of {records} records, per record (local runtime, moto in-process):")
    for name, seconds in per_record.items():
        print(f"   {name:<16} {seconds * 1000:8.1f} ms")
    print(
        f"   MAX_RECORDS_PER_MESSAGE={MAX_RECORDS_PER_MESSAGE}: "
        f"{MAX_RECORDS_PER_MESSAGE * worst:6.2f} s at the worst figure "
        f"(ingest timeout {timeout} s; target <= half of it)"
    )
    return per_record
