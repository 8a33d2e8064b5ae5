"""The history writer's bench (bench/history_writer.py) on a small run: its figures, and a
replayed batch adding no row and no commit."""

from __future__ import annotations

from bench import history_writer


def test_the_bench_measures_a_commit_and_a_replay() -> None:
    got = history_writer.measure(batch=10, commits=2)
    assert got["files_per_commit"] == 4.0  # data file, manifest, manifest list, metadata
    assert got["replay_rows_added"] == 0 and got["replay_commits"] == 0
    assert got["rows_per_second"] > 0 and got["data_bytes_per_commit"] > 0


def test_the_bench_measures_the_maintenance() -> None:
    got = history_writer.measure_maintenance(batch=10, commits=12)
    assert got["files_per_day_before"] == [12] and got["files_per_day_after"] == [1]
    assert got["snapshots_after"] == 1 and got["snapshots_expired"] == 13  # 12 and a delete
    assert got["files_deleted"] > 12 and got["metadata_bytes_per_snapshot"] > 0
    assert (got["parquet_files_before"], got["parquet_files_after"]) == (12, 1)
    assert got["avro_files_after"] < got["avro_files_before"]
