"""Deprecated: each command's operation moved to its one home in :mod:`s3ingest.commands`
(replay: :mod:`~s3ingest.commands.replay`; DLQ redrive: :mod:`~s3ingest.commands.redrive`;
explain: :mod:`~s3ingest.commands.explain`; status: :mod:`~s3ingest.commands.status`), and
``to_json`` to :mod:`s3ingest.cli.render`. The old names still work for one release, each with a
:class:`DeprecationWarning` naming its new module.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

#: Each old name, by the module now holding it.
MOVED = {
    **dict.fromkeys(
        (
            "ARCHIVE_INGESTION_LAG",
            "TERMINAL_REPLAY",
            "OperationError",
            "ReplayTarget",
            "start_replay",
            "check_window",
            "wait_replay",
            "REPLAY_OUTCOMES",
            "replay_outcomes",
        ),
        "s3ingest.commands.replay",
    ),
    **dict.fromkeys(
        ("inspect_dlq", "redrive_all", "move_task_status", "redrive_valid"),
        "s3ingest.commands.redrive",
    ),
    "explain": "s3ingest.commands.explain",
    **dict.fromkeys(
        (
            "status",
            "processor_effects",
            "stack_metric",
            "MAX_MESSAGE_AGE_SECONDS",
            "FAILED_EXECUTION",
        ),
        "s3ingest.commands.status",
    ),
    "to_json": "s3ingest.cli.render",
}


def __getattr__(name: str) -> Any:
    """The names of :data:`MOVED`, with a :class:`DeprecationWarning` naming their new module."""
    if name not in MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"s3ingest.operations.{name} moved to {MOVED[name]}.{name}",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(MOVED[name]), name)
