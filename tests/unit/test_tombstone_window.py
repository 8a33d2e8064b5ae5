"""The tombstone lifetime is computed from the stack's own settings (CONTRACT C6): the longest
time an older event can still turn up is the archive retention (before a replay), plus the ingest
queue's retention, plus the dead-letter queue's (before a redrive), plus a margin."""

from __future__ import annotations

import pytest

from s3ingest.settings import Settings

DAY = 86_400


@pytest.mark.contract("C6")
@pytest.mark.parametrize(
    ("archive", "queue", "dlq", "margin", "days"),
    [(30, 4, 14, 1, 49), (1, 1, 1, 0, 3), (3650, 14, 14, 7, 3685)],
)
def test_tombstones_outlive_every_place_an_older_event_can_wait(
    archive: int, queue: int, dlq: int, margin: int, days: int
) -> None:
    settings = Settings(
        archive_retention_days=archive,
        queue_retention_days=queue,
        dlq_retention_days=dlq,
        tombstone_margin_days=margin,
    )
    assert settings.tombstone_ttl_seconds == days * DAY
