"""A processor's version (issue 27) from the settings to the specs the functions run: a
``processors`` entry's ``version`` and the single processor's ``processorVersion`` reach
:class:`~s3ingest_fn.core.effects.ProcessorSpec` through the functions' environment
(``PROCESSORS``), the same as through the local runtime's settings."""

from __future__ import annotations

import json
from typing import Any

import pytest

from s3ingest.settings import Settings
from s3ingest_fn import config, wiring
from s3ingest_fn.config import IngestConfig
from s3ingest_fn.core.effects import AppliedChange, PinnedContent

HERE = "tests.unit.test_processor_versions"


def noop(change: AppliedChange, content: PinnedContent | None) -> None:
    """A processor that does nothing."""


def handler(event: dict[str, Any], context: Any) -> dict[str, str]:
    """A processor function's handler that does nothing."""
    return {"status": "done"}


def _function_env(settings: Settings) -> dict[str, str]:
    """What the stack gives the functions that run the processors (``ingest_processors`` and
    ``grant_ingest_service``): ``PROCESSORS`` when :attr:`Settings.processors_variable`, else
    ``PROCESSOR``."""
    env = {config.LEDGER_TABLE_NAME: "ledger", config.DEAD_LETTER_QUEUE_URL: "dlq"}
    if settings.processors_variable:
        env[config.PROCESSORS] = json.dumps(settings.processor_entries())
    elif settings.processor is not None:
        env[config.PROCESSOR] = settings.processor
    return env


def _versions(entries: list[dict[str, Any]]) -> dict[str, int]:
    return {spec.name: spec.version for spec in wiring.processor_specs(entries)}


def test_each_spec_has_its_entrys_version() -> None:
    entries: list[dict[str, Any]] = [
        {"name": "thumbs", "module": f"{HERE}:noop", "version": 3},
        {"name": "audit", "handler": f"{HERE}:handler", "version": 2},
        {"name": "index", "module": f"{HERE}:noop"},
    ]
    assert _versions(entries) == {"thumbs": 3, "audit": 2, "index": 1}


@pytest.mark.parametrize(
    ("context", "expected"),
    [
        ({"processor": f"{HERE}:noop"}, {"default": 1}),
        ({"processor": f"{HERE}:noop", "processorVersion": "4"}, {"default": 4}),
        (
            {
                "processors": json.dumps(
                    [
                        {"name": "a", "module": f"{HERE}:noop", "version": 2},
                        {"name": "b", "handler": f"{HERE}:handler", "version": "5"},
                        {"name": "c", "module": f"{HERE}:noop", "version": 1},
                    ]
                )
            },
            {"a": 2, "b": 5, "c": 1},
        ),
    ],
)
def test_the_functions_and_the_local_runtime_see_the_same_versions(
    context: dict[str, Any], expected: dict[str, int]
) -> None:
    settings = Settings.from_context(context)
    # the local runtime builds its specs from the settings' entries
    assert _versions(settings.processor_entries()) == expected
    # the deployed functions from their environment, as IngestConfig reads it
    found = IngestConfig.from_env(_function_env(settings))
    assert _versions(found.processor_entries()) == expected
    assert IngestConfig.from_env(found.to_env()) == found


def test_the_single_processor_at_version_1_keeps_its_processor_variable() -> None:
    env = _function_env(Settings(processor=f"{HERE}:noop"))
    assert config.PROCESSORS not in env and env[config.PROCESSOR] == f"{HERE}:noop"
    env = _function_env(Settings(processor=f"{HERE}:noop", processor_version=2))
    assert config.PROCESSOR not in env
    assert json.loads(env[config.PROCESSORS])[0]["version"] == 2
