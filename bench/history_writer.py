"""The history writer (functions/s3ingest_fn/services/history.py) on a SQLite catalog and a
folder warehouse: rows per second written, files and bytes per commit, for batches of 10, 100
and 1000 change events (the deployed event source's batch is 100); then the same batches
delivered again (a replay: no row, no commit), and the cost of the anti-join on a grown table;
then the table's maintenance (functions/s3ingest_fn/services/history_maintenance.py) after
``commits`` commits on closed days: data files per day before and after, the metadata file's
bytes per snapshot, snapshots expired, files deleted and the seconds it took.

Deployed, S3 and Glue replace the folder and SQLite: each commit adds the same files (one data
file per day partition, a manifest, a manifest list, a metadata file) as PUTs, and one Glue
UpdateTable; docs/history.md models that for 10^6 changes a day.
"""

from __future__ import annotations

import json
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from s3ingest_fn.services import history, history_maintenance

BATCHES = (10, 100, 1000)
#: Epoch ms of the first change; every change is one second after the one before.
T0 = 1_780_000_000_000


def _event(n: int) -> dict[str, Any]:
    return {
        "source": "s3ingest",
        "detail-type": "Object Ingested",
        "time": "2026-06-01T00:00:00Z",
        "detail": {
            "id": f"{n:032x}",
            "bucket": "landing-bucket-of-a-team",
            "key": f"incoming/2026/06/01/object-{n:08d}.csv",
            "kind": "created",
            "sequencer": f"0066{n:014X}",
            "versionId": "Zlt1vQkT3XvnNb9cS9b0pIjM0ZDQ5yGx",
            "etag": "d41d8cd98f00b204e9800998ecf8427e",
            "size": 1_000 + n,
            "rev": 1,
            "source": "event",
            "eventName": "ObjectCreated:Put",
            "reason": "newer-sequencer",
            "appliedAt": T0 + n * 1_000,
        },
    }


def _files(root: Path) -> dict[str, int]:
    return {str(p): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def measure(batch: int, commits: int) -> dict[str, Any]:
    """``commits`` batches of ``batch`` new changes, then the same again (a replay)."""
    from pyiceberg.catalog.sql import SqlCatalog

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "warehouse").mkdir()
        catalog = SqlCatalog(
            "bench", uri=f"sqlite:///{root / 'c.db'}", warehouse=(root / "warehouse").as_uri()
        )
        table = history.ensure_table(catalog, "s3ingest.history")
        batches = [
            [history.row_from_event(_event(c * batch + i)) for i in range(batch)]
            for c in range(commits)
        ]
        before = _files(root / "warehouse")
        started = time.perf_counter()
        for rows in batches:
            history.write(table, rows)  # type: ignore[arg-type]
        written = time.perf_counter() - started
        after = _files(root / "warehouse")
        added = {p: s for p, s in after.items() if p not in before}
        data = [s for p, s in added.items() if p.endswith(".parquet")]
        started = time.perf_counter()
        replayed = [history.write(table, rows) for rows in batches]  # type: ignore[arg-type]
        replay = time.perf_counter() - started
        return {
            "batch": batch,
            "commits": commits,
            "rows_per_second": round(batch * commits / written),
            "seconds_per_commit": round(written / commits, 3),
            "files_per_commit": round(len(added) / commits, 1),
            "data_bytes_per_commit": round(sum(data) / commits),
            "bytes_per_commit": round(sum(added.values()) / commits),
            "replay_rows_added": sum(len(w.added) for w in replayed),
            "replay_commits": sum(w.commits for w in replayed),
            "replay_seconds_per_batch": round(replay / commits, 3),
        }


def measure_maintenance(batch: int = 100, commits: int = 50) -> dict[str, Any]:
    """``commits`` batches of ``batch`` changes (on closed days: T0 is in the past), then one
    maintenance run that expires every snapshot but the last (``keep=1``: the compaction's
    own, so the small files it replaced are deleted in the same run)."""
    from pyiceberg.catalog.sql import SqlCatalog

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "warehouse").mkdir()
        catalog = SqlCatalog(
            "bench", uri=f"sqlite:///{root / 'c.db'}", warehouse=(root / "warehouse").as_uri()
        )
        table = history.ensure_table(catalog, "s3ingest.history")
        for c in range(commits):
            rows = [history.row_from_event(_event(c * batch + i)) for i in range(batch)]
            history.write(table, rows)  # type: ignore[arg-type]
        metadata = Path(table.metadata_location.removeprefix("file://")).stat().st_size
        snapshots = len(table.metadata.snapshots)
        days = history_maintenance.day_files(table)
        before = _files(root / "warehouse")
        done = history_maintenance.maintain(
            table, now=datetime.now(UTC) + timedelta(hours=2), retention=timedelta(hours=1), keep=1
        )
        after = _files(root / "warehouse")
        compacted = history_maintenance.day_files(table)
        return {
            "batch": batch,
            "commits": commits,
            "files_per_day_before": sorted(len(f) for f in days.values()),
            "files_per_day_after": sorted(len(f) for f in compacted.values()),
            "data_bytes_before": done.bytes_before,
            "data_bytes_after": done.bytes_after,
            "metadata_bytes_per_snapshot": round(metadata / snapshots),
            "snapshots_expired": done.snapshots_expired,
            "snapshots_after": done.snapshots_after,
            "files_deleted": done.deleted_files,
            "parquet_files_before": sum(1 for p in before if p.endswith(".parquet")),
            "parquet_files_after": sum(1 for p in after if p.endswith(".parquet")),
            "avro_files_before": sum(1 for p in before if p.endswith(".avro")),
            "avro_files_after": sum(1 for p in after if p.endswith(".avro")),
            "maintenance_seconds": done.seconds,
        }


def run(commits: int = 10) -> list[dict[str, Any]]:
    """Print and return one figure set per batch size, then the maintenance's."""
    results = [measure(batch, commits) for batch in BATCHES]
    results.append(measure_maintenance(commits=5 * commits))
    for result in results:
        print("   " + json.dumps(result), flush=True)
    return results
