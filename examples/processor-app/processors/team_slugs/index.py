"""A ``module`` processor that imports a third-party package (``python-slugify``, declared in
``../requirements.txt``): it logs a URL-safe slug of every applied change's key.

Run in-process by the ingest-side functions under the claim (``docs/processor-api.md``).
"""

from __future__ import annotations

import json
from typing import Any

from slugify import slugify


def slug_of(key: str) -> str:
    """``key`` as a lower-case, dash-separated slug (``"Reports/Q1 Été.csv"`` ->
    ``"reports-q1-ete-csv"``)."""
    return str(slugify(key))


def process(change: Any, content: Any) -> None:
    """The processor entry point (``team_slugs.index:process``): one JSON log line per change."""
    print(json.dumps({"key": change.key, "kind": change.kind, "slug": slug_of(change.key)}))
