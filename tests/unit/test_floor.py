"""The ledger-floor estimates of ``s3ingest onboard`` and ``reprocess`` (issue 37): exact
figures for 5e7 keys on a new table, a warm one and at the 40,000 table quota."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from s3ingest import floor


def test_the_ramp_from_a_new_table_doubles_every_thirty_minutes() -> None:
    # 7.2M in the first window at 4,000/s, 14.4M at 8,000/s, then 28.4M at 16,000/s
    assert floor.ramp_seconds(50_000_000) == 3_600 + 28_400_000 / 16_000  # 5375 s, 89.6 min
    assert floor.ramp_seconds(50_000_000, 20_000) == 1_800 + 14_000_000 / 40_000  # 35.8 min
    assert floor.ramp_seconds(50_000_000, 40_000) == 1_250  # 20.8 min, the floor
    assert floor.ramp_seconds(7_200_000) == 1_800
    assert floor.ramp_seconds(0) == 0


def test_an_onboarding_of_fifty_million_objects_is_bound_by_the_ramp() -> None:
    e = floor.estimate("onboarding", 50_000_000, floor.ONBOARD_WRITES_PER_OBJECT)
    assert e.ramp_binds and e.warm_now == 4_000
    assert e.seconds == 5_375 and e.floor_seconds == 1_250
    lines = e.lines()
    assert lines[0] == (
        "estimate: onboarding 50,000,000 keys, 50,000,000 ledger writes: about 90 min on the "
        "table's on-demand ramp (from 4,000 write units/s, doubling every 30 min); the ramp binds."
    )
    assert lines[1] == (
        "  warmed to 40,000 (ledgerWarmWriteUnits=40000, the table quota; one-time about "
        "$26.00, assumed): about 21 min, the ledger's floor."
    )
    assert len(lines) == 2


def test_a_small_run_or_a_table_warm_to_the_quota_is_not_bound_by_the_ramp() -> None:
    assert not floor.estimate("onboarding", 7_200_000, 1.0).ramp_binds
    assert floor.estimate("onboarding", 7_200_001, 1.0).ramp_binds
    assert not floor.estimate("onboarding", 50_000_000, 1.0, warm_now=40_000).ramp_binds
    assert floor.estimate("onboarding", 50_000_000, 1.0, warm_now=80_000).warm_now == 40_000


def test_a_reprocess_prints_s3_s_per_prefix_floor() -> None:
    e = floor.estimate("reprocess", 50_000_000, 2.0, gets_per_item=1.0)
    assert e.ramp_binds
    assert e.floor_seconds == 2_500
    assert e.s3_prefix_floor_seconds == pytest.approx(50_000_000 / 5_500)  # 151.5 min
    assert e.lines()[2] == (
        "  S3: at least 152 min for the objects' reads if the keys share one partitioned "
        "prefix (5,500 GET/s)."
    )


def test_a_large_reprocess_on_a_warm_table_gets_the_segments_to_reach_it() -> None:
    # a segment: 16 keys at once, 66 ms a key, 2 writes: 484.8 write units a second
    assert floor.floor_segments(50_000_000, 40_000) == 83
    assert floor.floor_segments(50_000_000, 20_000) == 42
    assert floor.floor_segments(50_000_000, None) == 16  # a new table: the default suffices
    assert floor.floor_segments(2_000_000, 40_000) == 40  # 50,000 keys a segment at least
    assert floor.floor_segments(10_000, 40_000) == 16


class _CloudWatch:
    def __init__(self, points: list[dict[str, Any]]) -> None:
        self.points = points
        self.asked: dict[str, Any] = {}

    def get_metric_statistics(self, **kwargs: Any) -> dict[str, Any]:
        self.asked = kwargs
        return {"Datapoints": self.points}


def test_the_bucket_s_size_is_its_latest_daily_object_count() -> None:
    cw = _CloudWatch(
        [
            {"Timestamp": datetime(2026, 12, 6, tzinfo=UTC), "Average": 49_000_000.0},
            {"Timestamp": datetime(2026, 12, 5, tzinfo=UTC), "Average": 48_000_000.0},
        ]
    )
    now = datetime(2026, 12, 7, tzinfo=UTC)
    assert floor.bucket_objects(cw, "landing", now) == 49_000_000
    assert cw.asked["MetricName"] == "NumberOfObjects"
    assert {"Name": "BucketName", "Value": "landing"} in cw.asked["Dimensions"]
    assert floor.bucket_objects(_CloudWatch([]), "landing", now) is None


def test_the_ledger_s_size_and_warm_throughput_come_from_describe_table() -> None:
    class Ddb:
        def __init__(self, table: dict[str, Any]) -> None:
            self.table = table

        def describe_table(self, TableName: str) -> dict[str, Any]:
            return {"Table": self.table}

    warm = {"ItemCount": 5, "WarmThroughput": {"WriteUnitsPerSecond": 40_000}}
    assert floor.ledger_size(Ddb(warm), "ledger") == (5, 40_000)
    assert floor.ledger_size(Ddb({}), "ledger") == (0, None)


@pytest.mark.parametrize(
    ("objects", "warm", "printed"),
    [(50_000_000, None, 2), (50_000_000, 40_000, 0), (1_000_000, None, 0), (None, None, 0)],
)
def test_onboard_prints_the_estimate_when_the_ramp_binds(
    monkeypatch: pytest.MonkeyPatch, objects: int | None, warm: int | None, printed: int
) -> None:
    from s3ingest.cli import floor_notice
    from s3ingest.cli import onboard as cli

    lines: list[str] = []
    monkeypatch.setattr(floor_notice, "bucket_objects", lambda deployed, bucket: objects)
    monkeypatch.setattr(floor_notice, "ledger", lambda deployed: (0, warm))
    monkeypatch.setattr(
        cli, "console", type("C", (), {"print": lambda s, x, **k: lines.append(x)})()
    )
    cli._estimate(object(), "landing")
    assert len(lines) == printed
    if printed:
        assert lines[0].startswith("estimate: onboarding 50,000,000 keys")
        assert "ledgerWarmWriteUnits=40000" in lines[1]


def test_an_unreadable_size_prints_nothing() -> None:
    from botocore.exceptions import NoCredentialsError

    from s3ingest.cli import floor_notice

    class Deployed:
        outputs = {"LedgerTableName": "ledger"}

        def client(self, service: str) -> Any:
            raise NoCredentialsError()

    assert floor_notice.bucket_objects(Deployed(), "landing") is None
    assert floor_notice.ledger(Deployed()) is None
    assert floor_notice.ledger(type("D", (), {"outputs": {}})()) is None
