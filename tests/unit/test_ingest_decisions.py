"""The ingest decision (CONTRACT C2-C5, C7, C9) over in-memory ports.

Every test runs twice: over :class:`tests.fakes.FakeLedger` (the ``Ledger`` port in memory)
and over the real :class:`DynamoLedger` on moto, so the fake is checked against the
adapter it stands in for. The bucket is always :class:`FakeBucket`: the decision's view of S3 is
one HEAD.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from s3ingest_fn.core.decide import IngestService
from s3ingest_fn.core.events import parse_body
from s3ingest_fn.core.model import Change, Kind, Outcome
from s3ingest_fn.core.sequencer import normalize as normalize_sequencer
from tests.fakes import CountingLedger
from tests.fakes import FakeBucket as _FakeBucket
from tests.moto_ledger import LEDGER_KINDS, counting_ledger
from tests.samples import load_sample

BUCKET = "amzn-s3-demo-bucket"
KEY = "reports/2024 q1.csv"
TTL_SECONDS = 3600
NOW = 1000.0
# Real-format sequencers of one key, in write order; S2 is shorter than S1 (right-padding, C2).
S1, S2, S3 = "00643717F9F8B85354", "00643717FA1234AB", "00643717FB00000001"


# -- ports ---------------------------------------------------------------------------------------


class FakeBucket(_FakeBucket):
    """The bucket port, with this module's bucket and key as defaults."""

    def put(  # type: ignore[override]
        self, version_id: str | None, etag: str, size: int = 5, key: str = KEY
    ) -> None:
        super().put(BUCKET, key, version_id, etag, size)

    def hide(self, key: str = KEY) -> None:  # type: ignore[override]
        super().hide(BUCKET, key)


@pytest.fixture(params=LEDGER_KINDS)
def ledger(request: pytest.FixtureRequest) -> Iterator[CountingLedger]:
    with counting_ledger(request.param, NOW, tombstone_ttl_seconds=TTL_SECONDS) as counted:
        yield counted


@pytest.fixture
def bucket() -> FakeBucket:
    return FakeBucket()


@pytest.fixture
def service(ledger: CountingLedger, bucket: FakeBucket) -> IngestService:
    return IngestService(ledger=ledger, bucket=bucket, scope_bucket=BUCKET)


# -- events: the AWS doc samples, varied ---------------------------------------------------------


def _eventbridge(
    sample: str,
    *,
    key: str,
    bucket: str,
    sequencer: str | None,
    version_id: str | None,
    etag: str | None,
    **detail: Any,
) -> Change:
    doc = copy.deepcopy(load_sample(sample))
    assert isinstance(doc, dict)
    doc["detail"]["bucket"]["name"] = bucket
    obj = doc["detail"]["object"]
    obj["key"] = key.replace(" ", "+")  # form-encoded on the wire
    for name, value in (("sequencer", sequencer), ("version-id", version_id), ("etag", etag)):
        if value is None:
            obj.pop(name, None)
        else:
            obj[name] = value
    doc["detail"].update(detail)
    (change,) = parse_body(json.dumps(doc)).changes
    return change


def created(
    sequencer: str | None,
    version_id: str | None = "v1",
    etag: str | None = "e1",
    *,
    key: str = KEY,
    bucket: str = BUCKET,
) -> Change:
    return _eventbridge(
        "awsdocs-s3ug__eventbridge-ObjectCreated.json",
        key=key,
        bucket=bucket,
        sequencer=sequencer,
        version_id=version_id,
        etag=etag,
    )


def delete_marker(sequencer: str, version_id: str = "dm1") -> Change:
    change = _eventbridge(
        "awsdocs-s3ug__eventbridge-ObjectDeleted-DeleteObject.json",
        key=KEY,
        bucket=BUCKET,
        sequencer=sequencer,
        version_id=version_id,
        etag=None,
    )
    assert change.kind is Kind.REMOVED
    return change


def version_removed(sequencer: str, version_id: str) -> Change:
    change = _eventbridge(
        "awsdocs-s3ug__eventbridge-ObjectDeleted-DeleteObject.json",
        key=KEY,
        bucket=BUCKET,
        sequencer=sequencer,
        version_id=version_id,
        etag=None,
        **{"deletion-type": "Permanently Deleted"},
    )
    assert change.kind is Kind.VERSION_REMOVED
    return change


