"""The local runtime's processor dependencies: the ``requirements.txt`` beside the team's
processors (``processorPackageDir``) installed as the stack's bundle has them, under the run
directory, never in the processors' folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from s3ingest.local.stack.daemon import processor_dependencies

#: A small pure-Python package of the local index (no dependencies of its own).
PACKAGE = "text-unidecode==1.3"


def test_declared_dependencies_are_installed_under_the_run_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a team folder whose processors declare one package
    monkeypatch.chdir(tmp_path)
    processors = tmp_path / "processors"
    processors.mkdir()
    (processors / "requirements.txt").write_text(f"{PACKAGE}\n")
    # WHEN the local runtime prepares them
    deps = processor_dependencies("processors", tmp_path / ".s3ingest")
    # THEN they are installed once, under the run directory, the folder left as it was
    assert deps is not None and deps.parent == tmp_path / ".s3ingest" / "build"
    assert (deps / "text_unidecode" / "__init__.py").is_file()
    assert sorted(p.name for p in processors.iterdir()) == ["requirements.txt"]
    assert processor_dependencies("processors", tmp_path / ".s3ingest") == deps


def test_no_declaration_no_dependencies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "processors").mkdir()
    assert processor_dependencies("processors", tmp_path / ".s3ingest") is None
    assert not (tmp_path / ".s3ingest").exists()
