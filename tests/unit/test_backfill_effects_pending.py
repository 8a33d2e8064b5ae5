"""A processor outage during a backfill (issue 34, item 9): a task whose row was written while
the processor failed after it is ``Succeeded`` (``effects-pending: ...``), its effect left
pending for ``s3ingest reprocess`` or reconciliation; a ledger write that fails, or a worker
killed before its commit, still fails the task (``TemporaryFailure``, retried)."""

from __future__ import annotations

from typing import Any

import pytest

from s3ingest.local.emulator.chaos import kill_after_effect
from s3ingest_fn.core.decide import IngestService
from s3ingest_fn.core.effects import AppliedChange, EffectRunner, PinnedContent
from s3ingest_fn.core.model import Change as IngestChange
from s3ingest_fn.core.model import (
    Format,
    Kind,
    ObjectState,
    TransientError,
)
from s3ingest_fn.core.row import DEFAULT_PROCESSOR, PENDING, RowState, WriteMeta
from s3ingest_fn.services.backfill import EFFECTS_PENDING, handle_invocation
from s3ingest_fn.services.listing_backfill import ListingBackfill, Shard
from tests.fakes import FakeBucket, FakeContentReader, FakeInventoryStore, FakeLedger

pytestmark = pytest.mark.contract("C11", "C13")

BUCKET, KEY, NOW_MS = "landing", "in/a.csv", 1_000_000


def _event() -> dict[str, Any]:
    return {
        "invocationSchemaVersion": "2.0",
        "invocationId": "inv-1",
        "job": {"id": "job-1"},
        "tasks": [{"taskId": "t1", "s3Bucket": BUCKET, "s3Key": KEY, "s3VersionId": None}],
    }


def _down(change: AppliedChange, content: PinnedContent | None) -> None:
    raise ConnectionError("downstream is down")


def _service(
    ledger: FakeLedger | None = None, processor: Any = _down, after_effect: Any = None
) -> tuple[IngestService, FakeLedger]:
    ledger = ledger or FakeLedger()
    bucket = FakeBucket({(BUCKET, KEY): ObjectState(True, "v1", "e1", 5)})
    reader = FakeContentReader()
    reader.put(BUCKET, KEY, "v1", b"hello")
    runner = kill_after_effect(
        EffectRunner(processor, reader, clock_ms=lambda: NOW_MS), after_effect
    )
    return IngestService(ledger, bucket, scope_bucket=BUCKET, effects=runner), ledger


def test_a_failing_processor_leaves_the_row_written_and_the_task_succeeded() -> None:
    # GIVEN a backfill task of a key the ledger never saw, and the processor failing
    service, ledger = _service()
    # WHEN Batch Operations invokes the backfill
    (result,) = handle_invocation(_event(), service)["results"]
    # THEN the task succeeded, saying its effect is pending and why
    assert result["resultCode"] == "Succeeded"
    assert result["resultString"].startswith(
        f"{EFFECTS_PENDING}: processor-failed: ConnectionError: downstream is down"
    )
    # and the row holds the object, its effect pending with the claim released (behind now)
    row = ledger.get(BUCKET, KEY)
    assert row is not None and row.present and row.version_id == "v1"
    effect = row.effect_of(DEFAULT_PROCESSOR)
    assert effect is not None and effect.status == PENDING
    assert service.behind(row, DEFAULT_PROCESSOR)


def test_the_live_path_still_retries_it_as_a_transient_error() -> None:
    service, _ = _service()
    change = IngestChange(
        bucket=BUCKET,
        key=KEY,
        raw_key=KEY,
        kind=Kind.OBSERVE,
        event_name="Backfill/job-1",
        fmt=Format.BACKFILL,
    )
    with pytest.raises(TransientError, match="processor-failed") as raised:
        service.handle(change)
    assert raised.value.effects_pending  # the message comes back, as before
    assert raised.value.extra["change_id"]  # the change the row holds, its effect pending


class _RefusingLedger(FakeLedger):
    """A ledger whose observation writes fail (throttled beyond the SDK's retries)."""

    def record_observation(self, state: RowState, meta: WriteMeta, *args: Any) -> Any:
        raise TransientError("dynamodb UpdateItem: ProvisionedThroughputExceededException")


def test_a_ledger_write_that_fails_still_fails_the_task() -> None:
    service, ledger = _service(ledger=_RefusingLedger())
    (result,) = handle_invocation(_event(), service)["results"]
    assert result["resultCode"] == "TemporaryFailure"
    assert "ProvisionedThroughputExceededException" in result["resultString"]
    assert ledger.get(BUCKET, KEY) is None


def test_a_worker_killed_before_its_commit_still_fails_the_task() -> None:
    # GIVEN a processor that works, and the worker dying between its effect and the commit
    def killed(change: AppliedChange) -> None:
        raise TransientError("worker-killed-before-commit")

    service, _ = _service(processor=lambda change, content: None, after_effect=killed)
    (result,) = handle_invocation(_event(), service)["results"]
    # THEN the invocation reports no success for it: Batch Operations retries the task
    assert result["resultCode"] == "TemporaryFailure"
    assert result["resultString"] == "worker-killed-before-commit"


# -- the listing backfill ------------------------------------------------------------------------


def _listing(ledger: FakeLedger | None = None) -> ListingBackfill:
    from tests.unit.test_listing_backfill_plan import FakeShardListing

    service, _ = _service(ledger=ledger)
    # the listing shows the key's version v1 (written from the listing, without a HEAD)
    return ListingBackfill(
        listing=FakeShardListing({KEY: ["v1"]}),
        store=FakeInventoryStore(),
        checkpoint_bucket="checkpoints",
        service=service,
        record_concurrency=2,
    )


def test_a_listed_key_whose_processor_fails_counts_as_effects_pending() -> None:
    # GIVEN a shard of one key, its processor failing; WHEN it is listed
    listing = _listing()
    result = listing.list_shard("r", Shard(id="0000", bucket=BUCKET))
    listing.close()
    # THEN the page is checkpointed done, the key written and counted apart (not a failure)
    assert result["done"] is True
    assert result["counts"]["listed"] == 1 and result["counts"]["effects_pending"] == 1
    row = listing.service.ledger.get(BUCKET, KEY)
    assert row is not None and row.present


def test_a_listed_key_whose_ledger_write_fails_still_fails_the_page() -> None:
    listing = _listing(ledger=_RefusingLedger())
    with pytest.raises(TransientError, match="listed keys failed to record"):
        listing.list_shard("r", Shard(id="0000", bucket=BUCKET))
    listing.close()
