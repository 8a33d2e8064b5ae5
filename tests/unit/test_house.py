"""The house's shape: no source file grows past :data:`MAX_LINES`, and the modules of each
package (the function package, the CLI's and the CDK app's) import each other without a circle
(function-local imports included, so a circle cannot hide behind an import inside a function;
``TYPE_CHECKING`` blocks apart, as they never run).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: The longest a Python source file may be (issue 23: the rooms nobody wanted to enter were
#: 1,336 to 1,912 lines).
MAX_LINES = 900
#: Where the project's Python sources live.
SOURCES = ("functions", "infra", "s3ingest", "bench", "tests", "examples")
#: The packages checked for import circles.
PACKAGES = (ROOT / "functions" / "s3ingest_fn", ROOT / "s3ingest", ROOT / "infra" / "s3ingest_cdk")


def _python_files() -> list[Path]:
    files = [ROOT / "app.py"]
    for folder in SOURCES:
        files.extend(p for p in (ROOT / folder).rglob("*.py") if "node_modules" not in p.parts)
    return sorted(files)


def test_no_source_file_is_longer_than_the_limit() -> None:
    long = {
        str(path.relative_to(ROOT)): n
        for path in _python_files()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def _module_name(path: Path, package: Path) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_imports(path: Path, package_root: Path, modules: set[str]) -> set[str]:
    """The package modules a file imports at run time (any depth, but not under
    ``if TYPE_CHECKING:``), resolving ``from pkg import mod`` to the module when it is one."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(child) for child in ast.walk(node))
    own = _module_name(path, package_root)
    package = own if path.name == "__init__.py" else own.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        else:
            continue
        found.update(name for name in names if name in modules and name != own)
    return found


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


@pytest.mark.parametrize("root", PACKAGES, ids=lambda p: p.name)
def test_a_package_has_no_import_circle(root: Path) -> None:
    files = {_module_name(p, root): p for p in root.rglob("*.py")}
    modules = set(files)
    # A package's __init__ importing its own submodules is how a package re-exports them; the
    # submodules importing their package's other submodules is not a circle through __init__.
    graph = {
        name: {
            other
            for other in _runtime_imports(path, root, modules)
            if not (path.name == "__init__.py" and other.startswith(name + "."))
        }
        for name, path in files.items()
    }
    assert _circles(graph) == []


def _imports_of(path: Path) -> set[str]:
    """Every module name a file imports at run time (``TYPE_CHECKING`` blocks apart)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(child) for child in ast.walk(node))
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module)
    return found


#: What the CLI's package may not import: the CDK app sits above it (the app reads the CLI's
#: settings and function roles), and the CLI must run where no CDK is installed.
ABOVE_THE_CLI = ("s3ingest_cdk", "aws_cdk", "constructs", "cdk_nag")


def test_the_cli_package_imports_nothing_of_the_cdk_app() -> None:
    upward = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in (ROOT / "s3ingest").rglob("*.py")
        for name in _imports_of(path)
        if name.split(".")[0] in ABOVE_THE_CLI
    }
    assert upward == set()


def test_the_upward_import_check_sees_a_function_local_import(tmp_path: Path) -> None:
    planted = tmp_path / "m.py"
    planted.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import aws_cdk\n"
        "def f():\n    from s3ingest_cdk.synth import synthesize\n",
        encoding="utf-8",
    )
    assert _imports_of(planted) == {"typing", "s3ingest_cdk.synth"}


def test_the_circle_check_finds_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


#: The local runtime's layers, lowest first: each imports only the ones before it (issue 35).
LOCAL_LAYERS = ("emulator", "stack", "rehearsal")


def test_the_local_layers_import_only_downward() -> None:
    local = ROOT / "s3ingest" / "local"
    upward = {
        f"{path.relative_to(ROOT)}: {name}"
        for depth, layer in enumerate(LOCAL_LAYERS)
        for path in (local / layer).rglob("*.py")
        for name in _imports_of(path)
        for above in LOCAL_LAYERS[depth + 1 :]
        if name == f"s3ingest.local.{above}" or name.startswith(f"s3ingest.local.{above}.")
    }
    assert upward == set()
