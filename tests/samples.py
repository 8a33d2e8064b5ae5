"""The one loader for the real payload corpus (``shared/corpus/samples``, see ``corpus/FACTS.md``).

The corpus lives beside the repository, at ``<repo>/../shared/corpus/samples``; set
``S3INGEST_CORPUS_DIR`` to read it from somewhere else.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

#: Environment variable that overrides where the sample files are read from.
CORPUS_ENV = "S3INGEST_CORPUS_DIR"


def samples_dir() -> Path:
    """Directory holding the sample payload files (``S3INGEST_CORPUS_DIR`` if set)."""
    override = os.environ.get(CORPUS_ENV)
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[1].parent / "shared" / "corpus" / "samples"


def load_sample(name: str) -> str | dict[str, Any]:
    """Read one sample file.

    Parameters
    ----------
    name : str
        File name inside the samples directory, e.g. ``powertools__s3SqsEvent.json``.

    Returns
    -------
    dict or str
        The parsed document for a ``.json`` file, the text for any other file.
    """
    text = (samples_dir() / name).read_text(encoding="utf-8")
    if name.endswith(".json"):
        loaded: dict[str, Any] = json.loads(text)
        return loaded
    return text
