"""Fixtures shared by the integration tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from s3ingest.local.emulator.s3control_jobs import BatchOperations
from s3ingest.local.emulator.server import Emulator


@pytest.fixture
def jobs(emulator: Emulator) -> Iterator[BatchOperations]:
    """The session emulator's S3 Batch Operations jobs, their test hooks reset afterwards."""
    service = emulator.batch_operations
    yield service
    service.reset_hooks()
