"""A processor's version on the local runtime (issue 27): a scenario's ``processors`` entry
takes ``version``, and the runtime's specs and the environment it gives the functions it runs
(the backfills' and the listing shards') carry the same versions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from s3ingest.local.rehearsal.scenario import ScenarioError, parse_lines, run_scenario
from s3ingest.local.stack.runtime import LocalRuntime, local_settings
from s3ingest.settings import Settings
from s3ingest_fn import config, wiring

AUDIT = "s3ingest_examples.audit:handler"
SIDECAR = "s3ingest_examples.sidecar:process"


def _versions(rt: LocalRuntime) -> tuple[dict[str, int], dict[str, int]]:
    """The versions of the runtime's own specs, and of the specs its functions' environment
    builds."""
    assert rt.service.effects is not None
    own = {spec.name: spec.version for spec in rt.service.effects.specs}
    entries = wiring.processor_entries(rt.environment())
    built = {spec.name: spec.version for spec in wiring.processor_specs(entries)}
    return own, built


def test_a_scenario_entry_version_reaches_the_runtimes_specs(emulator: Any) -> None:
    # GIVEN a scenario's first line with two processors, one at version 3
    setup, _steps = parse_lines(
        [
            json.dumps(
                {
                    "processors": [
                        {"name": "sidecar", "module": SIDECAR, "version": 3},
                        {"name": "audit", "handler": AUDIT},
                    ]
                }
            )
        ]
    )
    # WHEN the runtime is set up from it (as the scenario runner does)
    rt = LocalRuntime(emulator, local_settings(processor=None, processors=setup["processors"]))
    # THEN its specs and its functions' specs have the same versions
    own, built = _versions(rt)
    assert own == built == {"sidecar": 3, "audit": 1}


def test_the_single_processor_version_reaches_the_runtimes_specs(emulator: Any) -> None:
    rt = LocalRuntime(emulator, local_settings(processor_version=2))
    own, built = _versions(rt)
    assert own == built == {"default": 2}
    assert config.PROCESSOR not in rt.environment()
    plain = LocalRuntime(emulator, local_settings())
    assert _versions(plain) == ({"default": 1}, {"default": 1})
    assert plain.environment()[config.PROCESSOR] == Settings(processor=SIDECAR).processor


def test_a_scenario_entry_version_that_is_no_whole_number_is_refused() -> None:
    line = {"processors": [{"name": "sidecar", "module": SIDECAR, "version": "2.5"}]}
    with pytest.raises(ScenarioError) as raised:
        parse_lines([json.dumps(line)])
    assert str(raised.value) == (
        "line 1: processors[0].version: '2.5' is not a whole number of at least 1"
    )


def test_a_scenario_with_a_versioned_processor_runs(emulator: Any, tmp_path: Path) -> None:
    path = tmp_path / "scenario.jsonl"
    lines = [
        {"processors": [{"name": "sidecar", "module": SIDECAR, "version": 2}]},
        {"op": "put", "key": "a.txt", "body": "one"},
        {"op": "flush"},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    result = run_scenario(path, emulator=emulator)
    assert [(e["processor"], e["key"]) for e in result["effects"]] == [("sidecar", "a.txt")]
