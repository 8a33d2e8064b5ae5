"""The fan-out reconciliation's attestation (issue 38 item 4): each partition's sorted run of
leaves, merged by key order, gives the document and leaves ``attest`` makes of the same
snapshot, for one partition and several; each inventory data file and Scan segment is read
once."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from s3ingest_fn.core.effects import EffectTarget
from s3ingest_fn.core.row import DEFAULT_PROCESSOR, LedgerRow
from s3ingest_fn.core.scope import BucketScope
from s3ingest_fn.services import attestation_fanout
from s3ingest_fn.services.attestation import Attestation, AttestRequest, attest
from s3ingest_fn.services.fanout import WORK_PREFIX, FanOut
from s3ingest_fn.services.reconcile import Reconciler
from tests.attestation_world import MANIFEST, PREFIX, reconciler, snapshot
from tests.unit.test_reconcile_columnar import BUCKET, TAKEN, TARGETS, _per_key_rows, world

BOTH = (EffectTarget(DEFAULT_PROCESSOR, version=2), EffectTarget("thumbs", version=3))


def fan_out(
    r: Reconciler,
    *,
    partitions: int,
    segments: int = 3,
    prefix: str = "",
    margin_s: int = 0,
    dry_run: bool = True,
    read_row: Any = None,
) -> tuple[Attestation, dict[str, Any]]:
    """Every step of a fan-out run, in the machine's order, attesting (the plan's ``attest``
    on, dry run or not); the attestation and the summary."""
    fan = FanOut(r)
    plan = fan.plan(
        {
            "manifest": MANIFEST,
            "partitions": partitions,
            "segments": segments,
            "prefix": prefix,
            "dryRun": dry_run,
            "marginSeconds": margin_s,
        }
    )
    plan["attest"] = True  # a dry run's plan does not attest; the steps do as told
    common = {"runId": plan["runId"], "partitions": partitions, "prefix": prefix}
    inventory = [
        fan.shard_inventory({**common, "manifest": plan["manifest"], "file": f})
        for f in plan["files"]
    ]
    ledger = [
        fan.shard_ledger({**common, "segment": s, "segments": segments})
        for s in plan["segmentList"]
    ]
    fields = ("createdMs", "marginMs", "dryRun", "compareVersions", "compareEtags", "attest")
    parts = [
        fan.diff_partition({**common, **{f: plan[f] for f in fields}, "partition": p})
        for p in plan["partitionList"]
    ]
    event = {"plan": plan, "inventory": inventory, "ledger": ledger, "partitions": parts}
    made = fan.attestation(event, stack="s", read_row=read_row, clock=r.now)
    return made, FanOut.summarize(event)


def _alone(lines: list[list[str]], rows: list[LedgerRow], prefix: str, margin: int, **kw: Any):
    alone, _, _ = reconciler(lines, rows, in_columns=False, **kw)
    request = AttestRequest(source="inventory", prefix=prefix, margin_ms=margin)
    return attest(alone, request, stack="s", clock=alone.now)


def _without_requests(document: dict[str, Any]) -> dict[str, Any]:
    """The document less the Scan's request count (the fan-out's segments are not the single
    Scan's: each counts its own requests)."""
    doc = json.loads(json.dumps(document))
    doc["inputs"]["ledger"].pop("requests")
    return doc


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32),
    partitions=st.sampled_from([1, 2, 5, 16]),
    segments=st.integers(1, 4),
    prefix=st.sampled_from(["", "a", "%", "日本"]),
    scope=st.sampled_from([None, BucketScope(BUCKET, prefixes=("a", "+"), suffixes=("b",))]),
    margin=st.sampled_from([0, 5]),
    page=st.integers(1, 7),
    targets=st.sampled_from([*TARGETS, BOTH]),
    versioned=st.booleans(),
    dry_run=st.booleans(),
)
def test_the_fan_out_attests_what_attest_attests_over_the_same_snapshot(
    seed: int,
    partitions: int,
    segments: int,
    prefix: str,
    scope: BucketScope | None,
    margin: int,
    page: int,
    targets: tuple[EffectTarget, ...],
    versioned: bool,
    dry_run: bool,
) -> None:
    # GIVEN a report and a ledger with hostile keys, drift, recent changes and every effect
    lines, rows, kw = snapshot(seed, versioned=versioned, page=page, scope=scope, targets=targets)
    made = _alone(lines, rows, prefix, margin * 1000, **kw)
    # WHEN the fan-out reconciles it in partitions (repairing, the rows read again unchanged)
    r, _, scanner = reconciler(lines, rows, in_columns=False, **kw)
    scanned = {x.key: x for x in _per_key_rows(rows)}
    fanned, _ = fan_out(
        r,
        partitions=partitions,
        segments=segments,
        prefix=prefix,
        margin_s=margin,
        dry_run=dry_run,
        read_row=scanned.get,
    )
    # THEN the leaves are the same bytes, the document the same but for the Scan's requests
    assert fanned.leaves == made.leaves
    assert _without_requests(fanned.document) == _without_requests(made.document)
    assert fanned.document["inputs"]["ledger"]["requests"] == scanner.requests
    assert fanned.differences == made.differences


