"""Exactly once in the history table when one change key is published again at another time
(docs/history.md#exactly-once): the writer's check of written keys reads only the batch's days and
the span of its times, so it finds a key again only when the event keeps its time."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from s3ingest_fn.core.row import HELD, Claim, Hold, Review
from s3ingest_fn.handlers.history import write_batch
from s3ingest_fn.services import history
from s3ingest_fn.services.changes import publish
from tests.moto_ledger import moto_ledger_table
from tests.unit.test_effect_events import BUCKET, KEY, NOW_MS, Capture, Recorder, _apply, _finish
from tests.unit.test_history import catalog, rows, sqs

DAY_MS = 86_400_000


def _bus_events(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The relay's entries for ``records`` as the history queue receives them."""
    capture = Capture()
    assert publish(capture, "bus", records, effects=True).failed_at is None
    return [
        {"source": e["Source"], "detail-type": e["DetailType"], "detail": json.loads(e["Detail"])}
        for e in capture.entries
    ]


@pytest.mark.xfail(
    strict=True,
    reason="defect: after `reprocess --remove` and a later reprocess, the same processor version "
    "completes the same change again a day later; its Effect Done has the same change key and "
    "another time, and the writer's time-bounded check does not find the first row",
)
def test_a_change_done_again_after_its_effect_was_forgotten_adds_no_second_row(
    tmp_path: Path,
) -> None:
    with moto_ledger_table() as client:
        rec = Recorder(client)
        applied = _apply(rec, "5")
        assert _finish(rec, "done", at=NOW_MS + 1)
        # s3ingest reprocess --processor default --remove (the processor left the settings)
        assert rec.ledger.forget(BUCKET, KEY, "default")
        rec.record()
        # the processor is configured again, same version; s3ingest reprocess runs the key a
        # day later
        later = NOW_MS + DAY_MS
        claimed = rec.ledger.claim_behind(
            BUCKET,
            KEY,
            "default",
            applied.change_id,
            None,
            Claim(now_ms=later, lease_until_ms=later + 60_000),
        )
        assert claimed.applied
        rec.record()
        assert _finish(rec, "done", at=later)
        events = _bus_events(rec.records)
    done = [e for e in events if e["detail-type"] == "Effect Done"]
    assert [d["detail"]["at"] for d in done] == [NOW_MS + 1, later]
    table = history.ensure_table(catalog(tmp_path), "s3ingest.history")
    for event in events:  # one batch each, as the days apart deliver them
        write_batch(table, sqs(event))
    keys = Counter(r["change_key"] for r in rows(table))
    assert keys[f"{applied.change_id}/done/default/1"] == 1


def _hold(rec: Recorder, change_id: str, at: int) -> None:
    """The hold policy holds the claimed change (a review the change stream publishes)."""
    row = rec.ledger.get(BUCKET, KEY)
    assert row is not None
    token = row.effects()["default"].token
    assert token is not None
    review = Review(HELD, "default", change_id, "-", "delete", "policy", at)
    held = rec.ledger.hold(BUCKET, KEY, token, "default", Hold(change_id, "delete", at), review)
    assert held
    rec.record()


@pytest.mark.xfail(
    strict=True,
    reason="defect: after `reprocess --remove` and a later reprocess, the hold policy holds the "
    "same change again a day later; its Object Held has the same change key and another time",
)
def test_a_change_held_again_after_its_effect_was_forgotten_adds_no_second_row(
    tmp_path: Path,
) -> None:
    with moto_ledger_table() as client:
        rec = Recorder(client)
        applied = _apply(rec, "5")
        _hold(rec, applied.change_id, NOW_MS + 1)
        assert rec.ledger.forget(BUCKET, KEY, "default")
        rec.record()
        later = NOW_MS + DAY_MS
        claimed = rec.ledger.claim_behind(
            BUCKET,
            KEY,
            "default",
            applied.change_id,
            None,
            Claim(now_ms=later, lease_until_ms=later + 60_000),
        )
        assert claimed.applied
        rec.record()
        _hold(rec, applied.change_id, later)
        events = _bus_events(rec.records)
    held = [e for e in events if e["detail-type"] == "Object Held"]
    assert [h["detail"]["at"] for h in held] == [NOW_MS + 1, later]
    table = history.ensure_table(catalog(tmp_path), "s3ingest.history")
    for event in events:
        write_batch(table, sqs(event))
    keys = Counter(r["change_key"] for r in rows(table))
    assert keys[f"{applied.change_id}/held/default"] == 1
