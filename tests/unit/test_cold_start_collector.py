"""The garbage collector during a cold start (:mod:`s3ingest_fn.handlers`): paused in Lambda
only, running again once the cold start is over, with what it made frozen."""

from __future__ import annotations

from pathlib import Path

import pytest

from s3ingest.function_roles import ROLES
from tests.cold_start import LAMBDA_ENV, import_collector, ingest_cold_start_collector

#: Every role's handler module (``s3ingest_fn.handlers.<module>``).
HANDLER_MODULES = sorted(
    {r.handler.rsplit(".", 1)[0] for r in ROLES.values() if r.handler.startswith("s3ingest_fn.")}
)


def test_in_lambda_the_ingest_cold_start_ends_with_the_collector_running_and_its_objects_frozen(
    tmp_path: Path,
) -> None:
    enabled, frozen = ingest_cold_start_collector(tmp_path, LAMBDA_ENV)
    assert enabled
    assert frozen > 10_000


def test_outside_lambda_the_cold_start_leaves_the_collector_as_it_was(tmp_path: Path) -> None:
    assert ingest_cold_start_collector(tmp_path, {}) == (True, 0)


def test_every_role_s_handler_module_is_listed() -> None:
    assert "s3ingest_fn.handlers.ingest" in HANDLER_MODULES
    assert len(HANDLER_MODULES) >= 8


@pytest.mark.parametrize("module", HANDLER_MODULES)
def test_in_lambda_importing_a_handler_module_leaves_the_collector_running(
    tmp_path: Path, module: str
) -> None:
    enabled, frozen = import_collector(tmp_path, module, LAMBDA_ENV)
    assert enabled, f"{module} does not end with s3ingest_fn.handlers.resume()"
    assert frozen > 0