def row_view(ledger: CountingLedger, key: str = KEY) -> dict[str, Any] | None:
    """The part of a row the decision is responsible for."""
    row = ledger.inner.get(BUCKET, key)
    if row is None:
        return None
    return {
        "state": row.state,
        "seq": row.seq,
        "observed": row.observed,
        "version_id": row.version_id,
        "etag": row.etag,
    }


def seq(raw: str) -> str:
    normalized = normalize_sequencer(raw)
    assert normalized is not None
    return normalized


def _outcome(service: IngestService, change: Change) -> tuple[Outcome, str]:
    result = service.handle(change)
    assert (result.bucket, result.key) == (change.bucket, change.key)
    return result.outcome, result.reason


# -- sequenced events ----------------------------------------------------------------------------


@pytest.mark.contract("C2", "C5")
def test_newer_created_applies_with_one_write_and_no_read(
    service: IngestService, ledger: CountingLedger, bucket: FakeBucket
) -> None:
    # GIVEN a row at S1
    assert _outcome(service, created(S1, "v1", "e1")) == (Outcome.APPLIED, "newer-sequencer")

    # WHEN a create at S2 (newer, though shorter) arrives
    outcome = _outcome(service, created(S2, "v2", "e2"))

    # THEN it is applied at the cost of one conditional write each, no read, no HEAD (C5)
    assert outcome == (Outcome.APPLIED, "newer-sequencer")
    assert row_view(ledger) == {
        "state": "present",
        "seq": seq(S2),
        "observed": False,
        "version_id": "v2",
        "etag": "e2",
    }
    assert ledger.calls == Counter(write_sequenced=2)
    assert bucket.requests == 0


@pytest.mark.contract("C2", "C5")
@pytest.mark.parametrize(
    ("incoming", "expected"),
    [
        (created(S2, "v2", "e2"), (Outcome.DUPLICATE, "equal-sequencer")),
        (created("00643717fa1234ab00", "v2", "e2"), (Outcome.DUPLICATE, "equal-sequencer")),
        (created(S1, "v1", "e1"), (Outcome.STALE, "older-sequencer")),
        (delete_marker(S1), (Outcome.STALE, "older-sequencer")),
    ],
    ids=["equal", "equal-after-case-and-padding", "older", "older-delete"],
)
def test_equal_is_duplicate_and_older_is_stale_with_one_write(
    service: IngestService,
    ledger: CountingLedger,
    bucket: FakeBucket,
    incoming: Change,
    expected: tuple[Outcome, str],
) -> None:
    # GIVEN a row at S2 that the bucket agrees with: v2 (a delete marker for a delete)
    if incoming.kind is Kind.REMOVED:
        service.handle(delete_marker(S2, "dm2"))
    else:
        service.handle(created(S2, "v2", "e2"))
        bucket.put("v2", "e2")
    before, heads = row_view(ledger), bucket.requests

    # WHEN an equal or older event arrives
    outcome = _outcome(service, incoming)

    # THEN the refusal alone says which, and the row is unchanged
    assert outcome == expected
    assert row_view(ledger) == before
    assert ledger.calls == Counter(write_sequenced=2)
    # a hiding delete reads the bucket first (C4: never a tombstone of a key it still shows); a
    # stale create against a real sequencer (its time not ahead of the clock) never
    assert bucket.requests - heads == (1 if incoming.kind is Kind.REMOVED else 0)


@pytest.mark.contract("C6")
def test_older_create_never_undoes_a_delete(service: IngestService, ledger: CountingLedger) -> None:
    assert _outcome(service, delete_marker(S2)) == (Outcome.APPLIED, "newer-sequencer")

    assert _outcome(service, created(S1)) == (Outcome.STALE, "older-sequencer")

    assert row_view(ledger) == {
        "state": "deleted",
        "seq": seq(S2),
        "observed": False,
        "version_id": None,
        "etag": None,
    }


# -- ignored -------------------------------------------------------------------------------------


@pytest.mark.contract("C3", "C9")
def test_metadata_only_event_is_ignored_and_touches_nothing(
    service: IngestService, ledger: CountingLedger, bucket: FakeBucket
) -> None:
    change = _eventbridge(
        "awsdocs-s3ug__eventbridge-ObjectRestoreCompleted.json",
        key=KEY,
        bucket=BUCKET,
        sequencer=None,
        version_id="v1",
        etag="e1",
    )
    assert change.kind is Kind.METADATA

    outcome = _outcome(service, change)

    assert outcome == (Outcome.IGNORED, "metadata-only: Object Restore Completed")
    assert ledger.calls == Counter()
    assert bucket.requests == 0


