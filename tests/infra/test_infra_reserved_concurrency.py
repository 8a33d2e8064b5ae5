"""Reserved concurrency (issue 24): the ingest function's, and each backfill worker's (the Batch
Operations task function, or the Distributed Map engine's control function, and the listing
shard function), from the settings; none elsewhere."""

from __future__ import annotations

import pytest

from s3ingest_cdk.synth import Synth

from .conftest import BACKFILL_RESERVED, INGEST_RESERVED


def _reserved(synth: Synth) -> dict[str, int | None]:
    """Function logical id -> its ReservedConcurrentExecutions (None: unreserved)."""
    return {
        logical_id: resource["Properties"].get("ReservedConcurrentExecutions")
        for logical_id, resource in synth.resources("AWS::Lambda::Function").items()
    }


def test_reserved_as_the_settings_say(processors_synth: Synth) -> None:
    synth = processors_synth
    functions = synth.pipeline.functions
    expected = {synth.logical_id(functions["ingest"]): INGEST_RESERVED}
    for name in ("backfill", "listing-shard", "reprocess-segment"):
        expected[synth.logical_id(functions[name])] = BACKFILL_RESERVED
    found = {k: v for k, v in _reserved(synth).items() if v is not None}
    # reconcile, the listing and reprocess plan and summary steps, the control functions:
    # unreserved
    assert found == expected


def test_distributed_map_worker_reserved(two_bucket_synth: Synth) -> None:
    """With the Distributed Map engine the control function runs each data file: the worker."""
    synth = two_bucket_synth
    assert synth.settings.backfill_engine == "distributed-map"
    functions = synth.pipeline.functions
    expected = {
        synth.logical_id(functions[name]): BACKFILL_RESERVED
        for name in ("backfill-control", "listing-shard", "reprocess-segment")
    }
    assert {k: v for k, v in _reserved(synth).items() if v is not None} == expected


@pytest.mark.parametrize("variant", ["synth", "fanout_synth"])
def test_unreserved_by_default(variant: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(variant)
    assert synth.settings.ingest_reserved_concurrency is None
    assert set(_reserved(synth).values()) == {None}
