"""``make flake-check`` (:mod:`tests.flake_check`): the runs' JUnit reports read back as node
ids, and the report of every test that failed in some run with the seeds that replay it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.flake_check import Run, main, read_report, summary

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4">
<testcase classname="tests.unit.test_a" name="test_ok" file="tests/unit/test_a.py" line="3"/>
<testcase classname="tests.unit.test_a" name="test_p[s3]" file="tests/unit/test_a.py" line="9">
<failure message="assert 1 == 2&#10;more">trace</failure></testcase>
<testcase classname="tests.unit.test_b.TestX" name="test_m" file="tests/unit/test_b.py" line="5">
<error message="failed on setup with &quot;boom&quot;">trace</error></testcase>
<testcase classname="tests.unit.test_b" name="test_s" file="tests/unit/test_b.py" line="8">
<skipped message="no"/></testcase>
</testsuite></testsuites>
"""


def test_a_report_gives_the_failed_and_errored_tests_by_node_id(tmp_path: Path) -> None:
    report = tmp_path / "run.xml"
    report.write_text(REPORT)
    tests, failed = read_report(report)
    assert tests == 4
    assert failed == {
        "tests/unit/test_a.py::test_p[s3]": "failure: assert 1 == 2",
        "tests/unit/test_b.py::TestX::test_m": 'error: failed on setup with "boom"',
    }


def test_the_summary_names_each_failed_test_with_the_seeds_of_its_runs() -> None:
    runs = [
        Run(seed=11, returncode=1, seconds=3.0, tests=2, failed={"t.py::a": "failure: x"}),
        Run(seed=22, returncode=0, seconds=2.0, tests=2),
        Run(seed=33, returncode=1, seconds=2.5, tests=2, failed={"t.py::a": "failure: y"}),
    ]
    lines, ok = summary(runs)
    assert not ok
    assert "FAILED in 2 of 3 runs (seeds 11, 33): t.py::a" in lines
    assert lines[-1] == "flake-check: 3 runs, 1 tests failed in some run"


def test_a_run_that_broke_fails_the_check_even_with_no_failed_test() -> None:
    lines, ok = summary([Run(seed=5, returncode=5, seconds=1.0, broken="exit code 5")])
    assert not ok
    assert lines[0] == "run 1: seed 5, exit 5, 0 tests, 0 failed, 1 s (BROKEN: exit code 5)"
    _, ok = summary([Run(seed=5, returncode=0, seconds=1.0, tests=3)])
    assert ok


def test_seeds_that_are_not_integers_are_a_usage_error() -> None:
    with pytest.raises(SystemExit) as stop:
        main(["--seeds", "1,x"])
    assert stop.value.code == 2
