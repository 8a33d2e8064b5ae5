"""The function asset: the package plus arm64 / CPython 3.13 wheels, built without Docker, and a
processor's package when one is configured."""

from __future__ import annotations

import importlib.resources
import re
import shutil
import tomllib
from pathlib import Path

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_lambda as lambda_

from s3ingest.packaging import cache_tag
from s3ingest.settings import SettingsError
from s3ingest_cdk.bundling import (
    FUNCTION_PACKAGE,
    FUNCTIONS_DIR,
    LOCK_FILE,
    PACKAGE_DIR,
    PACKAGED_LOCK_FILE,
    PIP_PLATFORM,
    PROJECT_ROOT,
    PYTHON_VERSION,
    PipLocalBundling,
    ProcessorPackageError,
    function_code,
    lock_path,
    processor_sources,
)
from s3ingest_cdk.synth import Synth
from tests.infra.functions import shared_asset

#: The ``__pycache__`` tag of the runtime's Python (``cpython-313``).
_TAG = cache_tag(PYTHON_VERSION)


def _asset_dir(synth: Synth) -> Path:
    # the shared one (the reconcile function's has pyarrow too: test_infra_role_packages.py)
    return shared_asset(synth)


def test_asset_holds_the_function_package_and_its_dependencies(synth: Synth) -> None:
    asset = _asset_dir(synth)
    assert (asset / "s3ingest_fn" / "__init__.py").is_file()
    assert (asset / "aws_lambda_powertools").is_dir()
    # compiled files: the runtime's only (issue 37; test_infra_bundling_bytecode.py)
    assert not [p for p in asset.rglob("*.pyc") if f".{_TAG}." not in p.name]
    assert not (asset / "bin").exists()


def test_native_wheels_target_linux_arm64(fanout_synth: Synth) -> None:
    # the fan-out synth traces: its package holds wrapt (tracing off, none: issue 37)
    extensions = list(_asset_dir(fanout_synth).rglob("*.so"))
    assert extensions, "expected at least one compiled extension (wrapt)"
    for extension in extensions:
        assert "x86_64" not in extension.name, extension
        assert "aarch64" in extension.name or "abi3" in extension.name, extension


def test_dependency_cache_key_follows_the_lock(tmp_path: Path) -> None:
    (tmp_path / LOCK_FILE).write_text("a==1 --hash=sha256:00\n")
    bundler = PipLocalBundling(
        functions_dir=tmp_path,
        package="pkg",
        cache_dir=tmp_path / "cache",
        python_version=PYTHON_VERSION,
        platform=PIP_PLATFORM,
    )
    first = bundler.cache_key()
    (tmp_path / LOCK_FILE).write_text("a==2 --hash=sha256:01\n")
    assert bundler.cache_key() != first
    assert first.startswith(f"deps-{PIP_PLATFORM}-cp{PYTHON_VERSION}-")
    assert (FUNCTIONS_DIR / LOCK_FILE).is_file()
    # the human-edited input is not what is installed: editing it alone changes nothing
    (tmp_path / "requirements.txt").write_text("a==3\n")
    assert (
        bundler.cache_key()
        == PipLocalBundling(
            functions_dir=tmp_path,
            package="pkg",
            cache_dir=tmp_path / "cache",
            python_version=PYTHON_VERSION,
            platform=PIP_PLATFORM,
        ).cache_key()
    )


def test_the_lambda_lock_pins_with_hashes_what_its_input_pins() -> None:
    pins = _pins((FUNCTIONS_DIR / "requirements.txt").read_text())
    lock_text = (FUNCTIONS_DIR / LOCK_FILE).read_text()
    locked = _pins(lock_text)
    assert pins and {name: locked.get(name) for name in pins} == pins
    # every pinned distribution carries at least one hash (pip runs with --require-hashes)
    entries = re.split(r"\n(?=[a-z0-9])", lock_text.split("\n", 2)[2])
    assert entries and all("--hash=sha256:" in entry for entry in entries if "==" in entry)
    # resolved for the function's platform and Python (make lock)
    assert "--python-platform aarch64-manylinux2014" in lock_text
    assert "--python-version 3.13" in lock_text


def _pins(text: str) -> dict[str, str]:
    """``name -> version`` of the ``name[extras]==version`` lines of a requirements file."""
    found = re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)", text, re.M)
    return {re.sub(r"[-_.]+", "-", name).lower(): version for name, version in found}


