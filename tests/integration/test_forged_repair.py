"""Forged input on the local runtime (issue 24, Done when): a row poisoned with a forged
sequencer is put right by one reconciliation or by ``s3ingest repair``; a forged delete of a key
the bucket holds changes nothing and runs no processor (CONTRACT C4, C7, C11, C12, C15)."""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import quote_plus

import pytest
from typer.testing import CliRunner

from s3ingest.cli import app
from s3ingest.commands import repair as repair_commands
from s3ingest.local.emulator.chaos import Chaos
from s3ingest.local.stack.runtime import LocalRuntime, local_settings
from s3ingest_fn.core.row import RowState, WriteMeta
from s3ingest_fn.core.sequencer import normalize
from tests.integration.test_commands import _stack
from tests.samples import load_sample

KEY = "in/a b+c.csv"
FORGED = "F" * 64


def _poisoned(emulator: Any) -> LocalRuntime:
    """A runtime whose KEY row holds a 64-F sequencer, written as a forged event of an earlier
    release wrote it (the adapter's ordinary sequenced write; the parser now refuses such an
    event), then a real overwrite of the key whose event was lost (one that arrives repairs the
    row itself: a stale event the bucket shows current, issue 34)."""
    rt = LocalRuntime(emulator, local_settings(), versioning="Enabled")
    rt.faithful.put(KEY, "one")
    rt.flush()
    rt.drain()
    row = rt.ledger.get(rt.resources.bucket, KEY)
    assert row is not None
    state = RowState(True, row.version_id, row.etag, row.size)
    meta = WriteMeta(
        rt.resources.bucket,
        KEY,
        KEY,
        "Object Created/PutObject",
        "newer-sequencer",
        "live",
        normalize(FORGED),
        FORGED,
    )
    assert rt.ledger.apply_if_newer(state, meta).applied
    rt.faithful.put(KEY, "two")
    rt.flush(Chaos(seed=0, drop=1.0))
    rt.drain()
    assert not rt.compare().converged  # the real write's event was lost
    return rt


@pytest.mark.contract("C7", "C12", "C15")
@pytest.mark.parametrize("source", ["listing", "inventory"])
def test_one_reconciliation_puts_a_forged_sequencer_right(emulator: Any, source: str) -> None:
    rt = _poisoned(emulator)
    report = rt.reconcile(source)
    assert report.drift["sequencer_contradicted"] + report.drift["content_mismatch"] == 1
    assert rt.compare().converged
    row = rt.ledger.get(rt.resources.bucket, KEY)
    assert row is not None and row.seq is None
    assert row.reason == "sequencer-reset: sequencer-length"
    # later real events apply again
    rt.faithful.put(KEY, "three")
    rt.flush()
    rt.drain()
    assert rt.compare().converged
    assert rt.check_effects() == []


@pytest.mark.contract("C4", "C11", "C15")
def test_a_forged_delete_of_a_key_the_bucket_holds_runs_nothing(emulator: Any) -> None:
    rt = LocalRuntime(emulator, local_settings(), versioning="Enabled")
    rt.faithful.put(KEY, "one")
    rt.flush()
    rt.drain()
    runs = len(rt.effects)
    before = rt.ledger.get(rt.resources.bucket, KEY)
    # a delete with a valid-shaped, current sequencer, sent straight to the ingest queue
    doc = load_sample("awsdocs-s3ug__eventbridge-ObjectDeleted-DeleteObject.json")
    assert isinstance(doc, dict)
    doc["detail"]["bucket"]["name"] = rt.resources.bucket
    obj = doc["detail"]["object"]
    obj["key"] = quote_plus(KEY, safe="/")
    obj["sequencer"] = f"00{int(time.time()):08X}FFFFFFFFFF"
    obj.pop("version-id", None)
    doc["detail"].pop("deletion-type", None)
    rt.send_raw(json.dumps(doc))
    rt.drain()
    assert rt.compare().converged
    assert rt.ledger.get(rt.resources.bucket, KEY) == before
    assert rt.effects[runs:] == []  # no processor call at all


@pytest.mark.contract("C7", "C12")
def test_the_repair_command_resets_a_poisoned_row(
    emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = _poisoned(emulator)
    env = _stack(monkeypatch, rt)
    # the pipeline's queue is played where the command would wait a second
    monkeypatch.setattr(repair_commands, "wait_step", lambda seconds: rt.drain())
    result = CliRunner().invoke(app, ["repair", KEY, "--json"], env=env)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["due"] == ["state-differs", "sequencer-contradicted: sequencer-length"]
    assert doc["queued"] and doc["settled"] and doc["agrees"]
    assert doc["before"]["sequencer"] == FORGED and doc["after"]["sequencer"] is None
    assert doc["decision"]["reason"] == "sequencer-reset: sequencer-length"
    assert rt.compare().converged
    # again: nothing due, nothing sent
    again = CliRunner().invoke(app, ["repair", KEY], env=env)
    assert again.exit_code == 0 and "nothing due" in again.stdout
    # an unknown bucket is an AWS-side error of the stack (exit 3)
    assert CliRunner().invoke(app, ["repair", KEY, "--bucket", "nope"], env=env).exit_code == 3
