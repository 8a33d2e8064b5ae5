"""The ingest function's cold start in a fresh interpreter, as the unit tests inspect it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import s3ingest_fn

#: The folder holding ``s3ingest_fn`` (the Lambda package's root).
FUNCTIONS = Path(s3ingest_fn.__file__).resolve().parents[1]
_CODE = (
    "import dataclasses, gc, json, sys\n"
    "import s3ingest_fn.handlers.ingest as h\n"
    "h.built()\n"
    "print(json.dumps({probe}))\n"
)
#: A handler module's import alone, then ``{probe}``.
_IMPORT = (
    "import gc, importlib, json\nimportlib.import_module({module!r})\nprint(json.dumps({probe}))\n"
)
#: Whether the garbage collector runs, and how many objects it keeps frozen.
_COLLECTOR = "[gc.isenabled(), gc.get_freeze_count()]"
#: What Lambda's Python runtime sets (``s3ingest_fn.handlers`` pauses the collector under it).
LAMBDA_ENV = {"AWS_EXECUTION_ENV": "AWS_Lambda_python3.13"}
#: What :func:`ingest_cold_start_modules` prints: every loaded module's name.
_MODULES = "sorted(sys.modules)"
#: What :func:`ingest_cold_start_dataclasses` prints: each loaded module's dataclasses.
_DATACLASSES = (
    "sorted(f'{n}.{k}' for n, m in list(sys.modules.items()) if n.startswith('s3ingest_fn')"
    " for k, v in vars(m).items() if isinstance(v, type) and dataclasses.is_dataclass(v)"
    " and v.__module__ == n)"
)


def ingest_cold_start_modules(cwd: Path) -> list[str]:
    """Every module loaded after importing the ingest handler and building it from a minimal
    environment (tracing and metrics off, fake credentials), run in ``cwd``."""
    return _cold_start(cwd, _MODULES)


def ingest_cold_start_dataclasses(cwd: Path) -> list[str]:
    """``module.Class`` of every dataclass of ``s3ingest_fn`` the same cold start built."""
    return _cold_start(cwd, _DATACLASSES)


def ingest_cold_start_collector(cwd: Path, env: dict[str, str]) -> tuple[bool, int]:
    """After the same cold start with ``env`` added: whether the garbage collector runs, and how
    many objects it keeps frozen."""
    enabled, frozen = _cold_start(cwd, _COLLECTOR, env)
    return bool(enabled), int(frozen)


def import_collector(cwd: Path, module: str, env: dict[str, str]) -> tuple[bool, int]:
    """:func:`ingest_cold_start_collector` after importing handler ``module`` alone."""
    enabled, frozen = _cold_start(
        cwd, _COLLECTOR, env, _IMPORT.format(module=module, probe="{probe}")
    )
    return bool(enabled), int(frozen)


def _cold_start(
    cwd: Path, probe: str, extra: dict[str, str] | None = None, code: str = _CODE
) -> list[Any]:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(FUNCTIONS),
        "LEDGER_TABLE_NAME": "ledger",
        "DEAD_LETTER_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/dlq",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "secret",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_METRICS_DISABLED": "true",
        **(extra or {}),
    }
    done = subprocess.run(
        [sys.executable, "-c", code.format(probe=probe)],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    loaded: list[Any] = json.loads(done.stdout.splitlines()[-1])
    return loaded
