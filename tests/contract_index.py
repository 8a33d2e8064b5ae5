"""The rule-to-test index: which tests prove which rule of ``docs/contract.md``.

A test names the rules it proves with ``@pytest.mark.contract("C6")`` (several rules:
``contract("C5", "C10")``); a module that proves one rule as a whole sets
``pytestmark = pytest.mark.contract("C13")``. This module reads those markers from the test
sources (by their syntax tree, so nothing is imported or synthesized), checks that each names a
rule of ``docs/contract.md``, and renders ``docs/contract-tests.md``.

``python -m tests.contract_index`` (``make contract-index``) rewrites the index;
``tests/unit/test_contract_index.py`` fails when it is not current. ``tests/conftest.py`` checks
the markers of every collected test with :func:`check_rules`, so a typo fails the run.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONTRACT = ROOT / "docs" / "contract.md"
INDEX = ROOT / "docs" / "contract-tests.md"
TESTS = ROOT / "tests"

#: Set to a file path, the collection hook in ``tests/conftest.py`` writes there the rules pytest
#: sees on each marked test (JSON ``{nodeid: [rule, ...]}``, parameters stripped).
CONTRACT_DUMP = "S3INGEST_CONTRACT_DUMP"

#: A rule's heading in docs/contract.md: ``**C6 Tombstones.** ...`` at the start of a line.
_RULE = re.compile(r"^\*\*(C\d+) ([^*]+?)\.\*\*", re.MULTILINE)


class ContractMarkError(ValueError):
    """A ``contract`` marker that names no rule, or is not written as literal rule names."""


@dataclass(frozen=True)
class Marked:
    """One test and the rules it is marked with: ``nodeid`` is ``path::name`` (``path::Class::name``
    for a method), the path relative to the repository root with ``/`` separators."""

    nodeid: str
    rules: tuple[str, ...]


def read_rules(text: str | None = None) -> dict[str, str]:
    """The rules of ``docs/contract.md`` in document order: ``{"C1": "Identity", ...}``.

    Raises :class:`ContractMarkError` when the document names no rule or a number twice.
    """
    text = CONTRACT.read_text(encoding="utf-8") if text is None else text
    rules: dict[str, str] = {}
    for number, title in _RULE.findall(text):
        if number in rules:
            raise ContractMarkError(f"docs/contract.md defines {number} twice")
        rules[number] = title.strip()
    if not rules:
        raise ContractMarkError("docs/contract.md defines no rule (**Cn Title.**)")
    return rules


def check_rules(args: tuple[object, ...], kwargs: dict[str, object], rules: dict[str, str]) -> None:
    """Check one marker's arguments: one or more rule names of ``rules``, positional, nothing else.

    Raises :class:`ContractMarkError` naming what is wrong.
    """
    if kwargs:
        raise ContractMarkError(f"contract(...) takes rule names only, not {sorted(kwargs)}")
    if not args:
        raise ContractMarkError("contract() names no rule: give at least one, e.g. contract('C6')")
    for arg in args:
        if not isinstance(arg, str) or arg not in rules:
            known = f"{next(iter(rules))}..{next(reversed(rules))}"
            raise ContractMarkError(
                f"contract({arg!r}) names no rule of docs/contract.md (known: {known})"
            )


def _contract_args(node: ast.expr) -> tuple[str, ...] | None:
    """The rule names of ``pytest.mark.contract(...)`` (None if ``node`` is another expression).

    Raises :class:`ContractMarkError` for a contract marker whose arguments are not literal strings
    (the index is read from the source, so it must be able to read them).
    """
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "contract"
        and ast.unparse(node.func.value) in ("pytest.mark", "mark")
    ):
        return None
    if node.keywords:
        raise ContractMarkError(f"{ast.unparse(node)}: takes rule names only")
    names: list[str] = []
    for arg in node.args:
        if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
            raise ContractMarkError(f"contract({ast.unparse(arg)}): write rule names as literals")
        names.append(arg.value)
    return tuple(names)


def _marks(decorators: list[ast.expr]) -> tuple[str, ...]:
    found: list[str] = []
    for decorator in decorators:
        found.extend(_contract_args(decorator) or ())
    return tuple(found)


def _module_marks(tree: ast.Module) -> tuple[str, ...]:
    """The rules of a module-level ``pytestmark = pytest.mark.contract(...)`` (or a list of marks
    holding one)."""
    found: list[str] = []
    for node in tree.body:
        if not isinstance(node, ast.Assign) or [ast.unparse(t) for t in node.targets] != [
            "pytestmark"
        ]:
            continue
        value = node.value
        items = list(value.elts) if isinstance(value, ast.List | ast.Tuple) else [value]
        found.extend(_marks(items))
    return tuple(found)


def scan(path: Path, root: Path = ROOT) -> list[Marked]:
    """The marked tests of one test module, in source order: a test's own rules after its
    module's, each rule once."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    relative = path.relative_to(root).as_posix()
    module = _module_marks(tree)
    marked: list[Marked] = []

    def visit(body: list[ast.stmt], prefix: str, inherited: tuple[str, ...]) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
                visit(node.body, f"{prefix}{node.name}::", inherited + _marks(node.decorator_list))
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
                "test"
            ):
                rules = tuple(dict.fromkeys(inherited + _marks(node.decorator_list)))
                if rules:
                    marked.append(Marked(f"{relative}::{prefix}{node.name}", rules))

    visit(tree.body, "", module)
    return marked


