"""Each side's leaf of a key (issue 38, :mod:`s3ingest_fn.services.attestation`): what the
bucket owes each processor, and the version whose effect the ledger has done for the row's
change."""

from __future__ import annotations

from s3ingest_fn.contract import CANARY_PREFIX
from s3ingest_fn.core.attestation import ABSENT, NOT_CONCERNED, NOT_DONE, PRESENT
from s3ingest_fn.core.diff import Truth
from s3ingest_fn.core.effects import EffectTarget
from s3ingest_fn.core.row import DONE, PENDING, SUPERSEDED, Effect, LedgerRow
from s3ingest_fn.services.attestation import bucket_leaf, ledger_leaf

FIELDS = {"version_id", "etag"}
TARGETS = (EffectTarget("extract", 3, prefixes=("in/",)),)


def _row(key: str = "in/a", **effect: object) -> LedgerRow:
    fx = Effect(**effect) if effect else None  # type: ignore[arg-type]
    return LedgerRow(
        "b",
        key,
        True,
        version_id="v",
        etag="e",
        change_id="c2",
        effect=None,
        named_effects={"extract": fx} if fx else {},
    )


def _value(row: LedgerRow) -> str:
    return dict(ledger_leaf("b", row.key, row, TARGETS, FIELDS).processors)["extract"]


def test_the_bucket_owes_each_concerned_key_the_processors_version() -> None:
    seen = Truth(True, "v", "e", 1)
    assert dict(bucket_leaf("b", "in/a", seen, TARGETS, FIELDS).processors) == {"extract": "3"}
    assert dict(bucket_leaf("b", "out/a", seen, TARGETS, FIELDS).processors) == {
        "extract": NOT_CONCERNED
    }
    canary = CANARY_PREFIX + "in/x"
    assert dict(bucket_leaf("b", canary, seen, TARGETS, FIELDS).processors) == {
        "extract": NOT_CONCERNED
    }
    hidden = bucket_leaf("b", "in/a", Truth(False, None, None, 1), TARGETS, FIELDS)
    assert (hidden.state, hidden.version_id) == (ABSENT, "")


def test_the_ledger_states_the_version_done_for_the_rows_change() -> None:
    assert _value(_row(status=DONE, version=3, done_change_id="c2")) == "3"
    assert _value(_row(status=DONE, version=2, done_change_id="c2")) == "2"
    # done for an earlier change, pending, superseded, or never run: not done
    assert _value(_row(status=DONE, version=3, done_change_id="c1")) == NOT_DONE
    assert _value(_row(status=PENDING)) == NOT_DONE
    assert _value(_row(status=SUPERSEDED)) == NOT_DONE
    assert _value(_row()) == NOT_DONE
    assert _value(_row("out/a", status=DONE, version=3)) == NOT_CONCERNED


def test_a_tombstone_is_an_absent_leaf_and_fields_the_source_lacks_are_empty() -> None:
    row = LedgerRow("b", "in/a", False)
    assert ledger_leaf("b", "in/a", row, TARGETS, FIELDS).state == ABSENT
    leaf = ledger_leaf("b", "in/a", _row(status=DONE, version=3), TARGETS, {"etag"})
    assert (leaf.state, leaf.version_id, leaf.etag) == (PRESENT, "", "e")
