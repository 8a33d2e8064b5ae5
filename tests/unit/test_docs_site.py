"""The documentation site's set-up (``make docs``): its lock satisfies its input with hashes and
never moves a package the test suite's lock pins, every page of ``docs/`` is in the nav, the
README stays a landing page, and the build's hook turns links to repository files into links
to the repository. Needs no mkdocs."""

from __future__ import annotations

import re
from pathlib import Path

from packaging.requirements import Requirement

import mkdocs_hooks

ROOT = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", re.M)


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins(lock: Path) -> dict[str, set[str]]:
    pins: dict[str, set[str]] = {}
    for name, version in PIN.findall(lock.read_text(encoding="utf-8")):
        pins.setdefault(_normalize(name), set()).add(version)
    return pins


def test_the_docs_lock_satisfies_its_input_and_agrees_with_the_main_lock() -> None:
    lock = ROOT / "requirements-docs.lock"
    docs = _pins(lock)
    wanted = [
        Requirement(line)
        for line in (ROOT / "requirements-docs.txt").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert {_normalize(r.name) for r in wanted} >= {"mkdocs", "mkdocs-material"}
    wrong = {
        str(r): docs.get(_normalize(r.name))
        for r in wanted
        if not docs.get(_normalize(r.name))
        or not all(r.specifier.contains(v) for v in docs[_normalize(r.name)])
    }
    assert wrong == {}
    text = lock.read_text(encoding="utf-8")
    entries = re.split(r"\n(?=[a-z0-9])", text.split("\n", 2)[2])
    assert all("--hash=sha256:" in entry for entry in entries if "==" in entry)
    # Installing the site's toolchain into the venv moves none of the test suite's packages.
    main = _pins(ROOT / "requirements.lock")
    moved = {n: (v, main[n]) for n, v in docs.items() if n in main and not v <= main[n]}
    assert moved == {}


def test_every_docs_page_is_in_the_nav_and_site_is_ignored() -> None:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = set(re.findall(r"^\s+- [^:]+: (\S+\.md)\s*$", config, re.M))
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert nav == pages | {mkdocs_hooks.HOME}
    assert "site/" in (ROOT / ".gitignore").read_text(encoding="utf-8").split()


def test_the_readme_lands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.encode()) <= 15_500
    # The two commands for a fresh machine come first (.ci/run runs the test one).
    lines = readme.splitlines()
    assert lines[3].startswith("make demo") and lines[4].startswith("make test")
    for page in ("settings.md", "scenarios.md", "costs.md", "iam.md", "local-runtime.md"):
        assert f"(docs/{page}" in readme


def test_the_hook_points_repository_files_at_the_repository() -> None:
    url = "https://github.com/o/r"
    readme = mkdocs_hooks.rewrite_links(
        "[a](docs/contract.md#c6) [b](examples/scenarios/) [c](https://x.org/a.md) "
        "[d](#why-it-is-correct) [gone](docs/nothing.md)\n```\n[e](examples/)\n```\n",
        mkdocs_hooks.HOME,
        url,
    )
    assert readme == (
        "[a](contract.md#c6) [b](https://github.com/o/r/tree/main/examples/scenarios) "
        "[c](https://x.org/a.md) [d](#why-it-is-correct) [gone](docs/nothing.md)\n"
        "```\n[e](examples/)\n```\n"
    )
    page = mkdocs_hooks.rewrite_links(
        "[s](settings.md) [x](../tests/events/SOURCES.md)", "payloads.md", url
    )
    assert page == "[s](settings.md) [x](https://github.com/o/r/blob/main/tests/events/SOURCES.md)"


def test_a_list_rendered_as_a_paragraph_is_found() -> None:
    # GIVEN the HTML Python-Markdown makes of a list with no blank line before it (issue 36: 27
    # places in the runbook rendered as one run-on paragraph), and of a proper list
    run_on = "<p><strong>Steps</strong>\n1. <strong>Find out.</strong> Run it.\n2. Then.</p>"
    proper = "<p><strong>Steps</strong></p>\n<ol>\n<li>Find out.</li>\n</ol>\n<p>a - b\nc</p>"
    # THEN the first is named by its first line, the second passes
    assert mkdocs_hooks.run_on_lists(run_on) == ["<strong>Steps</strong>"]
    assert mkdocs_hooks.run_on_lists(proper) == []


def test_every_runbook_section_an_incident_names_exists() -> None:
    headings = {
        line.removeprefix("## ").strip()
        for line in (ROOT / "docs" / "runbook.md").read_text(encoding="utf-8").splitlines()
        if line.startswith("## ")
    }
    named = {
        title
        for path in (ROOT / "examples" / "incidents").glob("*.jsonl")
        for title in re.findall(r'docs/runbook\.md, "([^"]+)"', path.read_text(encoding="utf-8"))
    }
    assert named, "the incident examples name their runbook sections"
    assert named - headings == set()
