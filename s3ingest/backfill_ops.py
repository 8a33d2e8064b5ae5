"""Deprecated: backfill against a deployed stack moved to its one home,
:mod:`s3ingest.commands.backfill`. The old names still work for one release, each with a
:class:`DeprecationWarning` naming its new place.
"""

from __future__ import annotations

from s3ingest.moved import moved

#: Each old name, by its name in :mod:`s3ingest.commands.backfill`.
MOVED = {
    "TERMINAL_JOB": "TERMINAL_JOB",
    "TERMINAL_EXECUTION": "TERMINAL_EXECUTION",
    "start_backfill": "start_backfill",
    "job_id_of": "job_id_of",
    "backfill_status": "backfill_status",
    "latest_execution": "latest_backfill",
}


__getattr__ = moved(
    __name__, {old: f"s3ingest.commands.backfill.{new}" for old, new in MOVED.items()}
)
