"""The effect hook's pieces that need no ledger: loading a processor, change ids, leases, and
the example sidecar processor (CONTRACT C8, C11)."""

from __future__ import annotations

import hashlib
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
    doc = json.loads(
        s3.get_object(Bucket="out", Key="sidecars/landing/in/a b.json.json")["Body"].read()
    )
    assert doc["json"] is True and doc["lines"] == 1 and doc["bytes"] == 9
    assert doc["changeId"] == "c" * 32 and doc["token"] == 7
    sidecar.write_sidecar(_change(kind="removed"), None, s3=s3, output_bucket="out")
    assert s3.list_objects_v2(Bucket="out")["KeyCount"] == 0


@pytest.mark.contract("C1")
@mock_aws
def test_sidecars_of_two_buckets_holding_one_key_never_meet() -> None:
    s3 = boto3.client("s3", region_name="us-east-1")
    for name in ("landing", "landing-two", "out"):
        s3.create_bucket(Bucket=name)
    changes = {}
    for bucket, body in (("landing", b"1"), ("landing-two", b"22")):
        put = s3.put_object(Bucket=bucket, Key="in/a b.json", Body=body)
        changes[bucket] = _change(bucket=bucket, etag=put["ETag"].strip('"'), size=len(body))
        change = changes[bucket]
        sidecar.write_sidecar(
            change, PinnedContent(S3ContentReader(s3), change), s3=s3, output_bucket="out"
        )
    # the second bucket's object is removed: its sidecar goes, the first's stays
    removed = _change(bucket="landing-two", kind="removed")
    sidecar.write_sidecar(removed, None, s3=s3, output_bucket="out")
    listed = [o["Key"] for o in s3.list_objects_v2(Bucket="out")["Contents"]]
    assert listed == ["sidecars/landing/in/a b.json.json"]
    doc = json.loads(s3.get_object(Bucket="out", Key=listed[0])["Body"].read())
    assert (doc["bucket"], doc["key"], doc["bytes"]) == ("landing", "in/a b.json", 1)


def test_a_long_keys_sidecar_is_named_by_bucket_and_digest_within_s3s_limit() -> None:
    key = "k" * 1010
    first, second = sidecar.sidecar_key("landing", key), sidecar.sidecar_key("landing-two", key)
    assert first.startswith("sidecars/_sha256/landing/") and first.endswith(".json")
    assert second.startswith("sidecars/_sha256/landing-two/") and first != second
    assert max(len(first.encode()), len(second.encode())) <= sidecar.MAX_KEY_BYTES
    # a plain name never falls under the digests' folder: no bucket name starts with "_"
    assert sidecar.sidecar_key("landing", "_sha256/x") == "sidecars/landing/_sha256/x.json"


@pytest.mark.contract("C1")
def test_audit_records_are_named_by_bucket_and_key_within_s3s_limit() -> None:
    from s3ingest_examples import audit
    from s3ingest_processor import Change

    def change(bucket: str, key: str) -> Change:
        return Change(
            change_id="c" * 32,
            bucket=bucket,
            key=key,
            kind="created",
            sequencer=None,
            version_id=None,
            etag=None,
            size=1,
            source="live",
            event_name="Object Created/PutObject",
            token=3,
            lease_deadline_ms=None,
            processor="audit",
        )

    name = "000000000003-" + "c" * 32 + ".json"
    assert audit.record_key(change("b-one", "a")) == f"audit/b-one/a/{name}"
    assert audit.record_key(change("b-two", "a")) == f"audit/b-two/a/{name}"
    longest, bucket = "k" * 1024, "b" * 63  # S3's longest key and bucket name
    digest = hashlib.sha256(longest.encode()).hexdigest()
    hashed = audit.record_key(change(bucket, longest))
    assert hashed == f"audit/_sha256/{bucket}/{digest}/{name}"
    assert len(hashed.encode()) <= audit.MAX_KEY_BYTES


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
