"""A listing's entry recorded without a HEAD (issue 15; CONTRACT C7, C9, C15), and the scope
checks on every way into the ledger.

Every decision test runs over :class:`tests.fakes.FakeLedger` and the real
:class:`DynamoLedger` on moto (as ``test_ingest_decisions``). The property at the end drives
listing observations interleaved with sequenced events, in any order, against a small model of
a bucket, and checks C15's invariants at every step and convergence at the end.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from s3ingest_fn.core.decide import IngestService
from s3ingest_fn.core.effects import AppliedChange, EffectRunner, PinnedContent
from s3ingest_fn.core.model import Change, Format, Kind, ObjectState, Outcome
from s3ingest_fn.core.row import LedgerRow, RowState
from s3ingest_fn.core.scope import BucketScope, Scope
from s3ingest_fn.core.sequencer import normalize
from s3ingest_fn.services.backfill import handle_invocation
from tests.fakes import CountingLedger, FakeBucket, FakeContentReader, FakeLedger
from tests.moto_ledger import LEDGER_KINDS, counting_ledger

BUCKET = "landing"
KEY = "in/reports/2024 q1.csv"
NOW = 1000.0
S1, S2, S3 = "00643717F9F8B85354", "00643717FA1234", "00643717FB00000001"


@pytest.fixture(params=LEDGER_KINDS)
def ledger(request: pytest.FixtureRequest) -> Iterator[CountingLedger]:
    with counting_ledger(request.param, NOW) as counted:
        yield counted


@pytest.fixture
def bucket() -> FakeBucket:
    return FakeBucket()


@pytest.fixture
def service(ledger: CountingLedger, bucket: FakeBucket) -> IngestService:
    scope = Scope((BucketScope(BUCKET, prefixes=("in/",), suffixes=(".csv",)),))
    return IngestService(ledger=ledger, bucket=bucket, scope=scope)


def listed(
    version_id: str | None = "v1", etag: str = "e1", key: str = KEY, bucket: str = BUCKET
) -> Change:
    return Change(
        bucket=bucket,
        key=key,
        raw_key=key,
        kind=Kind.LISTED,
        event_name="Listing/run-1",
        fmt=Format.LISTING,
        version_id=version_id,
        etag=etag,
        size=5,
        last_modified_ms=1_700_000_000_000,
    )


def event(
    kind: Kind, sequencer: str, version_id: str | None = None, etag: str | None = None
) -> Change:
    return Change(
        bucket=BUCKET,
        key=KEY,
        raw_key=KEY.replace(" ", "+"),
        kind=kind,
        event_name="Object Created/PutObject" if kind is Kind.CREATED else "Object Deleted/x",
        fmt=Format.EVENTBRIDGE,
        sequencer=normalize(sequencer),
        raw_sequencer=sequencer,
        version_id=version_id,
        etag=etag,
        size=5 if kind is Kind.CREATED else None,
    )


def row(ledger: CountingLedger, key: str = KEY) -> LedgerRow | None:
    found: LedgerRow | None = ledger.inner.get(BUCKET, key)
    return found


# -- the HEAD-less write -------------------------------------------------------------------------


@pytest.mark.contract("C7", "C9")
def test_a_key_never_seen_is_recorded_from_the_listing_with_one_write(
    service: IngestService, ledger: CountingLedger, bucket: FakeBucket
) -> None:
    result = service.handle(listed())

    assert (result.outcome, result.reason) == (Outcome.APPLIED, "listed-state")
    assert result.extra["listing"] == "recorded-without-head"
    assert ledger.calls == Counter({"write_observation": 1})  # no GetItem
    assert bucket.requests == 0  # no HEAD
    stored = row(ledger)
    assert stored is not None
    assert (stored.present, stored.version_id, stored.etag, stored.size) == (True, "v1", "e1", 5)
    assert stored.observed and stored.seq is None
    assert (stored.source, stored.reason) == ("backfill", "listed-state")


@pytest.mark.contract("C7", "C9")
def test_the_same_listing_again_is_a_duplicate_settled_by_the_refused_write(
    service: IngestService, ledger: CountingLedger, bucket: FakeBucket
) -> None:
    service.handle(listed())
    ledger.calls.clear()

    result = service.handle(listed())

    assert (result.outcome, result.reason) == (Outcome.DUPLICATE, "listing-matches-ledger")
    assert ledger.calls == Counter({"write_observation": 1})  # refused; its row said the rest
    assert bucket.requests == 0


@pytest.mark.contract("C7")
def test_a_listing_older_than_the_row_reads_the_bucket_and_never_regresses(
    service: IngestService, ledger: CountingLedger, bucket: FakeBucket
) -> None:
    # GIVEN a live event applied v2 (the bucket holds v2); the listing was taken at v1
    bucket.put(BUCKET, KEY, "v2", "e2")
    service.handle(event(Kind.CREATED, S2, "v2", "e2"))
    ledger.calls.clear()

    result = service.handle(listed("v1", "e1"))

    # THEN the refused write's row differs: one HEAD, the row already holds the bucket's state
    assert (result.outcome, result.reason) == (Outcome.DUPLICATE, "observation-matches-ledger")
    assert ledger.calls == Counter({"write_observation": 1})  # no GetItem: the refusal's row
    assert bucket.heads == [(BUCKET, KEY)]
    stored = row(ledger)
    assert stored is not None and (stored.version_id, stored.seq) == ("v2", normalize(S2))


@pytest.mark.contract("C4", "C7")
def test_a_listing_of_a_since_deleted_key_never_undoes_the_tombstone(
    service: IngestService, ledger: CountingLedger, bucket: FakeBucket
) -> None:
    service.handle(event(Kind.REMOVED, S2, "dm1"))  # the bucket shows nothing

    result = service.handle(listed("v1", "e1"))

    assert result.outcome is Outcome.DUPLICATE
    stored = row(ledger)
    assert stored is not None and not stored.present and stored.seq == normalize(S2)


@pytest.mark.contract("C7")
def test_a_listing_behind_an_observed_row_records_what_the_bucket_holds(
    service: IngestService, ledger: CountingLedger, bucket: FakeBucket
) -> None:
    # GIVEN a repair observed v3; the bucket now holds v4; a listing says v1
    bucket.put(BUCKET, KEY, "v3", "e3")
    service.handle(listed("v3", "e3"))
    bucket.put(BUCKET, KEY, "v4", "e4")
    ledger.calls.clear()

    result = service.handle(listed("v1", "e1"))

    assert (result.outcome, result.reason) == (Outcome.APPLIED, "observed-bucket-state")
    assert result.extra["listing"] == "observed-with-head"
    # refused write + HEAD + the observation's conditional write; still no GetItem
    assert ledger.calls == Counter({"write_observation": 2})
    stored = row(ledger)
    assert stored is not None and stored.version_id == "v4"


@pytest.mark.contract("C7", "C15")
def test_sequenced_events_after_a_listed_row_verify_against_the_bucket(
    service: IngestService, ledger: CountingLedger, bucket: FakeBucket
) -> None:
    # GIVEN v1 recorded from a listing; then v2 was written, then deleted (a delete marker)
    service.handle(listed("v1", "e1"))
    # WHEN the event of v1 (older than the listing's knowledge, but its own) arrives while the
    # bucket holds v2: it is verified, and the row records v2 (superseded), never stays at v1
    bucket.put(BUCKET, KEY, "v2", "e2")
    first = service.handle(event(Kind.CREATED, S1, "v1", "e1"))
    assert (first.outcome, first.reason) == (Outcome.SUPERSEDED, "bucket-moved-past-event")
    # the event of v2 matches the bucket: only the sequencer moves
    second = service.handle(event(Kind.CREATED, S2, "v2", "e2"))
    assert second.outcome is Outcome.APPLIED and second.extra.get("effect") == "already-recorded"
    # the delete marker hides it
    bucket.hide(BUCKET, KEY)
    third = service.handle(event(Kind.REMOVED, S3, "dm1"))
    assert third.outcome is Outcome.APPLIED
    stored = row(ledger)
    assert stored is not None and not stored.present and stored.seq == normalize(S3)
    # and a listing taken long before cannot bring it back
    assert service.handle(listed("v1", "e1")).outcome is Outcome.DUPLICATE
    assert not (row(ledger) or stored).present


@pytest.mark.contract("C11")
def test_the_listed_write_claims_the_processor_effect(
    ledger: CountingLedger, bucket: FakeBucket
) -> None:
    reader = FakeContentReader()
    reader.put(BUCKET, KEY, "v1", b"hello")
    seen: list[AppliedChange] = []

    def processor(change: AppliedChange, content: PinnedContent | None) -> None:
        seen.append(change)

    runner = EffectRunner(processor, reader, clock_ms=lambda: int(NOW * 1000))
    service = IngestService(ledger=ledger, bucket=bucket, scope_bucket=BUCKET, effects=runner)

    result = service.handle(listed())

    assert result.outcome is Outcome.APPLIED and result.extra["effect"] == "done"
    assert [(c.key, c.version_id, c.source) for c in seen] == [(KEY, "v1", "backfill")]
    stored = row(ledger)
    assert stored is not None and stored.effect_status == "done"
    # listed again: a duplicate, and the effect does not run twice
    assert service.handle(listed()).outcome is Outcome.DUPLICATE
    assert len(seen) == 1


# -- scope ---------------------------------------------------------------------------------------


@pytest.mark.contract("C9")
@pytest.mark.parametrize(
    ("change", "why"),
    [
        (listed(key="in/notes.txt"), "key-filter"),  # suffix filter
        (listed(key="out/r.csv"), "key-filter"),  # prefix filter
        (listed(bucket="someone-else"), "other-bucket"),
        (dataclasses.replace(event(Kind.CREATED, S1, "v1", "e1"), key="x.csv"), "key-filter"),
    ],
)
def test_out_of_scope_keys_are_ignored_without_a_request(
    service: IngestService, ledger: CountingLedger, bucket: FakeBucket, change: Change, why: str
) -> None:
    result = service.handle(change)

    assert (result.outcome, result.reason) == (Outcome.IGNORED, "out-of-scope")
    assert result.extra["scope"] == why
    assert ledger.calls == Counter() and bucket.requests == 0


@pytest.mark.contract("C9", "C13")
def test_inventory_backfill_tasks_outside_the_key_filters_are_ignored() -> None:
    ledger = FakeLedger()
    bucket = FakeBucket({(BUCKET, "in/a.csv"): ObjectState(True, None, "e", 1)})
    service = IngestService(ledger, bucket, scope=Scope((BucketScope(BUCKET, prefixes=("in/",)),)))
    tasks = [
        {"taskId": "t1", "s3Bucket": BUCKET, "s3Key": "in/a.csv"},
        {"taskId": "t2", "s3Bucket": BUCKET, "s3Key": "tmp/b.csv"},
        {"taskId": "t3", "s3Bucket": "other", "s3Key": "in/c.csv"},
    ]
    event = {"invocationSchemaVersion": "2.0", "invocationId": "i", "job": {"id": "j"}}
    response = handle_invocation({**event, "tasks": tasks}, service)

    assert [(r["resultCode"], r["resultString"]) for r in response["results"]] == [
        ("Succeeded", "applied: observed-bucket-state"),
        ("Succeeded", "ignored: out-of-scope"),
        ("PermanentFailure", "bucket other is not this stack's landing bucket"),
    ]
    assert set(ledger.rows) == {(BUCKET, "in/a.csv")}
    assert bucket.heads == [(BUCKET, "in/a.csv")]


def test_one_bucket_still_works_as_the_scope() -> None:
    service = IngestService(FakeLedger(), FakeBucket(), scope_bucket=BUCKET)
    assert service.tracked == Scope((BucketScope(BUCKET),))
    assert IngestService(FakeLedger(), FakeBucket()).tracked == Scope()


# -- C15: listings interleaved with sequenced events, in any order -------------------------------

KEYS = ("a", "b b", "c+%")


@dataclass
class Model:
    """A bucket: each key's versions (newest last; ``None`` a delete marker), and the events
    and listing observations its operations produced, waiting for delivery."""

    versioned: bool
    versions: dict[str, list[tuple[str | None, str | None]]] = field(default_factory=dict)
    clock: int = 0x6437_0000
    pending: list[Change] = field(default_factory=list)
    counter: int = 0

    def current(self, bucket: str, key: str) -> ObjectState:
        stack = self.versions.get(key) or []
        if not stack or stack[-1][0] is None:
            return ObjectState(visible=False)
        version, etag = stack[-1]
        return ObjectState(True, version if self.versioned else None, etag, 5)

    def _sequencer(self) -> str:
        self.clock += 1
        return f"00{self.clock:08X}{self.counter:0{1 + self.clock % 5}X}"

    def put(self, key: str, emits: bool) -> None:
        self.counter += 1
        version, etag = f"v{self.counter}", f"e{self.counter}"
        stack = self.versions.setdefault(key, [])
        if self.versioned:
            stack.append((version, etag))
        else:
            stack[:] = [(version, etag)]
        if emits:
            self.pending.append(self._event(Kind.CREATED, key, version, etag))

    def delete(self, key: str, emits: bool) -> None:
        self.counter += 1
        stack = self.versions.setdefault(key, [])
        if self.versioned:
            stack.append((None, None))
        else:
            stack.clear()
        if emits:
            marker = f"dm{self.counter}" if self.versioned else None
            self.pending.append(self._event(Kind.REMOVED, key, marker, None))

    def delete_version(self, key: str, index: int, emits: bool) -> None:
        stack = self.versions.get(key) or []
        if not self.versioned or not stack:
            return
        version, _ = stack.pop(index % len(stack))
        if emits:
            self.pending.append(
                self._event(Kind.VERSION_REMOVED, key, version or f"dm{self.counter}", None)
            )

    def list(self) -> None:
        """A listing now: every key's latest entry that is an object version."""
        for key in sorted(self.versions):
            state = self.current(BUCKET, key)
            if state.visible:
                self.pending.append(listed(state.version_id, str(state.etag), key=key))

    def _event(self, kind: Kind, key: str, version_id: str | None, etag: str | None) -> Change:
        raw = self._sequencer()
        return Change(
            bucket=BUCKET,
            key=key,
            raw_key=key,
            kind=kind,
            event_name=kind.value,
            fmt=Format.EVENTBRIDGE,
            sequencer=normalize(raw),
            raw_sequencer=raw,
            version_id=version_id if self.versioned else None,
            etag=etag,
            size=5 if etag else None,
        )


