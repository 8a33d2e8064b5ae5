"""AWS requests per backfill task: the backfill handler's cost per object, on the emulator.

A bucket of N objects that predate the pipeline is backfilled twice through the locally driven
S3 Batch Operations job and the real backfill handler; every DynamoDB and S3 request the handler
makes is counted (botocore ``before-call`` hooks).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from s3ingest.local.emulator.server import Emulator
from s3ingest.local.stack.runtime import LocalRuntime


def _count(client: Any, service: str) -> Counter[str]:
    calls: Counter[str] = Counter()
    client.meta.events.register(
        f"before-call.{service}", lambda model, **_: calls.update([model.name])
    )
    return calls


def run(objects: int = 500) -> None:
    with Emulator() as emu:
        rt = LocalRuntime(emu, versioning="Enabled")
        for i in range(objects):
            rt.faithful.put(f"pre/{i:05d} file+x.csv", f"body {i}")
        rt.faithful.take_pending()
        manifest = rt.write_inventory()
        for label in ("first run (new rows)", "second run (nothing to do)"):
            ddb, s3 = _count(rt.ddb, "dynamodb"), _count(rt.s3, "s3")
            report = rt.drive_backfill_job(manifest)
            tasks = report["total"]
            print(f"   {label}: {tasks} tasks, results {json.dumps(report['result_strings'])}")
            print(
                f"     DynamoDB per task {sum(ddb.values()) / tasks:.2f} "
                f"{json.dumps(dict(ddb))}; S3 per task {sum(s3.values()) / tasks:.2f} "
                f"{json.dumps(dict(s3))}"
            )
            rt.ddb.meta.events.unregister("before-call.dynamodb")
            rt.s3.meta.events.unregister("before-call.s3")
