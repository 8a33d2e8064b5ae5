"""The local functions' logs (issue 36): what an invocation prints, on its own thread or on a
worker thread it starts with its context, lands in its function's file, stamped, line by line;
a processor's in its own; and ``read`` and ``follow`` give the lines back in time order."""

from __future__ import annotations

import re
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from s3ingest.local.emulator import function_logs
from s3ingest.local.emulator.function_logs import FunctionLogs, routed
from s3ingest.local.emulator.lambda_service import run_with_timeout
from s3ingest_fn.core.context import in_caller_context

STAMPED = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z ")


def _texts(directory: Path, name: str) -> list[str]:
    return [line.text for line in function_logs.read(directory, [name])]


def test_an_invocation_s_prints_go_to_its_function_s_file_worker_threads_included(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs = FunctionLogs(tmp_path)

    def record(i: int) -> None:
        print(f"record {i}")

    def handler() -> str:
        print("on the invocation's thread")
        with ThreadPoolExecutor(2) as pool:  # as the ingest handler's record workers
            list(pool.map(in_caller_context(record), range(2)))
        print("to stderr", file=sys.stderr)
        return "ok"

    outcome = run_with_timeout(handler, 5.0, {}, logs.sink("ingest"), name="t", request_id="r-1")
    assert outcome.result == "ok"
    raw = (tmp_path / "ingest.log").read_text().splitlines()
    assert all(STAMPED.match(line) for line in raw)
    texts = _texts(tmp_path, "ingest")
    assert texts[0] == "START RequestId: r-1 Version: $LATEST"
    assert texts[-1] == "END RequestId: r-1"
    assert sorted(texts[1:-1]) == sorted(
        ["on the invocation's thread", "record 0", "record 1", "to stderr"]
    )
    # AND nothing of it reached the caller's streams
    captured = capsys.readouterr()
    assert "record" not in captured.out and "stderr" not in captured.err


def test_a_processor_s_prints_go_to_its_own_file_and_lines_in_pieces_stay_whole(
    tmp_path: Path,
) -> None:
    logs = FunctionLogs(tmp_path)
    shout = logs.processor("shout", lambda change, content: print("got", change, end=""))

    def pieces(tag: str) -> None:
        with routed(logs.sink("ingest")):
            for _ in range(50):
                sys.stdout.write(tag)
                sys.stdout.write(" whole\n")

    with routed(logs.sink("ingest")):
        print("before")
        shout("k1", None)
        print("after")
    threads = [threading.Thread(target=pieces, args=(t,)) for t in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert _texts(tmp_path, "processor-shout") == ["got k1"]  # its unfinished line, ended
    texts = _texts(tmp_path, "ingest")
    assert texts[:2] == ["before", "after"]
    assert sorted(set(texts[2:])) == ["a whole", "b whole"] and len(texts) == 102
    assert function_logs.names(tmp_path) == ["ingest", "processor-shout"]
    # AND all logs read together are in time order, each line named
    both = function_logs.read(tmp_path, function_logs.names(tmp_path))
    assert [line.time for line in both] == sorted(line.time for line in both)
    assert {line.function for line in both} == {"ingest", "processor-shout"}


def test_follow_gives_the_lines_so_far_then_each_new_one(tmp_path: Path) -> None:
    logs = FunctionLogs(tmp_path)
    with routed(logs.sink("ingest")):
        print("first")
    seen: list[str] = []
    lines = function_logs.follow(tmp_path, None, stop=lambda: len(seen) >= 3, poll_seconds=0.01)
    seen.append(next(lines).text)
    with routed(logs.sink("change-relay")):  # a log created later
        print("second")
    with routed(logs.sink("ingest")):
        print("third")
    seen.extend(line.text for line in lines)
    assert seen == ["first", "second", "third"]


def test_without_a_folder_functions_go_to_memory_and_processors_to_the_caller(
    capsys: pytest.CaptureFixture[str],
) -> None:
    logs = FunctionLogs()
    loud = logs.processor("loud", lambda: print("processed a.txt"))
    with routed(logs.sink("ingest")):
        print("kept")
        loud()
    assert logs.memory.getvalue() == "kept\n"
    assert capsys.readouterr().out == "processed a.txt\n"
