"""The ambiguous write (issue 34; CONTRACT C9, C11): a DynamoDB write applied whose response was
lost. botocore retries it, the retry fails its condition, and the row it is refused by holds the
write's own claim: the effect runs now, under that claim, instead of the message being acked as a
``duplicate`` with the effect pending until reconciliation."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ConnectionClosedError
from botocore.httpsession import URLLib3Session

from s3ingest.local.stack.runtime import LocalRuntime
from s3ingest_fn import wiring
from s3ingest_fn.adapters.dynamo_ledger.codec import item_of
from s3ingest_fn.adapters.dynamo_ledger.operations import own_write
from s3ingest_fn.core.effects import AppliedChange, PinnedContent, ProcessorSpec
from s3ingest_fn.core.events import parse_body
from s3ingest_fn.core.model import Outcome
from s3ingest_fn.core.row import (
    PENDING,
    Claim,
    Effect,
    LedgerRow,
    QueuedChange,
    fencing_token,
)


class ResponseLost:
    """botocore ``before-send.dynamodb.UpdateItem`` hook: the first ``times`` requests are sent
    to the emulator (DynamoDB applies them), then their response is lost: a connection error,
    which botocore retries."""

    def __init__(self, times: int = 1) -> None:
        self.left = times
        self.lost: list[str] = []
        self.session = URLLib3Session()

    def __call__(self, request: Any, **_: Any) -> None:
        if self.left <= 0:
            return
        self.left -= 1
        response = self.session.send(request)
        self.lost.append(json.loads(response.content or b"{}").get("__type", "applied"))
        raise ConnectionClosedError(endpoint_url=request.url)


def _runtime(emulator: Any) -> tuple[LocalRuntime, list[tuple[str, str]]]:
    rt = LocalRuntime(emulator, versioning="Enabled")
    runs: list[tuple[str, str]] = []

    def probe(change: AppliedChange, content: PinnedContent | None) -> None:
        runs.append((change.key, change.change_id))

    rt.service.effects = wiring.effect_runner([ProcessorSpec(name="probe", call=probe)], rt.s3)
    return rt, runs


@pytest.mark.contract("C9", "C11")
def test_a_write_applied_whose_response_was_lost_runs_its_effect_now(emulator: Any) -> None:
    # GIVEN a put whose ledger write DynamoDB applies but whose response is lost, so botocore
    # retries it and the retry fails its condition (the row already holds the sequencer)
    rt, runs = _runtime(emulator)
    rt.faithful.put("k.csv", "one")
    (event,) = rt.faithful.take_pending()
    (change,) = parse_body(json.dumps(event)).changes
    lost = ResponseLost()
    rt.ddb.meta.events.register("before-send.dynamodb.UpdateItem", lost)
    try:
        # WHEN the ingest service handles the event
        result = rt.service.handle(change)
    finally:
        rt.ddb.meta.events.unregister("before-send.dynamodb.UpdateItem", lost)
    # THEN the first attempt was applied and its response lost; the outcome is the write's own
    # (applied), and the effect it claimed ran and committed in this invocation
    assert lost.lost == ["applied"]
    assert result.outcome is Outcome.APPLIED
    assert result.extra["effect"] == {"probe": "done"}
    (row,) = rt.ledger_rows()
    assert runs == [("k.csv", row.change_id)]
    effect = row.effect_of("probe")
    assert effect is not None and effect.status == "done"
    # and a duplicate of the message afterwards runs nothing more
    assert rt.service.handle(change).outcome is Outcome.DUPLICATE
    assert len(runs) == 1


def _row(lease: int, token: int, change_id: str = "c1", rev: int = 3) -> LedgerRow:
    return LedgerRow(
        bucket="b",
        key="k",
        present=True,
        rev=rev,
        change_id=change_id,
        named_effects={"p": Effect(PENDING, token=token, lease_until_ms=lease)},
    )


@pytest.mark.contract("C11")
def test_only_the_write_s_own_claim_is_read_as_applied() -> None:
    # GIVEN the claim a write made, and rows a retry of it could be refused by
    claim = Claim(now_ms=1_800_000_000_123, lease_until_ms=1_800_000_900_000, processors=("p",))
    token = fencing_token(3, claim.now_ms)
    # THEN the row as the write left it is the write's own: applied, with its token
    mine = own_write(_row(claim.lease_until_ms, token), "c1", claim)
    assert mine is not None and mine.applied and mine.token == token and mine.change_id == "c1"
    # and another worker's claim of the same change (another lease), a later revision, another
    # change, or no claim at all, is not: the retry's duplicate stands
    assert own_write(_row(claim.lease_until_ms + 1, token), "c1", claim) is None
    assert own_write(_row(claim.lease_until_ms, token, rev=4), "c1", claim) is None
    assert own_write(_row(claim.lease_until_ms, token, change_id="c2"), "c1", claim) is None
    assert own_write(_row(claim.lease_until_ms, token), "c1", None) is None


def _queued(change_id: str) -> QueuedChange:
    return QueuedChange(
        change_id=change_id,
        present=True,
        sequencer=None,
        version_id=None,
        etag='"e"',
        size=1,
        source="event",
        event_name="ObjectCreated:Put",
    )


@pytest.mark.contract("C11")
def test_a_queued_commit_whose_response_was_lost_removes_only_its_own_change(
    emulator: Any,
) -> None:
    # GIVEN an every-change processor's claim of a row with two queued changes, q1 then q2
    rt = LocalRuntime(emulator, versioning="Enabled")
    ledger = rt.ledger
    row = LedgerRow(
        bucket=rt.faithful.bucket,
        key="queued.csv",
        present=True,
        rev=4,
        change_id="q2",
        named_effects={
            "p": Effect(
                PENDING, token=7, lease_until_ms=2**40, queue=(_queued("q1"), _queued("q2"))
            )
        },
    )
    rt.ddb.put_item(TableName=ledger._table, Item=item_of(row))
    lost = ResponseLost()
    rt.ddb.meta.events.register("before-send.dynamodb.UpdateItem", lost)
    try:
        # WHEN q1's commit (more changes follow) is applied, its response lost and retried
        committed = ledger.finish(
            row.bucket, row.key, 7, "done", processor="p", change_id="q1", more=True
        )
    finally:
        rt.ddb.meta.events.unregister("before-send.dynamodb.UpdateItem", lost)
    # THEN the first attempt was applied, the retry removed nothing more, and the commit reads
    # as the worker's own: q2 is still queued under the same claim
    assert lost.lost == ["applied"]
    assert committed is True
    after = ledger.get(row.bucket, row.key)
    assert after is not None
    effect = after.effect_of("p")
    assert effect is not None and effect.token == 7
    assert [q.change_id for q in effect.queue] == ["q2"]
