"""Processors added or changed later (issue 27; CONTRACT C11): rows behind for a processor (no
state for it, done under a lower version, superseded) are brought up to date by the reprocess
run's segments, through the claim, the fencing token and the commit; tombstones are never run;
a key whose change moved on is skipped; a removed processor's state is cleaned.

Over the DynamoDB adapter on moto (named processors are modelled there, not in the fake) and
the in-memory checkpoint store.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any, cast

import pytest

from s3ingest_fn.adapters.dynamo_ledger import (
    DynamoLedger,
    DynamoLedgerSegments,
    version_attribute,
)
from s3ingest_fn.core.decide import IngestService
from s3ingest_fn.core.effects import AppliedChange, EffectRunner, PinnedContent, ProcessorSpec
from s3ingest_fn.core.model import Change, Format, Kind, TransientError
from s3ingest_fn.core.row import DONE, PENDING, LedgerRow
from s3ingest_fn.core.scope import BucketScope, Scope
from s3ingest_fn.core.sequencer import normalize
from s3ingest_fn.services.reprocess import (
    Reprocessor,
    ReprocessRequest,
    RunTakenOver,
    estimate_cost,
    finish_command,
)
from tests.fakes import FakeBucket, FakeContentReader, FakeInventoryStore
from tests.moto_ledger import moto_ledger_table

BUCKET = "landing"
NOW_MS = 1_700_000_000_000


class Clock:
    def __init__(self) -> None:
        self.ms = NOW_MS

    def __call__(self) -> int:
        return self.ms


class Recorder:
    """A processor that records each run (change id, token) and can fail on chosen keys."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, str, int]] = []
        self.fail_keys: set[str] = set()

    def __call__(self, change: AppliedChange, content: PinnedContent | None) -> None:
        if change.key in self.fail_keys:
            raise RuntimeError("downstream unavailable")
        if content is not None:
            content.read()
        self.runs.append((change.key, change.change_id, change.token))