@pytest.mark.parametrize("partitions", [1, 4])
def test_the_fan_out_reads_each_data_file_and_segment_once_and_rereads_repaired_rows(
    partitions: int,
) -> None:
    # GIVEN a drifted snapshot reconciled by the fan-out, repairing
    lines, rows = world(3, n=120)
    r, store, scanner = reconciler(lines, rows, in_columns=False)
    read: list[str] = []
    scanned = {x.key: x for x in _per_key_rows(rows)}

    def read_row(key: str) -> LedgerRow | None:
        read.append(key)
        return scanned.get(key)

    # WHEN it attests from its own pass
    made, summary = fan_out(r, partitions=partitions, segments=3, dry_run=False, read_row=read_row)
    # THEN each data file was read once, and the Scan made each segment's requests once
    data = [k for k in store.gets if "/data/" in k]
    assert data and all(store.gets[k] == 1 for k in data)
    assert scanner.requests == made.document["inputs"]["ledger"]["requests"]
    assert scanner.requests == sum(-(-len(rows[s::3]) // 3) or 1 for s in range(3))
    # and each run object once; only the repaired keys' rows were read again, once each
    runs = [k for k in store.gets if k.startswith(WORK_PREFIX) and "/attest/" in k]
    assert runs and all(store.gets[k] == 1 for k in runs)
    assert summary["repairs_queued"] > 0 and len(read) == len(set(read)) > 0
    # and the repairs not applied, the roots are attest's of the same snapshot
    assert made.document["roots"] == _alone(lines, rows, "", 0).document["roots"]
    assert made.document["equal"] is False


def test_a_dropped_event_names_its_key_through_the_partitions() -> None:
    # GIVEN a converged bucket and ledger but one object whose event was dropped
    day = "2027-01-15T00:00:00.000Z"
    keys = [f"k{i:03d}" for i in range(40)]
    lines = [[BUCKET, k, "v1", "true", "false", "1", day, "e" * 32] for k in keys]
    rows = [
        LedgerRow(BUCKET, k, True, version_id="v1", etag="e" * 32, updated_at=TAKEN - 1)
        for k in keys
        if k != "k017"
    ]
    # WHEN the fan-out attests it in several partitions, dry run (no repair)
    made, _ = fan_out(reconciler(lines, rows, in_columns=False)[0], partitions=7)
    # THEN the roots differ and the tree's path names that key alone
    doc = made.document
    assert doc["equal"] is False and doc["counts"]["keys"] == 40
    assert [d["key"] for d in doc["differences"]] == ["k017"]
    assert doc["differences"][0]["path"] == [1, 1]


def test_runs_are_cut_into_objects_and_merged_in_key_order(monkeypatch: Any) -> None:
    # GIVEN runs cut every 5 lines
    monkeypatch.setattr(attestation_fanout, "RUN_LINES", 5)
    lines, rows = world(5, n=150)
    r, store, _ = reconciler(lines, rows, in_columns=False)
    made, _ = fan_out(r, partitions=3)
    # THEN several objects a partition, and the leaves those of attest
    objects = [k for k in store.gets if "/attest/0000/" in k]
    assert len(objects) > 2
    assert made.leaves == _alone(lines, rows, "", 0).leaves
    assert PREFIX  # the report's folder, as the single pass's tests write it


@pytest.mark.parametrize(
    ("asked", "dry_run", "attests"),
    [(True, False, True), (True, True, False), (False, False, False), (None, False, False)],
)
def test_the_plan_attests_when_asked_and_not_a_dry_run(
    asked: bool | None, dry_run: bool, attests: bool
) -> None:
    r, _, _ = reconciler([], [], in_columns=False)
    event: dict[str, Any] = {"manifest": MANIFEST, "dryRun": dry_run}
    if asked is not None:
        event["attest"] = asked
    assert FanOut(r).plan(event)["attest"] is attests


def test_a_partition_not_attesting_writes_no_run() -> None:
    lines, rows = world(9, n=60)
    r, store, _ = reconciler(lines, rows, in_columns=False)
    fan = FanOut(r)
    plan = fan.plan({"manifest": MANIFEST, "partitions": 2, "segments": 1, "dryRun": True})
    common = {"runId": plan["runId"], "partitions": 2, "prefix": ""}
    for f in plan["files"]:
        fan.shard_inventory({**common, "manifest": plan["manifest"], "file": f})
    fan.shard_ledger({**common, "segment": 0, "segments": 1})
    fields = ("createdMs", "marginMs", "dryRun", "compareVersions", "compareEtags", "attest")
    result = fan.diff_partition({**common, **{f: plan[f] for f in fields}, "partition": 0})
    assert "attestLines" not in result
    assert not [k for k in store.keys("inv", WORK_PREFIX) if "/attest/" in k]


@pytest.mark.parametrize(("store", "attests"), [("", False), ("attestations-bucket", True)])
def test_the_step_function_plans_no_attestation_without_a_place_to_keep_it(
    monkeypatch: pytest.MonkeyPatch, store: str, attests: bool
) -> None:
    from s3ingest_fn.config import use_env
    from s3ingest_fn.handlers import reconcile_fanout

    r, _, _ = reconciler([], [], in_columns=False)
    monkeypatch.setattr(reconcile_fanout.wiring, "function_reconciler", lambda bucket: r)

    class Context:
        function_name = "fan-out"
        memory_limit_in_mb = 3008
        invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:fan-out"
        aws_request_id = "req-1"

    env = {"ATTESTATION_BUCKET_NAME": store} if store else {}
    with use_env(env):
        plan = reconcile_fanout.handler(
            {"action": "plan", "manifest": MANIFEST, "attest": True}, Context()
        )
    assert plan["attest"] is attests
