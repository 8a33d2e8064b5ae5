"""Shared fixtures: one embedded emulator per test session (moto's server on 127.0.0.1)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

# Never let a test reach a real AWS account.
os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")


@pytest.fixture(scope="session")
def emulator() -> Iterator[object]:
    """A started :class:`s3ingest.local.emulator.Emulator`, shared by the session; each test
    provisions its own uniquely named resources on it."""
    from s3ingest.local.emulator import Emulator

    with Emulator() as emu:
        yield emu