class Serialized:
    """A boto3 client whose calls take turns: moto's in-process DynamoDB is not safe for two
    threads writing one item (each processor of a change commits from its own thread)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return method(*args, **kwargs)

        return call


class World:
    """One ledger table, one bucket and its contents, and services built over them with any
    processor configuration."""

    def __init__(self, client: Any) -> None:
        self.client = cast(Any, Serialized(client))
        self.clock = Clock()
        self.ledger = DynamoLedger(
            self.client, "ledger", tombstone_ttl_seconds=3600, clock=lambda: self.clock.ms / 1000
        )
        self.bucket = FakeBucket()
        self.content = FakeContentReader()
        self.store = FakeInventoryStore()
        self.recorders: dict[str, Recorder] = {}
        self.seq = 0x1000

    def service(self, **versions: int) -> IngestService:
        specs = []
        for name, version in versions.items():
            recorder = self.recorders.setdefault(name, Recorder())
            specs.append(ProcessorSpec(name, recorder, version=version))
        effects = EffectRunner(specs, self.content, clock_ms=self.clock) if specs else None
        scope = Scope((BucketScope(BUCKET),))
        return IngestService(ledger=self.ledger, bucket=self.bucket, effects=effects, scope=scope)

    def reprocessor(self, service: IngestService, **kw: Any) -> Reprocessor:
        return Reprocessor(
            segments=DynamoLedgerSegments(self.client, "ledger"),
            store=self.store,
            checkpoint_bucket="checkpoints",
            service=service,
            page_size=kw.pop("page_size", 3),
            **kw,
        )

    def put(self, service: IngestService, key: str, body: bytes = b"data") -> None:
        self.seq += 1
        raw = f"{self.seq:018X}"
        etag = f"etag-{self.seq}"
        version = f"v{self.seq}"
        self.bucket.put(BUCKET, key, version, etag)
        self.content.put(BUCKET, key, version, body)
        service.handle(
            Change(
                bucket=BUCKET,
                key=key,
                raw_key=key,
                kind=Kind.CREATED,
                event_name="Object Created/PutObject",
                fmt=Format.EVENTBRIDGE,
                sequencer=normalize(raw),
                raw_sequencer=raw,
                version_id=version,
                etag=etag,
                size=4,
            )
        )

    def delete(self, service: IngestService, key: str) -> None:
        self.seq += 1
        raw = f"{self.seq:018X}"
        self.bucket.hide(BUCKET, key)
        service.handle(
            Change(
                bucket=BUCKET,
                key=key,
                raw_key=key,
                kind=Kind.REMOVED,
                event_name="Object Deleted/DeleteObject",
                fmt=Format.EVENTBRIDGE,
                sequencer=normalize(raw),
                raw_sequencer=raw,
            )
        )

    def row(self, key: str) -> LedgerRow:
        found = self.ledger.get(BUCKET, key)
        assert found is not None
        return found

    def run(self, reprocessor: Reprocessor, **request: Any) -> dict[str, Any]:
        request.setdefault("run", "r1")
        plan = reprocessor.plan(request)
        for item in plan["segments"]:
            while not reprocessor.segment(item["run"], item["segment"])["done"]:
                pass
        reprocessor.close()
        return reprocessor.summarize(request["run"])


@pytest.fixture
def world() -> Iterator[World]:
    with moto_ledger_table("ledger") as client:
        yield World(client)


KEYS = [f"in/{i:02d} file.csv" for i in range(7)]


@pytest.mark.contract("C11")
def test_a_processor_added_later_runs_once_over_every_visible_key_and_never_a_tombstone(
    world: World,
) -> None:
    before = world.service(thumbs=1)
    for key in KEYS:
        world.put(before, key)
    world.delete(before, KEYS[-1])
    after = world.service(thumbs=1, index=1)
    assert all(after.behind(world.row(k), "index") for k in KEYS[:-1])
    assert not after.behind(world.row(KEYS[-1]), "index")  # deleted before it existed
    assert not any(after.behind(world.row(k), "thumbs") for k in KEYS[:-1])

    summary = world.run(world.reprocessor(after), processor="index", segments=3)

    runs = world.recorders["index"].runs
    assert sorted(k for k, _, _ in runs) == sorted(KEYS[:-1])
    assert summary["counts"]["run"] == 6 and summary["counts"]["behind"] == 6
    assert summary["counts"]["scanned"] == 7 and summary["done"] == 3
    for key, change_id, token in runs:
        row = world.row(key)
        effect = row.effect_of("index")
        assert effect is not None and effect.status == DONE
        assert effect.done_change_id == change_id == row.change_id
        assert effect.token == token
        assert not after.behind(row, "index")
    assert estimate_cost(summary["counts"], summary["requests"]) == summary["estimated_cost_usd"]
    assert summary["estimated_cost_usd"] > 0

    again = world.run(world.reprocessor(after), processor="index", segments=3, run="r2")
    assert again["counts"]["behind"] == 0 and again["counts"]["run"] == 0
    assert len(world.recorders["index"].runs) == 6  # safe to run twice: nothing ran again


@pytest.mark.contract("C11")
def test_a_version_bump_makes_done_rows_behind_and_the_commit_records_the_version(
    world: World,
) -> None:
    v1 = world.service(thumbs=1)
    for key in KEYS[:3]:
        world.put(v1, key)
    item = world.client.get_item(TableName="ledger", Key={"pk": {"S": f"{BUCKET}/{KEYS[0]}"}})
    assert version_attribute("thumbs") not in item["Item"]  # version 1 is stored as nothing
    v2 = world.service(thumbs=2)
    assert all(v2.behind(world.row(k), "thumbs") for k in KEYS[:3])
    assert not any(v1.behind(world.row(k), "thumbs") for k in KEYS[:3])

    summary = world.run(world.reprocessor(v2), processor="thumbs", segments=2)

    assert summary["version"] == 2 and summary["counts"]["run"] == 3
    for key in KEYS[:3]:
        effect = world.row(key).effect_of("thumbs")
        assert effect is not None and (effect.status, effect.version) == (DONE, 2)
        assert not v2.behind(world.row(key), "thumbs")
    # a live change after the bump records the new version too
    world.put(v2, KEYS[3])
    effect = world.row(KEYS[3]).effect_of("thumbs")
    assert effect is not None and effect.version == 2
    assert Counter(k for k, _, _ in world.recorders["thumbs"].runs) == Counter(
        {KEYS[0]: 2, KEYS[1]: 2, KEYS[2]: 2, KEYS[3]: 1}
    )


def test_a_dry_run_counts_what_would_run_and_writes_nothing(world: World) -> None:
    before = world.service()
    for key in KEYS[:4]:
        world.put(before, key)
    after = world.service(index=1)
    revs = {k: world.row(k).rev for k in KEYS[:4]}

    summary = world.run(world.reprocessor(after), processor="index", dry_run=True)

    assert summary["counts"]["behind"] == 4 and summary["counts"]["run"] == 0
    assert summary["requests"]["write"] == 0
    assert world.recorders["index"].runs == []
    assert {k: world.row(k).rev for k in KEYS[:4]} == revs


def test_a_row_whose_change_moved_on_after_the_scan_is_skipped_not_run_twice(
    world: World,
) -> None:
    before = world.service()
    world.put(before, KEYS[0])
    after = world.service(index=1)
    stale = world.row(KEYS[0])
    world.put(after, KEYS[0], b"newer")  # live traffic: the newer change runs index itself
    assert len(world.recorders["index"].runs) == 1

    assert after.reprocess(stale, "index") == "skipped"
    assert len(world.recorders["index"].runs) == 1
    assert not after.behind(world.row(KEYS[0]), "index")


def test_a_live_lease_refuses_the_claim_as_busy(world: World) -> None:
    before = world.service()
    world.put(before, KEYS[0])
    after = world.service(index=1)
    row = world.row(KEYS[0])
    claim = after.effects.claim(KEYS[0], "created", only=("index",))  # type: ignore[union-attr]
    assert world.ledger.claim_behind(BUCKET, KEYS[0], "index", row.change_id, None, claim).applied

    assert after.reprocess(row, "index") == "busy"
    assert world.recorders["index"].runs == []


def test_a_failing_processor_leaves_the_effect_pending_for_the_next_run(world: World) -> None:
    before = world.service()
    for key in KEYS[:3]:
        world.put(before, key)
    after = world.service(index=1)
    world.recorders["index"].fail_keys = {KEYS[1]}

    first = world.run(world.reprocessor(after), processor="index", segments=1)

    assert first["counts"]["failed"] == 1 and first["counts"]["run"] == 2
    effect = world.row(KEYS[1]).effect_of("index")
    assert effect is not None and effect.status == PENDING and effect.lease_until_ms == 0
    assert after.behind(world.row(KEYS[1]), "index")  # the claim was released
    world.recorders["index"].fail_keys = set()
    second = world.run(world.reprocessor(after), processor="index", segments=1, run="r2")
    assert second["counts"]["run"] == 1
    assert sorted(k for k, _, _ in world.recorders["index"].runs) == sorted(KEYS[:3])


def test_failing_processor_raises_transient_from_reprocess(world: World) -> None:
    before = world.service()
    world.put(before, KEYS[0])
    after = world.service(index=1)
    world.recorders["index"].fail_keys = {KEYS[0]}
    with pytest.raises(TransientError, match="processor-failed: index"):
        after.reprocess(world.row(KEYS[0]), "index")


def test_remove_cleans_a_processor_no_longer_configured(world: World) -> None:
    both = world.service(thumbs=1, index=3)
    for key in KEYS[:3]:
        world.put(both, key)
    world.put(both, "out/other.csv")
    only = world.service(thumbs=1)
    with pytest.raises(ValueError, match="still configured"):
        world.reprocessor(both).plan({"run": "x", "processor": "index", "remove": True})

    summary = world.run(
        world.reprocessor(only), processor="index", remove=True, prefix="in/", bucket=BUCKET
    )

    assert summary["counts"]["removed"] == 3
    for key in KEYS[:3]:
        item = world.client.get_item(TableName="ledger", Key={"pk": {"S": f"{BUCKET}/{key}"}})
        assert not [a for a in item["Item"] if a.endswith(":index")]
        assert world.row(key).effect_of("thumbs") is not None
    assert world.row("out/other.csv").effect_of("index") is not None  # outside the prefix


def test_a_processor_not_configured_and_a_foreign_bucket_are_refused(world: World) -> None:
    service = world.service(thumbs=1)
    with pytest.raises(ValueError, match="not configured"):
        world.reprocessor(service).plan({"run": "x", "processor": "index"})
    with pytest.raises(ValueError, match="not one of the pipeline's"):
        world.reprocessor(service).plan({"run": "x", "processor": "thumbs", "bucket": "other"})


def test_planning_a_run_again_resumes_it_and_another_request_is_refused(world: World) -> None:
    before = world.service()
    for key in KEYS:
        world.put(before, key)
    after = world.service(index=1)
    reprocessor = world.reprocessor(after, page_size=2)
    plan = reprocessor.plan({"run": "r1", "processor": "index", "segments": 2})
    first = reprocessor.segment("r1", plan["segments"][0]["segment"])
    while not first["done"]:
        first = reprocessor.segment("r1", 0)

    again = reprocessor.plan({"run": "r1", "processor": "index", "segments": 2})
    assert [s["segment"] for s in again["segments"]] == [1] and again["done"] == 1
    with pytest.raises(ValueError, match="another request"):
        reprocessor.plan({"run": "r1", "processor": "index", "segments": 3})


def test_the_rate_spreads_starts_over_the_segment_workers() -> None:
    request = ReprocessRequest.of(
        {"run": "r", "processor": "p", "rate": 40, "segments": 8, "concurrency": 4}
    )
    assert request.segment_rate == 10.0
    with pytest.raises(ValueError, match="rate"):
        ReprocessRequest.of({"run": "r", "processor": "p", "rate": 0})
    with pytest.raises(ValueError, match="run"):
        ReprocessRequest.of({"run": "../x", "processor": "p"})


@pytest.mark.contract("C12")
def test_reconciliation_counts_rows_behind_each_processor_and_repairs_none(world: World) -> None:
    from s3ingest_fn.core.effects import EffectTarget
    from s3ingest_fn.services.reconcile_run import ReconcileReport, combine_reports

    before = world.service(thumbs=1)
    for key in KEYS[:4]:
        world.put(before, key)
    world.delete(before, KEYS[3])
    targets = (
        EffectTarget("thumbs", version=2),  # raised: every visible row is behind
        EffectTarget("index", suffixes=(".json",)),  # added; concerns no .csv key
        EffectTarget("audit"),  # added: every visible row is behind
    )
    report = ReconcileReport(source="listing", bucket=BUCKET, prefix="", dry_run=False)
    for key in KEYS[:4]:
        report.count_held(world.row(key), NOW_MS, targets)

    assert report.effects_behind_by_processor == {"thumbs": 3, "audit": 3}
    assert report.behind_samples["audit"] == KEYS[:3]
    assert report.repairs_queued == 0
    other = ReconcileReport(source="listing", bucket="b2", prefix="", dry_run=False)
    other.behind("audit", "x")
    combined = combine_reports([report, other])
    assert combined["effects_behind_by_processor"] == {"thumbs": 3, "audit": 4}
    assert combined["behind_samples"]["audit"] == [*KEYS[:3], "x"]


@pytest.mark.contract("C11")
def test_a_change_applied_while_the_processor_was_not_configured_is_behind(
    world: World,
) -> None:
    from s3ingest_fn.adapters.dynamo_ledger import DynamoLedgerScanner
    from s3ingest_fn.core.effects import EffectTarget

    # GIVEN index done for a key's first change, then removed from the configuration (its
    # state left on the row), the key changed, and index configured again
    both = world.service(thumbs=1, index=1)
    world.put(both, KEYS[0], b"one")
    world.put(world.service(thumbs=1), KEYS[0], b"two")
    row = world.row(KEYS[0])
    effect = row.effect_of("index")
    assert effect is not None and effect.status == DONE
    assert effect.done_change_id != row.change_id
    again = world.service(thumbs=1, index=1)
    # THEN the row is behind index, for the reprocess run and for reconciliation's Scan alike
    assert again.behind(row, "index") and not again.behind(row, "thumbs")
    scanner = DynamoLedgerScanner(world.client, "ledger", ["thumbs", "index"])
    (scanned,) = [r for page in scanner.pages(BUCKET, 0, 1) for r in page]
    assert EffectTarget("index").behind(scanned, NOW_MS)
    assert not EffectTarget("thumbs").behind(scanned, NOW_MS)
    # WHEN reprocessed: index runs the row's current change once, and nothing is behind
    summary = world.run(world.reprocessor(again), processor="index", segments=1)
    assert summary["counts"]["run"] == 1
    assert world.recorders["index"].runs[-1][1] == row.change_id
    assert not again.behind(world.row(KEYS[0]), "index")
    (scanned,) = [r for page in scanner.pages(BUCKET, 0, 1) for r in page]
    assert not EffectTarget("index").behind(scanned, NOW_MS)


def test_explain_says_which_processors_a_row_is_behind(world: World) -> None:
    from s3ingest.commands.explain import explain
    from s3ingest_fn.core.effects import EffectTarget
    from s3ingest_fn.core.model import ObjectState

    world.put(world.service(thumbs=1), KEYS[0])
    row = world.row(KEYS[0])
    here = ObjectState(True, row.version_id, row.etag, 4)
    # WHEN the stack's processors are thumbs at version 2 and index (added later)
    targets = (EffectTarget("thumbs", version=2), EffectTarget("index"))
    effects = explain(row, here, targets, NOW_MS)["effects"]
    # THEN both are behind: thumbs done under version 1, index never run for the row
    assert effects["thumbs"]["status"] == DONE and effects["thumbs"]["completed_version"] == 1
    assert effects["thumbs"]["behind"] is True
    assert effects["index"]["status"] is None and effects["index"]["behind"] is True
    # and with thumbs at version 1 alone, nothing is behind
    current = explain(row, here, (EffectTarget("thumbs"),), NOW_MS)["effects"]
    assert set(current) == {"thumbs"} and current["thumbs"]["behind"] is False


class SlowRecorder(Recorder):
    """A processor each run of which takes ``seconds`` of the test's clock."""

    def __init__(self, seconds: float, gap: float = 0.0) -> None:
        super().__init__()
        self.now = 0.0
        self.seconds = seconds
        self._lock = threading.Lock()

    def clock(self) -> float:
        with self._lock:
            return self.now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.now += seconds

    def __call__(self, change: AppliedChange, content: PinnedContent | None) -> None:
        self.advance(self.seconds)
        super().__call__(change, content)


