"""Run the suite several times, each in its own random order, and report every test that failed.

``make flake-check N=5`` (``ARGS=tests/unit`` for a path) runs::

    python -m tests.flake_check --runs 5 -- <make unit's pytest options> <ARGS>

Each run is pytest with those options, ``-p randomly --randomly-seed=<seed>`` (a new seed per
run, drawn at random unless ``--seeds`` names them) and a JUnit XML report, read afterwards: a
test that failed or errored in any run is reported with the seeds of those runs, so each one
replays with ``pytest -p randomly --randomly-seed=<seed> ...``. A run that ended without its
report, or with an exit code other than 0 or 1 (pytest's: 2 interrupted, 3 internal error, 4
usage error, 5 no tests collected), is reported as broken.

Exit status: 0 when every run passed; 1 when a test failed or a run broke; 2 on a usage error.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

#: pytest's exit codes for a run that ran its tests: all passed, some failed.
_RAN = (0, 1)


@dataclass
class Run:
    """One pytest run: its seed, exit code, wall time (s), and the tests that failed in it
    (node id -> the first line of the failure's message)."""

    seed: int
    returncode: int
    seconds: float
    tests: int = 0
    failed: dict[str, str] = field(default_factory=dict)
    broken: str | None = None


def node_id(case: ET.Element) -> str:
    """A JUnit ``testcase`` (``junit_family=xunit1``: with its ``file``) as pytest's node id:
    ``tests/unit/test_x.py::TestClass::test_y[param]``."""
    name = case.get("name", "?")
    path = case.get("file")
    classname = case.get("classname", "")
    if not path:
        return f"{classname}::{name}" if classname else name
    module = path.removesuffix(".py").replace("/", ".")
    inner = classname[len(module) + 1 :] if classname.startswith(module + ".") else ""
    return "::".join(part for part in (path, *inner.split("."), name) if part)


def read_report(report: Path) -> tuple[int, dict[str, str]]:
    """The number of tests in a JUnit XML report and those that failed or errored (a failing
    teardown is reported too: a test whose setup or teardown failed is a failure of the run).

    Raises
    ------
    ET.ParseError, OSError
        The report is missing or unreadable.
    """
    root = ET.parse(report).getroot()
    tests = 0
    failed: dict[str, str] = {}
    for case in root.iter("testcase"):
        tests += 1
        for kind in ("failure", "error"):
            problem = case.find(kind)
            if problem is not None:
                message = (problem.get("message") or problem.text or kind).strip()
                failed.setdefault(node_id(case), f"{kind}: {message.splitlines()[0][:200]}")
    return tests, failed


def run_once(seed: int, pytest_args: Sequence[str], report: Path) -> Run:
    """Run pytest once in the order of ``seed``; the run's outcome (see :class:`Run`)."""
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "randomly",
        f"--randomly-seed={seed}",
        f"--junitxml={report}",
        "-o",
        "junit_family=xunit1",
        "-p",
        "no:cacheprovider",
        *pytest_args,
    ]
    print(f"== flake-check: {' '.join(command[1:])}", flush=True)
    start = time.monotonic()
    returncode = subprocess.run(command, check=False).returncode
    run = Run(seed=seed, returncode=returncode, seconds=time.monotonic() - start)
    try:
        run.tests, run.failed = read_report(report)
    except (ET.ParseError, OSError) as error:
        run.broken = f"no report ({error.__class__.__name__}), exit code {returncode}"
        return run
    if returncode not in _RAN:
        run.broken = f"exit code {returncode}"
    elif returncode == 1 and not run.failed:
        run.broken = "exit code 1 with no failed test in its report"
    return run


def summary(runs: Sequence[Run]) -> tuple[list[str], bool]:
    """The report's lines and whether every run passed."""
    lines: list[str] = []
    for i, r in enumerate(runs):
        broken = f" (BROKEN: {r.broken})" if r.broken else ""
        lines.append(
            f"run {i + 1}: seed {r.seed}, exit {r.returncode}, {r.tests} tests, "
            f"{len(r.failed)} failed, {r.seconds:.0f} s{broken}"
        )
    flaky: dict[str, list[Run]] = {}
    for r in runs:
        for test in r.failed:
            flaky.setdefault(test, []).append(r)
    for test in sorted(flaky):
        seeds = ", ".join(str(r.seed) for r in flaky[test])
        lines.append(f"FAILED in {len(flaky[test])} of {len(runs)} runs (seeds {seeds}): {test}")
        lines.append(f"    {flaky[test][0].failed[test]}")
    broke = sum(1 for r in runs if r.broken)
    verdict = f"{len(flaky)} tests failed in some run" if flaky else "no test failed"
    if broke:
        verdict += f", {broke} runs broke"
    elif not flaky:
        verdict = "every test passed in every run"
    lines.append(f"flake-check: {len(runs)} runs, {verdict}")
    return lines, not flaky and not broke


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.flake_check",
        description="Run pytest N times in random orders; report every test that ever failed.",
    )
    parser.add_argument("--runs", type=int, default=5, help="how many runs (default 5)")
    parser.add_argument(
        "--seeds",
        help="comma-separated pytest-randomly seeds, one per run (replays those orders)",
    )
    parser.add_argument(
        "pytest_args", nargs="*", help="pytest's options and paths (after --)", metavar="ARG"
    )
    args = parser.parse_args(argv)
    if args.seeds:
        try:
            seeds = [int(s) for s in args.seeds.split(",")]
        except ValueError:
            parser.error(f"--seeds {args.seeds!r} is not comma-separated integers")
    else:
        if args.runs < 1:
            parser.error("--runs must be at least 1")
        seeds = random.SystemRandom().sample(range(1, 2**32), args.runs)
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="flake-check-") as tmp:
        for i, seed in enumerate(seeds):
            runs.append(run_once(seed, args.pytest_args, Path(tmp) / f"run-{i + 1}.xml"))
    lines, ok = summary(runs)
    print("\n".join(["", "== flake-check report", *lines]), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