@pytest.mark.contract("C1", "C9")
def test_event_of_another_bucket_is_out_of_scope(
    service: IngestService, ledger: CountingLedger, bucket: FakeBucket
) -> None:
    result = service.handle(created(S1, bucket="some-other-bucket"))

    assert (result.outcome, result.reason) == (Outcome.IGNORED, "out-of-scope")
    assert result.extra["scope"] == "other-bucket"
    assert ledger.calls == Counter()
    assert bucket.requests == 0


# -- versioned deletes (C4) ----------------------------------------------------------------------


@pytest.mark.contract("C4")
def test_version_removed_records_the_still_visible_version(
    service: IngestService, ledger: CountingLedger, bucket: FakeBucket
) -> None:
    # GIVEN v1 then v2 were written, and v2 (the current version) was then deleted by id
    service.handle(created(S1, "v1", "e1"))
    service.handle(created(S2, "v2", "e2"))
    bucket.put("v1", "e1")

    # WHEN the version delete arrives
    outcome = _outcome(service, version_removed(S3, "v2"))

    # THEN the bucket is consulted and the key stays present at v1: no tombstone (C4)
    assert outcome == (Outcome.APPLIED, "version-removed-key-visible")
    assert bucket.requests == 1
    assert row_view(ledger) == {
        "state": "present",
        "seq": seq(S3),
        "observed": True,
        "version_id": "v1",
        "etag": "e1",
    }


@pytest.mark.contract("C4")
def test_version_removed_of_the_last_version_tombstones(
    service: IngestService, ledger: CountingLedger, bucket: FakeBucket
) -> None:
    service.handle(created(S1, "v1", "e1"))

    outcome = _outcome(service, version_removed(S2, "v1"))

    assert outcome == (Outcome.APPLIED, "version-removed-key-hidden")
    assert bucket.requests == 1
    assert row_view(ledger) == {
        "state": "deleted",
        "seq": seq(S2),
        "observed": True,
        "version_id": None,
        "etag": None,
    }


@pytest.mark.contract("C4", "C5")
def test_older_version_removed_is_stale(
    service: IngestService, ledger: CountingLedger, bucket: FakeBucket
) -> None:
    service.handle(created(S2, "v2", "e2"))
    bucket.put("v2", "e2")
    before = row_view(ledger)

    assert _outcome(service, version_removed(S1, "v0")) == (Outcome.STALE, "older-sequencer")
    assert row_view(ledger) == before


# -- observations (C7) ---------------------------------------------------------------------------


@pytest.mark.contract("C2", "C7")
@pytest.mark.parametrize(
    "change",
    [
        created(None, "v9", "e9"),
        created("", "v9", "e9"),
        parse_body(
            json.dumps({"s3ingestRepair": {"bucket": BUCKET, "key": KEY, "reason": "missing"}})
        ).changes[0],
    ],
    ids=["no-sequencer", "empty-sequencer", "repair"],
)
def test_event_without_usable_sequencer_records_what_the_bucket_holds(
    service: IngestService, ledger: CountingLedger, bucket: FakeBucket, change: Change
) -> None:
    # GIVEN the bucket holds v1 and the ledger nothing
    bucket.put("v1", "e1")

    # WHEN the event arrives
    outcome = _outcome(service, change)

    # THEN the row is read, the bucket HEADed, and the bucket's state recorded as observed
    assert outcome == (Outcome.APPLIED, "observed-bucket-state")
    assert ledger.calls == Counter(get=1, write_observation=1)
    assert bucket.requests == 1
    assert row_view(ledger) == {
        "state": "present",
        "seq": None,
        "observed": True,
        "version_id": "v1",
        "etag": "e1",
    }


@pytest.mark.contract("C7")
def test_observation_keeps_the_row_sequencer(
    service: IngestService, ledger: CountingLedger, bucket: FakeBucket
) -> None:
    service.handle(created(S1, "v1", "e1"))
    bucket.hide()  # a delete whose event has not arrived (or was lost)

    outcome = _outcome(service, created(None))

    assert outcome == (Outcome.APPLIED, "observed-bucket-state")
    assert row_view(ledger) == {
        "state": "deleted",
        "seq": seq(S1),
        "observed": True,
        "version_id": None,
        "etag": None,
    }


