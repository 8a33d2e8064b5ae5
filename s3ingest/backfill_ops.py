"""Deprecated: backfill against a deployed stack moved to its one home,
:mod:`s3ingest.commands.backfill`. The old names still work for one release, each with a
:class:`DeprecationWarning` naming its new place.
"""

from __future__ import annotations

import warnings
from typing import Any

#: Each old name, by its name in :mod:`s3ingest.commands.backfill`.
MOVED = {
    "TERMINAL_JOB": "TERMINAL_JOB",
    "TERMINAL_EXECUTION": "TERMINAL_EXECUTION",
    "start_backfill": "start_backfill",
    "job_id_of": "job_id_of",
    "backfill_status": "backfill_status",
    "latest_execution": "latest_backfill",
}


def __getattr__(name: str) -> Any:
    """The names of :data:`MOVED`, with a :class:`DeprecationWarning` naming their new place."""
    if name not in MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from s3ingest.commands import backfill

    warnings.warn(
        f"s3ingest.backfill_ops.{name} moved to s3ingest.commands.backfill.{MOVED[name]}",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(backfill, MOVED[name])
