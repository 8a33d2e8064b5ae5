"""The local stack's run directory: an explicit one, else ``S3INGEST_RUN_DIR``, else
``.s3ingest`` of the current directory; and the tests' own, never the repository's (issue 36)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from s3ingest.local.stack import daemon
from tests import run_dir_guard

TESTS = Path(__file__).resolve().parents[1]


def test_an_explicit_directory_wins_over_the_variable_which_wins_over_the_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(daemon.RUN_DIR_ENV, str(tmp_path / "named"))
    assert daemon.run_dir(tmp_path / "given") == tmp_path / "given"
    assert daemon.run_dir() == tmp_path / "named"
    monkeypatch.setenv(daemon.RUN_DIR_ENV, " ")  # set but empty: as unset
    assert daemon.run_dir() == tmp_path / daemon.RUN_DIR
    monkeypatch.delenv(daemon.RUN_DIR_ENV)
    assert daemon.run_dir() == tmp_path / daemon.RUN_DIR


def test_a_test_s_run_directory_is_its_own_outside_the_repository(tmp_path: Path) -> None:
    # (pytest runs from the checkout: without the override, this was its .s3ingest/)
    here = daemon.run_dir()
    assert here == tmp_path / daemon.RUN_DIR
    assert not here.resolve().is_relative_to(run_dir_guard.REPO)
    # AND a process a test starts (the daemon, a CLI) inherits it
    out = subprocess.run(
        [sys.executable, "-c", "from s3ingest.local.stack.daemon import run_dir; print(run_dir())"],
        capture_output=True,
        text=True,
        check=True,
        cwd=run_dir_guard.REPO,
        env={**os.environ, "PYTHONPATH": str(run_dir_guard.REPO)},
    ).stdout.strip()
    assert Path(out) == here


def test_the_session_check_names_what_changed_in_a_run_directory(tmp_path: Path) -> None:
    run = tmp_path / ".s3ingest"
    assert run_dir_guard.changes(None, run_dir_guard.snapshot(run)) == []
    (run / "logs").mkdir(parents=True)
    (run / "local.json").write_text("{}")
    assert run_dir_guard.changes(None, run_dir_guard.snapshot(run)) == [
        "created",
        "created local.json",
    ]
    before = run_dir_guard.snapshot(run)
    (run / "logs" / "ingest.log").write_text("x\n")
    (run / "local.json").write_text('{"pid": 1}')
    assert run_dir_guard.changes(before, run_dir_guard.snapshot(run)) == [
        "created logs/ingest.log",
        "modified local.json",
    ]
    before = run_dir_guard.snapshot(run)
    (run / "local.json").unlink()
    assert run_dir_guard.changes(before, run_dir_guard.snapshot(run)) == ["removed local.json"]
    assert run_dir_guard.changes(before, before) == []


def test_no_test_changes_into_a_directory_other_than_a_tmp_one() -> None:
    # a test that changes into the checkout (pytest's cwd, or ROOT) and removes the override
    # would find the repository's run directory again
    offenders = []
    for path in TESTS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "chdir"
            ):
                where = ast.unparse(node.args[0]) if node.args else ""
                if "tmp" not in where:
                    offenders.append(f"{path.relative_to(TESTS)}:{node.lineno}: chdir({where})")
    assert offenders == []
