"""The listing backfill's key ranges and shards over an in-memory listing (issue 15): shards are
contiguous, cover every key exactly once whatever the keys, and are listed page by page from
their checkpoints."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from s3ingest_fn.core.decide import IngestService
from s3ingest_fn.core.model import InventoryRow, ObjectState
from s3ingest_fn.core.ports import VersionPage
from s3ingest_fn.core.scope import BucketScope, Scope
from s3ingest_fn.services.listing_backfill import (
    PLAN_PAYLOAD_BYTES,
    ListingBackfill,
    Shard,
    before,
    totals,
    upper,
)
from tests.fakes import FakeBucket, FakeInventoryStore, FakeLedger

BUCKET = "landing"


class FakeShardListing:
    """The :class:`~s3ingest_fn.core.ports.ShardListing` port over ``{key: [versions]}`` (newest
    first; a version ``None`` is a delete marker), with S3's order and markers."""

    def __init__(self, objects: dict[str, list[str | None]]) -> None:
        self.objects = objects
        self.requests = 0

    def _entries(self, prefix: str) -> list[tuple[str, str, bool, bool]]:
        out = []
        for key in sorted(k for k in self.objects if k.startswith(prefix)):
            for i, version in enumerate(self.objects[key]):
                out.append((key, version or f"dm-{key}-{i}", i == 0, version is None))
        return out

    def versions(
        self,
        bucket: str,
        prefix: str,
        key_marker: str | None,
        version_marker: str | None,
        max_keys: int,
    ) -> VersionPage:
        self.requests += 1
        entries = self._entries(prefix)
        start = 0
        if key_marker is not None:
            if version_marker is None:
                start = next((i for i, e in enumerate(entries) if e[0] > key_marker), len(entries))
            else:
                start = next(
                    i + 1
                    for i, e in enumerate(entries)
                    if (e[0], e[1]) == (key_marker, version_marker)
                )
        page = entries[start : start + max_keys]
        rows = [
            InventoryRow(
                bucket, key, version, latest, marker, None if marker else f"e-{version}", 1, None
            )
            for key, version, latest, marker in page
        ]
        more = start + max_keys < len(entries)
        return VersionPage(rows, page[-1][0] if more else None, page[-1][1] if more else None)

    def keys_after(
        self, bucket: str, prefix: str, start_after: str | None, max_keys: int
    ) -> tuple[list[str], bool]:
        self.requests += 1
        current = sorted(
            k
            for k, versions in self.objects.items()
            if k.startswith(prefix)
            and versions[0] is not None
            and (start_after is None or k > start_after)
        )
        return current[:max_keys], len(current) > max_keys


def service_over(objects: dict[str, list[str | None]], scope: Scope) -> IngestService:
    bucket = FakeBucket()
    for key, versions in objects.items():
        if versions[0] is not None:
            bucket.objects[(BUCKET, key)] = ObjectState(True, versions[0], f"e-{versions[0]}", 1)
    return IngestService(FakeLedger(), bucket, scope=scope)


def backfill(
    objects: dict[str, list[str | None]], scope: Scope | None = None, **options: Any
) -> ListingBackfill:
    return ListingBackfill(
        listing=FakeShardListing(objects),
        store=FakeInventoryStore(),
        checkpoint_bucket="checkpoints",
        service=service_over(objects, scope or Scope((BucketScope(BUCKET),))),
        record_concurrency=2,
        **options,
    )


# -- key ranges ----------------------------------------------------------------------------------

key_text = st.text(
    alphabet=st.sampled_from(["a", "b", "z", "/", " ", "+", "%", "\t", "é", "\uffff", "😀"]),
    min_size=1,
    max_size=6,
)


@given(bound=key_text, key=key_text)
def test_a_key_is_after_before_b_exactly_when_it_is_not_below_b(bound: str, key: str) -> None:
    assert (key > before(bound)) == (key >= bound)


def test_before_is_a_short_marker_just_below() -> None:
    for bound in ("b", "é", "😀", "a\ue000", "x" * 1019 + "y"):
        low = before(bound)
        assert low < bound and len(low) == len(bound) + 1
    assert before("b") == "a\U0010ffff"
    assert before("a\ue000") == "a\ud7ff\U0010ffff"  # no surrogates
    assert before("a\x00") == "a"
    # a bound near S3's 1,024-byte key limit: the marker is no longer than a key (S3 refuses
    # longer markers), still below the bound; the keys between are listed twice, none lost
    long_bound = "x" * 1023 + "y"
    assert before(long_bound) == "x" * 1023
    assert all(len(before(b).encode()) <= 1024 for b in (long_bound, "é" * 512, "😀" * 256))
    with pytest.raises(ValueError):
        before("")


