"""Shared fixtures: one embedded emulator per test session (moto's server on 127.0.0.1); and the
check that every ``contract`` marker names a rule of ``docs/contract.md``."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.contract_index import CONTRACT_DUMP, ContractMarkError, check_rules, read_rules

# Never let a test reach a real AWS account.
os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Refuse the run when a ``contract(...)`` marker names no rule of ``docs/contract.md``
    (``contract("C16")``, ``contract("c6")``, ``contract()``): a usage error listing each."""
    rules = read_rules()
    problems: list[str] = []
    seen: dict[str, list[str]] = {}
    for item in items:
        for mark in item.iter_markers("contract"):
            try:
                check_rules(mark.args, dict(mark.kwargs), rules)
            except ContractMarkError as error:
                problems.append(f"{item.nodeid}: {error}")
            seen.setdefault(item.nodeid.split("[", 1)[0], []).extend(map(str, mark.args))
    if problems:
        raise pytest.UsageError("invalid contract marker(s):\n" + "\n".join(problems))
    if dump := os.environ.get(CONTRACT_DUMP):
        # for tests/unit/test_contract_index.py: the markers as pytest sees them
        Path(dump).write_text(json.dumps({k: sorted(set(v)) for k, v in seen.items()}))


@pytest.fixture(scope="session")
def emulator() -> Iterator[object]:
    """A started :class:`s3ingest.local.emulator.Emulator`, shared by the session; each test
    provisions its own uniquely named resources on it."""
    from s3ingest.local.emulator import Emulator

    with Emulator() as emu:
        yield emu