def test_a_segment_call_stops_before_the_time_a_slow_page_needs(world: World) -> None:
    before = world.service()
    for key in KEYS:
        world.put(before, key)
    slow = world.recorders["index"] = SlowRecorder(2.5)  # a page of two rows: 5 s
    after = world.service(index=1)
    reprocessor = world.reprocessor(after, page_size=2, margin_ms=1_000, clock=slow.clock)
    reprocessor.plan({"run": "slow", "processor": "index", "segments": 1})
    # WHEN 10 s are left: the first page (5 s here), then no time for another: the margin
    # and twice the slowest page (1 + 2 x 5 s) is more than is left
    first = reprocessor.segment("slow", 0, remaining_ms=lambda: 10_000)
    assert (first["done"], first["added"]["pages"]) == (False, 1)
    # WHEN 25 s are left at every page: the segment runs to its end from the checkpoint
    second = reprocessor.segment("slow", 0, remaining_ms=lambda: 25_000)
    assert second["done"] and second["added"]["pages"] >= 2
    reprocessor.close()


class Invocation:
    """A Lambda invocation's remaining time on the test's clock, ms."""

    def __init__(self, clock: Any, seconds: float) -> None:
        self.clock = clock
        self.ends = clock() + seconds

    def get_remaining_time_in_millis(self) -> int:
        return int((self.ends - self.clock()) * 1000)


