"""The typed configuration spine (s3ingest_fn.config): each role's model reads what it writes,
reports every problem at once, and is hashable (wiring caches per configuration value)."""

from __future__ import annotations

from pathlib import Path

import pytest

from s3ingest_fn import config, wiring
from s3ingest_fn.config import ConfigError, IngestConfig, ProcessorEntry
from s3ingest_fn.config_roles import (
    BackfillControlConfig,
    ChangeRelayConfig,
    DeliveryCheckConfig,
    FanOutConfig,
    Inventory,
    ListingBackfillConfig,
    ReconcileConfig,
)
from s3ingest_fn.core.scope import BucketScope, Scope
from tests.cold_start import ingest_cold_start_dataclasses

SCOPE = Scope((BucketScope("a", ("in/",)), BucketScope("b"))).to_json()
ENTRIES = (
    ProcessorEntry.of({"name": "thumb", "module": "pkg.mod:fn", "mode": "latest"}),
    ProcessorEntry.of(
        {"name": "audit", "functionArn": "arn:f", "timeoutSeconds": 12, "hold": None}
    ),
    ProcessorEntry.of({"name": "index", "module": "pkg.mod:index", "version": 3}),
)


@pytest.mark.parametrize(
    "model",
    [
        IngestConfig(
            ledger_table_name="t",
            dead_letter_queue_url="dlq",
            tombstone_ttl_seconds=60,
            record_concurrency=4,
            bucket_name="a",
            scope_json=SCOPE,
            processors=ENTRIES,
            hold_json='{"maxChanges":3}',
            trail_length=5,
            output_bucket="out",
        ),
        ListingBackfillConfig(
            ledger_table_name="t", dead_letter_queue_url="dlq", checkpoint_bucket_name="cp"
        ),
        ReconcileConfig(
            ledger_table_name="t",
            ingest_queue_url="q",
            scope_json=SCOPE,
            inventories=(Inventory("a", "inv", "a/x"),),
            processor_names=("default", "thumb"),
        ),
        FanOutConfig(
            ledger_table_name="t",
            ingest_queue_url="q",
            bucket_name="a",
            checkpoint_bucket_name="cp",
        ),
        ChangeRelayConfig("bus"),
        ChangeRelayConfig("bus", "https://sqs/relay-dlq"),
        DeliveryCheckConfig(("a", "b")),
    ],
)
def test_a_model_reads_back_what_it_writes(model: config._Config) -> None:
    again = type(model).from_env(model.to_env())
    assert again == model
    assert hash(again) == hash(model)


def test_the_backfill_control_model_is_both_parts() -> None:
    env = {
        config.LEDGER_TABLE_NAME: "t",
        config.INGEST_QUEUE_URL: "q",
        config.DEAD_LETTER_QUEUE_URL: "dlq",
        config.BUCKET_NAME: "a",
        config.REPORT_BUCKET_NAME: "reports",
    }
    found = BackfillControlConfig.from_env(env)
    assert (found.reconcile.buckets, found.ingest.ledger_table_name) == (("a",), "t")
    assert found.report_bucket_name == "reports"
    assert BackfillControlConfig.from_env(found.to_env()) == found


def test_every_problem_is_reported_at_once() -> None:
    env = {
        config.RECORD_CONCURRENCY: "0",
        config.SCOPE: "[{",
        config.PROCESSORS: '{"name": "x"}',
        config.HOLD: "[]",
    }
    with pytest.raises(ConfigError) as info:
        IngestConfig.from_env(env)
    problems = info.value.problems
    assert "LEDGER_TABLE_NAME is not set" in problems
    assert "DEAD_LETTER_QUEUE_URL is not set" in problems
    assert any(p.startswith("RECORD_CONCURRENCY='0'") for p in problems)
    assert any(p.startswith("SCOPE is not JSON") for p in problems)
    assert "PROCESSORS must be a JSON list of processor objects" in problems
    assert "HOLD must be a JSON object" in problems
    assert str(info.value).startswith("ingest function misconfigured: ")


def test_reconcile_names_every_missing_variable() -> None:
    with pytest.raises(ConfigError) as info:
        ReconcileConfig.from_env({config.INVENTORIES: '[{"name": "a"}]'})
    assert info.value.problems == (
        "LEDGER_TABLE_NAME is not set",
        "INGEST_QUEUE_URL is not set",
        "BUCKET_NAME is not set",
        "INVENTORIES entry without name or bucket: {'name': 'a'}",
    )


def test_a_processor_entry_keeps_its_keys_and_its_own_hold() -> None:
    raw = {
        "name": "p",
        "handler": "pkg.mod:handler",
        "mode": "every-change",
        "prefixes": ["in/"],
        "kinds": ["created"],
        "timeoutSeconds": 9,
        "hold": {"maxChanges": 1},
        "future": [1, 2],
    }
    entry = ProcessorEntry.of(raw)
    assert entry.as_dict() == raw
    assert entry.hold({"maxChanges": 5}) == {"maxChanges": 1}
    assert ProcessorEntry.of({"name": "q", "hold": None}).hold({"maxChanges": 5}) is None
    assert ProcessorEntry.of({"name": "r"}).hold({"maxChanges": 5}) == {"maxChanges": 5}
    assert ProcessorEntry.of({"name": "r"}).timeout == config.DEFAULT_PROCESSOR_TIMEOUT_SECONDS


