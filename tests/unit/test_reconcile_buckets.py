"""Reconciliation over several buckets: each bucket's reconciler from the function's environment
(``SCOPE``, ``INVENTORIES`` and the single-bucket variables), the fan-out steps' bucket, and the
result of a run over several buckets."""

from __future__ import annotations

import json

import pytest

from s3ingest_fn import wiring
from s3ingest_fn.core.row import LedgerRow
from s3ingest_fn.core.scope import BucketScope
from s3ingest_fn.services.fanout import FanOut, bucket_of
from s3ingest_fn.services.reconcile import Reconciler, ReconcileReport, combine_reports
from tests.fakes import (
    FakeBucket,
    FakeBucketListing,
    FakeInventoryStore,
    FakeLedger,
    FakeLedgerScanner,
    FakeRepairQueue,
)

pytestmark = pytest.mark.contract("C12")


def test_inventories_come_from_the_list_then_the_single_bucket_variables() -> None:
    env = {
        "INVENTORIES": json.dumps(
            [{"name": "two", "bucket": "inv", "prefix": "inventory/two/s3ingest-daily/"}]
        ),
        "INVENTORY_BUCKET_NAME": "inv",
        "INVENTORY_PREFIX": "inventory/one/s3ingest-daily/",
    }
    assert wiring.inventories_from_env(env, "one") == {
        "one": ("inv", "inventory/one/s3ingest-daily/"),
        "two": ("inv", "inventory/two/s3ingest-daily/"),
    }
    assert wiring.inventories_from_env({}, "one") == {}
    with pytest.raises(ValueError, match="INVENTORIES is not JSON"):
        wiring.inventories_from_env({"INVENTORIES": "[oops"}, "one")
    with pytest.raises(ValueError, match="without name or bucket"):
        wiring.inventories_from_env({"INVENTORIES": '[{"name": "x"}]'}, "one")


def test_each_bucket_gets_its_scope_and_inventory(monkeypatch: pytest.MonkeyPatch) -> None:
    scope = [
        {"name": "one", "prefixes": [], "suffixes": []},
        {"name": "two", "prefixes": ["in/"], "suffixes": [".csv"]},
    ]
    for name, value in {
        "LEDGER_TABLE_NAME": "ledger",
        "INGEST_QUEUE_URL": "https://sqs/q",
        "BUCKET_NAME": "one",
        "SCOPE": json.dumps(scope),
        "INVENTORY_BUCKET_NAME": "inv",
        "INVENTORY_PREFIX": "inventory/one/s3ingest-daily/",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("INVENTORIES", raising=False)
    wiring.function_reconciler.cache_clear()
    try:
        assert wiring.function_reconcile_buckets() == ("one", "two")
        first, default = wiring.function_reconciler("one"), wiring.function_reconciler()
        assert (default.bucket, default.inventory_bucket) == ("one", "inv")
        assert first.inventory_prefix == "inventory/one/s3ingest-daily/"
        two = wiring.function_reconciler("two")
        assert (two.bucket, two.inventory_bucket) == ("two", None)  # reconciled by listing
        assert two.scope == BucketScope("two", ("in/",), (".csv",))
        with pytest.raises(ValueError, match="not one of the pipeline's"):
            wiring.function_reconciler("three")
    finally:
        wiring.function_reconciler.cache_clear()


def test_a_fan_out_step_finds_its_bucket() -> None:
    assert bucket_of({"bucket": "two", "runId": "one/abc"}) == "two"
    assert bucket_of({"plan": {"bucket": "two", "runId": "x"}}) == "two"
    assert bucket_of({"runId": "two/0123abcd", "partition": 3}) == "two"
    assert bucket_of({"runId": "0123abcd"}) is None  # a run started before several buckets
    assert bucket_of({}) is None


def test_a_ledger_shard_leaves_out_of_scope_rows_out_and_counts_them() -> None:
    ledger = FakeLedger()
    for key in ("in/a.csv", "in/b.txt", "old/c.csv"):
        ledger.rows[("two", key)] = LedgerRow("two", key, True, etag="e", updated_at=1)
    store = FakeInventoryStore()
    r = Reconciler(
        objects=FakeBucket(),
        listing=FakeBucketListing(),
        inventory=store,
        repairs=FakeRepairQueue(),
        scanner=FakeLedgerScanner(ledger),
        bucket="two",
        table="ledger",
        queue_url="q",
        inventory_bucket="inv",
        scope=BucketScope("two", ("in/",), (".csv",)),
    )
    out = FanOut(r).shard_ledger(
        {"runId": "two/run", "segment": 0, "segments": 1, "partitions": 1, "prefix": ""}
    )
    assert (out["rows"], out["outOfScope"]) == (1, 2)
    (shard,) = [k for b, k in store.objects if b == "inv"]
    assert shard.startswith("reconcile-work/two/run/ledger/")
    summary = FanOut.summarize({"plan": {"bucket": "two"}, "ledger": [out], "partitions": []})
    assert (summary["bucket"], summary["out_of_scope"]) == ("two", 2)


def test_one_bucket_keeps_the_single_report_shape_several_add_up() -> None:
    one = ReconcileReport(source="listing", bucket="one", prefix="", dry_run=False)
    one.drift["missing"], one.repairs_queued, one.bucket_keys = 2, 2, 10
    one.samples = [{"kind": "missing", "key": "a"}]
    assert combine_reports([one]) == one.as_dict()
    two = ReconcileReport(source="inventory", bucket="two", prefix="", dry_run=False)
    two.drift["deleted_but_live"], two.repairs_queued, two.out_of_scope = 1, 1, 4
    both = combine_reports([one, two])
    assert both["buckets"] == ["one", "two"] and both["bucket"] is None
    assert both["source"] == "mixed"
    assert both["drift"] == {
        "missing": 2,
        "deleted_but_live": 1,
        "content_mismatch": 0,
        "sequencer_contradicted": 0,
    }
    assert (both["drift_total"], both["repairs_queued"], both["out_of_scope"]) == (3, 3, 4)
    assert both["samples"] == [{"kind": "missing", "key": "a", "bucket": "one"}]
    assert [r["bucket"] for r in both["reports"]] == ["one", "two"]
