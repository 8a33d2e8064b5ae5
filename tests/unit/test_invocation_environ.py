"""``os.environ`` as the local runtime lays it (:mod:`s3ingest.local.emulator.environment`): outside
an invocation it behaves as the process environment, operators included; inside one it answers
from that invocation's environment alone. Tested on a view over a plain dict, so the process
environment is never touched."""

from __future__ import annotations

import threading

from s3ingest.local.emulator.environment import InvocationEnviron
from s3ingest_fn.config import carry_context, use_env


def test_outside_an_invocation_it_is_the_process_environment() -> None:
    base = {"HOME": "/root", "PATH": "/bin"}
    view = InvocationEnviron(base)
    assert view["HOME"] == "/root"
    assert view | {"X": "1"} == {"HOME": "/root", "PATH": "/bin", "X": "1"}
    assert {"HOME": "other", "Y": "2"} | view == {"HOME": "/root", "PATH": "/bin", "Y": "2"}
    assert view.copy() == base
    view["NEW"] = "v"
    assert base["NEW"] == "v"
    view |= {"MORE": "m"}
    assert base["MORE"] == "m"
    del view["NEW"]
    assert "NEW" not in base


def test_inside_an_invocation_only_its_environment_is_seen_and_written() -> None:
    base = {"HOME": "/root", "PROCESSOR": "host.module:run"}
    view = InvocationEnviron(base)
    with use_env({"OUTPUT_BUCKET": "out"}):
        assert dict(view) == {"OUTPUT_BUCKET": "out"}
        assert view.get("PROCESSOR") is None
        assert view | {"X": "1"} == {"OUTPUT_BUCKET": "out", "X": "1"}
        view["SET_INSIDE"] = "yes"
        assert view["SET_INSIDE"] == "yes"
    assert "SET_INSIDE" not in base
    assert dict(view) == base


def test_a_worker_thread_of_an_invocation_sees_its_environment() -> None:
    view = InvocationEnviron({"HOME": "/root"})
    seen: list[str | None] = []

    def look() -> None:
        seen.append(view.get("OUTPUT_BUCKET"))

    with use_env({"OUTPUT_BUCKET": "out"}):
        worker = threading.Thread(target=carry_context(look))
        worker.start()
        worker.join()
    plain = threading.Thread(target=look)
    plain.start()
    plain.join()
    assert seen == ["out", None]
