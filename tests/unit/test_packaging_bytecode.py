"""Bytecode for the Lambda runtime's Python, compiled on a host of another (issue 37)."""

from __future__ import annotations

import importlib.util
import os
import stat
import sys
from pathlib import Path

import pytest

from s3ingest import packaging
from s3ingest.packaging import (
    PYTHON_VERSION,
    bytecode_compiler,
    cache_tag,
    compile_bytecode,
    magic_number,
)


def _tree(root: Path) -> Path:
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "sub" / "__init__.py").write_text("")
    (root / "pkg" / "sub" / "mod.py").write_text("def f(x):\n    return [y for y in x]\n")
    (root / "top.py").write_text("VALUE = 1\n")
    return root


def test_the_magic_number_of_this_python_is_the_table_s() -> None:
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert magic_number(here) == importlib.util.MAGIC_NUMBER
    assert cache_tag(here) == sys.implementation.cache_tag


def test_modules_are_compiled_for_the_runtime_as_unchecked_hash_pycs(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    assert compile_bytecode([root / "pkg"], top_only=[root]) is True
    tag = cache_tag(PYTHON_VERSION)
    for module in ("pkg/__init__", "pkg/sub/__init__", "pkg/sub/mod", "top"):
        parent, _, stem = module.rpartition("/")
        pyc = root / parent / "__pycache__" / f"{stem}.{tag}.pyc"
        header = pyc.read_bytes()[:8]
        # the runtime's magic number; PEP 552 flags 0b01: hash-based, source not checked (the
        # bundling's copies and the zip do not keep the modification times)
        assert header[:4] == magic_number(PYTHON_VERSION), module
        assert int.from_bytes(header[4:8], "little") == 0b01, module
    # nothing of another Python's
    assert {p.name.split(".")[1] for p in root.rglob("*.pyc")} == {tag}


def test_a_module_that_does_not_compile_fails_the_bundling(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text("def f(:\n")
    with pytest.raises(packaging.BundlingError, match="could not compile"):
        compile_bytecode([tmp_path])


def test_a_shim_that_cannot_run_the_version_is_not_the_compiler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a version manager's shim named python3.13 that answers "command not found"
    shim = tmp_path / f"python{PYTHON_VERSION}"
    shim.write_text("#!/bin/sh\necho 'pyenv: python3.13: command not found' >&2\nexit 127\n")
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    command = bytecode_compiler()
    assert command is not None and command[0] != str(shim)


def test_without_an_interpreter_of_the_version_the_package_is_left_uncompiled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(packaging, "bytecode_compiler", lambda version=PYTHON_VERSION: None)
    root = _tree(tmp_path)
    with pytest.warns(UserWarning, match="compiles it at every cold start"):
        assert compile_bytecode([root]) is False
    assert not list(root.rglob("*.pyc"))
