"""The fan-out's ledger shards read back as the rows written, in this release's form and in the
previous release's (an execution that spans a deploy reads shards the earlier version wrote)."""

from __future__ import annotations

import pytest

from s3ingest_fn.core.row import Effect, LedgerRow
from s3ingest_fn.services.fanout import _ledger_record, _ledger_row


@pytest.mark.contract("C12")
@pytest.mark.parametrize("present", [True, False])
def test_a_shard_record_reads_back_as_its_row(present: bool) -> None:
    row = LedgerRow(
        bucket="b",
        key="k",
        present=present,
        version_id="v1",
        etag="e1",
        updated_at=7,
        effect=Effect(status="done", lease_until_ms=None, done_change_id="c" * 32),
        change_id="c" * 32,
    )
    back = _ledger_row("b", _ledger_record(row, 1000.0))
    assert (back.present, back.version_id, back.etag, back.effect_status, back.change_id) == (
        present,
        "v1",
        "e1",
        "done",
        "c" * 32,
    )


@pytest.mark.contract("C12")
@pytest.mark.parametrize(("state", "present"), [("present", True), ("deleted", False)])
def test_a_shard_of_the_previous_release_keeps_its_tombstones(state: str, present: bool) -> None:
    record = ["k", state, None, None, 7, None, None, None, None]
    assert _ledger_row("b", record).present is present


@pytest.mark.contract("C12")
@pytest.mark.parametrize(
    ("seq", "kept"),
    [
        ("F" * 64, True),  # forged before events were checked (issue 24): drift
        (f"00{5_000:08X}01".ljust(64, "0"), True),  # beyond the skew at 1000 s
        (f"00{900:08X}01".ljust(64, "0"), False),  # a real one: not carried
        (None, False),
    ],
)
def test_a_shard_carries_a_sequencer_only_when_s3_cannot_have_sent_it(
    seq: str | None, kept: bool
) -> None:
    row = LedgerRow(bucket="b", key="k", present=True, etag="e1", seq=seq)
    record = _ledger_record(row, 1000.0)
    assert _ledger_row("b", record).seq == (seq if kept else None)
