"""Request counts of a run's step (the listing backfill's shards, the reprocess run's segments):
thread-safe counts by kind, and the ledger port counting its requests."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping
from typing import Any


class Requests:
    """Thread-safe request counts by kind, from ``start`` (a checkpoint's)."""

    def __init__(self, start: Mapping[str, int] | None = None) -> None:
        self.counts: Counter[str] = Counter(start or {})
        self._lock = threading.Lock()

    def add(self, kind: str, n: int = 1) -> None:
        with self._lock:
            self.counts[kind] += n


class CountedLedger:
    """The ledger port, counting ``get`` and ``write`` (every other method's) requests, failed
    ones included."""

    def __init__(self, inner: Any, requests: Requests) -> None:
        self._inner = inner
        self._requests = requests

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._inner, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            self._requests.add("get" if name == "get" else "write")
            return method(*args, **kwargs)

        return counted
