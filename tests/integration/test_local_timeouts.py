"""In-process functions obey their function's timeout as Lambda does (issue 23, 4(d)): an ingest
invocation whose processor is still running at the end of the function's timeout has timed
out, and its batch comes back; it is never reported done."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from s3ingest.local.stack.runtime import LocalRuntime, local_settings
from s3ingest_fn.core import effects

#: Released by the test once the first invocation has timed out.
RELEASE = threading.Event()
#: Calls of :func:`blocking`.
CALLS: list[str] = []


def blocking(change: Any, content: Any) -> None:
    """An in-process processor whose first run outlasts any short timeout (it waits for the
    test, not for the clock)."""
    CALLS.append(change.key)
    if len(CALLS) == 1:
        RELEASE.wait(30)


def test_an_in_process_processor_over_the_ingest_timeout_times_the_invocation_out(
    emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a short timeout (no long waits): effects may start with little time left
    monkeypatch.setattr(effects, "MIN_EFFECT_MS", 100)
    RELEASE.clear()
    CALLS.clear()
    rt = LocalRuntime(
        emulator,
        local_settings(processor=f"{__name__}:blocking", change_stream=False),
        versioning="Enabled",
    )
    try:
        timeout, rt.ingest_timeout_seconds = rt.ingest_timeout_seconds, 0.5
        rt.faithful.put("k", b"x")
        rt.flush()

        def after_batch(runtime: LocalRuntime) -> None:
            if RELEASE.is_set():
                return
            RELEASE.set()  # the first invocation has ended (timed out): let the run finish
            # and report (it releases its claim first), so that the message, back after the
            # poller's 1 s visibility timeout, finds no live lease however slow the machine;
            # the retry gets the whole default timeout, its reclaim, effect and commit with it
            late = time.monotonic() + 30
            while not runtime.delivered and time.monotonic() < late:
                time.sleep(0.01)
            runtime.ingest_timeout_seconds = timeout

        rt.after_batch = after_batch
        rt.drain()
        # THEN the first invocation timed out: its run, finished after the deadline, committed
        # nothing, and the retried message ran the effect again, to done
        assert rt.ingest_timeouts == 1
        assert CALLS == ["k", "k"]
        by_effect = {d.result.extra.get("effect"): d.result for d in rt.delivered}
        assert sorted(by_effect, key=str) == [None, "resumed-done"], rt.delivered
        late = by_effect[None]
        assert late.outcome.value == "retried" and "timed out during the effect" in late.reason
        assert rt.compare().converged
        (row,) = rt.ledger_rows()
        assert row.effect_status == "done"
    finally:
        RELEASE.set()
        rt.close()