def test_a_call_without_time_for_a_processor_functions_timeout_starts_nothing(
    world: World,
) -> None:
    # GIVEN a processor function with a 300 s timeout, behind on every row
    before = world.service()
    for key in KEYS[:6]:
        world.put(before, key)
    recorder = world.recorders.setdefault("slow", Recorder())
    spec = ProcessorSpec("slow", recorder, timeout_ms=300_000)
    effects = EffectRunner([spec], world.content, clock_ms=world.clock)
    service = IngestService(
        ledger=world.ledger,
        bucket=world.bucket,
        effects=effects,
        scope=Scope((BucketScope(BUCKET),)),
    )
    reprocessor = world.reprocessor(service, page_size=100)
    reprocessor.plan({"run": "t", "processor": "slow", "segments": 1})
    # WHEN a call has 200 s left: no claim could finish; the step's retry is asked for
    short = Invocation(lambda: 0.0, 200)
    service.bind_context(short)
    with pytest.raises(TransientError, match="could start no row"):
        reprocessor.segment("t", 0, short.get_remaining_time_in_millis)
    assert recorder.runs == []
    assert reprocessor.plan({"run": "t", "processor": "slow", "segments": 1})["segments"]
    # WHEN the retry has the function's time: every row runs, once
    full = Invocation(lambda: 0.0, 900)
    service.bind_context(full)
    done = reprocessor.segment("t", 0, full.get_remaining_time_in_millis)
    reprocessor.close()
    assert done["done"] and done["counts"]["run"] == 6 and done["counts"]["failed"] == 0
    assert sorted(k for k, _, _ in recorder.runs) == sorted(KEYS[:6])


