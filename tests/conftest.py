"""Shared fixtures: one embedded emulator per test session (moto's server on 127.0.0.1); each
test's local stack run directory in its own tmp folder, never the repository's ``.s3ingest/``
(checked at the session's end); and the check that every ``contract`` marker names a rule of
``docs/contract.md``."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import run_dir_guard
from tests.contract_index import CONTRACT_DUMP, ContractMarkError, check_rules, read_rules

# Never let a test reach a real AWS account.
os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")

#: The Node.js the repository pins (package.json, installed by `make node_modules/.stamp`).
PINNED_NODE = Path(__file__).resolve().parent.parent / "node_modules" / ".bin" / "node"
# jsii (the Python CDK) runs on it, as under `make unit`, even when pytest is started without it
# first on PATH (JSII_NODE, read when jsii starts its Node process at the first `import
# aws_cdk`): on the machine's Node, an end-of-life release makes jsii's runtime print its
# support banner, which jsii's Python side echoes as bytes reprs (b'!!  Node 20 is ...').
if PINNED_NODE.exists():
    os.environ.setdefault("JSII_NODE", str(PINNED_NODE))


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


#: ``s3ingest.local.stack.daemon.RUN_DIR_ENV`` (not imported here: conftest stays light).
RUN_DIR_ENV = "S3INGEST_RUN_DIR"


@pytest.fixture(scope="session", autouse=True)
def _repository_run_dir_left_alone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The session's run directory (for session fixtures and what they start) is a tmp folder;
    at the end, the session fails (an error at teardown) if the repository's ``.s3ingest/``
    came, went or changed: a test wrote to it, or acted on the local stack it names (whose
    functions' logs grew). A local stack of your own there, busy during the run, trips it too."""
    before = run_dir_guard.snapshot(run_dir_guard.REPO_RUN_DIR)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(RUN_DIR_ENV, str(tmp_path_factory.mktemp("session-run") / ".s3ingest"))
        yield
    after = run_dir_guard.snapshot(run_dir_guard.REPO_RUN_DIR)
    changed = run_dir_guard.changes(before, after)
    if changed:
        pytest.fail(
            f"the tests changed {run_dir_guard.REPO_RUN_DIR}: " + "; ".join(changed[:20]),
            pytrace=False,
        )


@pytest.fixture(autouse=True)
def _run_dir_of_the_test(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """This test's run directory (``S3INGEST_RUN_DIR``): ``.s3ingest`` of its ``tmp_path``, so
    ``local up``, ``--local`` and ``verify --local`` never reach the repository's (nor a stack
    running from it), and a test that changes into ``tmp_path`` finds it where it looks."""
    monkeypatch.setenv(RUN_DIR_ENV, str(tmp_path / ".s3ingest"))


@pytest.fixture(scope="session")
def emulator() -> Iterator[object]:
    """A started :class:`s3ingest.local.emulator.server.Emulator`, shared by the session; each test
    provisions its own uniquely named resources on it."""
    from s3ingest.local.emulator.server import Emulator

    with Emulator() as emu:
        yield emu
