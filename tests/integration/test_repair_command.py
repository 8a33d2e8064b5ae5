"""``s3ingest repair KEY`` end to end against the emulator: the CLI's own session, the stack's
outputs naming a local runtime's resources, the repair event on the ingest queue and the
ingest function handling it (CONTRACT C5, C7, C12; issue 24)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from s3ingest.cli import app
from s3ingest.commands import repair as commands
from s3ingest.local.emulator.chaos import Chaos
from s3ingest.local.stack.runtime import LocalRuntime
from s3ingest_fn.core.row import RowState, WriteMeta
from s3ingest_fn.core.sequencer import normalize
from tests.integration.test_commands import _stack

#: What a forged event wrote before events were checked: 64 significant hex digits.
FORGED = "F" * 64
KEY = "in/a b.csv"


def _poison(rt: LocalRuntime, state: RowState) -> None:
    """Write the row as a forged event of an earlier release did: through the ledger adapter's
    ordinary sequenced write, at a sequencer S3 cannot send (the parser now refuses it, so no
    event of this release can write it)."""
    meta = WriteMeta(
        rt.resources.bucket,
        KEY,
        KEY,
        "Object Created/PutObject",
        "newer-sequencer",
        "live",
        sequencer=normalize(FORGED),
        raw_sequencer=FORGED,
    )
    assert rt.ledger.apply_if_newer(state, meta).applied


def _put(rt: LocalRuntime, body: str, *, lost: bool = False) -> None:
    """Put the key; ``lost``: its event never arrives."""
    rt.faithful.put(KEY, body)
    rt.flush(Chaos(seed=0, drop=1.0) if lost else None)
    rt.drain()


@pytest.mark.contract("C5", "C7", "C12")
def test_repair_resets_a_forged_sequencer_and_a_later_real_event_applies(
    emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a row poisoned with 64 F before this release, then a real PUT of the key whose
    # event was lost (one that arrives repairs the row itself: stale-but-current, issue 34)
    rt = LocalRuntime(emulator, versioning="Enabled")
    bucket = rt.resources.bucket
    _poison(rt, RowState(True, "v-forged", '"forged"', 5))
    _put(rt, "real 1", lost=True)
    poisoned = rt.ledger.get(bucket, KEY)
    assert poisoned is not None and poisoned.raw_seq == FORGED
    assert poisoned.version_id == "v-forged"
    env = {**_stack(monkeypatch, rt), "COLUMNS": "200"}
    # each wait of the command delivers the ingest queue (the local runtime has no poller)
    monkeypatch.setattr(commands, "wait_step", lambda seconds: rt.drain())

    # WHEN the operator repairs the key
    result = CliRunner().invoke(app, ["repair", KEY, "--bucket", bucket, "--json"], env=env)

    # THEN the repair event reset the row to what the bucket shows, without a sequencer
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["queued"] is True and doc["settled"] is True and doc["agrees"] is True
    assert "state-differs" in doc["due"]
    assert "sequencer-contradicted: sequencer-length" in doc["due"]
    assert (doc["before"]["sequencer"], doc["before"]["version_id"]) == (FORGED, "v-forged")
    head = rt.objects.current(bucket, KEY)
    assert doc["bucket_state"] == {
        "visible": True,
        "version_id": head.version_id,
        "etag": head.etag,
    }
    after = doc["after"]
    assert (after["state"], after["sequencer"], after["observed"]) == ("present", None, True)
    assert after["version_id"] == head.version_id
    assert after["reason"] == "sequencer-reset: sequencer-length"
    assert doc["decision"]["reason"] == "sequencer-reset: sequencer-length"
    assert doc["decision"]["source"] == "repair"
    assert set(doc) == {
        "bucket",
        "key",
        "due",
        "queued",
        "waited",
        "settled",
        "before",
        "after",
        "bucket_state",
        "decision",
        "agrees",
    }

    # ... and a later real event of the key applies (verified against the bucket: C7)
    _put(rt, "real 2")
    row = rt.ledger.get(bucket, KEY)
    assert row is not None and row.raw_seq not in (None, FORGED)
    assert row.version_id == rt.objects.current(bucket, KEY).version_id
    assert rt.compare().converged

    # ... and a second repair finds nothing due, sends nothing (table output, exit 0)
    again = CliRunner().invoke(app, ["repair", KEY], env=env)
    assert again.exit_code == 0, again.output
    assert "nothing due" in again.stdout


def test_repair_that_does_not_settle_exits_1(
    emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a poisoned row and an ingest queue nobody delivers
    rt = LocalRuntime(emulator, versioning="Enabled")
    _poison(rt, RowState(True, "v-forged", '"forged"', 5))
    rt.faithful.put(KEY, "real")
    env = _stack(monkeypatch, rt)
    polls: list[float] = []
    monkeypatch.setattr(commands, "wait_step", polls.append)

    # WHEN the key is repaired with a wait that passes before the queue is delivered
    result = CliRunner().invoke(app, ["repair", KEY, "--wait", "3", "--json"], env=env)

    # THEN the command says so with exit code 1; the repair event is on the queue
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    assert (doc["queued"], doc["waited"], doc["settled"], doc["agrees"]) == (
        True,
        True,
        False,
        False,
    )
    assert doc["after"] == doc["before"] and polls == [1.0, 1.0, 1.0]  # one read a second
    rt.drain()
    row = rt.ledger.get(rt.resources.bucket, KEY)
    assert row is not None and row.reason == "sequencer-reset: sequencer-length"
