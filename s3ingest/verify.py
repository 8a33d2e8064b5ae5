"""Deprecated: ``s3ingest verify``'s check moved to :mod:`s3ingest.commands.verify` (its one home);
every name of that module is read from there, with a :class:`DeprecationWarning` (one release).
"""

from __future__ import annotations

import warnings
from typing import Any


def __getattr__(name: str) -> Any:
    """``s3ingest.commands.verify``'s ``name``, with a :class:`DeprecationWarning`."""
    from s3ingest.commands import verify

    if name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(verify, name)
    warnings.warn(
        f"s3ingest.verify.{name} moved to s3ingest.commands.verify.{name}",
        DeprecationWarning,
        stacklevel=2,
    )
    return value
