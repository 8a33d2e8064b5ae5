"""Deprecated: each command's operation moved to its one home in :mod:`s3ingest.commands`
(replay: :mod:`~s3ingest.commands.replay`; DLQ redrive: :mod:`~s3ingest.commands.redrive`;
explain: :mod:`~s3ingest.commands.explain`; status: :mod:`~s3ingest.commands.status`), and
``to_json`` to :mod:`s3ingest.cli.render`. The old names still work for one release, each with a
:class:`DeprecationWarning` naming its new module.
"""

from __future__ import annotations

from s3ingest.moved import moved

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


__getattr__ = moved(__name__, {name: f"{module}.{name}" for name, module in MOVED.items()})
