"""The distribution's long description: the README with its relative links made absolute.

The README links its pages relatively (``docs/overview.md``): so they work on GitHub and on the
documentation site (``mkdocs_hooks.py``). On the package index a relative link leads nowhere, so
the built metadata's copy points each one at the file in the repository (``[project.urls]
Source``, branch ``main``). Everything else is declared in ``pyproject.toml``; setuptools runs
this file when it builds the sdist or the wheel (https://setuptools.pypa.io/en/latest/userguide/pyproject_config.html).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent
#: ``](target)`` of a Markdown link or image; the target has no space.
LINK = re.compile(r"(\]\()([^)\s]+)(\))")
#: A fenced code block (its links are text, not links).
FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)
#: Targets left as they are: absolute, or an anchor of the same page.
ABSOLUTE = ("http://", "https://", "mailto:", "#")


def absolute_links(markdown: str, base: str) -> str:
    """``markdown`` with each relative link target ``path[#anchor]`` outside code fences made
    ``<base>path[#anchor]`` (``base`` ends with ``/``)."""

    def fix(match: re.Match[str]) -> str:
        target = match.group(2)
        if target.startswith(ABSOLUTE):
            return match.group(0)
        return f"{match.group(1)}{base}{target.removeprefix('./')}{match.group(3)}"

    parts, last = [], 0
    for fence in FENCE.finditer(markdown):
        parts.append(LINK.sub(fix, markdown[last : fence.start()]))
        parts.append(fence.group(0))
        last = fence.end()
    parts.append(LINK.sub(fix, markdown[last:]))
    return "".join(parts)


def long_description(root: Path = ROOT) -> str:
    """The README of ``root`` with its links into the repository (``<Source>/blob/main/``)."""
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    base = f"{project['urls']['Source'].rstrip('/')}/blob/main/"
    return absolute_links((root / "README.md").read_text(encoding="utf-8"), base)


if __name__ == "__main__":
    from setuptools import setup

    setup(long_description=long_description(), long_description_content_type="text/markdown")