# --- The processor's package (CONTRACT C11) ------------------------------------------------------


def test_fanout_asset_holds_the_example_processor(synth: Synth, fanout_synth: Synth) -> None:
    # GIVEN processor = "s3ingest_examples.sidecar:process" (fan-out synth) or none (default)
    with_processor = _asset_dir(fanout_synth)
    # THEN its package is copied beside the function package, the host's compiled files left
    # out (the runtime's are compiled in the package: issue 37) ...
    assert (with_processor / "s3ingest_examples" / "sidecar.py").is_file()
    assert (with_processor / "s3ingest_examples" / "__init__.py").is_file()
    assert (with_processor / "s3ingest_fn" / "__init__.py").is_file()
    assert not [p for p in with_processor.rglob("*.pyc") if f".{_TAG}." not in p.name]
    assert (with_processor / "s3ingest_examples" / "__pycache__" / f"sidecar.{_TAG}.pyc").is_file()
    # ... and only there: the two packages are two assets
    without = _asset_dir(synth)
    assert not (without / "s3ingest_examples").exists()
    assert with_processor.name != without.name


def test_processor_sources_without_a_processor_or_inside_the_function_package() -> None:
    assert processor_sources(None) == []
    assert processor_sources("s3ingest_fn.core.effects:load_processor") == []


@pytest.mark.parametrize(
    ("processor", "message"),
    [
        ("s3ingest_examples.sidecar:nope", "defines no 'nope' at its top level"),
        ("s3ingest_examples.nomod:process", "no module file 's3ingest_examples.nomod'"),
        ("s3ingest_fn.core.effects:process", "defines no 'process'"),
    ],
)
def test_a_processor_function_or_module_that_does_not_exist_fails_synth(
    processor: str, message: str
) -> None:
    # read with ast, never imported: a typo fails synth instead of every cold start
    with pytest.raises(ProcessorPackageError, match=message):
        processor_sources(processor)


def test_processor_sources_under_functions() -> None:
    assert processor_sources("s3ingest_examples.sidecar:process") == [
        FUNCTIONS_DIR / "s3ingest_examples"
    ]


def test_processor_sources_missing_is_a_settings_error(tmp_path: Path) -> None:
    with pytest.raises(ProcessorPackageError) as raised:
        processor_sources("team_effects.thumbnails:make", functions_dir=tmp_path)
    # A settings error: app.py reports it like any invalid setting, without a traceback.
    assert isinstance(raised.value, SettingsError)
    (problem,) = raised.value.problems
    assert "'team_effects'" in problem and "processorPackageDir" in problem


def _team_dir(root: Path) -> Path:
    team = root / "team"
    (team / "team_effects").mkdir(parents=True)
    (team / "team_effects" / "__init__.py").write_text("")
    (team / "team_effects" / "thumbnails.py").write_text("def make(change, content): pass\n")
    (team / "team_effects" / "__pycache__").mkdir()
    (team / "team_effects" / "__pycache__" / "thumbnails.cpython-311.pyc").write_bytes(b"")
    (team / "helpers.py").write_text("")
    (team / "data").mkdir()  # not a package: left out
    (team / "README.md").write_text("")
    return team


def test_processor_package_dir_copies_its_top_level_packages_and_modules(tmp_path: Path) -> None:
    team = _team_dir(tmp_path)
    # GIVEN processorPackageDir relative to the project root
    sources = processor_sources(
        "team_effects.thumbnails:make", "team", project_root=tmp_path, functions_dir=tmp_path
    )
    assert sources == [team / "helpers.py", team / "team_effects"]
    # WHEN bundled (the dependency cache already holds this requirements file's wheels)
    functions = tmp_path / "functions"
    (functions / "s3ingest_fn").mkdir(parents=True)
    (functions / "s3ingest_fn" / "__init__.py").write_text("")
    (functions / LOCK_FILE).write_text("a==1 --hash=sha256:00\n")
    bundler = PipLocalBundling(
        functions_dir=functions,
        package="s3ingest_fn",
        cache_dir=tmp_path / "cache",
        python_version=PYTHON_VERSION,
        platform=PIP_PLATFORM,
        extra_sources=sources,
    )
    (tmp_path / "cache" / bundler.cache_key()).mkdir(parents=True)
    out = tmp_path / "out"
    out.mkdir()
    assert bundler.try_bundle(str(out)) is True
    # THEN the package root holds the function package, the team's package and module
    assert (out / "s3ingest_fn" / "__init__.py").is_file()
    assert (out / "team_effects" / "thumbnails.py").is_file()
    assert (out / "helpers.py").is_file()
    # compiled for the runtime, the host's compiled file left out; the root's module too
    assert sorted(p.name for p in (out / "team_effects" / "__pycache__").iterdir()) == [
        f"__init__.{_TAG}.pyc",
        f"thumbnails.{_TAG}.pyc",
    ]
    assert (out / "__pycache__" / f"helpers.{_TAG}.pyc").is_file()
    assert not (out / "data").exists() and not (out / "README.md").exists()


