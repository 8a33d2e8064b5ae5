"""The reconcile function's memory default and the fan-out's partition count follow from the
measured bytes and CPU time per key (s3ingest/reconcile_sizing.py, docs/reconciliation.md)."""

from __future__ import annotations

from s3ingest import function_roles
from s3ingest.reconcile_sizing import (
    COLUMNS,
    KEYS,
    LAMBDA_MAX_MIB,
    RECONCILE_MEMORY_MIB,
    SINGLE_RUN_KEYS,
    cpu_seconds,
    fan_out_keys,
    keys_within,
    memory_for,
    partitions_for,
)
from s3ingest.settings import Settings
from s3ingest_fn.services.fanout import DEFAULT_PARTITIONS

#: The bucket docs/reconciliation.md models.
MODELLED_KEYS = 50_000_000


def test_the_default_memory_holds_the_single_runs_keys_in_columns() -> None:
    settings = Settings()
    assert settings.reconcile_memory_mb == RECONCILE_MEMORY_MIB
    assert function_roles.RECONCILE.memory(settings) == RECONCILE_MEMORY_MIB
    assert function_roles.RECONCILE.packages  # the reconcile function runs in columns
    assert memory_for(SINGLE_RUN_KEYS, COLUMNS) <= RECONCILE_MEMORY_MIB
    assert keys_within(RECONCILE_MEMORY_MIB, COLUMNS) >= SINGLE_RUN_KEYS
    # ... and memory binds before time: that many keys take under half the timeout
    held = keys_within(RECONCILE_MEMORY_MIB, COLUMNS)
    assert cpu_seconds(held, RECONCILE_MEMORY_MIB, COLUMNS) < settings.reconcile_timeout_seconds / 2


def test_the_derivation_matches_the_documented_figures() -> None:
    assert memory_for(SINGLE_RUN_KEYS, COLUMNS) == 2620
    assert round(keys_within(RECONCILE_MEMORY_MIB, COLUMNS), -5) == 23_100_000
    assert round(keys_within(LAMBDA_MAX_MIB, COLUMNS), -5) == 81_500_000
    assert round(keys_within(RECONCILE_MEMORY_MIB, KEYS), -5) == 6_100_000
    assert memory_for(MODELLED_KEYS, COLUMNS) == 6339
    assert memory_for(MODELLED_KEYS // DEFAULT_PARTITIONS, KEYS) == 473


def test_the_default_partitions_hold_the_modelled_bucket_inside_the_timeout() -> None:
    timeout = Settings().reconcile_timeout_seconds
    assert partitions_for(MODELLED_KEYS) == 9 <= DEFAULT_PARTITIONS
    assert fan_out_keys(DEFAULT_PARTITIONS) >= 7 * MODELLED_KEYS
    # a partition as full as memory allows still finishes in under half the timeout
    child = keys_within(RECONCILE_MEMORY_MIB, KEYS)
    assert cpu_seconds(child, RECONCILE_MEMORY_MIB, KEYS) < timeout / 2
