"""The one loader for the real payload fixtures in ``tests/events/``.

Each file's origin, licence and how real it is are in ``tests/events/SOURCES.md``; what the files
show about real payloads is in ``docs/payloads.md``. A missing fixture is an error, never a skip.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: The fixtures directory, inside the repository.
EVENTS_DIR = Path(__file__).resolve().parent / "events"

#: Files in :data:`EVENTS_DIR` that document the fixtures and are not fixtures themselves.
NOT_FIXTURES = frozenset({"SOURCES.md", "LICENSE-Apache-2.0.txt"})


def sample_names() -> set[str]:
    """Names of every fixture file in :data:`EVENTS_DIR`, without :data:`NOT_FIXTURES`."""
    return {p.name for p in EVENTS_DIR.iterdir() if p.is_file() and p.name not in NOT_FIXTURES}


def read_sample_bytes(name: str) -> bytes:
    """The bytes of one fixture file, e.g. ``orcabus-filemanager__orc_inventory.orc``."""
    return (EVENTS_DIR / name).read_bytes()


def load_sample(name: str) -> str | dict[str, Any]:
    """Read one fixture file.

    Parameters
    ----------
    name : str
        File name inside ``tests/events/``, e.g. ``powertools__s3SqsEvent.json``.

    Returns
    -------
    dict or str
        The parsed document for a ``.json`` file, the text for any other file.

    Raises
    ------
    FileNotFoundError
        When the fixture is not in ``tests/events/``.
    """
    text = (EVENTS_DIR / name).read_text(encoding="utf-8")
    if name.endswith(".json"):
        loaded: dict[str, Any] = json.loads(text)
        return loaded
    return text
