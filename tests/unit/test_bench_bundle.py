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
