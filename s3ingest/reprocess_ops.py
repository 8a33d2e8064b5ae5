"""Deprecated: reprocess against a deployed stack moved to its one home,
:mod:`s3ingest.commands.reprocess`. The old names still work for one release, each with a
:class:`DeprecationWarning` naming its new place.
"""

from __future__ import annotations

import warnings
from typing import Any

#: Each old name, by its name in :mod:`s3ingest.commands.reprocess`.
MOVED = {
    "TERMINAL_EXECUTION": "TERMINAL_EXECUTION",
    "RUN_NAME": "RUN_NAME",
    "default_run": "default_run",
    "request_of": "request_of",
    "running_execution": "running_execution",
    "cause_text": "cause_text",
    "plan_of": "plan_of",
    "reprocess_status": "reprocess_status",
    "start_reprocess": "start_execution",
}


def __getattr__(name: str) -> Any:
    """The names of :data:`MOVED`, with a :class:`DeprecationWarning` naming their new place."""
    if name not in MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from s3ingest.commands import reprocess

    warnings.warn(
        f"s3ingest.reprocess_ops.{name} moved to s3ingest.commands.reprocess.{MOVED[name]}",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(reprocess, MOVED[name])
