"""The integrity settings: ``logKeys``, reserved concurrency and ``operatorRoleArns``."""

from __future__ import annotations

import pytest

from s3ingest.settings import Settings, SettingsError

ROLE = "arn:aws:iam::123456789012:role/ops/redrive"


def test_defaults_keep_todays_behaviour() -> None:
    s = Settings.from_context({})
    assert s.log_keys == "plain"
    assert s.ingest_reserved_concurrency is None
    assert s.backfill_reserved_concurrency is None
    assert s.operator_role_arns == ()


def test_values_from_context_strings_round_trip() -> None:
    s = Settings.from_context(
        {
            "logKeys": "hashed",
            "ingestReservedConcurrency": "20",
            "backfillReservedConcurrency": "5",
            "operatorRoleArns": f'["{ROLE}"]',
        }
    )
    assert (s.log_keys, s.ingest_reserved_concurrency, s.backfill_reserved_concurrency) == (
        "hashed",
        20,
        5,
    )
    assert s.operator_role_arns == (ROLE,)
    assert Settings.from_context(s.to_context()) == s


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_context(
            {
                "logKeys": "secret",
                "ingestReservedConcurrency": 4,
                "backfillReservedConcurrency": 0,
                "operatorRoleArns": '["arn:aws:iam::123456789012:user/bob"]',
            }
        )
    text = str(caught.value)
    assert "logKeys: 'secret' is not one of plain, hashed, none" in text
    assert "ingestReservedConcurrency: 4 is below maxConcurrency (10)" in text
    assert "backfillReservedConcurrency: 0 is outside 1..1000" in text
    assert "operatorRoleArns[0]" in text and "is not an IAM role ARN" in text
