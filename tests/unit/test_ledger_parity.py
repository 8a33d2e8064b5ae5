"""The fake ledger (``tests/fakes``) against the DynamoDB adapter on moto: the same operations,
the same answers, the same rows, so the fake the unit tests use cannot drift from the adapter.

Each check is a script of ledger operations; it runs on both and the results (applied or not,
tokens, change ids, the row refusing a write, the row at the end) are compared.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from s3ingest_fn.adapters.dynamo_ledger import DynamoLedger
from s3ingest_fn.core import sequencer
from s3ingest_fn.core.ports import Ledger
from s3ingest_fn.core.row import Claim, RowState, WriteMeta
from tests.fakes import FakeLedger
from tests.moto_ledger import moto_ledger_table

BUCKET, KEY = "amzn-s3-demo-bucket", "a b+c"
NOW, TTL = 1000.0, 3600
S1, S2, S3 = "00643717F9F8B85354", "00643717FA1234", "00643717FB00000001"
#: A sequencer S3 cannot have sent (64 significant digits), as a forged event wrote it before
#: events were checked (issue 24).
FORGED = "F" * 64
V1 = RowState(True, "v1", "e1", 1)
V2 = RowState(True, "v2", "e2", 2)
GONE = RowState(False)


def meta(raw: str | None, reason: str = "newer-sequencer", raw_key: str = "a+b%2Bc") -> WriteMeta:
    return WriteMeta(
        BUCKET,
        KEY,
        raw_key,
        "ObjectCreated:Put",
        reason,
        "live",
        sequencer.normalize(raw) if raw else None,
        raw,
    )


def claim(now: int, until: int) -> Claim:
    return Claim(now_ms=now, lease_until_ms=until)


Script = Callable[[Ledger], list[Any]]

SCRIPTS: dict[str, Script] = {
    "newer-applies-older-refused": lambda lg: [
        lg.apply_if_newer(V1, meta(S2)),
        lg.apply_if_newer(V2, meta(S1)),
        lg.apply_if_newer(V2, meta(S2)),
        lg.apply_if_newer(GONE, meta(S3)),
    ],
    "observed-row-needs-verification": lambda lg: [
        lg.apply_if_newer(V1, meta(S1)),
        lg.record_observation(V2, meta(None, "observed-bucket-state"), 1),
        lg.apply_if_newer(GONE, meta(S2)),
        lg.apply_verified(V1, meta(S2), observed=False, expected_rev=1),
        lg.apply_verified(V2, meta(S2), observed=True, expected_rev=2),
    ],
    "observation-needs-unchanged-revision": lambda lg: [
        lg.record_observation(V1, meta(None, "observed-bucket-state"), None),
        lg.record_observation(V2, meta(None, "observed-bucket-state"), None),
        lg.record_observation(V2, meta(None, "observed-bucket-state"), 0),
        lg.record_observation(GONE, meta(None, "observed-bucket-state"), 1),
    ],
    "version-removal": lambda lg: [
        lg.apply_if_newer(V1, meta(S1)),
        lg.advance_sequencer(V2, meta(S2), observed=True),  # the row does not hold V2: refused
        lg.advance_sequencer(V1, meta(S2), observed=True),
        lg.apply_observed_at(V1, meta(S3)),  # holds V1 already: refused
        lg.apply_observed_at(GONE, meta(S3)),
    ],
    "claims-commit-and-fence": lambda lg: [
        lg.apply_if_newer(V1, meta(S1), claim(10, 100)),
        lg.apply_if_newer(V2, meta(S2), claim(50, 200)),  # a live lease blocks a newer change
        lg.finish(BUCKET, KEY, 99, "done"),  # not the claim's token
        lg.finish(BUCKET, KEY, 1, "done"),
        lg.apply_if_newer(V2, meta(S2), claim(60, 300)),
        lg.release(BUCKET, KEY, 2),
        lg.release(BUCKET, KEY, 2),
        lg.reclaim(BUCKET, KEY, 2, claim(70, 400)),
        lg.finish(BUCKET, KEY, 2, "done"),  # the old token lost the claim
        lg.finish(BUCKET, KEY, 3, "superseded"),
        lg.reclaim(BUCKET, KEY, 3, claim(80, 500)),  # superseded: taken over at once
        lg.finish(BUCKET, KEY, 4, "done"),
    ],
    "expired-lease-is-taken-over": lambda lg: [
        lg.apply_if_newer(V1, meta(S1), claim(10, 100)),
        lg.reclaim(BUCKET, KEY, 1, claim(50, 150)),  # lease still live
        lg.reclaim(BUCKET, KEY, 1, claim(101, 250)),
        lg.apply_if_newer(GONE, meta(S2), claim(251, 400)),  # after the lease: a new change
        lg.apply_if_newer(V2, meta(S3)),  # without a claim: the effect is dropped
    ],
    "same-change-keeps-the-effect": lambda lg: [
        lg.record_observation(V1, meta(None, "observed-bucket-state"), None, claim(10, 100)),
        lg.finish(BUCKET, KEY, 1, "done"),
        lg.advance_sequencer(
            V1, meta(S1, "verified-against-bucket"), observed=False, expected_rev=2
        ),
    ],
    # a poisoned sequencer reset: the revision must match; the row keeps no sequencer, holds
    # the bucket's state as observed, and the next event is ordered again (C5, C7)
    "sequencer-reset-new-change": lambda lg: [
        lg.apply_if_newer(V1, meta(FORGED), claim(10, 100)),
        lg.apply_if_newer(V2, meta(S2)),  # stale against the forged sequencer
        lg.reset_sequencer(V2, meta(None, "sequencer-reset: sequencer-length"), 7, claim(20, 90)),
        lg.reset_sequencer(V2, meta(None, "sequencer-reset: sequencer-length"), 1, claim(200, 300)),
        lg.get(BUCKET, KEY),
        lg.apply_verified(V2, meta(S2), observed=False, expected_rev=2),
    ],
    "sequencer-reset-same-change": lambda lg: [
        lg.apply_if_newer(GONE, meta(FORGED)),
        lg.reset_sequencer(
            GONE, meta(None, "sequencer-reset: sequencer-length"), 1, same_change=True
        ),
        lg.get(BUCKET, KEY),
        lg.apply_if_newer(V1, meta(S1)),  # refused: an observed row is verified first (C7)
    ],
    # the key as received: S3's own form (no rk stored), another form, the decoded key itself
    "raw-key-forms": lambda lg: [
        lg.apply_if_newer(V1, meta(S1, raw_key="a%20b%2bc")),
        lg.get(BUCKET, KEY),
        lg.apply_if_newer(V2, meta(S2, raw_key=KEY)),
        lg.get(BUCKET, KEY),
        lg.apply_if_newer(GONE, meta(S3)),
    ],
}


@pytest.fixture
def dynamo() -> Iterator[DynamoLedger]:
    with moto_ledger_table("ledger") as client:
        yield DynamoLedger(client, "ledger", TTL, clock=lambda: NOW)


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_the_fake_ledger_answers_as_the_dynamodb_adapter(name: str, dynamo: DynamoLedger) -> None:
    fake = FakeLedger(clock=lambda: NOW, tombstone_ttl_seconds=TTL)
    expected = SCRIPTS[name](dynamo)
    got = SCRIPTS[name](fake)
    assert got == expected
    assert fake.get(BUCKET, KEY) == dynamo.get(BUCKET, KEY)
    # the script did something: at least one write applied and the row exists
    assert any(getattr(r, "applied", r is True) for r in expected)
    assert dynamo.get(BUCKET, KEY) is not None