@pytest.mark.contract("C7")
def test_observation_that_matches_the_ledger_writes_nothing(
    service: IngestService, ledger: CountingLedger, bucket: FakeBucket
) -> None:
    service.handle(created(S1, "v1", "e1"))
    bucket.put("v1", "e1")

    assert _outcome(service, created(None)) == (Outcome.DUPLICATE, "observation-matches-ledger")
    assert ledger.calls == Counter(write_sequenced=1, get=1)


@pytest.mark.contract("C7")
def test_observation_of_an_absent_key_not_in_the_ledger_is_ignored(
    service: IngestService, ledger: CountingLedger
) -> None:
    assert _outcome(service, created(None)) == (Outcome.IGNORED, "observed-absent-not-in-ledger")
    assert row_view(ledger) is None


@pytest.mark.contract("C7")
def test_older_sequenced_event_after_an_observation_does_not_regress_the_row(
    service: IngestService, ledger: CountingLedger, bucket: FakeBucket
) -> None:
    # GIVEN v1 (S1) then v2 (S2) were written; a repair observed v2 before any event arrived
    bucket.put("v2", "e2")
    service.handle(created(None))
    assert row_view(ledger) == {
        "state": "present",
        "seq": None,
        "observed": True,
        "version_id": "v2",
        "etag": "e2",
    }

    # WHEN v1's event arrives late
    outcome = _outcome(service, created(S1, "v1", "e1"))

    # THEN it is verified against the bucket and superseded: the row keeps v2
    assert outcome == (Outcome.SUPERSEDED, "bucket-moved-past-event")
    assert row_view(ledger) == {
        "state": "present",
        "seq": seq(S1),
        "observed": True,
        "version_id": "v2",
        "etag": "e2",
    }

    # AND its duplicate is a duplicate, and v2's own event then applies and clears observed
    assert _outcome(service, created(S1, "v1", "e1")) == (Outcome.DUPLICATE, "equal-sequencer")
    assert _outcome(service, created(S2, "v2", "e2")) == (
        Outcome.APPLIED,
        "verified-against-bucket",
    )
    assert row_view(ledger) == {
        "state": "present",
        "seq": seq(S2),
        "observed": False,
        "version_id": "v2",
        "etag": "e2",
    }


@pytest.mark.contract("C4", "C7")
def test_older_delete_after_an_observation_never_tombstones_a_visible_key(
    service: IngestService, ledger: CountingLedger, bucket: FakeBucket
) -> None:
    # GIVEN the key was deleted (S1) and re-created (S2); a repair observed the re-created v2
    bucket.put("v2", "e2")
    service.handle(created(None))

    # WHEN the delete's event arrives late
    outcome = _outcome(service, delete_marker(S1))

    # THEN the row stays present (C4, C7), and the delete's sequencer is not taken: the bucket
    # contradicts the delete, which may be forged (issue 24)
    assert outcome == (Outcome.SUPERSEDED, "delete-contradicted-by-bucket")
    assert row_view(ledger) == {
        "state": "present",
        "seq": None,
        "observed": True,
        "version_id": "v2",
        "etag": "e2",
    }


@pytest.mark.contract("C5", "C7")
@pytest.mark.parametrize("versioned", [True, False], ids=["versioned", "unversioned"])
def test_sequenced_event_matching_the_bucket_applies_over_an_observed_row(
    service: IngestService, ledger: CountingLedger, bucket: FakeBucket, versioned: bool
) -> None:
    # GIVEN an observed row that shows what the bucket holds
    version = "v2" if versioned else None
    bucket.put(version, "e2")
    service.handle(created(None))

    # WHEN the event of that very write arrives
    outcome = _outcome(service, created(S2, version, "e2"))

    # THEN it is verified with one HEAD and applied; the row is exact again
    assert outcome == (Outcome.APPLIED, "verified-against-bucket")
    assert bucket.requests == 2  # the observation's HEAD, then the verification's
    assert row_view(ledger) == {
        "state": "present",
        "seq": seq(S2),
        "observed": False,
        "version_id": version,
        "etag": "e2",
    }

    # AND the next event takes the one-write path again
    ledger.calls.clear()
    assert _outcome(service, created(S3, "v3" if versioned else None, "e3"))[0] is Outcome.APPLIED
    assert ledger.calls == Counter(write_sequenced=1)
