"""``python -m bench --only reconcile`` (issue 37): each side's peak memory is its own."""

from __future__ import annotations

import multiprocessing
import sys
from typing import Any

import pytest

from bench import reconcile_diff


def _tiny_side(connection: Any) -> None:
    """In the spawned child: a side that builds nothing, measured as the bench measures one."""
    reconcile_diff.SIDES["tiny"] = lambda folder, n: {}
    reconcile_diff._child("tiny", "", 0, connection)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork's high-water mark")
def test_a_sides_peak_does_not_include_its_parents() -> None:
    # GIVEN a parent whose peak RSS is at least 256 MiB (as the bench's, which builds the
    # fixture: about 400 MiB at 10^6 keys), its memory freed again
    big = b"x" * (256 << 20)
    del big
    # WHEN a side that builds nothing runs in a spawned child
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)  # a pipe, not a socket pair (no sockets here)
    proc = ctx.Process(target=_tiny_side, args=(child,))
    proc.start()
    result = parent.recv()
    proc.join()
    # THEN its peak is the interpreter and the bench's imports, not the parent's 256 MiB
    assert result["peak_mib"] < 128