def test_a_plan_that_would_outgrow_the_state_payload_is_merged_pairwise() -> None:
    # 300 ranges whose bounds are 900-character keys: about 540 KB of JSON as planned
    stem = "p/" + "x" * 900
    objects: dict[str, list[str | None]] = {
        f"{stem}{c}{i}": ["v1"] for c in "abcdefghijklmnopqrstuvwxyz" for i in range(12)
    }
    bf = backfill(objects, probe_size=1, shard_keys=1, max_shards=400, max_probes=2000)
    plan = bf.plan(BUCKET, "r")
    shards = [Shard.of(s) for s in plan["shards"]]
    assert len(json.dumps(plan["shards"]).encode()) <= PLAN_PAYLOAD_BYTES
    assert [s.id for s in shards] == [f"{i:04d}" for i in range(len(shards))]
    for key in objects:
        assert sum(s.holds(key) for s in shards) == 1, key


def test_upper_is_the_first_string_past_a_prefix() -> None:
    assert upper("ab") == "ac"
    assert upper("a\U0010ffff") == "b"
    assert upper("a\ud7ff") == "a\ue000"
    assert upper("") is None and upper("\U0010ffff") is None


# -- plans ---------------------------------------------------------------------------------------

objects_strategy = st.dictionaries(
    key_text.map(lambda k: "k/" + k), st.sampled_from([["v1"], ["v2", "v1"], [None, "v1"]])
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=objects_strategy, probe=st.integers(1, 5), max_shards=st.integers(1, 12))
def test_shards_cover_every_key_exactly_once_and_listing_them_records_each(
    objects: dict[str, list[str | None]], probe: int, max_shards: int
) -> None:
    bf = backfill(objects, probe_size=probe, max_shards=max_shards, shard_keys=3, page_size=2)
    plan = bf.plan(BUCKET, "r")
    shards = [Shard.of(s) for s in plan["shards"]]
    assert plan["done"] == 0 and shards
    for key in objects:
        assert sum(s.holds(key) for s in shards) == 1, key
    results = []
    for shard in shards:
        while True:
            result = bf.list_shard("r", shard)
            if result["done"]:
                break
        results.append(result)
    total = totals(results)
    visible = sum(1 for v in objects.values() if v[0] is not None)
    assert total["listed"] == len(objects)
    assert total["recorded_without_head"] == visible
    assert total["not_visible"] == len(objects) - visible
    ledger = bf.service.ledger
    assert isinstance(ledger, FakeLedger)
    assert {k for (_, k) in ledger.rows} == {k for k, v in objects.items() if v[0] is not None}


def test_a_replanned_run_reads_its_stored_plan_and_leaves_out_finished_shards() -> None:
    objects: dict[str, list[str | None]] = {f"{c}/{i}": ["v1"] for c in "abcdef" for i in range(9)}
    bf = backfill(objects, probe_size=10, shard_keys=10, page_size=4)
    plan = bf.plan(BUCKET, "r")
    assert len(plan["shards"]) >= 3 and plan["probes"] > 0
    first = Shard.of(plan["shards"][0])
    while not bf.list_shard("r", first)["done"]:
        pass
    objects["0-new"] = ["v1"]  # the bucket changed: the stored plan still holds
    again = bf.plan(BUCKET, "r")
    assert again["probes"] == 0 and again["done"] == 1
    assert again["shards"] == plan["shards"][1:]
    # a finished shard is not listed again
    listing = bf.listing
    assert isinstance(listing, FakeShardListing)
    before_requests = listing.requests
    assert bf.list_shard("r", first)["done"] is True
    assert listing.requests == before_requests
    stored = json.loads(bf.store.read("checkpoints", f"backfill-listing/{BUCKET}/r/plan.json"))
    assert stored["shards"] == plan["shards"]


def test_a_bucket_with_key_filters_is_listed_by_its_prefixes() -> None:
    objects: dict[str, list[str | None]] = {
        "in/a.csv": ["v1"],
        "in/b.txt": ["v1"],
        "in/deep/c.csv": ["v1"],
        "out/d.csv": ["v1"],
    }
    scope = Scope((BucketScope(BUCKET, prefixes=("in/", "in/deep/"), suffixes=(".csv",)),))
    bf = backfill(objects, scope)
    assert bf.prefixes(BUCKET) == ["in/"]  # nested prefixes listed once
    plan = bf.plan(BUCKET, "r")
    results = [bf.list_shard("r", Shard.of(s)) for s in plan["shards"]]
    total = totals(results)
    assert (total["listed"], total["recorded_without_head"], total["out_of_scope"]) == (3, 2, 1)
    ledger = bf.service.ledger
    assert isinstance(ledger, FakeLedger)
    assert {k for (_, k) in ledger.rows} == {"in/a.csv", "in/deep/c.csv"}


@pytest.mark.parametrize("run", ["", "a/b", ".."])
def test_a_run_must_be_a_plain_name(run: str) -> None:
    with pytest.raises(ValueError, match="plain name"):
        backfill({}).plan(BUCKET, run)


def test_an_empty_bucket_is_one_empty_shard() -> None:
    bf = backfill({})
    plan = bf.plan(BUCKET, "r")
    (shard,) = plan["shards"]
    result = bf.list_shard("r", Shard.of(shard))
    assert result["done"] and result["counts"]["listed"] == 0
    assert bf.summarize(BUCKET, "r")["done"] == 1
