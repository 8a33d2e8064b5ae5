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
from s3ingest_fn.core.row import (
    TOKEN_SECOND_SHIFT,
    Claim,
    LedgerRow,
    RowState,
    WriteMeta,
    WriteResult,
    fencing_token,
)
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
    # claims at epoch ms below 1000 (second 0): each token is fencing_token(rev, ms) == rev
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


# -- fencing tokens across a restored or a recreated table (issue 24) --------------------------

T0 = 1_800_000_000_000  # epoch ms of the first claim: a token of today's clock
LEASE = 900_000


class _Table:
    """One ledger and its storage: ``snapshot`` (the items as of now, a PITR restore point),
    ``restore`` (the table holds exactly those items again: the restored table under the
    ledger's name) and ``empty`` (a recreated table)."""

    def __init__(self, ledger: Ledger, snapshot: Callable[[], Any], put: Callable[[Any], None]):
        self.ledger, self.snapshot, self._put = ledger, snapshot, put

    def restore(self, items: Any) -> None:
        self._put(items)

    def empty(self) -> None:
        self._put(None)


def _dynamo_table(client: Any, clock: Callable[[], float]) -> _Table:
    def snapshot() -> list[dict[str, Any]]:
        return list(client.scan(TableName="ledger")["Items"])

    def put(items: list[dict[str, Any]] | None) -> None:
        for item in client.scan(TableName="ledger")["Items"]:
            client.delete_item(TableName="ledger", Key={"pk": item["pk"]})
        for item in items or ():
            client.put_item(TableName="ledger", Item=item)

    return _Table(DynamoLedger(client, "ledger", TTL, clock=clock), snapshot, put)


def _fake_table(clock: Callable[[], float]) -> _Table:
    fake = FakeLedger(clock=clock, tombstone_ttl_seconds=TTL)

    def put(rows: dict[Any, Any] | None) -> None:
        fake.rows = dict(rows or {})

    return _Table(fake, lambda: dict(fake.rows), put)


def _token(result: WriteResult) -> int:
    """The fencing token of an applied claim."""
    assert result.applied and result.token is not None, result
    return result.token


def _row(lg: Ledger) -> LedgerRow:
    row = lg.get(BUCKET, KEY)
    assert row is not None
    return row


def _restore_scenario(table: _Table, at: list[int], recreate: bool) -> list[Any]:
    """Claims of one key on the old table, a restore to a point before the last two (or an
    empty table), then claims on the new table at least a second after the last old one;
    asserts the fencing properties and returns what each step answered."""
    lg = table.ledger

    def claim_at(ms: int) -> Claim:
        at[0] = ms
        return claim(ms, ms + LEASE)

    # old table: A claims and its worker dies (the lease ends early), the restore point
    a = _token(lg.apply_if_newer(V1, meta(S1), claim(T0, T0 + 500)))
    point = table.snapshot()
    b = _token(lg.reclaim(BUCKET, KEY, a, claim_at(T0 + 1_000)))  # B takes A's effect over
    b_done = lg.finish(BUCKET, KEY, b, "done")
    c = _token(lg.apply_if_newer(V2, meta(S2), claim_at(T0 + 2_000)))  # C's worker still runs
    old = [a, b, c]
    # the swap: the restored table (rows at older revisions) or an empty one takes the name
    table.empty() if recreate else table.restore(point)
    t1 = T0 + 3_000  # one second after the old table's last claim
    if recreate:
        d = _token(lg.apply_if_newer(V1, meta(S1), claim_at(t1)))
    else:
        d = _token(lg.reclaim(BUCKET, KEY, a, claim_at(t1)))  # A's effect, pending again
    # the revisions repeat (a revision alone as the token would repeat A's or B's), the tokens
    # do not
    rev_d = _row(lg).rev
    assert rev_d == (1 if recreate else 2)
    assert d > max(old)
    # B's worker of the old table (its commit retried) cannot commit over D's claim
    stale_b = lg.finish(BUCKET, KEY, b, "done")
    d_done = lg.finish(BUCKET, KEY, d, "done")
    e = _token(lg.apply_if_newer(V2, meta(S2), claim_at(t1 + 1_000)))  # C's change, replayed
    assert e > max(old)
    # C's worker of the old table, still running, cannot commit over E's claim
    stale_c = lg.finish(BUCKET, KEY, c, "done")
    e_done = lg.finish(BUCKET, KEY, e, "done")
    assert (b_done, stale_b, d_done, stale_c, e_done) == (True, False, True, False, True)
    effect = _row(lg).effect
    assert effect is not None and effect.status == "done"
    # within each table the tokens strictly increase
    assert old == sorted(set(old)) and d < e
    return [a, b, b_done, c, d, stale_b, d_done, e, stale_c, e_done, rev_d]


@pytest.mark.parametrize("recreate", [False, True], ids=["pitr-restore", "recreated-table"])
def test_a_claim_after_a_restore_outranks_every_earlier_token(recreate: bool) -> None:
    # GIVEN a key claimed and committed on the ledger, a restore point between its claims, and
    # a worker of the old table still holding a claim at the swap
    # WHEN the restored (or an empty) table takes the ledger's place and the key is claimed
    # again a second or more after the old table's last claim
    # THEN every new token is greater than every token the old table issued, and the old
    # table's workers cannot commit over the new claims: on DynamoDB (moto) and the fake alike
    at = [T0]

    def clock() -> float:
        return at[0] / 1000

    with moto_ledger_table("ledger") as client:
        expected = _restore_scenario(_dynamo_table(client, clock), at, recreate)
        on_dynamo = _dynamo_table(client, clock).ledger.get(BUCKET, KEY)
    at[0] = T0
    fake = _fake_table(clock)
    assert _restore_scenario(fake, at, recreate) == expected
    assert fake.ledger.get(BUCKET, KEY) == on_dynamo


@pytest.mark.parametrize("seconds", [1, 3])
def test_a_restore_needs_one_second_per_2_20_lost_revisions(seconds: int) -> None:
    # GIVEN a row whose last claim was at revision 7 + lost, and a restore back to revision 7
    # (the claims after the restore point lost)
    point, at = 7, T0 + 999  # the old claim late in its second
    for lost in (1, 2**20 * seconds, 2**20 * seconds + 1):
        last = fencing_token(point + lost, at)
        # WHEN the restored row is claimed `seconds` whole seconds later (early in that second)
        again = fencing_token(point + 1, at + 1 + 1000 * (seconds - 1))
        # THEN it outranks every earlier token while lost <= seconds << 20, and no further
        assert (again > last) == (lost <= seconds << TOKEN_SECOND_SHIFT), lost
