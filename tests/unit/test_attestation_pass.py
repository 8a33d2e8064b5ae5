"""The attestation's trees from the reconciliation's own pass (issue 38 item 4): the same
document and leaves as ``attest`` over the same snapshot, in the per-key pass and in columns,
built by key-range partitions combined, and no second read for the scheduled attestation."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from s3ingest_fn.core.attestation import Fragment, combine
from s3ingest_fn.core.effects import EffectTarget
from s3ingest_fn.core.row import LedgerRow
from s3ingest_fn.core.scope import BucketScope
from s3ingest_fn.services.attestation import AttestRequest, attest, leaf_from_json
from s3ingest_fn.services.attestation_store import scheduled, tap_for
from s3ingest_fn.services.reconcile import Reconciler, ReconcileRequest
from tests.attestation_world import reconciler, snapshot
from tests.unit.test_reconcile_columnar import (
    BUCKET,
    TAKEN,
    TARGETS,
    _per_key_rows,
    world,
)


def _from_the_pass(r: Reconciler, prefix: str, margin: int) -> Any:
    tap = tap_for(r, clock=r.now)
    r.run(ReconcileRequest(prefix=prefix, dry_run=True, margin_ms=margin), tap=tap)
    return tap.attestation(stack="s", scope=r.scope.as_dict(), prefix=prefix)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32),
    prefix=st.sampled_from(["", "a", "%", "日本"]),
    scope=st.sampled_from([None, BucketScope(BUCKET, prefixes=("a", "+"), suffixes=("b",))]),
    margin=st.sampled_from([0, 5_000]),
    page=st.integers(1, 7),
    targets=st.sampled_from(TARGETS),
    versioned=st.booleans(),
    in_columns=st.booleans(),
)
def test_the_pass_attests_what_attest_attests_over_the_same_snapshot(
    seed: int,
    prefix: str,
    scope: BucketScope | None,
    margin: int,
    page: int,
    targets: tuple[EffectTarget, ...],
    versioned: bool,
    in_columns: bool,
) -> None:
    # GIVEN a report and a ledger with hostile keys, drift, recent changes and every effect
    lines, rows, kw = snapshot(seed, versioned=versioned, page=page, scope=scope, targets=targets)
    # WHEN attest reads the snapshot on its own, and the reconciliation's pass feeds a tap
    alone, _, _ = reconciler(lines, rows, in_columns=in_columns, **kw)
    made = attest(
        alone,
        AttestRequest(source="inventory", prefix=prefix, margin_ms=margin),
        stack="s",
        clock=alone.now,
    )
    passed = _from_the_pass(reconciler(lines, rows, in_columns=in_columns, **kw)[0], prefix, margin)
    # THEN the documents (roots, counts, differences, inputs) and the leaves are the same bytes
    assert passed.leaves == made.leaves
    assert passed.document == made.document
    assert passed.differences == made.differences


def test_a_pass_over_the_same_snapshot_twice_gives_byte_identical_roots() -> None:
    lines, rows = world(7, n=200)
    docs = [
        _from_the_pass(reconciler(lines, rows, in_columns=c)[0], "", 0).document
        for c in (True, False, True)
    ]
    assert docs[0]["roots"] == docs[1]["roots"] == docs[2]["roots"]
    assert docs[0]["counts"]["keys"] > 30 and docs[0]["differences_total"] > 0


@pytest.mark.parametrize("parts", [1, 2, 5, 16, 17, 100])
def test_key_range_partitions_combined_give_the_whole_passs_roots(parts: int) -> None:
    # GIVEN the pass's leaves (in key order), cut into key ranges
    lines, rows = world(11, n=300)
    made = _from_the_pass(reconciler(lines, rows, in_columns=True)[0], "", 0)
    entries = [json.loads(x) for x in made.leaves.splitlines()]
    hashes = [
        (
            leaf_from_json(BUCKET, e["key"], e["bucket"]).hash(),
            leaf_from_json(BUCKET, e["key"], e["ledger"]).hash(),
        )
        for e in entries
        if not e.get("skipped")
    ]
    n = len(hashes)
    bounds = [n * p // parts for p in range(parts + 1)]
    # WHEN each range builds its fragment from its first index and they are combined in order
    for side in (0, 1):
        fragments = [
            Fragment(a).extend(h[side] for h in hashes[a:b]) for a, b in itertools.pairwise(bounds)
        ]
        # THEN the root is the whole build's
        root = combine(fragments).root().hex()
        assert root == made.document["roots"]["bucket" if side == 0 else "ledger"]


@pytest.mark.parametrize("in_columns", [True, False])
def test_the_scheduled_attestation_reads_neither_the_report_nor_the_ledger_again(
    in_columns: bool,
) -> None:
    # GIVEN an inventory reconciliation that repairs drift, its pass feeding a tap
    lines, rows = world(3, n=120)
    r, store, scanner = reconciler(lines, rows, in_columns=in_columns)
    tap = tap_for(r, clock=r.now)
    report = r.run(ReconcileRequest(margin_ms=0), tap=tap)
    assert report.repairs_queued > 0
    requests, gets = scanner.requests, dict(store.gets)
    # WHEN the scheduled attestation is made after the repairs (none applied here)
    read: list[str] = []

    def read_row(key: str) -> LedgerRow | None:
        read.append(key)
        return next((x for x in _per_key_rows(rows) if x.key == key), None)

    class S3:
        def put_object(self, **kw: Any) -> dict[str, Any]:
            return {"VersionId": "v"}

    stored = scheduled(
        r,
        S3(),
        store_bucket="store",
        stack="s",
        source="inventory",
        margin_ms=0,
        tap=tap,
        read_row=read_row,
    )
    # THEN no Scan request and no GetObject of the report or its manifest was made again;
    # only the repaired keys' rows were read, one by one
    assert scanner.requests == requests
    assert store.gets == gets and all(n == 1 for n in gets.values())
    assert sorted(read) == sorted(set(tap.repaired)) and len(read) == report.repairs_queued
    # and, the repairs not applied, the document is what attest makes of the same snapshot
    fresh, _, _ = reconciler(lines, rows, in_columns=in_columns)
    made = attest(fresh, AttestRequest(source="inventory", margin_ms=0), stack="s", clock=r.now)
    assert stored["document"]["roots"] == made.document["roots"]
    assert stored["document"]["equal"] is False


def test_a_repaired_row_replaces_the_passs_and_is_skipped_as_changed_after_the_cutoff() -> None:
    # GIVEN a key the ledger missed, repaired by the run
    lines = [[BUCKET, "k", "v1", "true", "false", "1", "2027-01-15T00:00:00.000Z", "e" * 32]]
    for in_columns in (True, False):
        r, _, _ = reconciler(lines, [], in_columns=in_columns)
        r.objects.put(BUCKET, "k", "v1", "e" * 32)  # type: ignore[attr-defined]
        tap = tap_for(r, clock=r.now)
        r.run(ReconcileRequest(margin_ms=0), tap=tap)
        assert tap.repaired == ["k"]
        # WHEN the repair wrote its row after the snapshot
        row = LedgerRow(BUCKET, "k", True, version_id="v1", etag="e" * 32, updated_at=TAKEN + 5)
        tap.recheck({"k": row})
        doc = tap.attestation(stack="s", scope={}, prefix="").document
        # THEN the key is skipped, as any key changed after the snapshot's cutoff
        assert (doc["counts"]["keys"], doc["counts"]["skipped_recent"]) == (0, 1)
