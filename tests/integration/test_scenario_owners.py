"""Owners, not names, on the local runtime (which keeps the emulator's accounts apart): a
bucket of a configured name in a third account feeds nothing into the ledger
(``examples/scenarios/bucket-owners.jsonl``, ``docs/organisation.md``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from s3ingest.local.rehearsal.scenario import ScenarioError, parse_lines, run_scenario

EXAMPLE = Path(__file__).parents[2] / "examples" / "scenarios" / "bucket-owners.jsonl"
SQUATTED = "producer-drop"


@pytest.mark.contract("C9", "C15")
def test_a_third_account_s_bucket_of_a_configured_name_feeds_nothing(emulator: Any) -> None:
    # GIVEN a pipeline with its own bucket and another account's, whose name a third account
    # takes, puts and deletes objects in, and forwards the events of to the pipeline's bus
    result = run_scenario(EXAMPLE, emulator=emulator)
    assert result["error"] is None
    # THEN no event of the third account's bucket reached the ingest queue but the one
    # delivered by hand, and that one is invalid: wrong-account
    squatted = [m for m in result["messages"] if m["bucket"] == SQUATTED or m["bucket"] is None]
    assert [(m["outcome"], m["reason"]) for m in squatted] == [("invalid", "wrong-account")]
    # AND it waits in the dead-letter queue with its reason (nothing lost, C9)
    assert [d["reason"] for d in result["dead_letter_queue"]] == ["wrong-account"]
    # AND the ledger holds the pipeline's own bucket only, equal to it (C15)
    assert [(r["bucket"], r["key"]) for r in result["ledger"]] == [("landing-main", "report.csv")]
    assert result["converged"], result["differences"]


def test_a_squat_step_names_an_account() -> None:
    with pytest.raises(ScenarioError, match="squat account must be an AWS account id"):
        parse_lines(['{"op": "squat", "account": "1234"}'])
    with pytest.raises(ScenarioError, match="needs account"):
        parse_lines(['{"op": "squat"}'])
