"""The local stack's run directory (``.s3ingest`` of the current directory, or
``S3INGEST_RUN_DIR``): what the daemon, the CLI and the local history table share, apart from
:mod:`s3ingest.local.stack.daemon` so that the runtime's modules may read it."""

from __future__ import annotations

import os
from pathlib import Path

#: The run directory under the current directory.
RUN_DIR = ".s3ingest"
#: Names another run directory than :data:`RUN_DIR` of the current directory.
RUN_DIR_ENV = "S3INGEST_RUN_DIR"


def run_dir(directory: str | Path | None = None) -> Path:
    """The run directory: ``directory`` when given, else the environment's
    :data:`RUN_DIR_ENV` (``S3INGEST_RUN_DIR``) when set and not empty, else :data:`RUN_DIR` of
    the current directory."""
    if directory is not None:
        return Path(directory)
    named = os.environ.get(RUN_DIR_ENV, "").strip()
    return Path(named) if named else Path.cwd() / RUN_DIR
