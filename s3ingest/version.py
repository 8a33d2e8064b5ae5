"""The s3ingest version: the installed distribution's (``importlib.metadata``), else the source
checkout's ``pyproject.toml``, else ``0+unknown``.

The CLI reports it (``s3ingest --version``) and the stack records it (the ``s3ingest:version``
stack tag and the ``Version`` output).
"""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

#: The distribution name (``pyproject.toml`` ``[project] name``).
DISTRIBUTION = "s3ingest"
#: Reported when neither the installed metadata nor a checkout's ``pyproject.toml`` says.
UNKNOWN = "0+unknown"

_PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def version(*, pyproject: Path = _PYPROJECT) -> str:
    """The version of s3ingest that is running.

    Parameters
    ----------
    pyproject : pathlib.Path
        The checkout's ``pyproject.toml``, read when the distribution is not installed (the
        package imported from a source tree, e.g. ``PYTHONPATH=.``).

    Returns
    -------
    str
        ``"0.1.0"`` and the like; :data:`UNKNOWN` when nothing says.
    """
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        pass
    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    except (OSError, KeyError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return UNKNOWN
    if project.get("name") != DISTRIBUTION or not isinstance(project.get("version"), str):
        return UNKNOWN
    return str(project["version"])
