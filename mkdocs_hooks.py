"""Hooks of the documentation site (``mkdocs.yml``, ``make docs``): the README is the home page,
and a link to a repository file outside ``docs/`` (``../examples/...``, the README's
``examples/...``) becomes a link to that file in the repository (``repo_url``), so the pages
keep the relative links that work on GitHub and the site has no broken one. A list that
Python-Markdown rendered as a paragraph (no blank line before it, which GitHub forgives) is a
warning, so ``mkdocs build --strict`` fails on it.

The hooks take mkdocs' objects untyped: mkdocs is installed by ``make docs`` only, not with the
test suite (https://www.mkdocs.org/user-guide/configuration/#hooks).
"""

from __future__ import annotations

import importlib
import logging
import posixpath
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
DOCS = ROOT / "docs"
#: The page the README becomes.
HOME = "index.md"
#: ``](target)`` of a Markdown link or image; the target has no space.
LINK = re.compile(r"(\]\()([^)\s]+)(\))")
#: A fenced code block (its links are text, not links).
FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)
EXTERNAL = ("http://", "https://", "mailto:", "#")
#: A paragraph of the rendered page with a line that starts like a list item.
RUN_ON_LIST = re.compile(r"<p>((?:(?!</p>).)*?\n(?:[-*+]|\d+\.) (?:(?!</p>).)*)</p>", re.S)
LOG = logging.getLogger("mkdocs.plugins.s3ingest")


def on_files(files: Any, config: Any) -> Any:
    """Add the README as the site's home page."""
    file_class = importlib.import_module("mkdocs.structure.files").File
    files.append(file_class.generated(config, HOME, abs_src_path=str(ROOT / "README.md")))
    return files


def rewrite_links(markdown: str, src_uri: str, repo_url: str) -> str:
    """``markdown`` of the page ``src_uri`` (relative to ``docs/``; :data:`HOME` is the README)
    with every relative link resolved: to a page of ``docs/`` relative to this page, or else to
    the file's (or folder's) address in the repository, ``<repo_url>/blob/main/<path>``."""
    page_dir = ROOT if src_uri == HOME else DOCS / posixpath.dirname(src_uri)

    def fix(match: re.Match[str]) -> str:
        target = match.group(2)
        if target.startswith(EXTERNAL):
            return match.group(0)
        path, hash_, anchor = target.partition("#")
        resolved = (page_dir / path).resolve()
        if not resolved.exists():  # left as it is: mkdocs --strict reports it
            return match.group(0)
        if resolved == DOCS or DOCS in resolved.parents:
            here = DOCS / posixpath.dirname(src_uri) if src_uri != HOME else DOCS
            new = Path(posixpath.relpath(resolved, here)).as_posix()
        else:
            kind = "tree" if resolved.is_dir() else "blob"
            new = f"{repo_url.rstrip('/')}/{kind}/main/{resolved.relative_to(ROOT).as_posix()}"
        return f"{match.group(1)}{new}{hash_}{anchor}{match.group(3)}"

    parts, last = [], 0
    for fence in FENCE.finditer(markdown):
        parts.append(LINK.sub(fix, markdown[last : fence.start()]))
        parts.append(fence.group(0))
        last = fence.end()
    parts.append(LINK.sub(fix, markdown[last:]))
    return "".join(parts)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Resolve the page's relative links (:func:`rewrite_links`)."""
    return rewrite_links(markdown, page.file.src_uri, config["repo_url"])


def run_on_lists(html: str) -> list[str]:
    """The first line of each paragraph of ``html`` that holds a list Markdown did not render
    as one (a line starting ``- ``, ``* ``, ``+ `` or ``1. `` inside a ``<p>``)."""
    return [match.group(1).split("\n", 1)[0][:80] for match in RUN_ON_LIST.finditer(html)]


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    """Warn (an error under ``--strict``) for each list rendered as a paragraph."""
    for first in run_on_lists(html):
        LOG.warning(
            "%s: a list renders as a paragraph (add a blank line before it): %s",
            page.file.src_uri,
            first,
        )
    return html
