"""Debugging on the local stack (issue 36): the printed ``export`` line is enough for boto3's
default chain (both region variables), ``local up --port N`` fixes the emulator's port (a taken
one refused), and ``s3ingest local logs`` shows what the functions and processors printed."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from typer.testing import CliRunner

from s3ingest.cli import app
from s3ingest.local.emulator.server import PortInUseError, check_port
from s3ingest.local.stack import daemon

DEADLINE_SECONDS = 90.0


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    return result.exit_code, result.output


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def shouting_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """``local up --port P`` in a fresh directory, with a processor that prints each key it
    gets; stopped by its pid at the end."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "procs" / "team").mkdir(parents=True)
    (tmp_path / "procs" / "team" / "__init__.py").write_text("")
    (tmp_path / "procs" / "team" / "shout.py").write_text(
        "def run(change, content):\n    print(f'shout saw {change.key}')\n"
    )
    processors = json.dumps([{"name": "shout", "module": "team.shout:run"}])
    port = _free_port()
    code, output = _cli(
        "local",
        "up",
        "--port",
        str(port),
        "--context",
        f"processors={processors}",
        "--context",
        "processorPackageDir=procs",
        "--json",
    )
    assert code == 0, output
    info: dict[str, Any] = json.loads(output)
    info["port"] = port
    try:
        yield info
    finally:
        pid = int(info["pid"])
        if daemon.alive(pid):
            daemon.stop(daemon.run_dir())
        assert not daemon.alive(pid)


@pytest.mark.slow
def test_the_export_line_port_and_logs_of_a_local_stack(
    shouting_stack: dict[str, Any], tmp_path: Path
) -> None:
    info = shouting_stack
    # THEN the emulator listens on the port asked for
    assert info["endpoint"] == f"http://127.0.0.1:{info['port']}"
    # AND the export line local status prints gives boto3's default chain all it needs
    code, output = _cli("local", "status")
    assert code == 0, output
    line = next(x for x in output.splitlines() if x.startswith("export "))
    exported = dict(pair.split("=", 1) for pair in line.removeprefix("export ").split())
    assert exported["AWS_DEFAULT_REGION"] == exported["AWS_REGION"] == info["region"]
    table = info["outputs"]["LedgerTableName"]
    nowhere = str(tmp_path / "no-aws-config")  # no profile's region to fall back on
    scan = subprocess.run(
        [
            sys.executable,
            "-c",
            "import boto3, sys; print(boto3.client('dynamodb').scan(TableName=sys.argv[1])"
            "['Count'])",
            table,
        ],
        capture_output=True,
        text=True,
        env={
            "PATH": os.environ.get("PATH", ""),
            "AWS_CONFIG_FILE": nowhere,
            "AWS_SHARED_CREDENTIALS_FILE": nowhere,
            **exported,
        },
        timeout=60,
    )
    assert scan.returncode == 0, scan.stderr
    assert scan.stdout.strip() == "0"
    # WHEN an object lands and the processor prints
    s3 = boto3.client(
        "s3", endpoint_url=info["endpoint"], region_name=info["region"], **info["credentials"]
    )
    s3.put_object(Bucket=info["buckets"][0], Key="in/loud.txt", Body=b"hey")
    deadline = time.monotonic() + DEADLINE_SECONDS
    while True:
        code, output = _cli("local", "logs")
        assert code == 0, output
        if "shout saw in/loud.txt" in output or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    # THEN local logs shows the line, named after the processor's log, with the ingest
    # function's invocation around it
    assert "processor-shout " in output and "shout saw in/loud.txt" in output, output
    assert any(x.startswith("ingest ") and "START RequestId: " in x for x in output.splitlines())
    assert (daemon.run_dir() / daemon.LOGS_DIR / "processor-shout.log").is_file()
    code, output = _cli("local", "logs", "processor-shout", "--json")
    assert code == 0, output
    lines = [json.loads(x) for x in output.splitlines()]
    assert [x["text"] for x in lines] == ["shout saw in/loud.txt"]
    assert lines[0]["function"] == "processor-shout"
    # AND a log that does not exist is a usage error naming those that do
    code, output = _cli("local", "logs", "nosuch")
    assert code == 2 and "processor-shout" in output and "ingest" in output
    # AND the same port is refused to a second stack, before anything starts
    second = tmp_path / "second"
    result = CliRunner().invoke(
        app,
        ["local", "up", "--port", str(info["port"])],
        env={"COLUMNS": "200", daemon.RUN_DIR_ENV: str(second)},
    )
    assert result.exit_code == 2 and f"port {info['port']} is in use" in result.output
    assert not (second / daemon.RUN_FILE).exists()


def test_a_taken_port_is_refused_by_local_up_and_by_the_daemon(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = int(taken.getsockname()[1])
        # THEN local up --port exits 2 naming it, and starts nothing
        code, output = _cli("local", "up", "--port", str(port))
        assert code == 2 and f"port {port} is in use" in output, output
        assert not (daemon.run_dir() / daemon.RUN_FILE).exists()
        # AND the daemon itself refuses it (a port taken between the check and the start)
        with pytest.raises(daemon.LocalStackError, match=f"port {port} is in use") as refused:
            daemon.start({}, tmp_path / "run", port=port, timeout_seconds=60)
        assert refused.value.usage
        with pytest.raises(PortInUseError):
            check_port(port)
    assert check_port(port) == port  # free again


def test_local_logs_without_a_stack_exits_1() -> None:
    code, output = _cli("local", "logs")
    assert code == 1 and "no logs: run s3ingest local up" in output
