"""pyarrow's memory pool for the bulk passes (the columnar reconciliation, the ORC and Parquet
readers), chosen before pyarrow is first imported.

Arrow C++ reads ``ARROW_DEFAULT_MEMORY_POOL`` once, when pyarrow is imported, and its readers
allocate part of their buffers (decompression, the CSV and JSON parsers' blocks) from that
default pool whatever :func:`pyarrow.set_memory_pool` says later. mimalloc (the wheels'
default) keeps what a pass frees, about 40 MiB at 10^6 keys (docs/reconciliation.md#scale),
so :func:`prepare` imports pyarrow with the C library's allocator as its default, without the
caller setting anything: the variable is set for the import only (a value the user set is
kept). glibc is told to hand back every freed block of 256 KiB or more
(``mallopt(M_MMAP_THRESHOLD)``); elsewhere its default.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
from typing import Any

#: The environment variable Arrow C++ reads its default pool's name from, at import.
POOL_VARIABLE = "ARROW_DEFAULT_MEMORY_POOL"
#: glibc's ``M_MMAP_THRESHOLD`` parameter of ``mallopt``.
_M_MMAP_THRESHOLD = -3
_MMAP_BYTES = 256 * 1024
_LOCK = threading.Lock()


def prepare() -> Any:
    """pyarrow, imported with the system allocator as Arrow's default pool (when this is its
    first import and the user set no pool) and as pyarrow's; once per process."""
    with _LOCK:
        return _prepare()


def _process_environ() -> Any:
    """The process's own environment, which Arrow C++ reads: ``os.environ``, or the mapping it
    wraps where a host made it a per-invocation view (the local Lambda service,
    ``s3ingest.local.emulator.environment``): a write to the view would not reach it."""
    env: Any = os.environ
    return env if isinstance(env, os._Environ) else getattr(env, "base", env)


@functools.cache
def _prepare() -> Any:
    env = _process_environ()
    if "pyarrow" not in sys.modules and POOL_VARIABLE not in env:
        # set for the import only: another thread starting a child process meanwhile passes it
        # on (harmless: the child gets the system allocator too)
        env[POOL_VARIABLE] = "system"
        try:
            import pyarrow as pa

            pa.default_memory_pool()
        finally:
            del env[POOL_VARIABLE]
    import pyarrow as pa

    if env.get(POOL_VARIABLE) in (None, "system"):
        pa.set_memory_pool(pa.system_memory_pool())
        _mmap_threshold()
    return pa


def _mmap_threshold() -> None:
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if name and "libc.so" in name:
        ctypes.CDLL(name).mallopt(_M_MMAP_THRESHOLD, _MMAP_BYTES)


def release() -> None:
    """Hand the memory pyarrow's pool holds free back to the system (a bulk pass frees blocks
    of every size in turn: without it the process keeps them)."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()