step = st.one_of(
    st.tuples(st.just("put"), st.sampled_from(KEYS), st.integers(0, 5)),
    st.tuples(st.just("delete"), st.sampled_from(KEYS), st.integers(0, 5)),
    st.tuples(st.just("delete_version"), st.sampled_from(KEYS), st.integers(0, 5)),
    st.tuples(st.just("list"), st.just(""), st.integers(0, 5)),
    st.tuples(st.just("deliver"), st.just(""), st.integers(0, 2**16)),
    st.tuples(st.just("onboard"), st.just(""), st.just(0)),
)


def _check_monotonic(before: dict[str, LedgerRow], ledger: FakeLedger) -> list[str]:
    """C15's invariants between two moments: no sequencer decreased; no tombstone undone by
    an event that is not newer (an observation of the bucket may, the bucket being the truth)."""
    problems = []
    for (_, key), now in ledger.rows.items():
        prev = before.get(key)
        if prev is None:
            continue
        if (now.seq or "") < (prev.seq or ""):
            problems.append(f"{key}: sequencer {prev.seq} -> {now.seq}")
        if not prev.present and now.present and not now.observed and now.seq == prev.seq:
            problems.append(f"{key}: tombstone undone at {now.seq}")
    return problems


@pytest.mark.contract("C7", "C15")
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(step, min_size=1, max_size=30),
    versioned=st.booleans(),
    duplicate=st.booleans(),
    drop=st.booleans(),
    data=st.data(),
)
def test_listings_and_events_in_any_order_converge(
    steps: list[tuple[str, str, int]],
    versioned: bool,
    duplicate: bool,
    drop: bool,
    data: st.DataObject,
) -> None:
    # GIVEN an existing bucket: what is written before onboarding emits no events; listings
    # run after onboarding (as the backfill does), interleaved with the events' deliveries, in
    # an order (and with the duplicates and losses) hypothesis chooses
    model = Model(versioned=versioned)
    ledger = FakeLedger(clock=lambda: NOW)
    service = IngestService(ledger=ledger, bucket=model, scope_bucket=BUCKET)
    emits = False
    problems: list[str] = []

    def deliver(n: int) -> None:
        for _ in range(min(n, len(model.pending))):
            index = data.draw(st.integers(0, len(model.pending) - 1), label="deliver")
            change = model.pending.pop(index)
            if drop and change.kind is not Kind.LISTED and data.draw(st.booleans(), "lost"):
                continue
            if duplicate and data.draw(st.booleans(), label="duplicated"):
                model.pending.append(change)
            before = {key: r for (_, key), r in ledger.rows.items()}
            result = service.handle(change)
            assert result.outcome is not Outcome.RETRIED
            problems.extend(_check_monotonic(before, ledger))

    for op, key, n in steps:
        if op == "put":
            model.put(key, emits)
        elif op == "delete":
            model.delete(key, emits)
        elif op == "delete_version":
            model.delete_version(key, n, emits)
        elif op == "list" and emits:
            model.list()
        elif op == "onboard":
            emits = True
        else:
            deliver(1 + n % 4)
    emits = True
    model.list()  # the backfill's listing runs after onboarding
    while model.pending:  # quiescence
        deliver(len(model.pending))
    assert problems == []
    # WHEN delivery is quiescent (and, after lost events, one reconciliation has run)
    if drop:
        # one reconciliation: an observation (the repair event) of every key that differs
        for key in KEYS:
            state = model.current(BUCKET, key)
            stored = ledger.get(BUCKET, key)
            if stored is None and not state.visible:
                continue
            if stored is None or not stored.holds(_state(state)):
                service.handle(Change(BUCKET, key, key, Kind.OBSERVE, "Repair", Format.REPAIR))
    # THEN the ledger equals the bucket (without a reconciliation when nothing was lost)
    for key in KEYS:
        state = model.current(BUCKET, key)
        stored = ledger.get(BUCKET, key)
        if not state.visible:
            assert stored is None or not stored.present, key
        else:
            assert stored is not None and stored.present, key
            assert (stored.version_id, stored.etag) == (state.version_id, state.etag), key


def _state(now: ObjectState) -> RowState:
    if not now.visible:
        return RowState(present=False)
    return RowState(True, now.version_id, now.etag, now.size)


def test_the_functions_read_their_scope_from_the_environment() -> None:
    from s3ingest_fn.services.ingest import FunctionSettings

    base = {"LEDGER_TABLE_NAME": "ledger", "DEAD_LETTER_QUEUE_URL": "https://q", "BUCKET_NAME": "a"}
    scope = Scope((BucketScope("a", ("in/",)), BucketScope("b", (), (".csv",))))
    settings = FunctionSettings.from_env({**base, "SCOPE": scope.to_json()})
    assert settings.scope == scope
    assert FunctionSettings.from_env(base).scope == Scope((BucketScope("a"),))
    with pytest.raises(ValueError, match=r"misconfigured.*SCOPE is not JSON"):
        FunctionSettings.from_env({**base, "SCOPE": "[{"})
