"""One declaration per setting (:mod:`s3ingest.settings.fields`): what derives from it, and the
pipeline's keyword overrides checked against the model's fields."""

from __future__ import annotations

from dataclasses import fields

import pytest

from s3ingest.settings import DEFAULTS, OPTIONAL_INT_KEYS, Settings
from s3ingest.settings.fields import SETTING, Setting, declared
from s3ingest_cdk.pipeline import RESOURCE_FIELDS, setting_overrides


def test_every_field_declares_a_setting_and_a_context_key() -> None:
    keys = [key for key, _, spec in declared(Settings) if isinstance(spec, Setting)]
    assert keys == list(DEFAULTS) and len(keys) == len(fields(Settings))
    assert {
        "ledgerWarmWriteUnits",
        "ingestReservedConcurrency",
        "backfillReservedConcurrency",
        "attestationRetentionDays",
    } == OPTIONAL_INT_KEYS


def test_the_declared_bounds_are_the_problems() -> None:
    spec = next(f.metadata[SETTING] for f in fields(Settings) if f.name == "queue_retention_days")
    assert spec.bounds == (1, 14) and spec.unit == "days"
    assert Settings(queue_retention_days=15, dlq_retention_days=14).problems() == [
        "queueRetentionDays: 15 is outside 1..14 (SQS limit)",
        "dlqRetentionDays must be at least queueRetentionDays: a standard queue keeps a "
        "message's original enqueue time when it moves to the dead-letter queue",
    ]
    assert Settings(log_keys="loud").problems() == [
        "logKeys: 'loud' is not one of plain, hashed, none"
    ]


def test_the_pipelines_keywords_are_the_models_fields() -> None:
    assert setting_overrides({"operator_role_arns": ["a"], "hold": {"deletes": True}}) == {
        "operator_role_arns": ("a",),
        "hold": {"deletes": True},
    }
    with pytest.raises(TypeError, match="'queue_retention_day'; did you mean queue_retention_days"):
        setting_overrides({"queue_retention_day": 4})
    for name in RESOURCE_FIELDS:  # the team's own resources go in as their own arguments
        with pytest.raises(TypeError):
            setting_overrides({name: ()})
