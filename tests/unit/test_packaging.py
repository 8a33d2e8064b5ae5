"""The distribution: ``pyproject.toml`` declares every third-party module the CLI imports (the
base for the deployed-stack commands, the extras for the rest), the CLI reports its version, and
a command whose extra is missing says which one to install.

The real check, the wheel installed into an empty virtual environment, needs the package index:
``make package-check`` does it in CI (docs/development.md).
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest
from typer.testing import CliRunner

from s3ingest import extras
from s3ingest import version as version_module
from s3ingest.cli import app

ROOT = Path(__file__).resolve().parents[2]
#: First-party top-level packages and where their sources are.
FIRST_PARTY = {
    "s3ingest": ROOT / "s3ingest",
    "s3ingest_fn": ROOT / "functions" / "s3ingest_fn",
    "s3ingest_examples": ROOT / "functions" / "s3ingest_examples",
    "s3ingest_processor": ROOT / "functions" / "s3ingest_processor",
    "s3ingest_cdk": ROOT / "infra" / "s3ingest_cdk",
}
#: Reached only through the local-runtime commands, which check the [local] extra first.
LOCAL_RUNTIME = "s3ingest.local"


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _names(requirements: list[str]) -> set[str]:
    return {_normalize(re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0]) for r in requirements}


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _source(module: str) -> Path | None:
    top, *rest = module.split(".")
    if top not in FIRST_PARTY:
        return None
    base = FIRST_PARTY[top].joinpath(*rest)
    return next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.is_file()), None)


def _imports(path: Path, module: str) -> Iterator[tuple[str, bool]]:
    """(imported module, imported inside a function) for every import of ``path``, less those
    under ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text())
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    type_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            type_only.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    lazy: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lazy.update(id(child) for child in ast.walk(node))
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, id(node) in lazy
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            else:
                base = str(node.module)
            yield base, id(node) in lazy
            for alias in node.names:
                yield f"{base}.{alias.name}", id(node) in lazy


def _third_party(*starts: str, skip: str | None = None) -> dict[str, set[tuple[str, bool]]]:
    """Top-level third-party module -> {(importing module, lazily)} over the first-party import
    graph from ``starts`` (module-level and function-level imports), not entering ``skip``."""
    found: dict[str, set[tuple[str, bool]]] = {}
    seen: set[str] = set()
    todo = list(starts)
    while todo:
        module = todo.pop()
        if module in seen or (skip and (module == skip or module.startswith(skip + "."))):
            continue
        seen.add(module)
        path = _source(module)
        if path is None:
            continue
        for imported, lazily in _imports(path, module):
            top = imported.split(".")[0]
            if top in FIRST_PARTY:
                if _source(imported) is not None:
                    todo.append(imported)
            elif top not in sys.stdlib_module_names and top != "__future__":
                found.setdefault(top, set()).add((module, lazily))
    return found


def _distributions(module: str) -> set[str]:
    return {_normalize(d) for d in metadata.packages_distributions().get(module, [])}


def test_base_dependencies_cover_every_import_of_the_cli_outside_the_local_runtime() -> None:
    project = _project()
    base = _names(project["dependencies"])
    arrow = _names(project["optional-dependencies"]["arrow"])
    history = _names(project["optional-dependencies"]["history"])
    imports = _third_party("s3ingest.cli", skip=LOCAL_RUNTIME)
    assert {"typer", "rich", "boto3", "botocore"} <= set(imports)
    uncovered = {}
    for module, sites in imports.items():
        dists = _distributions(module)
        assert dists, f"{module} (imported by {sorted(sites)}) is not installed"
        if dists & base:
            continue
        if dists & arrow and all(lazily for _, lazily in sites):
            continue  # pyarrow: imported when an ORC or Parquet inventory is read
        if dists & history and all(lazily for _, lazily in sites):
            continue  # pyiceberg, duckdb: imported by `s3ingest history --local`
        uncovered[module] = sorted(sites)
    assert uncovered == {}


