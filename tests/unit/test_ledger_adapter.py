"""The DynamoDB ledger adapter (CONTRACT C5, C6, C7).

Two layers: botocore ``Stubber`` on a real client for the exact UpdateItem request and for error
mapping, and moto for the condition semantics evaluated by a DynamoDB implementation.
"""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.stub import ANY, Stubber
from hypothesis import given, settings
from hypothesis import strategies as st
from moto import mock_aws

from s3ingest_fn.adapters.dynamo_ledger import DynamoLedger
from s3ingest_fn.core import sequencer
from s3ingest_fn.core.effects import change_id
from s3ingest_fn.core.model import TransientError
from s3ingest_fn.core.row import LedgerRow, RowState, WriteMeta, WriteResult
from tests.moto_ledger import create_ledger_table, dynamodb_client

TABLE = "ledger"
BUCKET = "amzn-s3-demo-bucket"
KEY = "photos/a b+c.jpg"
TTL_SECONDS = 3600
NOW = 1000.0
RAW_SEQ = "00643717F9F8B85354"
SEQ = sequencer.normalize(RAW_SEQ)
#: How the item stores a normalised sequencer: without its right-padding zeros.
STORED_SEQ = RAW_SEQ


def _client() -> Any:
    return dynamodb_client()


def _meta(
    raw_seq: str | None = RAW_SEQ, reason: str = "newer-sequencer", key: str = KEY
) -> WriteMeta:
    return WriteMeta(
        bucket=BUCKET,
        key=key,
        raw_key="photos/a+b%2Bc.jpg",
        event_name="Object Created/PutObject",
        reason=reason,
        source="live",
        sequencer=sequencer.normalize(raw_seq) if raw_seq else None,
        raw_sequencer=raw_seq,
    )


PRESENT = RowState(present=True, version_id="v1", etag="etag1", size=5)
TOMBSTONE = RowState(present=False)


# -- Stubber: the exact request ----------------------------------------------------------------


def _render(value: dict[str, Any]) -> str:
    ((typ, val),) = value.items()
    if typ == "S":
        return repr(val)
    if typ == "BOOL":
        return "true" if val else "false"
    return str(val)


def _resolve(text: str, names: dict[str, str], values: dict[str, Any]) -> str:
    """The expression with every placeholder replaced by the attribute name or value it holds."""
    text = re.sub(r"#\w+", lambda m: names[m.group(0)], text)
    return re.sub(r":\w+", lambda m: _render(values[m.group(0)]), text)


