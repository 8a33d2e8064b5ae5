"""The effect hook's pieces that need no ledger: loading a processor, change ids, leases, and
the example sidecar processor (CONTRACT C8, C11)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import boto3
import pytest
from moto import mock_aws

from s3ingest.settings import Settings
from s3ingest_examples import sidecar
from s3ingest_fn.adapters.s3_objects import S3ContentReader
from s3ingest_fn.core.effects import (
    LEASE_SKEW_MS,
    MIN_EFFECT_MS,
    AppliedChange,
    EffectRunner,
    PinnedContent,
    change_id,
    load_processor,
)
from s3ingest_fn.core.model import TransientError
from s3ingest_fn.core.row import Decision, LedgerRow
from tests.fakes import FakeContentReader


def test_load_processor_imports_module_colon_function() -> None:
    assert load_processor("s3ingest_examples.sidecar:process") is sidecar.process


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("s3ingest_examples.sidecar", "is not 'package.module:function'"),
        ("no_such_module_xyz:run", "cannot be imported"),
        ("s3ingest_examples.sidecar:DEFAULT_PREFIX", "is not a callable"),
        ("s3ingest_examples.sidecar:missing", "is not a callable"),
    ],
)
def test_load_processor_errors_are_clear(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_processor(spec)


def test_settings_validate_the_processor_spec() -> None:
    assert Settings(processor="pkg.mod:fn").problems() == []
    assert any("processor" in p for p in Settings(processor="pkg.mod").problems())
    assert any("processorPackageDir" in p for p in Settings(processor_package_dir="x").problems())


@pytest.mark.contract("C11")
def test_change_id_is_deterministic_and_distinguishes_changes() -> None:
    a = change_id("b", "k", "00AA", True, "v1", "e1")
    assert a == change_id("b", "k", "00AA", True, "v1", "e1") and len(a) == 32
    others = {
        change_id("b", "k", "00AB", True, "v1", "e1"),
        change_id("b", "k", "00AA", False, None, None),
        change_id("b2", "k", "00AA", True, "v1", "e1"),
        change_id("b", "k2", "00AA", True, "v1", "e1"),
        change_id("b", "k", None, True, "v1", "e1"),
    }
    assert a not in others and len(others) == 5


class Ctx:
    def __init__(self, ms: int) -> None:
        self.ms = ms

    def get_remaining_time_in_millis(self) -> int:
        return self.ms


@pytest.mark.contract("C11")
def test_the_lease_lasts_the_invocation_remaining_time_plus_skew() -> None:
    runner = EffectRunner(lambda c, x: None, FakeContentReader(), clock_ms=lambda: 1_000)
    runner.bind_context(Ctx(25_000))
    claim = runner.claim("k", "created")
    assert claim.now_ms == 1_000 and claim.lease_until_ms == 1_000 + 25_000 + LEASE_SKEW_MS
    runner.bind_context(Ctx(MIN_EFFECT_MS - 1))
    with pytest.raises(TransientError, match="effect not started"):
        runner.claim("k", "created")


def _change(**kw: Any) -> AppliedChange:
    base: dict[str, Any] = {
        "bucket": "landing",
        "key": "in/a b.json",
        "kind": "created",
        "sequencer": "00AA",
        "version_id": None,
        "etag": None,
        "size": 2,
        "source": "live",
        "event_name": "Object Created/PutObject",
        "change_id": "c" * 32,
        "token": 7,
    }
    return AppliedChange(**(base | kw))


@mock_aws
def test_sidecar_describes_the_pinned_bytes_and_deletes_on_remove() -> None:
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="landing")
    s3.create_bucket(Bucket="out")
    put = s3.put_object(Bucket="landing", Key="in/a b.json", Body=b'{"a": 1}\n')
    change = _change(etag=put["ETag"].strip('"'), size=9)
    sidecar.write_sidecar(
        change, PinnedContent(S3ContentReader(s3), change), s3=s3, output_bucket="out"
    )
    doc = json.loads(s3.get_object(Bucket="out", Key="sidecars/in/a b.json.json")["Body"].read())
    assert doc["json"] is True and doc["lines"] == 1 and doc["bytes"] == 9
    assert doc["changeId"] == "c" * 32 and doc["token"] == 7
    sidecar.write_sidecar(_change(kind="removed"), None, s3=s3, output_bucket="out")
    assert s3.list_objects_v2(Bucket="out")["KeyCount"] == 0


@mock_aws
def test_sidecar_never_processes_its_own_output() -> None:
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="landing")
    own = _change(key="sidecars/x.json")
    sidecar.write_sidecar(own, None, s3=s3, output_bucket="landing")  # would delete: skipped
    sidecar.write_sidecar(
        own, PinnedContent(S3ContentReader(s3), own), s3=s3, output_bucket="landing"
    )
    assert s3.list_objects_v2(Bucket="landing")["KeyCount"] == 0


@pytest.mark.contract("C11")
def test_the_row_names_its_changes_own_decision_past_later_sequencer_moves() -> None:
    # GIVEN a row whose change a repair applied (no sequencer), then two live events of the same
    # version that only moved the row's sequencer
    repair = Decision(seq="-", event="Repair/test", reason="r", source="repair", at=1, state="p")
    moves = [
        Decision(
            seq=s, event="Object Created/PutObject", reason="m", source="live", at=2, state="p"
        )
        for s in ("00A2", "00A1")
    ]
    row = LedgerRow(
        bucket="b", key="k", present=True, source="live", change_id="c1", history=(*moves, repair)
    )
    # THEN the change's decision is the repair's, though the row's last write was live
    assert row.change_decision is repair
    # and a sequenced change is found by its own sequencer
    live = replace(row, change_seq="00A1", history=(moves[0], moves[1], repair))
    assert live.change_decision is moves[1]
    # and a row whose change left the history, or that holds none, names no decision
    assert replace(row, history=tuple(moves)).change_decision is None
    assert replace(row, change_id=None).change_decision is None
