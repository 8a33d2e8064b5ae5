"""The state machines the local runtime executes are the stack's: the committed files under
``s3ingest/local/machines/`` equal what this session's synth gives (``make machines`` rewrites
them)."""

from __future__ import annotations

import pytest

from s3ingest.local import machines
from s3ingest_cdk.local_machines import HERE, MACHINES, documents, render
from s3ingest_cdk.synth import Synth


@pytest.fixture(scope="module")
def synthesized(synth: Synth, fanout_synth: Synth) -> dict[str, str]:
    return {
        name: render(document)
        for name, document in documents({"default": synth, "fanout": fanout_synth}).items()
    }


@pytest.mark.parametrize("name", sorted(MACHINES))
def test_committed_machine_equals_the_synthesized_one(
    synthesized: dict[str, str], name: str
) -> None:
    committed = (HERE / f"{name}.json").read_text(encoding="utf-8")
    assert committed == synthesized[name], f"{name}.json is stale: run make machines"


def test_every_machine_is_held_and_named() -> None:
    assert set(MACHINES) == set(machines.NAMES)


@pytest.mark.parametrize("name", sorted(MACHINES))
def test_placeholders_are_tokens_only(synthesized: dict[str, str], name: str) -> None:
    # every placeholder is a pseudo-parameter or a construct path (nothing else was a token)
    document = machines.load(name)
    for placeholder in machines.placeholders(document):
        assert placeholder.startswith(("AWS::", "Pipeline/")), placeholder
    assert document["functions"], "each machine invokes the stack's functions"
