"""Internal links of the README and ``docs/`` (the documentation site, ``make docs``): every
relative link ``[text](path#anchor)`` names a file or folder of the repository, and an anchor
names a heading of its page, by GitHub's rule (the site's ``toc`` slugify is configured to the
same one in ``mkdocs.yml``). Needs no mkdocs."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: A fenced code block: links and headings inside it are text.
FENCE = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1[ \t]*$", re.M | re.S)
#: An inline code span (its brackets are not a link).
CODE_SPAN = re.compile(r"(`+).+?\1", re.S)
#: An inline link or image: ``[text](target)`` or ``[text](target "title")``.
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)


def doc_files() -> list[Path]:
    """The README and every Markdown page under ``docs/``."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def prose(markdown: str) -> str:
    """``markdown`` without its fenced code blocks (each replaced by a blank line)."""
    return FENCE.sub("\n", markdown)


def heading_text(raw: str) -> str:
    """A heading as rendered text: code spans' content, links' text, no emphasis or tags."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", raw)
    text = re.sub(r"<[^>]+>", "", text)
    text = text.replace("`", "")
    return re.sub(r"(\*\*|__|\*)", "", text)


def slug(text: str) -> str:
    """GitHub's heading anchor (and pymdownx.slugs.slugify(case="lower")): lower case,
    characters other than letters, digits, ``_``, ``-`` and spaces dropped, each space a ``-``."""
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    """Every anchor a page defines: its headings' slugs (a repeated one ``-1``, ``-2``, ... as
    GitHub numbers them) and HTML ``<a name/id>`` anchors."""
    seen: Counter[str] = Counter()
    out: set[str] = set()
    text = prose(markdown)
    for match in HEADING.finditer(text):
        base = slug(heading_text(match.group(1)))
        out.add(base if not seen[base] else f"{base}-{seen[base]}")
        seen[base] += 1
    return out | set(HTML_ANCHOR.findall(text))


def links(markdown: str) -> list[str]:
    """The targets of the inline links of ``markdown``'s prose (not in code)."""
    return LINK.findall(CODE_SPAN.sub("", prose(markdown)))


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """One problem per relative link of ``page`` that names no file of ``root``, leaves it, or
    names a heading its page does not have."""
    problems = []
    markdown = page.read_text(encoding="utf-8")
    for target in links(markdown):
        if EXTERNAL.match(target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / unquote(path)).resolve() if path else page
        where = f"{page.relative_to(root)}: ({target})"
        if dest != root and root not in dest.parents:
            problems.append(f"{where} leaves the repository")
        elif not dest.exists():
            problems.append(f"{where} names no file")
        elif anchor and (dest.suffix != ".md" or anchor not in anchors(dest.read_text("utf-8"))):
            problems.append(f"{where} names no heading of {dest.relative_to(root)}")
    return problems


def test_every_internal_link_of_the_readme_and_docs_resolves() -> None:
    pages = doc_files()
    assert len(pages) > 10
    assert [p for page in pages for p in broken_links(page)] == []


def test_a_broken_link_or_anchor_is_found(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text(
        "# A page\n\n## Costs: per `event`\n\n## Costs: per `event`\n", encoding="utf-8"
    )
    page = tmp_path / "README.md"
    page.write_text(
        "[ok](docs/a.md#costs-per-event) [ok](docs/a.md#costs-per-event-1) [ok](#top)\n"
        "[gone](docs/b.md) [anchor](docs/a.md#costs) [out](../elsewhere.md)\n"
        '`[code](docs/c.md)`\n\n```\n[fenced](docs/d.md)\n```\n\n<a name="top"></a>\n'
        "[web](https://example.com/x.md#y) [mail](mailto:a@example.com)\n",
        encoding="utf-8",
    )
    assert broken_links(page, tmp_path) == [
        "README.md: (docs/b.md) names no file",
        "README.md: (docs/a.md#costs) names no heading of docs/a.md",
        "README.md: (../elsewhere.md) leaves the repository",
    ]


@pytest.mark.parametrize(
    ("heading", "expected"),
    [
        (
            "Onboarding an existing bucket: `s3ingest onboard`",
            "onboarding-an-existing-bucket-s3ingest-onboard",
        ),
        (
            "`functions/` \u2013 the code that runs in Lambda",
            "functions--the-code-that-runs-in-lambda",
        ),
        ("1.2 Which fields are present, by event", "12-which-fields-are-present-by-event"),
        ("The ingest contract (C1\u2013C15)", "the-ingest-contract-c1c15"),
        ("[Costs](costs.md) per **million**", "costs-per-million"),
    ],
)
def test_heading_anchors_follow_githubs_rule(heading: str, expected: str) -> None:
    assert slug(heading_text(heading)) == expected
