"""The listing backfill (issue 15) against the emulator: plan, list every shard, summarize.

An existing bucket's objects (written before the pipeline: no events) are brought into the
ledger from a live listing, versioned and unversioned; a second run changes nothing; a run
interrupted (out of time, or failing) resumes from its checkpoints without listing a finished
page again; live sequenced events delivered while the listing runs do not regress anything; a
bucket's key filters keep other keys out of the ledger.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from s3ingest.local.emulator.chaos import Chaos
from s3ingest.local.stack.runtime import LocalRuntime
from s3ingest_fn import wiring
from s3ingest_fn.core.decide import IngestService
from s3ingest_fn.core.model import TransientError
from s3ingest_fn.core.ports import VersionPage
from s3ingest_fn.core.scope import BucketScope, Scope
from s3ingest_fn.services.listing_backfill import ListingBackfill, Shard
from tests.integration.test_convergence import Monotonic

#: Keys S3 allows that break naive code: spaces, ``+`` and ``%`` (form-encoding), a tab (the
#: only control character the emulator can list), unicode, and S3's longest key (1,024 bytes).
HOSTILE = [
    "dir/a b+c%2B.txt",
    "plus+plus",
    "pct%20pct",
    "tab\there",
    "ünïcödé/ключ/😀",
    "z" * 1024,
    "ß" * 512,
]


def keys(n: int) -> list[str]:
    """``n`` ordinary keys over a few folders, and the hostile ones."""
    folders = ("data/2024/01/", "data/2024/02/", "logs/", "images/raw/", "")
    return [f"{folders[i % len(folders)]}part-{i:05d}.bin" for i in range(n)] + HOSTILE


def existing(rt: LocalRuntime, names: list[str]) -> set[str]:
    """Write ``names`` straight to the bucket (no events: the bucket predates the pipeline);
    when versioned, overwrite every 5th and put a delete marker on every 7th. Returns the keys
    left hidden."""
    hidden = set()
    for i, key in enumerate(names):
        rt.s3.put_object(Bucket=rt.resources.bucket, Key=key, Body=f"v1 {i}".encode())
        if rt.resources.versioning and i % 5 == 0:
            rt.s3.put_object(Bucket=rt.resources.bucket, Key=key, Body=f"v2 {i}".encode())
        if i % 7 == 3:
            rt.s3.delete_object(Bucket=rt.resources.bucket, Key=key)
            hidden.add(key)
    return hidden


class RecordingListing:
    """The shard listing, recording every ListObjectVersions request (to prove none repeats)
    and calling ``after_page`` after each (live traffic's hook)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.pages: list[tuple[str, str, str | None, str | None]] = []
        self.after_page: Callable[[], None] | None = None

    def versions(
        self, bucket: str, prefix: str, key_marker: str | None, version_marker: str | None, n: int
    ) -> VersionPage:
        self.pages.append((bucket, prefix, key_marker, version_marker))
        page: VersionPage = self.inner.versions(bucket, prefix, key_marker, version_marker, n)
        if self.after_page is not None:
            self.after_page()
        return page

    def keys_after(
        self, bucket: str, prefix: str, start_after: str | None, n: int
    ) -> tuple[list[str], bool]:
        found: tuple[list[str], bool] = self.inner.keys_after(bucket, prefix, start_after, n)
        return found


def backfill(rt: LocalRuntime, service: IngestService | None = None) -> ListingBackfill:
    """A listing backfill on the runtime's bucket, small pages and probes (many shards)."""
    made = wiring.listing_backfill(
        s3=rt.s3,
        service=service or rt.service,
        checkpoint_bucket=rt.resources.inventory_bucket,
        record_concurrency=4,
        page_size=17,
        probe_size=20,
        shard_keys=40,
    )
    made.listing = RecordingListing(made.listing)
    return made


def run(bf: ListingBackfill, bucket: str, name: str) -> dict[str, Any]:
    """Plan, list every shard until done, summarize (what the state machine does)."""
    plan = bf.plan(bucket, name)
    for shard in plan["shards"]:
        while not bf.list_shard(name, Shard.of(shard))["done"]:
            pass
    return bf.summarize(bucket, name)


@pytest.fixture(params=["Enabled", None], ids=["versioned", "unversioned"])
def rt(request: pytest.FixtureRequest, emulator: Any) -> Iterator[LocalRuntime]:
    runtime = LocalRuntime(emulator, versioning=request.param)
    yield runtime
    runtime.close()


def test_an_existing_bucket_converges_without_heads_and_a_second_run_changes_nothing(
    rt: LocalRuntime,
) -> None:
    # GIVEN a bucket holding objects written before the pipeline (no events)
    names = keys(150)
    hidden = existing(rt, names)
    bucket = rt.resources.bucket
    bf = backfill(rt)
    # WHEN the listing backfill runs
    summary = run(bf, bucket, "first")
    # THEN the ledger equals the bucket, every visible key recorded without a HEAD
    comparison = rt.compare()
    assert comparison.differences == [] and comparison.converged
    visible = len(names) - len(hidden)
    counts, requests = summary["counts"], summary["requests"]
    assert summary["shards"] > 3 and summary["done"] == summary["shards"]
    assert counts["recorded_without_head"] == visible
    assert counts["observed_with_head"] == counts["duplicate"] == counts["out_of_scope"] == 0
    # a hidden key's latest entry is a delete marker (versioned); unversioned, it is gone
    assert counts["not_visible"] == (len(hidden) if rt.resources.versioning else 0)
    assert counts["listed"] == visible + counts["not_visible"]
    assert requests["head"] == requests["get"] == 0
    assert requests["write"] == visible  # one conditional write per key
    assert requests["list"] == counts["pages"] == requests["checkpoint"]
    rows = {r.key: r.rev for r in rt.ledger_rows()}
    assert set(rows) == set(names) - hidden
    # WHEN it runs again (another run: nothing checkpointed)
    again = run(backfill(rt), bucket, "second")
    # THEN every key is a duplicate and no row moved
    assert again["counts"]["duplicate"] == visible
    assert again["counts"]["recorded_without_head"] == again["counts"]["observed_with_head"] == 0
    assert again["requests"]["head"] == again["requests"]["get"] == 0
    assert {r.key: r.rev for r in rt.ledger_rows()} == rows


def test_an_interrupted_run_resumes_from_its_checkpoints(rt: LocalRuntime) -> None:
    names = keys(120)
    existing(rt, names)
    bucket = rt.resources.bucket
    bf = backfill(rt)
    listing = bf.listing
    assert isinstance(listing, RecordingListing)
    plan = bf.plan(bucket, "r1")
    shards = [Shard.of(s) for s in plan["shards"]]
    assert len(shards) >= 3
    size = {s.id: sum(s.holds(k) for k in names) for s in shards}
    big = max(shards[1:], key=lambda s: size[s.id])
    assert size[big.id] > bf.page_size  # more than one page
    other = next(s for s in shards[1:] if s is not big)
    # WHEN the first shard finishes, the biggest runs out of time after one page, and another
    # fails while recording its first page
    assert bf.list_shard("r1", shards[0])["done"]
    out_of_time = bf.list_shard("r1", big, remaining_ms=lambda: 1_000)
    assert out_of_time["done"] is False and out_of_time["counts"]["pages"] == 1
    flaky = Flaky(bf.service.ledger, fail_after=3)
    failing = dataclasses.replace(bf, service=dataclasses.replace(bf.service, ledger=flaky))
    with pytest.raises(TransientError):
        failing.list_shard("r1", other)
    # THEN planning the same run again leaves out the finished shard, keeps the same shards
    again = bf.plan(bucket, "r1")
    assert again["done"] == 1
    assert [s["id"] for s in again["shards"]] == [s.id for s in shards[1:]]
    assert again["probes"] == 0  # the stored plan, no probing
    for shard in again["shards"]:
        while not bf.list_shard("r1", Shard.of(shard))["done"]:
            pass
    summary = bf.summarize(bucket, "r1")
    assert summary["done"] == summary["shards"] == len(shards)
    assert rt.compare().converged
    # no page was listed twice, except the one that failed before its checkpoint
    repeated = {page: n for page, n in Counter(listing.pages).items() if n > 1}
    assert repeated == {(bucket, other.prefix, other.start_after, None): 2}


class Flaky:
    """A ledger whose writes fail (throttled) after ``fail_after`` of them."""

    def __init__(self, inner: Any, fail_after: int) -> None:
        self.inner = inner
        self.left = fail_after

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            if name != "get":
                self.left -= 1
                if self.left < 0:
                    raise TransientError("dynamodb: ProvisionedThroughputExceededException")
            return method(*args, **kwargs)

        return call


def test_live_events_delivered_during_the_listing_never_regress(rt: LocalRuntime) -> None:
    # GIVEN an existing bucket, onboarded: events flow from now on
    names = keys(80)
    existing(rt, names)
    monitor = Monotonic()
    rt.after_batch = monitor
    bf = backfill(rt)
    listing = bf.listing
    assert isinstance(listing, RecordingListing)
    ops = iter(range(10_000))

    def live_traffic() -> None:
        # overwrites, deletes and new keys while the listing runs, delivered reordered and
        # duplicated between pages
        i = next(ops)
        target = names[(i * 7) % len(names)]
        if i % 3 == 2:
            rt.faithful.delete(target)
        else:
            rt.faithful.put(target, f"live {i}")
        rt.faithful.put(f"new/{i:04d}", f"new {i}")
        if i % 2:
            rt.flush(Chaos(seed=i, duplicate=0.3, reorder=True))
            rt.drain()

    listing.after_page = live_traffic
    # WHEN the backfill runs while the events are delivered
    summary = run(bf, rt.resources.bucket, "live")
    listing.after_page = None
    rt.flush(Chaos(seed=1, duplicate=0.3, reorder=True))
    rt.drain()
    # THEN no row regressed, and once delivery is quiescent the ledger equals the bucket
    assert monitor.violations == []
    comparison = rt.compare()
    assert comparison.differences == [] and comparison.converged
    assert summary["counts"]["recorded_without_head"] > 0
    assert rt.dead_letters() == []


def test_key_filters_keep_other_keys_out_of_the_ledger(emulator: Any) -> None:
    rt = LocalRuntime(emulator, versioning="Enabled")
    try:
        bucket = rt.resources.bucket
        names = keys(60)
        existing(rt, names)
        scope = Scope((BucketScope(bucket, prefixes=("data/", "logs/"), suffixes=(".bin",)),))
        service = dataclasses.replace(rt.service, scope=scope)
        bf = backfill(rt, service)
        assert bf.prefixes(bucket) == ["data/", "logs/"]
        with pytest.raises(ValueError, match="not one of the pipeline's"):
            bf.plan("someone-elses-bucket", "r")
        summary = run(bf, bucket, "filtered")
        listed_prefixes = {page[1] for page in bf.listing.pages}  # type: ignore[attr-defined]
        assert listed_prefixes == {"data/", "logs/"}
        stored = {r.key for r in rt.ledger_rows()}
        assert stored and all(scope.contains(bucket, k) for k in stored)
        expected = {o["key"] for o in rt.bucket_objects() if scope.contains(bucket, str(o["key"]))}
        assert stored == expected
        assert summary["counts"]["recorded_without_head"] == len(expected)
    finally:
        rt.close()


class Context:
    """A Lambda context with little time left after the first page (``list_shard`` returns
    ``done: false`` and is called again, as the state machine's loop does)."""

    function_name = "listing-backfill"
    memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:listing-backfill"
    aws_request_id = "req-1"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000  # below the 60 s margin: one page per invocation


def test_the_handlers_plan_list_and_summarize_from_the_environment(
    emulator: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN an existing bucket and the function's environment (as the stack sets it)
    rt = LocalRuntime(emulator, versioning="Enabled")
    try:
        names = keys(30)
        hidden = existing(rt, names)
        scope = Scope((BucketScope(rt.resources.bucket),))
        for name, value in {
            "AWS_ENDPOINT_URL": emulator.endpoint_url,
            "LEDGER_TABLE_NAME": rt.resources.table,
            "DEAD_LETTER_QUEUE_URL": rt.resources.dlq_url,
            "SCOPE": scope.to_json(),
            "BUCKET_NAME": rt.resources.bucket,
            "CHECKPOINT_BUCKET_NAME": rt.resources.inventory_bucket,
            "RECORD_CONCURRENCY": "4",
            "S3INGEST_STACK": "s3ingest-test",
            "POWERTOOLS_METRICS_DISABLED": "false",
        }.items():
            monkeypatch.setenv(name, value)
        from s3ingest_fn.handlers import listing_backfill

        # each step's metrics are its own (invocation_metrics): whatever else runs in this
        # process, possibly still running from an earlier test, prints documents of its own
        capsys.readouterr()
        for cached in (
            wiring.function_settings,
            wiring.function_ingest_service,
            wiring.function_listing_backfill,
        ):
            cached.cache_clear()  # built from this test's environment
        # WHEN the state machine's steps run (bucket defaults to the first of SCOPE)
        plan = listing_backfill.plan({"run": "handler-run"}, Context())
        assert plan["bucket"] == rt.resources.bucket and plan["shards"]
        invocations = 0
        for shard in plan["shards"]:
            while True:
                invocations += 1
                result = listing_backfill.list_shard(
                    {"run": "handler-run", "shard": shard}, Context()
                )
                if result["done"]:
                    break
        summary = listing_backfill.summarize({"run": "handler-run"}, Context())
        # THEN the ledger equals the bucket, a page per invocation
        assert rt.compare().converged
        assert summary["counts"]["recorded_without_head"] == len(names) - len(hidden)
        assert summary["done"] == summary["shards"] == len(plan["shards"])
        assert invocations == summary["counts"]["pages"]
        emf = [
            json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line
        ]
        values = [
            doc.get("listing_recorded_without_head", 0)
            for doc in emf
            if doc.get("bucket") == rt.resources.bucket
        ]
        recorded = sum(sum(v) if isinstance(v, list) else v for v in values)
        assert recorded == len(names) - len(hidden)
    finally:
        for cached in (
            wiring.function_settings,
            wiring.function_ingest_service,
            wiring.function_listing_backfill,
        ):
            cached.cache_clear()
        rt.close()


def test_the_emulator_lists_versions_after_a_key_marker_given_alone(emulator: Any) -> None:
    # S3 lists the keys after key-marker; unpatched moto starts at the marker's own versions
    # and drops the first version at or after it (s3ingest/local/emulator/moto_s3_markers.py)
    s3 = emulator.client("s3")
    bucket = "h2-markers-" + str(id(s3))[-6:]
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    for key in ("a", "b", "b", "c", "d"):
        s3.put_object(Bucket=bucket, Key=key, Body=b"x")

    def keys_after(marker: str) -> list[str]:
        page = s3.list_object_versions(Bucket=bucket, KeyMarker=marker)
        return [v["Key"] for v in page.get("Versions", [])]

    assert keys_after("b") == ["c", "d"]
    assert keys_after("bb") == ["c", "d"]  # not a key: the first key after it is kept
    assert keys_after("0") == ["a", "b", "b", "c", "d"]
    assert keys_after("z") == []