def _update_clauses(params: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``(SET attribute -> AttributeValue or resolved expression, REMOVE attributes)``."""
    names, values = params["ExpressionAttributeNames"], params["ExpressionAttributeValues"]
    set_part, _, remove_part = params["UpdateExpression"].partition(" REMOVE ")
    assert set_part.startswith("SET ")
    sets: dict[str, Any] = {}
    for name, rhs in re.findall(r"(#\w+) = (.+?)(?=, #\w+ = |$)", set_part[len("SET ") :]):
        sets[names[name]] = values[rhs] if rhs in values else _resolve(rhs, names, values)
    removes = [names[n.strip()] for n in remove_part.split(",")] if remove_part else []
    return sets, removes


@pytest.fixture
def stubbed() -> Iterator[tuple[DynamoLedger, Stubber, list[dict[str, Any]]]]:
    client = _client()
    sent: list[dict[str, Any]] = []

    def capture(params: dict[str, Any], **_: Any) -> None:
        sent.append(copy.deepcopy(params))

    client.meta.events.register("before-parameter-build.dynamodb.UpdateItem", capture)
    ledger = DynamoLedger(client, TABLE, tombstone_ttl_seconds=TTL_SECONDS, clock=lambda: NOW)
    with Stubber(client) as stub:
        yield ledger, stub, sent
        stub.assert_no_pending_responses()


EXPECTED_UPDATE = {
    "TableName": TABLE,
    "Key": {"pk": {"S": f"{BUCKET}/{KEY}"}},
    "UpdateExpression": ANY,
    "ConditionExpression": ANY,
    "ExpressionAttributeNames": ANY,
    "ExpressionAttributeValues": ANY,
    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
}


def _assert_every_placeholder_used(params: dict[str, Any]) -> None:
    # DynamoDB rejects a request with an unused ExpressionAttributeNames/Values entry.
    text = params["UpdateExpression"] + " " + params["ConditionExpression"]
    assert set(params["ExpressionAttributeNames"]) == set(re.findall(r"#\w+", text))
    assert set(params["ExpressionAttributeValues"]) == set(re.findall(r":\w+", text))


@pytest.mark.contract("C5")
def test_apply_if_newer_present_state_is_one_conditional_update(stubbed: Any) -> None:
    # GIVEN a ledger over a stubbed client expecting exactly one UpdateItem
    ledger, stub, sent = stubbed
    stub.add_response("update_item", {}, EXPECTED_UPDATE)

    # WHEN a present state is written at a sequencer
    result = ledger.apply_if_newer(PRESENT, _meta())

    # THEN it applied, with one request whose condition compares sequencers
    assert result.applied and result.token is None  # no processor: no effect claimed
    assert result.change_id == change_id(BUCKET, KEY, SEQ, True, "v1", "etag1")
    assert len(sent) == 1
    params = sent[0]
    _assert_every_placeholder_used(params)
    cond = _resolve(
        params["ConditionExpression"],
        params["ExpressionAttributeNames"],
        params["ExpressionAttributeValues"],
    )
    assert "attribute_not_exists(pk)" in cond
    assert f"sq < {STORED_SEQ!r}" in cond
    assert "ob = false" in cond  # an exact (non-observed) row is required
    assert "attribute_not_exists(bucket)" in cond  # a legacy item is migrated first
    sets, removes = _update_clauses(params)
    assert sets["st"] == {"S": "p"}
    assert sets["sq"] == {"S": STORED_SEQ}
    assert "rq" in removes  # the raw sequencer is the stored one
    assert "ob" in removes  # not observed
    assert sets["vi"] == {"S": "v1"}
    assert sets["et"] == {"S": "etag1"}
    assert sets["sz"] == {"N": "5"}
    assert sets["ut"] == {"N": "1000000"}
    assert sets["h0"]["L"][0] == {"N": "1000000"}  # the decision's time
    assert sets["rv"] == "if_not_exists(rv, 0) + 1"
    assert "expires_at" in removes
    assert "expires_at" not in sets
    # the change stream's outbox marker and id ride on the same write
    assert sets["op"] == {"S": "apply"}
    assert sets["ci"] == {"S": result.change_id}
    assert {"fe", "fl", "ft"} <= set(removes)


@pytest.mark.contract("C5")
def test_apply_verified_does_not_test_observed(stubbed: Any) -> None:
    ledger, stub, sent = stubbed
    stub.add_response("update_item", {}, EXPECTED_UPDATE)

    ledger.apply_verified(PRESENT, _meta(), observed=True, expected_rev=7)

    params = sent[0]
    _assert_every_placeholder_used(params)
    cond = _resolve(
        params["ConditionExpression"],
        params["ExpressionAttributeNames"],
        params["ExpressionAttributeValues"],
    )
    assert f"sq < {STORED_SEQ!r}" in cond
    assert "rv = 7" in cond
    assert "ob" not in cond
    sets, _ = _update_clauses(params)
    assert sets["ob"] == {"BOOL": True}


@pytest.mark.contract("C6")
def test_apply_if_newer_tombstone_sets_expiry_now_plus_ttl(stubbed: Any) -> None:
    ledger, stub, sent = stubbed
    stub.add_response("update_item", {}, EXPECTED_UPDATE)

    result = ledger.apply_if_newer(TOMBSTONE, _meta())

    assert result.applied
    params = sent[0]
    _assert_every_placeholder_used(params)
    sets, removes = _update_clauses(params)
    assert sets["st"] == {"S": "d"}
    assert sets["sq"] == {"S": STORED_SEQ}
    assert sets["expires_at"] == {"N": str(int(NOW) + TTL_SECONDS)}
    assert "expires_at" not in removes
    assert {"vi", "et", "sz"} <= set(removes)


@pytest.mark.contract("C7")
@pytest.mark.parametrize(
    ("expected_rev", "condition"), [(None, "attribute_not_exists(pk)"), (4, "rv = 4")]
)
def test_record_observation_is_conditional_on_the_row_not_having_moved(
    stubbed: Any, expected_rev: int | None, condition: str
) -> None:
    ledger, stub, sent = stubbed
    stub.add_response("update_item", {}, EXPECTED_UPDATE)

    result = ledger.record_observation(
        PRESENT, _meta(None, "observed-bucket-state"), expected_rev=expected_rev
    )

    assert result.applied
    params = sent[0]
    _assert_every_placeholder_used(params)
    cond = _resolve(
        params["ConditionExpression"],
        params["ExpressionAttributeNames"],
        params["ExpressionAttributeValues"],
    )
    assert cond == f"({condition}) AND attribute_not_exists(bucket)"
    sets, removes = _update_clauses(params)
    assert sets["ob"] == {"BOOL": True}
    assert "sq" not in sets and "sq" not in removes  # an observation keeps the sequencer
    assert sets["rv"] == "if_not_exists(rv, 0) + 1"


@pytest.mark.contract("C5")
def test_conditional_check_failure_returns_the_old_row_typed(stubbed: Any) -> None:
    # GIVEN DynamoDB refuses the condition and returns the row (ALL_OLD)
    ledger, stub, _ = stubbed
    item = {
        "pk": {"S": f"{BUCKET}/{KEY}"},
        "rk": {"S": ""},  # last written with the decoded key as its raw key (a repair)
        "sq": {"S": STORED_SEQ},
        "st": {"S": "p"},
        "rv": {"N": "3"},
        "sz": {"N": "5"},
    }
    stub.add_client_error(
        "update_item",
        service_error_code="ConditionalCheckFailedException",
        service_message="The conditional request failed",
        http_status_code=400,
        modeled_fields={"Item": item},
        expected_params=EXPECTED_UPDATE,
    )

    # WHEN a write is attempted
    result = ledger.apply_if_newer(PRESENT, _meta())

    # THEN the refusal carries the old row, converted, without a second request
    assert result == WriteResult(
        applied=False,
        old=LedgerRow(
            bucket=BUCKET,
            key=KEY,
            raw_key=KEY,
            present=True,
            seq=SEQ,
            raw_seq=RAW_SEQ,
            observed=False,
            rev=3,
            size=5,
        ),
    )


@pytest.mark.contract("C9")
def test_throttling_raises_transient_error(stubbed: Any) -> None:
    ledger, stub, _ = stubbed
    stub.add_client_error(
        "update_item",
        service_error_code="ProvisionedThroughputExceededException",
        http_status_code=400,
        expected_params=EXPECTED_UPDATE,
    )

    with pytest.raises(TransientError, match="ProvisionedThroughputExceededException") as info:
        ledger.apply_if_newer(PRESENT, _meta())
    assert info.value.__cause__ is not None


# -- moto: the condition semantics --------------------------------------------------------------


def _create_table(client: Any) -> None:
    create_ledger_table(client, TABLE)


@pytest.fixture
def ledger() -> Iterator[DynamoLedger]:
    with mock_aws():
        client = _client()
        _create_table(client)
        yield DynamoLedger(client, TABLE, tombstone_ttl_seconds=TTL_SECONDS, clock=lambda: NOW)


OLDER, NEWER = "00643717F9F8B85354", "00643717FA1234"  # NEWER is shorter but one second later


def _row(ledger: DynamoLedger) -> LedgerRow:
    row = ledger.get(BUCKET, KEY)
    assert row is not None
    return row


@pytest.mark.contract("C7")
def test_require_exact_refuses_to_overwrite_an_observed_row_even_with_newer_sequencer(
    ledger: DynamoLedger,
) -> None:
    # GIVEN a row at OLDER, then overwritten by an observation (observed=True, seq kept)
    assert ledger.apply_if_newer(PRESENT, _meta(OLDER)).applied
    observed_state = RowState(present=True, version_id="v2", etag="etag2", size=7)
    assert ledger.record_observation(
        observed_state, _meta(None, "observed-bucket-state"), expected_rev=1
    ).applied
    assert _row(ledger).observed is True
    assert _row(ledger).seq == sequencer.normalize(OLDER)

    # WHEN a newer sequenced write requires an exact (non-observed) row
    refused = ledger.apply_if_newer(TOMBSTONE, _meta(NEWER))

    # THEN it is refused and the old row comes back; the row is untouched
    assert not refused.applied
    assert refused.old is not None
    assert refused.old.observed is True
    assert refused.old.version_id == "v2"
    assert refused.old.rev == 2
    assert _row(ledger).state == "present"

    # WHEN the same write does not require exactness THEN it applies
    applied = ledger.apply_verified(TOMBSTONE, _meta(NEWER), observed=False, expected_rev=2)
    assert applied.applied
    row = _row(ledger)
    assert row.state == "deleted"
    assert row.observed is False
    assert row.seq == sequencer.normalize(NEWER)
    assert row.expires_at == int(NOW) + TTL_SECONDS
    assert row.version_id is None and row.etag is None and row.size is None


@pytest.mark.contract("C7")
def test_record_observation_with_stale_expected_rev_is_refused(ledger: DynamoLedger) -> None:
    ledger.apply_if_newer(PRESENT, _meta(OLDER))
    before = _row(ledger)
    assert before.rev == 1

    observed = RowState(present=False)
    stale = ledger.record_observation(observed, _meta(None, "observed"), expected_rev=0)
    absent = ledger.record_observation(observed, _meta(None, "observed"), expected_rev=None)

    assert not stale.applied
    assert stale.old is not None and stale.old.rev == 1
    assert not absent.applied
    assert _row(ledger) == before


@pytest.mark.contract("C7")
def test_rev_increments_by_one_per_write_and_not_on_a_refusal(ledger: DynamoLedger) -> None:
    assert ledger.record_observation(PRESENT, _meta(None, "observed"), expected_rev=None).applied
    assert _row(ledger).rev == 1
    assert ledger.apply_verified(PRESENT, _meta(OLDER), observed=False, expected_rev=1).applied
    assert _row(ledger).rev == 2
    assert ledger.record_observation(TOMBSTONE, _meta(None, "observed"), expected_rev=2).applied
    assert _row(ledger).rev == 3
    assert _row(ledger).seq == sequencer.normalize(OLDER)  # an observation keeps seq
    assert not ledger.apply_verified(PRESENT, _meta(OLDER), observed=False, expected_rev=3).applied
    assert _row(ledger).rev == 3


raw_sequencers = st.text(alphabet="0123456789ABCDEFabcdef", min_size=1, max_size=20)


@pytest.mark.contract("C5")
def test_no_write_ever_lowers_seq() -> None:
    # One emulator for every example; each example writes its own key.
    with mock_aws():
        client = _client()
        _create_table(client)
        ledger = DynamoLedger(client, TABLE, tombstone_ttl_seconds=TTL_SECONDS, clock=lambda: NOW)
        keys = itertools.count()

        @settings(max_examples=40, deadline=None)
        @given(writes=st.lists(st.tuples(raw_sequencers, st.booleans()), min_size=1, max_size=10))
        def check(writes: list[tuple[str, bool]]) -> None:
            key = f"k{next(keys)}"
            highest: str | None = None
            for raw, tombstone in writes:
                incoming = sequencer.normalize(raw)
                assert incoming is not None
                result = ledger.apply_if_newer(
                    TOMBSTONE if tombstone else PRESENT, _meta(raw, key=key)
                )
                assert result.applied == (highest is None or incoming > highest)
                highest = incoming if highest is None else max(highest, incoming)
                row = ledger.get(BUCKET, key)
                assert row is not None
                assert row.seq == highest

        check()
