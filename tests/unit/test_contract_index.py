"""The rule-to-test index (``docs/contract-tests.md``) is current, and every ``contract`` marker
names a rule of ``docs/contract.md``: checked on the index, on single markers, and on a pytest run
whose marker has a typo."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import contract_index
from tests.contract_index import (
    CONTRACT_DUMP,
    INDEX,
    ROOT,
    ContractMarkError,
    Marked,
    check_rules,
    collect,
    read_rules,
    render,
    scan,
)


def test_the_contract_defines_c1_to_c15_in_order() -> None:
    rules = read_rules()
    assert list(rules) == [f"C{n}" for n in range(1, 16)]
    assert rules["C6"] == "Tombstones" and rules["C15"] == "Convergence"


def test_the_index_is_current() -> None:
    # Regenerated in memory from the markers and docs/contract.md: `make contract-index` rewrites.
    assert INDEX.read_text(encoding="utf-8") == render(read_rules(), collect()), (
        "docs/contract-tests.md is not current: run make contract-index"
    )


def test_every_marker_names_a_rule_and_every_rule_is_indexed() -> None:
    rules = read_rules()
    marked = collect()
    assert marked, "no test carries a contract marker"
    for test in marked:
        check_rules(test.rules, {}, rules)
    text = INDEX.read_text(encoding="utf-8")
    for number, title in rules.items():
        assert f"## {number} {title}\n" in text


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (("C16",), {}, "contract('C16') names no rule"),
        (("c6",), {}, "contract('c6') names no rule"),
        (("C6", "C0"), {}, "contract('C0') names no rule"),
        ((6,), {}, "contract(6) names no rule"),
        ((), {}, "names no rule: give at least one"),
        (("C6",), {"rule": "C7"}, "rule names only"),
    ],
)
def test_a_marker_that_names_no_rule_is_refused(
    args: tuple[object, ...], kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(ContractMarkError, match=re.escape(message)):
        check_rules(args, kwargs, read_rules())
    check_rules(("C1", "C15"), {}, read_rules())


def test_scan_reads_function_class_and_module_markers(tmp_path: Path) -> None:
    source = tmp_path / "tests" / "test_sample.py"
    source.parent.mkdir()
    source.write_text(
        "import pytest\n"
        "from pytest import mark\n"
        "pytestmark = [pytest.mark.slow, pytest.mark.contract('C13')]\n"
        "@pytest.mark.contract('C7', 'C13')\n"
        "@pytest.mark.parametrize('x', [1])\n"
        "def test_one(x): pass\n"
        "def test_two(): pass\n"
        "def helper(): pass\n"
        "@mark.contract('C10')\n"
        "class TestThree:\n"
        "    @pytest.mark.contract('C5')\n"
        "    def test_four(self): pass\n",
        encoding="utf-8",
    )
    assert scan(source, tmp_path) == [
        Marked("tests/test_sample.py::test_one", ("C13", "C7")),
        Marked("tests/test_sample.py::test_two", ("C13",)),
        Marked("tests/test_sample.py::TestThree::test_four", ("C13", "C10", "C5")),
    ]


def test_a_marker_the_index_cannot_read_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "test_sample.py"
    source.write_text("import pytest\nR = 'C6'\n@pytest.mark.contract(R)\ndef test_x(): pass\n")
    with pytest.raises(ContractMarkError, match="literals"):
        scan(source, tmp_path)


def test_render_lists_each_rules_tests_and_the_rules_with_none() -> None:
    text = render(
        {"C1": "Identity", "C2": "Sequencer", "C3": "Event kinds"},
        [Marked("tests/a.py::test_x", ("C1",)), Marked("tests/b.py::test_y", ("C1", "C3"))],
    )
    assert "| C1 | Identity | 2 |" in text and "| C2 | Sequencer | 0 |" in text
    assert "Rules with no test: C2.\n" in text
    assert "## C1 Identity\n\n- `tests/a.py::test_x`\n- `tests/b.py::test_y`\n" in text
    assert "## C2 Sequencer\n\nNo test proves this rule.\n" in text
    with pytest.raises(ContractMarkError, match=re.escape("contract('C4') names no rule")):
        render({"C1": "Identity"}, [Marked("tests/a.py::test_x", ("C4",))])


def _collect_only(directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=directory,
        env=os.environ | {"PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_typo_in_a_marker_fails_the_run(tmp_path: Path) -> None:
    # GIVEN this repository's marker registration and collection hook, and a test marked C16
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\naddopts = --strict-markers\n"
        "markers =\n    contract(*rules): the rules this test proves\n"
    )
    (tmp_path / "conftest.py").write_text(
        "from tests.conftest import pytest_collection_modifyitems  # noqa: F401\n"
    )
    sample = tmp_path / "test_sample.py"
    sample.write_text(
        "import pytest\n"
        "@pytest.mark.contract('C6')\n"
        "def test_ok(): pass\n"
        "@pytest.mark.contract('C16')\n"
        "def test_typo(): pass\n"
    )
    # WHEN pytest collects it / THEN the run is a usage error naming the test and the marker
    result = _collect_only(tmp_path)
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    assert "test_sample.py::test_typo: contract('C16') names no rule" in result.stderr
    # AND with the typo fixed it collects
    sample.write_text("import pytest\n@pytest.mark.contract('C6')\ndef test_ok(): pass\n")
    result = _collect_only(tmp_path)
    assert result.returncode == pytest.ExitCode.OK, result.stdout + result.stderr


def test_the_index_reads_the_markers_pytest_applies(tmp_path: Path) -> None:
    # The index reads the sources; pytest's own collection must find the same tests and rules
    dump = tmp_path / "markers.json"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        env=os.environ | {CONTRACT_DUMP: str(dump)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == pytest.ExitCode.OK, result.stdout[-2000:] + result.stderr
    seen = json.loads(dump.read_text())
    assert seen == {m.nodeid: sorted(set(m.rules)) for m in collect()}


def test_main_check_tells_a_stale_index(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = tmp_path / "contract-tests.md"
    stale.write_text("# old\n", encoding="utf-8")
    monkeypatch.setattr(contract_index, "INDEX", stale)
    assert contract_index.main(["--check"]) == 1
    assert "not current" in capsys.readouterr().err
    assert contract_index.main([]) == 0
    assert contract_index.main(["--check"]) == 0
    assert stale.read_text(encoding="utf-8") == INDEX.read_text(encoding="utf-8")
