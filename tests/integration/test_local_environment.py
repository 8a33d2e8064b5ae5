"""Nothing of the host's environment reaches a local function (issue 23, part 1): each runs with
its function's environment alone, set for its invocation only."""

from __future__ import annotations

import os
from typing import Any

import pytest

from s3ingest.local.stack.runtime import LocalRuntime
from s3ingest.settings import Settings


def test_a_host_processor_variable_does_not_reach_a_local_function(
    emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a host whose shell names a processor that cannot even be imported
    monkeypatch.setenv("PROCESSOR", "no_such_package.nowhere:handler")
    rt = LocalRuntime(emulator, Settings(change_stream=False), versioning="Enabled")
    try:
        rt.faithful.put("k", b"x")  # its event is never flushed: only the backfill records it
        # WHEN the listing backfill machine runs its functions in-process
        result = rt.backfill_listing()
        # THEN they ran without the host's processor (importing it would have failed them)
        assert result["execution"]["status"] == "SUCCEEDED", result["execution"]
        assert rt.compare().converged
        assert "PROCESSOR" not in rt.environment()
        assert os.environ["PROCESSOR"] == "no_such_package.nowhere:handler"  # the host's kept
    finally:
        rt.close()
