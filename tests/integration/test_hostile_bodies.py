"""Hostile bodies through ``s3ingest local scenario`` (issue 34; CONTRACT C9, C11, C15): the
deliver step delivers what the handler classifies (a body nested past the parser, an EventBridge
``detail.object`` that is a list or a string) and the run goes on; a forged delete of a key the
ledger never held runs no removal effect; a key holding a newline converges with its effect
done."""

from __future__ import annotations

import copy
import json
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

import pytest

from s3ingest.local.rehearsal.scenario import ScenarioError, run_scenario
from s3ingest_fn.core.claimed import NEVER_HELD
from tests.samples import load_sample


@pytest.fixture
def bucket() -> str:
    """A bucket name of this test's own (the session's emulator keeps every bucket)."""
    return f"hostile-{uuid.uuid4().hex[:12]}"


def _created(bucket: str, key: str) -> dict[str, Any]:
    sample = load_sample("powertools__s3EventBridgeNotificationObjectCreatedEvent.json")
    assert isinstance(sample, dict)
    sample["detail"]["bucket"]["name"] = bucket
    sample["detail"]["object"]["key"] = quote_plus(key)
    return sample


def _deleted(bucket: str, key: str, sequencer: str = "0062E99A88DC407460") -> dict[str, Any]:
    forged = copy.deepcopy(_created(bucket, key))
    forged["detail-type"] = "Object Deleted"
    forged["detail"]["deletion-type"] = "Permanently Deleted"
    forged["detail"]["reason"] = "DeleteObject"
    forged["detail"]["object"] = {"key": quote_plus(key), "sequencer": sequencer}
    return forged


def _write(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "scenario.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.contract("C9")
def test_the_deliver_step_delivers_hostile_bodies_and_reports_their_outcomes(
    emulator: Any, tmp_path: Path, bucket: str
) -> None:
    # GIVEN a body nested 100,000 deep, EventBridge events whose detail.object is a list or a
    # string, then an ordinary put
    listed, text = _created(bucket, "x"), _created(bucket, "x")
    listed["detail"]["object"] = [1, 2]
    text["detail"]["object"] = "x"
    path = _write(
        tmp_path,
        [
            json.dumps({"bucket": bucket, "versioning": "Enabled"}),
            json.dumps({"op": "deliver", "body": "[" * 100_000 + "]" * 100_000}),
            json.dumps({"op": "deliver", "body": listed}),
            json.dumps({"op": "deliver", "body": text}),
            json.dumps({"op": "put", "key": "after.txt", "body": "one"}),
            json.dumps({"op": "flush"}),
        ],
    )
    # WHEN the scenario runs
    result = run_scenario(path, emulator=emulator)
    # THEN every step ran: each hostile body has the handler's classification, in the DLQ
    assert result["error"] is None
    outcomes = {m["step"]: (m["outcome"], m["reason"]) for m in result["messages"]}
    assert outcomes[2] == ("invalid", "malformed-json")
    assert outcomes[3] == ("invalid", "missing-field")
    assert outcomes[4] == ("invalid", "missing-field")
    assert outcomes[5] == ("applied", "newer-sequencer")
    assert len(result["dead_letter_queue"]) == 3
    assert result["converged"], result["differences"]


def test_a_scenario_line_nested_past_the_parser_is_a_scenario_error(tmp_path: Path) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    path = _write(tmp_path, ['{"op": "deliver", "body": {"a": ' + deep + "}}"])
    with pytest.raises(ScenarioError, match="line 1: nested too deep to read"):
        run_scenario(path)


@pytest.mark.contract("C9", "C11", "C15")
@pytest.mark.parametrize(
    "key", ["never.txt", "a\x01b", "a\nb", "c\x7f", "d\rx", 'a\n{"level":"ERROR"}']
)
def test_a_forged_delete_of_a_key_the_ledger_never_held_runs_no_removal_effect(
    emulator: Any, tmp_path: Path, bucket: str, key: str
) -> None:
    # GIVEN a forged delete of a key neither the bucket nor the ledger ever held
    path = _write(
        tmp_path,
        [
            json.dumps({"bucket": bucket, "versioning": None}),
            json.dumps({"op": "deliver", "body": _deleted(bucket, key)}),
            json.dumps({"op": "reconcile", "source": "listing"}),
        ],
    )
    # WHEN it is delivered, then the bucket reconciled
    result = run_scenario(path, emulator=emulator)
    # THEN the tombstone orders the key's later events, but no processor's removal effect ran
    # (nothing downstream ever saw the key), and nothing is left pending or behind
    assert result["error"] is None
    (message,) = [m for m in result["messages"] if m["step"] == 2]
    assert (message["key"], message["outcome"]) == (key, "applied")
    assert message["effect"] == NEVER_HELD
    assert result["effects"] == []
    assert [(r["key"], r["state"]) for r in result["ledger"]] == [(key, "deleted")]
    assert result["effects_problems"] == []
    assert result["converged"], result["differences"]


@pytest.mark.contract("C11", "C15")
def test_a_key_holding_a_newline_converges_with_its_removal_effect_done(
    emulator: Any, tmp_path: Path, bucket: str
) -> None:
    # GIVEN a forged create of a key holding a newline and a JSON log line, which the bucket
    # does not hold (its effect ends superseded), then a listing reconciliation
    key = 'a\n{"level":"ERROR"}'
    path = _write(
        tmp_path,
        [
            json.dumps({"bucket": bucket, "versioning": None}),
            json.dumps({"op": "deliver", "body": _created(bucket, key)}),
            json.dumps({"op": "reconcile", "source": "listing"}),
        ],
    )
    # WHEN it runs
    result = run_scenario(path, emulator=emulator)
    # THEN the repair tombstones the key and the removal effect (the example processor deletes
    # the key's sidecar: S3 answers 204) is done, nothing pending after quiescence
    assert result["error"] is None
    repair = [m for m in result["messages"] if m["step"] == 3]
    assert [(m["outcome"], m["effect"]) for m in repair] == [("applied", "done")]
    assert [(e["key"], e["kind"]) for e in result["effects"]] == [(key, "removed")]
    assert result["effects_problems"] == []
    assert result["converged"], result["differences"]


def test_the_emulator_answers_for_a_key_holding_a_newline(emulator: Any, bucket: str) -> None:
    s3 = emulator.client("s3")
    s3.create_bucket(Bucket=bucket)
    key = 'a\n{"level":"ERROR"}'
    assert s3.delete_object(Bucket=bucket, Key=key)["ResponseMetadata"]["HTTPStatusCode"] == 204
    s3.put_object(Bucket=bucket, Key=key, Body=b"x")
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"x"
    listed = s3.list_objects_v2(Bucket=bucket)["Contents"]
    assert [o["Key"] for o in listed] == [key]
