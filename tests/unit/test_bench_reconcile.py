"""The benches' peak memory is their own (issue 37): each measured part runs in a spawned
child (:func:`bench.memory.in_child`) and reads its ``VmHWM`` (:func:`bench.memory.peak_mib`),
not ``ru_maxrss``, which starts at the parent's peak."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

import bench
from bench import memory, onboard, reconcile_diff, reprocess
from bench.memory import in_child

BENCH_DIR = Path(bench.__file__).parent


def _tiny_side() -> dict[str, Any]:
    """In the spawned child: a side that builds nothing, measured as the bench measures one."""
    reconcile_diff.SIDES["tiny"] = lambda folder, n: {}
    return reconcile_diff._child("tiny", "", 0)


def _fails() -> None:
    raise ValueError("in the child")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork's high-water mark")
def test_a_sides_peak_does_not_include_its_parents() -> None:
    # GIVEN a parent whose peak RSS is at least 256 MiB (as the bench's, which builds the
    # fixture: about 400 MiB at 10^6 keys), its memory freed again
    big = b"x" * (256 << 20)
    del big
    assert memory.peak_mib() >= 256
    # WHEN a side that builds nothing runs in a spawned child
    result = in_child(_tiny_side)
    # THEN its peak is the interpreter and the bench's imports, not the parent's 256 MiB
    assert result["peak_mib"] < 128


def test_a_childs_error_is_raised_in_the_parent() -> None:
    with pytest.raises(RuntimeError, match="ValueError: in the child"):
        in_child(_fails)


def test_no_bench_reads_ru_maxrss_but_the_shared_helper() -> None:
    readers = [
        path.name
        for path in sorted(BENCH_DIR.glob("*.py"))
        if path.name != "memory.py" and re.search(r"\bru_maxrss\b\s*[^`]", path.read_text())
    ]
    assert readers == []


@pytest.mark.parametrize("module", [onboard, reprocess])
def test_the_local_runs_are_measured_in_a_child(
    module: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    called: list[Any] = []

    def recorded(target: Any, *args: Any) -> dict[str, Any]:
        called.append(target)
        return {}

    monkeypatch.setattr(module, "in_child", recorded)
    module.run(10, 0, 1)
    assert called == [module._run]