@pytest.mark.parametrize(
    ("package_dir", "expected"),
    [
        ("missing", "is not a directory"),
        ("team/data", "does not hold"),
    ],
)
def test_processor_package_dir_problems(tmp_path: Path, package_dir: str, expected: str) -> None:
    _team_dir(tmp_path)
    with pytest.raises(ProcessorPackageError, match=expected):
        processor_sources("team_effects.thumbnails:make", package_dir, project_root=tmp_path)


def test_processor_package_dir_cannot_replace_the_function_package(tmp_path: Path) -> None:
    team = _team_dir(tmp_path)
    (team / "s3ingest_fn").mkdir()
    (team / "s3ingest_fn" / "__init__.py").write_text("")
    with pytest.raises(ProcessorPackageError, match="would replace the function's own"):
        processor_sources("team_effects.thumbnails:make", "team", project_root=tmp_path)


# --- An installed package (no functions/ checkout) ----------------------------------------------


def test_the_function_package_is_found_through_the_imported_package() -> None:
    import s3ingest_fn

    assert Path(s3ingest_fn.__file__).resolve().parent == PACKAGE_DIR
    assert PACKAGE_DIR.parent == FUNCTIONS_DIR
    # in a checkout the lock is functions/'s own
    assert lock_path() == FUNCTIONS_DIR / LOCK_FILE


def test_the_packaged_lock_is_the_function_lock() -> None:
    # The package data a wheel ships (pyproject [tool.setuptools.package-data]) is the lock.
    packaged = Path(str(importlib.resources.files("s3ingest_cdk").joinpath(PACKAGED_LOCK_FILE)))
    assert packaged.read_bytes() == (FUNCTIONS_DIR / LOCK_FILE).read_bytes()
    pyproject = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())
    package_data = pyproject["tool"]["setuptools"]["package-data"]["s3ingest_cdk"]
    assert PACKAGED_LOCK_FILE in package_data


def test_an_installed_package_bundles_from_site_packages_with_the_packaged_lock(
    tmp_path: Path,
) -> None:
    # GIVEN the layout of an installed s3ingest: s3ingest_fn in site-packages, no lock beside it
    site = tmp_path / "site-packages"
    shutil.copytree(
        PACKAGE_DIR, site / FUNCTION_PACKAGE, ignore=shutil.ignore_patterns("__pycache__")
    )
    (site / "unrelated_dist").mkdir()
    (site / "unrelated_dist" / "big.bin").write_bytes(b"\0" * 1024)
    assert lock_path(site).name == PACKAGED_LOCK_FILE
    cache = tmp_path / "cache"
    # WHEN a function uses the code
    app = App(outdir=str(tmp_path / "out"))
    stack = Stack(app, "Installed")
    lambda_.Function(
        stack,
        "Function",
        runtime=lambda_.Runtime.PYTHON_3_13,
        handler="s3ingest_fn.handlers.ingest.handler",
        code=function_code(functions_dir=site, cache_dir=cache),
    )
    assembly = app.synth()
    # THEN the asset holds the package and the locked dependencies, nothing else of site-packages
    (asset,) = [p for p in Path(assembly.directory).glob("asset.*") if p.is_dir()]
    assert (asset / FUNCTION_PACKAGE / "__init__.py").is_file()
    assert (asset / "aws_lambda_powertools").is_dir()
    assert not (asset / "unrelated_dist").exists()
    # ... and its hash follows the package: a changed source is a new asset
    first = function_code(functions_dir=site, cache_dir=cache).bind(Stack(App(), "A")).s3_location
    (site / FUNCTION_PACKAGE / "__init__.py").write_text("# changed\n")
    second = function_code(functions_dir=site, cache_dir=cache).bind(Stack(App(), "B")).s3_location
    assert first is not None and second is not None
    assert first.object_key != second.object_key