def test_local_extra_covers_the_local_runtime() -> None:
    project = _project()
    allowed = _names(project["dependencies"]) | _names(project["optional-dependencies"]["local"])
    # arrow and history: imported lazily (an ORC or Parquet inventory; historyTable)
    lazy = _names(project["optional-dependencies"]["arrow"]) | _names(
        project["optional-dependencies"]["history"]
    )
    imports = _third_party(f"{LOCAL_RUNTIME}.rehearsal.demo", f"{LOCAL_RUNTIME}.rehearsal.scenario")
    assert "moto" in imports and "aws_lambda_powertools" in imports
    uncovered = {
        module: sorted(sites)
        for module, sites in imports.items()
        if not _distributions(module) & allowed
        and not (_distributions(module) & lazy and all(lazily for _, lazily in sites))
    }
    assert uncovered == {}
    for module in extras.EXTRA_MODULES["local"]:
        assert _distributions(module) & allowed, module


def test_cdk_extra_covers_the_cdk_app() -> None:
    project = _project()
    allowed = _names(project["dependencies"]) | _names(project["optional-dependencies"]["cdk"])
    imports = _third_party("s3ingest_cdk.compose", "s3ingest_cdk.synth")
    assert {"aws_cdk", "constructs", "cdk_nag", "jsii"} <= set(imports)
    # jsii comes with aws-cdk-lib (its runtime), as the Lambda asset's own pip does
    uncovered = {m: s for m, s in imports.items() if not _distributions(m) & allowed}
    assert set(uncovered) == {"jsii"}
    requires = metadata.requires("aws-cdk-lib") or []
    assert "jsii" in _names(requires)


def test_the_cli_module_imports_no_extra_at_load() -> None:
    imports = _third_party("s3ingest.cli", skip=LOCAL_RUNTIME)
    eager = {module for module, sites in imports.items() if any(not lazy for _, lazy in sites)}
    assert eager <= {"typer", "rich", "boto3", "botocore"}


def test_version_option_prints_the_package_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output == f"s3ingest {_project()['version']}\n"


def test_version_falls_back_to_the_checkout_then_unknown(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def not_installed(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(version_module.metadata, "version", not_installed)
    assert version_module.version() == _project()["version"]
    assert version_module.version(pyproject=tmp_path / "missing.toml") == version_module.UNKNOWN
    other = tmp_path / "pyproject.toml"
    other.write_text('[project]\nname = "other"\nversion = "9.9"\n')
    assert version_module.version(pyproject=other) == version_module.UNKNOWN


def test_a_local_command_without_its_extra_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = extras.importlib.util.find_spec
    monkeypatch.setattr(
        extras.importlib.util, "find_spec", lambda name: None if name == "moto" else real(name)
    )
    result = CliRunner().invoke(app, ["local", "demo"])
    assert result.exit_code == 2
    assert "s3ingest local demo needs the s3ingest[local] extra (moto not installed)" in (
        result.output
    )
    assert "pip install 's3ingest[local]'" in result.output


def test_the_lock_satisfies_every_requirement_of_pyproject() -> None:
    """``requirements.lock`` is in step with ``pyproject.toml`` (run ``make lock`` after an
    edit): every direct dependency of the base and of every extra is pinned, with hashes, at a
    version its specifier admits."""
    from packaging.requirements import Requirement

    text = (ROOT / "requirements.lock").read_text()
    pins = {
        _normalize(name): version
        for name, version in re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", text, re.M)
    }
    project = _project()
    requirements = [Requirement(r) for r in project["dependencies"]]
    for group in project["optional-dependencies"].values():
        requirements += [Requirement(r) for r in group if not r.startswith(project["name"])]
    assert requirements
    locked = {str(r): pins.get(_normalize(r.name)) for r in requirements}
    wrong = {
        r: version
        for r, version in locked.items()
        if version is None or not Requirement(r).specifier.contains(version)
    }
    assert wrong == {}
    entries = re.split(r"\n(?=[a-z0-9])", text.split("\n", 2)[2])
    assert all("--hash=sha256:" in entry for entry in entries if "==" in entry)
