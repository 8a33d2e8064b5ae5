"""Maintenance of the history table (functions/s3ingest_fn/services/history_maintenance.py) on a
SQLite catalog in tmp_path: closed days compacted into one file with the same rows, snapshots
expired past the retention, the files only they reached deleted, a concurrent append never lost,
and the writer's exactly once unchanged."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.exceptions import CommitFailedException

from s3ingest_fn.services import history
from s3ingest_fn.services import history_maintenance as maint
from tests.unit.test_history import DAY_MS, T0, catalog, change

#: Days closed when the tests run (T0 is 2026-05-28), and a day after every snapshot taken.
LATER = datetime.now(UTC) + timedelta(days=1)
#: Days with more data files than this are compacted (5 commits: 5 files a day).
FEW = 3


def grown(tmp_path: Path, commits: int = 5, days: int = 2) -> Any:
    """A table after ``commits`` commits of 2 changes on each of ``days`` days."""
    table = history.ensure_table(catalog(tmp_path), "s3ingest.history")
    for c in range(commits):
        rows = [
            history.row_from_event(change(f"c{c}-{d}-{i}", f"k{i}", at=T0 + d * DAY_MS + c * 1000))
            for d in range(days)
            for i in range(2)
        ]
        assert history.write(table, rows).commits == 1  # type: ignore[arg-type]
    return table


def content(table: Any) -> Counter[tuple[Any, ...]]:
    return Counter(
        tuple(sorted((k, v) for k, v in r.items() if k != "written_time"))
        for r in table.refresh().scan().to_arrow().to_pylist()
    )


def files(root: Path, suffix: str) -> set[Path]:
    return {p for p in root.rglob(f"*{suffix}") if p.is_file()}


def test_closed_days_are_compacted_with_the_same_rows(tmp_path: Path) -> None:
    table = grown(tmp_path)
    before = content(table)
    days = maint.day_files(table)
    assert [len(f) for f in days.values()] == [5, 5]
    out = maint.maintain(table, now=LATER, retention=timedelta(days=365), min_files=FEW)
    assert content(table) == before and sum(before.values()) == 20
    assert (out.files_before, out.files_after, out.rows) == (10, 2, 20)
    assert len(out.days_compacted) == 2 and out.days_refused == [] == out.days_left
    assert out.bytes_after < out.bytes_before
    assert out.snapshots_expired == 0
    # the compacted file is sorted by event_time, so its bounds still prune by time
    (day_file,) = maint.day_files(table.refresh())[min(days)]
    assert day_file.record_count == 10


def test_today_and_days_with_few_files_are_left(tmp_path: Path) -> None:
    table = grown(tmp_path)
    today = datetime.fromtimestamp((T0 + DAY_MS) / 1000, UTC)  # the second day is today
    out = maint.maintain(table, now=today, retention=timedelta(days=365), min_files=FEW)
    assert len(out.days_compacted) == 1 and out.files_after == 6
    out = maint.maintain(table, now=LATER, retention=timedelta(days=365), min_files=5)
    assert out.days_compacted == []  # 5 files is not more than 5


def test_snapshots_past_the_retention_expire_and_time_travel_to_kept_ones_works(
    tmp_path: Path,
) -> None:
    table = grown(tmp_path)
    snaps = sorted(table.metadata.snapshots, key=lambda s: s.timestamp_ms)
    kept_from = snaps[-3]
    # everything older than the third-newest write is past the retention; keep 2 at least
    now = datetime.fromtimestamp(kept_from.timestamp_ms / 1000, UTC) + timedelta(hours=1)
    retention = LATER - now + timedelta(hours=1)
    out = maint.maintain(table, now=LATER, retention=retention, keep=2, min_files=FEW)
    # the compactions (2 days: a delete and an append each) are the newest 4 snapshots
    assert out.days_compacted and out.snapshots_expired > 0
    ids = {s.snapshot_id for s in table.refresh().metadata.snapshots}
    assert out.snapshots_after == len(ids) == out.snapshots_before - out.snapshots_expired
    assert snaps[0].snapshot_id not in ids and kept_from.snapshot_id in ids
    # a kept snapshot from before the compaction still reads its small files' rows
    old = table.scan(snapshot_id=kept_from.snapshot_id).to_arrow()
    assert old.num_rows == 12  # 3 commits of 4 rows
    assert len(list(table.scan(snapshot_id=kept_from.snapshot_id).plan_files())) == 6


def test_files_only_expired_snapshots_reached_are_deleted(tmp_path: Path) -> None:
    table = grown(tmp_path)
    warehouse = tmp_path / "warehouse"
    data_before = files(warehouse, ".parquet")
    out = maint.maintain(table, now=LATER, retention=timedelta(hours=1), keep=1, min_files=FEW)
    # every snapshot but the last (the second day's compacted append) is gone
    assert out.snapshots_after == 1 and out.cleanup_skipped is None
    data_after = files(warehouse, ".parquet")
    assert len(data_before) == 10 and len(data_after) == 2
    assert {str(p) for p in data_after} == {
        f.file_path.removeprefix("file://") for fs in maint.day_files(table).values() for f in fs
    }
    assert out.deleted_files > 10 and out.delete_errors == 0
    # the table still reads whole from a fresh catalog
    fresh = catalog(tmp_path).load_table("s3ingest.history")
    assert fresh.scan().to_arrow().num_rows == 20
    (kept,) = fresh.metadata.snapshots
    referenced = {kept.manifest_list} | {m.manifest_path for m in kept.manifests(fresh.io)}
    assert {str(p) for p in files(warehouse, ".avro")} == {
        p.removeprefix("file://") for p in referenced
    }


def test_a_concurrent_append_during_compaction_is_not_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = grown(tmp_path)
    other = catalog(tmp_path).load_table("s3ingest.history")
    overwrite = type(table).overwrite
    late = history.row_from_event(change("late", "k9", at=T0 + 5_000))  # the first (closed) day

    def append_first(self: Any, *args: Any, **kwargs: Any) -> None:
        # another writer commits between the day's read and the compaction's commit
        if not history.write(other.refresh(), [late]).commits:  # type: ignore[list-item]
            raise AssertionError("the late row was not written")
        monkeypatch.setattr(type(table), "overwrite", overwrite)
        overwrite(self, *args, **kwargs)

    monkeypatch.setattr(type(table), "overwrite", append_first)
    out = maint.maintain(table, now=LATER, retention=timedelta(days=365), min_files=FEW)
    assert len(out.days_refused) == 1 and len(out.days_compacted) == 1
    keys = Counter(r["change_key"] for r in table.refresh().scan().to_arrow().to_pylist())
    assert keys["late"] == 1 and len(keys) == 21 and set(keys.values()) == {1}
    # the next run compacts the refused day, the late row with it
    out = maint.maintain(table, now=LATER, retention=timedelta(days=365), min_files=FEW)
    assert len(out.days_compacted) == 1 and out.files_after == 2
    assert table.refresh().scan().to_arrow().num_rows == 21


def test_exactly_once_holds_after_compaction(tmp_path: Path) -> None:
    table = grown(tmp_path)
    maint.maintain(table, now=LATER, retention=timedelta(hours=1), keep=1, min_files=FEW)
    replay = [
        history.row_from_event(change(f"c{c}-{d}-{i}", f"k{i}", at=T0 + d * DAY_MS + c * 1000))
        for c in (0, 2, 4)
        for d in range(2)
        for i in range(2)
    ]
    out = history.write(table.refresh(), replay)  # type: ignore[arg-type]
    assert out.added == [] and out.commits == 0 and len(out.duplicates) == 12
    keys = Counter(r["change_key"] for r in table.refresh().scan().to_arrow().to_pylist())
    assert len(keys) == 20 and set(keys.values()) == {1}


def test_a_table_that_retries_refused_commits_is_refused(tmp_path: Path) -> None:
    table = grown(tmp_path)
    with table.transaction() as tx:
        tx.set_properties({"commit.retry.num-retries": "4"})
    with pytest.raises(ValueError, match=r"commit\.retry\.num-retries"):
        maint.maintain(table, now=LATER, min_files=FEW)
    assert [len(f) for f in maint.day_files(table.refresh()).values()] == [5, 5]


def test_old_metadata_files_are_deleted_by_later_commits(tmp_path: Path) -> None:
    table = grown(tmp_path, commits=1)
    maint.maintain(table, now=LATER)
    props = table.refresh().properties
    assert props["write.metadata.delete-after-commit.enabled"] == "true"
    assert props["write.metadata.previous-versions-max"] == "100"


def test_a_refused_expiry_is_recomputed_on_the_reloaded_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = grown(tmp_path, commits=3)
    calls: list[int] = []
    commit = type(table.maintenance.expire_snapshots()).commit

    def refused_once(self: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise CommitFailedException("a concurrent commit")
        return commit(self)

    monkeypatch.setattr(type(table.maintenance.expire_snapshots()), "commit", refused_once)
    doomed, kept = maint.expire(table, LATER, timedelta(hours=1), 1)
    assert len(calls) == 2 and len(doomed) == 2 and kept is not None
    assert len(table.refresh().metadata.snapshots) == 1


def test_a_table_not_partitioned_by_day_is_maintained_without_compaction(tmp_path: Path) -> None:
    # a table another writer created without the event_date partition (same columns)
    cat = catalog(tmp_path)
    made = history.ensure_table(cat, "s3ingest.history")
    table = cat.create_table(
        "s3ingest.other", schema=made.schema(), properties=dict(made.properties)
    )
    for c in range(5):
        rows = [history.row_from_event(change(f"u{c}", "k", at=T0 + c * 1000))]
        assert history.write(table, rows).commits == 1  # type: ignore[arg-type]
    before = content(table)
    out = maint.maintain(table, now=LATER, retention=timedelta(hours=1), keep=2, min_files=1)
    assert content(table) == before and sum(before.values()) == 5
    assert (out.files_before, out.files_after, out.days_compacted) == (5, 5, [])
    assert out.snapshots_expired == 3
