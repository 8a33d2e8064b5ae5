"""The history writer's bench (bench/history_writer.py) on a small run: its figures, and a
replayed batch adding no row and no commit."""

from __future__ import annotations

from bench import history_writer


def test_the_bench_measures_a_commit_and_a_replay() -> None:
    got = history_writer.measure(batch=10, commits=2)
    assert got["files_per_commit"] == 4.0  # data file, manifest, manifest list, metadata
    assert got["replay_rows_added"] == 0 and got["replay_commits"] == 0
    assert got["rows_per_second"] > 0 and got["data_bytes_per_commit"] > 0
