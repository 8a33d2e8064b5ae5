"""pyarrow's memory pool for the bulk passes (:mod:`s3ingest_fn.arrow_memory`): chosen before
pyarrow's first import, in a fresh interpreter as the CLI and a function start."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.cold_start import FUNCTIONS

_CODE = """
import gzip, json, os
from s3ingest_fn.services import reconcile_columnar as rc
from s3ingest_fn.services.inventory import Manifest

columns = ("Bucket", "Key", "VersionId", "IsLatest", "IsDeleteMarker", "Size",
           "LastModifiedDate", "ETag")
row = '"bkt","k{}","v","true","false","1","2026-01-01T00:00:00.000Z","e"\\n'
data = gzip.compress("".join(row.format(i) for i in range(5000)).encode())
table = rc.truth_table(Manifest("bkt", "inv", 0, "CSV", columns, ("d",)), [data])
import pyarrow as pa

print(json.dumps([
    table.num_rows,
    pa.default_memory_pool().backend_name,
    pa.mimalloc_memory_pool().max_memory(),
    os.environ.get("ARROW_DEFAULT_MEMORY_POOL"),
]))
"""


def _fresh(**env: str) -> list[object]:
    base = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    done = subprocess.run(
        [sys.executable, "-c", _CODE],
        env={**base, "PYTHONPATH": str(FUNCTIONS), **env},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    out: list[object] = json.loads(done.stdout)
    return out


def test_the_columnar_pass_allocates_nothing_from_mimalloc_without_a_setting() -> None:
    pytest.importorskip("pyarrow")
    # GIVEN a fresh interpreter and no ARROW_DEFAULT_MEMORY_POOL (as the CLI and the function
    # start) WHEN the report is read in columns
    rows, backend, mimalloc_peak, variable = _fresh()
    # THEN every buffer, the readers' own included, came from the system allocator (mimalloc
    # keeps what a pass frees), and the variable is not left set for the process's children
    assert (rows, backend, mimalloc_peak, variable) == (5000, "system", 0, None)


def test_a_pool_the_user_chose_is_kept() -> None:
    pytest.importorskip("pyarrow")
    rows, backend, _, variable = _fresh(ARROW_DEFAULT_MEMORY_POOL="mimalloc")
    assert (rows, backend, variable) == (5000, "mimalloc", "mimalloc")


def test_an_invocations_view_of_the_environment_does_not_hide_the_process_pool() -> None:
    """Inside a local invocation ``os.environ`` is a per-invocation view: the pool variable
    must still reach the process's own environment, which Arrow C++ reads."""
    pytest.importorskip("pyarrow")
    code = (
        "from s3ingest.local.emulator import environment\n"
        "from s3ingest_fn.config import use_env\n"
        "environment.install()\n"
        "with use_env({}):\n" + "\n".join("    " + line for line in _CODE.strip().splitlines())
    )
    base = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**base, "PYTHONPATH": os.pathsep.join([str(FUNCTIONS), os.getcwd()])},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    rows, backend, mimalloc_peak, _ = json.loads(done.stdout)
    assert (rows, backend, mimalloc_peak) == (5000, "system", 0)