def test_the_single_processor_is_written_back_as_processor() -> None:
    found = IngestConfig.from_env(
        {
            config.LEDGER_TABLE_NAME: "t",
            config.DEAD_LETTER_QUEUE_URL: "dlq",
            config.PROCESSOR: "pkg.mod:fn",
        }
    )
    assert [e.as_dict() for e in found.processors] == [{"name": "default", "module": "pkg.mod:fn"}]
    assert found.to_env()[config.PROCESSOR] == "pkg.mod:fn"
    assert config.PROCESSORS not in found.to_env()


def test_a_processor_entry_carries_its_version_through_processors() -> None:
    model = IngestConfig(ledger_table_name="t", dead_letter_queue_url="dlq", processors=ENTRIES)
    env = model.to_env()
    assert [e.get("version") for e in wiring.processor_entries(env)] == [None, None, 3]
    again = IngestConfig.from_env(env)
    assert again == model and [e.version for e in again.processors] == [None, None, 3]
    # a versioned single processor is written as PROCESSORS: PROCESSOR names no version
    single = ProcessorEntry.of({"name": "default", "module": "pkg.mod:fn", "version": 2})
    written = IngestConfig("t", "dlq", processors=(single,), single=True).to_env()
    assert config.PROCESSOR not in written
    assert IngestConfig.from_env(written).processors == (single,)


@pytest.mark.parametrize("version", [0, -3, True, 2.0, "2"])
def test_a_processor_entry_version_that_is_no_whole_number_is_a_problem(version: object) -> None:
    env = {
        config.LEDGER_TABLE_NAME: "t",
        config.DEAD_LETTER_QUEUE_URL: "dlq",
        config.PROCESSORS: config.compact([{"name": "p", "module": "m:f", "version": version}]),
    }
    with pytest.raises(ConfigError) as info:
        IngestConfig.from_env(env)
    assert info.value.problems == (
        f"PROCESSORS: processor 'p': version {version!r} is not a whole number of at least 1",
    )


def test_the_inventories_of_a_reconcile_configuration() -> None:
    found = ReconcileConfig(
        ledger_table_name="t",
        ingest_queue_url="q",
        scope_json=SCOPE,
        inventories=(Inventory("b", "inv", "b/x"),),
        inventory_bucket_name="legacy",
        inventory_prefix="a/y",
    )
    assert found.inventory_map() == {"b": ("inv", "b/x"), "a": ("legacy", "a/y")}
    assert wiring.inventories_from_env(found.to_env(), "a") == found.inventory_map()


def test_the_invocation_environment_is_the_contexts_own() -> None:
    with config.use_env({config.CHANGE_BUS_NAME: "inner"}):
        assert config.invocation_env() == {config.CHANGE_BUS_NAME: "inner"}
        assert wiring.function_config(ChangeRelayConfig).change_bus_name == "inner"
    assert config.invocation_env().get(config.CHANGE_BUS_NAME) != "inner"


def test_a_functions_clients_come_from_its_own_environment() -> None:
    env = {
        "AWS_REGION": "eu-west-3",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:1",
        "AWS_ACCESS_KEY_ID": "k",
        "AWS_SECRET_ACCESS_KEY": "s",
    }
    with config.use_env(env):
        s3 = wiring.s3_client()
    assert (s3.meta.region_name, s3.meta.endpoint_url) == ("eu-west-3", "http://127.0.0.1:1")
    assert s3._request_signer._credentials.access_key == "k"


def test_the_ingest_cold_start_builds_no_other_roles_models(tmp_path: Path) -> None:
    """The ingest function reads its own models only: the other roles' (and ``Inventory``)
    are defined in ``config_roles``, imported on first use, so its cold start does not build
    them (each dataclass costs about 0.5 ms of CPU to build: ``bench/bundle_cold_start.py``)."""
    built = ingest_cold_start_dataclasses(tmp_path)
    assert "s3ingest_fn.config.IngestConfig" in built  # the check ran
    assert [c for c in built if c.startswith("s3ingest_fn.config")] == [
        "s3ingest_fn.config.ClientConfig",
        "s3ingest_fn.config.IngestConfig",
        "s3ingest_fn.config.LogConfig",
        "s3ingest_fn.config.ProcessorEntry",
        "s3ingest_fn.config._Config",
    ]


def test_the_roles_table_names_the_ingest_model_and_the_others() -> None:
    """:data:`config_roles.ROLES` maps each role to its model, the ingest function's in
    ``config``; the stack's synth reads ``targets_json`` through ``config``."""
    from s3ingest_fn import config_roles

    assert config.targets_json is config_roles.targets_json
    assert config_roles.ROLES["ingest"] is config.IngestConfig
    assert config_roles.ROLES["reconcile"] is config_roles.ReconcileConfig
