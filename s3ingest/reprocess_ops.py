"""Deprecated: reprocess against a deployed stack moved to its one home,
:mod:`s3ingest.commands.reprocess`. The old names still work for one release, each with a
:class:`DeprecationWarning` naming its new place.
"""

from __future__ import annotations

from s3ingest.moved import moved

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


__getattr__ = moved(
    __name__, {old: f"s3ingest.commands.reprocess.{new}" for old, new in MOVED.items()}
)
