"""The bundle cold-start bench's fixture pieces (issue 37): its interpreter and the sizes."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pytest

from bench import bundle_cold_start


def test_the_interpreter_named_by_the_environment_is_used_with_its_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(bundle_cold_start.PYTHON_ENV, sys.executable)
    python, version = bundle_cold_start.interpreter()
    assert python == sys.executable
    assert version == f"{sys.version_info.major}.{sys.version_info.minor}"


def test_sizes_are_the_files_and_their_deflated_zip(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    (bundle / "pkg").mkdir(parents=True)
    (bundle / "pkg" / "a.py").write_text("x = 1\n" * 100_000)
    unzipped, zipped = bundle_cold_start.sizes(bundle, tmp_path)
    assert unzipped == pytest.approx(0.6, abs=0.01)
    assert 0 < zipped < unzipped / 10
    with zipfile.ZipFile(tmp_path / "bundle.zip") as archive:
        assert archive.namelist() == ["pkg/a.py"]


def test_a_ratio_line_gives_the_run_by_run_spread() -> None:
    """Beside the ratio of the medians, the min, median and max of the runs' own ratios (each
    run's variants ran back to back)."""
    line = bundle_cold_start._line("x", [0.2, 0.3, 0.9], [0.4, 0.3, 0.3])
    assert "ratio  1.00" in line
    assert "(run by run: min 0.50  median 1.00  max 3.00)" in line
    assert "run by run" not in bundle_cold_start._line("x", [0.2, 0.3, 0.9])


def test_a_child_runs_its_body_in_a_function_with_its_environment_changes(tmp_path: Path) -> None:
    """As Lambda's runtime calls a handler: from a function, not the module's top level; a None
    in the variant's environment unsets that variable."""
    body = (
        "import os, sys; assert sys._getframe().f_code.co_name == 'cold_start'; "
        "assert 'GONE' not in os.environ and os.environ['KEPT'] == 'yes'"
    )
    variant = bundle_cold_start.Variant(tmp_path, body, {"GONE": None, "KEPT": "yes"})
    wall, cpu = bundle_cold_start._sample(sys.executable, variant, {"GONE": "1", "PATH": ""})
    assert wall >= 0 and cpu >= 0
    with pytest.raises(RuntimeError, match="the child failed"):
        bundle_cold_start._sample(sys.executable, variant._replace(env={}), {"GONE": "1"})


def test_the_top_level_child_runs_its_body_at_the_module_s_top_level(tmp_path: Path) -> None:
    body = "import sys; assert sys._getframe().f_code.co_name == '<module>'"
    variant = bundle_cold_start.Variant(tmp_path, body, {}, bundle_cold_start.TOP_LEVEL_CHILD)
    assert bundle_cold_start._sample(sys.executable, variant, {})[1] >= 0
