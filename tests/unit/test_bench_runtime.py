"""The benches that compare against an earlier runtime and count reads (issue 37): the earlier
runtime is built from its commit in the run, and every GetItem is put down to its caller."""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from botocore.hooks import HierarchicalEmitter

from bench import requests_per_event, runtime_speed


def _client() -> Any:
    return SimpleNamespace(meta=SimpleNamespace(events=HierarchicalEmitter()))


def _call(client: Any, operation: str) -> None:
    client.meta.events.emit("before-call.dynamodb.X", model=SimpleNamespace(name=operation))


def test_reads_are_put_down_to_the_ingest_function_that_made_them() -> None:
    client, reads_by = _client(), Counter[str]()
    calls = requests_per_event._count_calls(client, reads_by)

    def _removed() -> None:
        _call(client, "GetItem")

    def _observe() -> None:
        _call(client, "UpdateItem")
        _call(client, "GetItem")

    _removed()
    _removed()
    _observe()
    _call(client, "Scan")
    assert calls == {"GetItem": 3, "UpdateItem": 1, "Scan": 1}
    assert reads_by == {"_removed": 2, "_observe": 1, "other": 1}


def test_no_recorded_speed_figure_is_left_in_the_requests_bench() -> None:
    names = [n for n in vars(requests_per_event) if n.endswith("_BEFORE")]
    assert names == []


def test_the_earlier_runtime_is_checked_out_from_its_commit(tmp_path: Path) -> None:
    known = subprocess.run(
        ["git", "cat-file", "-e", f"{runtime_speed.BASELINE_COMMIT}^{{commit}}"],
        cwd=runtime_speed.ROOT,
        capture_output=True,
    )
    if known.returncode != 0:
        pytest.skip("a shallow clone: the earlier commit is not here")
    tree = runtime_speed.checkout(runtime_speed.BASELINE_COMMIT, tmp_path)
    assert (tree / "s3ingest" / "local" / "runtime.py").is_file()
    assert (tree / "functions" / "s3ingest_fn" / "handlers" / "ingest.py").is_file()
    assert not (tree / "s3ingest" / "local" / "in_process.py").exists()  # before 0.2.0's