def collect(tests: Path = TESTS, root: Path = ROOT) -> list[Marked]:
    """Every marked test under ``tests`` (modules ``test_*.py``), sorted by node id."""
    marked: list[Marked] = []
    for path in sorted(tests.rglob("test_*.py")):
        marked.extend(scan(path, root))
    return sorted(marked, key=lambda m: m.nodeid)


def render(rules: dict[str, str], marked: list[Marked]) -> str:
    """The Markdown of ``docs/contract-tests.md``.

    Raises :class:`ContractMarkError` when a marker names a rule ``rules`` does not hold.
    """
    by_rule: dict[str, list[str]] = {number: [] for number in rules}
    for test in marked:
        check_rules(test.rules, {}, rules)
        for rule in test.rules:
            by_rule[rule].append(test.nodeid)
    untested = [number for number, tests in by_rule.items() if not tests]
    lines = [
        "# The contract's rules and the tests that prove them",
        "",
        "Generated from the tests' `@pytest.mark.contract(...)` markers by `make contract-index`",
        "(`python -m tests.contract_index`); do not edit by hand. The rules are in",
        "[contract.md](contract.md). A test is listed under a rule when it fails if that rule is",
        "broken; tests of packaging, the CLI's conventions and the stack's hardening prove no rule",
        "and are not listed.",
        "",
        "| rule | title | tests |",
        "| --- | --- | ---: |",
    ]
    lines += [f"| {n} | {title} | {len(by_rule[n])} |" for n, title in rules.items()]
    lines += [
        "",
        "Rules with no test: " + (", ".join(untested) if untested else "none") + ".",
    ]
    for number, title in rules.items():
        lines += ["", f"## {number} {title}", ""]
        tests = by_rule[number]
        lines += [f"- `{nodeid}`" for nodeid in tests] or ["No test proves this rule."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Rewrite ``docs/contract-tests.md`` (``--check``: exit 1 if it is not current instead)."""
    args = sys.argv[1:] if argv is None else argv
    text = render(read_rules(), collect())
    if "--check" in args:
        current = INDEX.read_text(encoding="utf-8") if INDEX.exists() else ""
        if current != text:
            print("docs/contract-tests.md is not current: run make contract-index", file=sys.stderr)
            return 1
        return 0
    INDEX.write_text(text, encoding="utf-8")
    print(f"wrote {INDEX.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