def test_a_claim_whose_write_failed_cuts_the_page_and_the_next_call_runs_it(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the ledger refusing the first and the third claim (throttled after the SDK's
    # retries)
    before = world.service()
    for key in KEYS[:4]:
        world.put(before, key)
    after = world.service(index=1)
    real = world.ledger.claim_behind
    refused = iter([True, False, True])

    def throttled(*args: Any, **kwargs: Any) -> Any:
        if next(refused, False):
            raise TransientError("dynamodb: ProvisionedThroughputExceededException")
        return real(*args, **kwargs)

    monkeypatch.setattr(world.ledger, "claim_behind", throttled)
    reprocessor = world.reprocessor(after, page_size=100, concurrency=1)
    reprocessor.plan({"run": "t", "processor": "index", "segments": 1})
    # WHEN the segment is called until it is done
    with pytest.raises(TransientError, match="could start no row"):
        reprocessor.segment("t", 0)  # the page's first row: nothing to keep
    calls = [reprocessor.segment("t", 0)]  # one row, then cut before the refused claim
    while not calls[-1]["done"]:
        calls.append(reprocessor.segment("t", 0))
    reprocessor.close()
    # THEN nothing was skipped past: every key ran once, none counted failed
    assert len(calls) == 2 and not calls[0]["done"]
    assert sorted(k for k, _, _ in world.recorders["index"].runs) == sorted(KEYS[:4])
    summary = reprocessor.summarize("t")
    assert summary["counts"]["run"] == 4 and summary["counts"]["failed"] == 0
    assert summary["counts"]["scanned"] == 4 and summary["counts"]["behind"] == 4
    assert not any(after.behind(world.row(k), "index") for k in KEYS[:4])


def test_rows_that_ended_after_a_cut_are_not_run_or_counted_again(world: World) -> None:
    # GIVEN 8 keys run by 8 threads at once; the claim of the third (in Scan order) fails
    # once (throttled) after the five behind it ended, one of them with its processor raising
    import dataclasses

    before = world.service()
    keys = [f"k{i}" for i in range(8)]
    for key in keys:
        world.put(before, key)
    after = world.service(index=1)
    order = [r.key for r in DynamoLedgerSegments(world.client, "ledger").page(0, 1, None).rows]
    throttled, failing = order[2], order[5]
    world.recorders["index"].fail_keys = {failing}
    ended = threading.Semaphore(0)
    ledger = world.ledger

    class Ledger:
        def __getattr__(self, name: str) -> Any:
            method = getattr(ledger, name)

            def call(bucket: str, key: str, *args: Any, **kwargs: Any) -> Any:
                if name == "claim_behind" and key == throttled and not refused:
                    for _ in order[3:]:  # the rows behind it end first
                        assert ended.acquire(timeout=30)
                    refused.append(key)
                    raise TransientError("dynamodb: ProvisionedThroughputExceededException")
                result = method(bucket, key, *args, **kwargs)
                if name in ("finish", "release") and key in order[3:]:
                    ended.release()
                return result

            return call

    refused: list[str] = []
    service = dataclasses.replace(after, ledger=Ledger())
    reprocessor = world.reprocessor(service, page_size=100, concurrency=8)
    reprocessor.plan({"run": "t", "processor": "index", "segments": 1})
    # WHEN the segment is called twice: cut before the throttled key, then to its end
    first = reprocessor.segment("t", 0)
    world.recorders["index"].fail_keys = set()
    second = reprocessor.segment("t", 0)
    reprocessor.close()
    # THEN every key was counted once, the failed one not run again in this run
    assert refused == [throttled] and not first["done"] and second["done"]
    summary = reprocessor.summarize("t")
    assert summary["counts"]["scanned"] == summary["counts"]["behind"] == 8
    assert (summary["counts"]["run"], summary["counts"]["failed"]) == (7, 1)
    assert [f["key"] for f in summary["failures"]] == [failing]
    assert sorted(k for k, _, _ in world.recorders["index"].runs) == sorted(set(keys) - {failing})
    assert after.behind(world.row(failing), "index")  # a new run takes it up


def test_a_low_rate_stops_starting_rows_before_the_invocation_ends(world: World) -> None:
    # GIVEN one key every 50 s (the run's rate) and invocations of 90 s (one worker thread:
    # the test's clock moves only when the pacer sleeps)
    before = world.service()
    for key in KEYS[:5]:
        world.put(before, key)
    after = world.service(index=1)
    clock = SlowRecorder(0.0)
    reprocessor = world.reprocessor(
        after,
        page_size=100,
        margin_ms=10_000,
        concurrency=1,
        clock=clock.clock,
        sleep=clock.advance,
    )
    reprocessor.plan({"run": "t", "processor": "index", "segments": 1, "rate": 0.02})
    # WHEN called until done, each call a new invocation
    overruns, calls = [], 0
    while True:
        invocation = Invocation(clock.clock, 90)
        result = reprocessor.segment("t", 0, invocation.get_remaining_time_in_millis)
        calls += 1
        overruns.append(invocation.get_remaining_time_in_millis() < 0)
        if result["done"] or calls > 10:
            break
    reprocessor.close()
    # THEN no call ran past its invocation, and every key ran once
    assert result["done"] and not any(overruns) and calls > 1
    assert sorted(k for k, _, _ in world.recorders["index"].runs) == sorted(KEYS[:5])
    assert result["counts"]["run"] == 5 and result["counts"]["scanned"] == 5


def test_the_reserved_concurrency_caps_the_workers_and_shares_the_rate(world: World) -> None:
    # GIVEN a run asking for 16 segments at once and 32 keys/s, a reservation of 4
    before = world.service()
    world.put(before, KEYS[0])
    reprocessor = world.reprocessor(world.service(index=1))
    request = {"run": "t", "processor": "index", "segments": 16, "rate": 32}
    plan = reprocessor.plan(request, limit=4)
    # THEN 4 workers run at once, each at 8 keys/s; the request is kept as asked
    assert plan["concurrency"] == 4
    stored = json.loads(world.store.read_if_exists("checkpoints", "reprocess/t/plan.json") or "")
    assert stored["concurrency"] == 4 and stored["request"]["concurrency"] == 16
    assert ReprocessRequest.of(stored["request"]).rate_per_worker(stored["concurrency"]) == 8.0
    assert reprocessor.plan(request)["concurrency"] == 16  # no reservation: as asked


def test_a_later_execution_of_the_run_takes_it_over(world: World) -> None:
    before = world.service()
    for key in KEYS[:3]:
        world.put(before, key)
    after = world.service(index=1)
    reprocessor = world.reprocessor(after)
    reprocessor.plan({"run": "t", "processor": "index", "segments": 1}, owner="exec-1")
    reprocessor.plan({"run": "t", "processor": "index", "segments": 1}, owner="exec-2")
    with pytest.raises(RunTakenOver, match="exec-2"):
        reprocessor.segment("t", 0, owner="exec-1")
    assert world.recorders["index"].runs == []
    assert reprocessor.segment("t", 0, owner="exec-2")["done"]
    reprocessor.close()


def test_a_call_taken_over_during_its_page_writes_no_checkpoint(world: World) -> None:
    # GIVEN execution 1's call running its page when execution 2 plans the run again
    before = world.service()
    for key in KEYS[:3]:
        world.put(before, key)
    after = world.service(index=1)
    request = {"run": "t", "processor": "index", "segments": 1}
    world.reprocessor(after).plan(request, owner="exec-1")
    recorder = world.recorders["index"]
    record = recorder.__call__

    def taken_over(change: AppliedChange, content: PinnedContent | None) -> None:
        record(change, content)
        if len(recorder.runs) == 1:
            world.reprocessor(after).plan(request, owner="exec-2")

    world.recorders["index"] = cast(Recorder, taken_over)
    after = world.service(index=1)
    reprocessor = world.reprocessor(after, page_size=100, concurrency=1)
    # THEN its checkpoint is not written over the new owner's; the new owner finishes
    with pytest.raises(RunTakenOver, match="exec-2"):
        reprocessor.segment("t", 0, owner="exec-1")
    assert world.store.read_if_exists("checkpoints", "reprocess/t/0000.json") is None
    world.recorders["index"] = recorder
    final = world.reprocessor(world.service(index=1)).segment("t", 0, owner="exec-2")
    assert final["done"] and len(recorder.runs) == 3
    reprocessor.close()


def test_a_version_raised_after_the_plan_stops_the_run(world: World) -> None:
    before = world.service()
    world.put(before, KEYS[0])
    world.reprocessor(world.service(index=2)).plan(
        {"run": "t", "processor": "index", "segments": 1}
    )
    later = world.reprocessor(world.service(index=3))
    with pytest.raises(ValueError, match="version 3 since run 't' was planned for version 2"):
        later.segment("t", 0)
    with pytest.raises(ValueError, match="planned for version 2 of 'index', now 3"):
        later.plan({"run": "t", "processor": "index", "segments": 1})
    assert world.recorders["index"].runs == []


def test_the_summary_names_failed_keys_with_their_errors(world: World) -> None:
    before = world.service()
    for key in KEYS[:3]:
        world.put(before, key)
    after = world.service(index=1)
    world.recorders["index"].fail_keys = {KEYS[2]}

    summary = world.run(world.reprocessor(after), processor="index", segments=2)

    assert summary["counts"]["failed"] == 1
    (failure,) = summary["failures"]
    assert (failure["bucket"], failure["key"]) == (BUCKET, KEYS[2])
    assert "RuntimeError: downstream unavailable" in failure["error"]
    # its requests as made: two claims and commits, a claim and a release; three invocations
    assert summary["requests"]["write"] == 6 and summary["requests"]["invoke"] == 3


@pytest.mark.contract("C11")
def test_the_summary_names_the_keys_left_behind_and_the_command_that_finishes_them(
    world: World,
) -> None:
    # GIVEN a run over a bucket's prefix at a rate, one key's processor failing
    before = world.service()
    for key in KEYS[:3]:
        world.put(before, key)
    after = world.service(index=1)
    world.recorders["index"].fail_keys = {KEYS[1]}
    request = {"processor": "index", "segments": 1, "bucket": BUCKET, "prefix": "in/", "rate": 50}

    summary = world.run(world.reprocessor(after), **request)

    # THEN it names the key left behind, the count, and the exact command that finishes it
    assert summary["left_behind"] == {
        "count": 1,
        "samples": [{"bucket": BUCKET, "key": KEYS[1]}],
        "command": f"s3ingest reprocess --processor index --bucket {BUCKET} --prefix in/ --rate 50",
    }
    # WHEN the processor works again and that command's run (a new run, same request) runs
    world.recorders["index"].fail_keys = set()
    second = world.run(world.reprocessor(after), **request, run="r2")
    # THEN it runs that key alone and leaves nothing behind
    assert second["counts"]["run"] == 1
    assert second["left_behind"] == {"count": 0, "samples": [], "command": None}


def test_the_finishing_command_quotes_what_it_repeats() -> None:
    request = ReprocessRequest(
        run="r", processor="audit", bucket="b", prefix="in dir/it's", rate=1_234_567.0
    )
    assert finish_command(request) == (
        "s3ingest reprocess --processor audit --bucket b --prefix 'in dir/it'\"'\"'s' "
        "--rate 1234567"
    )
    assert finish_command(ReprocessRequest(run="r", processor="p", rate=0.25)) == (
        "s3ingest reprocess --processor p --rate 0.25"
    )


def test_the_claim_refuses_an_effect_already_done_at_the_version(world: World) -> None:
    # GIVEN a row whose thumbs effect is done at thumbs' version 2
    v2 = world.service(thumbs=2)
    world.put(v2, KEYS[0])
    row = world.row(KEYS[0])
    assert not v2.behind(row, "thumbs")
    runs = len(world.recorders["thumbs"].runs)
    # WHEN a caller skips the behind check: the conditional claim itself refuses it
    assert v2.reprocess(row, "thumbs") == "skipped"
    assert len(world.recorders["thumbs"].runs) == runs
    # and at a higher version it is claimed and run again
    v3 = world.service(thumbs=3)
    assert v3.reprocess(world.row(KEYS[0]), "thumbs") == "run"
    assert len(world.recorders["thumbs"].runs) == runs + 1


def test_processor_targets_round_trip_and_a_malformed_variable_is_a_config_problem() -> None:
    from s3ingest_fn.config import ConfigError
    from s3ingest_fn.config_roles import ReconcileConfig
    from s3ingest_fn.core.effects import EffectTarget
    from s3ingest_fn.effect_targets import parse_targets, targets_json

    entries: list[dict[str, Any]] = [
        {"name": "thumbs", "module": "t:run", "version": 3, "suffixes": [".jpg"]},
        {"name": "audit", "handler": "a:h", "kinds": ["created", "removed"]},
        {"name": "gone", "module": "g:run", "kinds": ["removed"]},
    ]
    raw = targets_json(entries)
    assert '"kinds"' in raw and raw.count('"kinds"') == 1  # the default kinds left out
    assert parse_targets(raw) == (
        EffectTarget("thumbs", 3, suffixes=(".jpg",)),
        EffectTarget("audit"),
        EffectTarget("gone", kinds=("removed",)),
    )
    env = {"LEDGER_TABLE_NAME": "t", "INGEST_QUEUE_URL": "q", "BUCKET_NAME": "b"}
    config = ReconcileConfig.from_env({**env, "PROCESSOR_TARGETS": raw})
    assert ReconcileConfig.from_env(config.to_env()) == config
    # without the variable: the targets of PROCESSORS (what the ingest functions get)
    listed = ReconcileConfig.from_env({**env, "PROCESSORS": json.dumps(entries)})
    assert listed.processor_targets == config.processor_targets
    with pytest.raises(ConfigError, match="PROCESSOR_TARGETS"):
        ReconcileConfig.from_env({**env, "PROCESSOR_TARGETS": "[1]"})
