"""Invalid context fails early, with every problem in one SettingsError."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from aws_cdk import App
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template

from s3ingest.settings import DEFAULTS, Settings, SettingsError
from s3ingest_cdk.compose import compose, settings_from_app
from s3ingest_cdk.synth import PROJECT_ROOT, cdk_json_context

INVALID = {
    "batchSize": "ten",  # type error
    "versioned": "maybe",  # type error
    "queueRetentionDays": 0,  # range error
    "logRetentionDays": 31,  # not a CloudWatch value
    "stage": "1-bad",  # pattern error
}


def test_cdk_json_context_holds_every_setting_with_its_default() -> None:
    context = cdk_json_context()
    assert {key: context[key] for key in DEFAULTS} == DEFAULTS
    assert settings_from_app(App(context=context)) == Settings()


def test_from_context_reports_type_and_range_problems_together() -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_context(INVALID)
    problems = caught.value.problems
    assert sorted(problem.split(":")[0] for problem in problems) == sorted(INVALID)
    assert "batchSize: expected a whole number, got 'ten'" in problems
    assert "versioned: expected true or false, got 'maybe'" in problems
    assert "queueRetentionDays: 0 is outside 1..14 (SQS limit)" in problems
    assert all(str(p) in str(caught.value) for p in problems)


def test_rules_naming_an_unparsable_key_are_not_judged() -> None:
    # GIVEN queueRetentionDays that is no number and a dlqRetentionDays that would be too short
    with pytest.raises(SettingsError) as caught:
        Settings.from_context({"queueRetentionDays": "four", "dlqRetentionDays": 2})
    # THEN only the type problem is reported (the cross-key rule cannot be judged)
    assert caught.value.problems == ["queueRetentionDays: expected a whole number, got 'four'"]


def test_compose_rejects_invalid_context_before_building(tmp_path: Path) -> None:
    app = App(context={**cdk_json_context(), **INVALID}, outdir=str(tmp_path))
    with pytest.raises(SettingsError) as caught:
        compose(app, nag=False)
    assert sorted(problem.split(":")[0] for problem in caught.value.problems) == sorted(INVALID)
    assert not app.node.children


def test_app_py_exits_with_one_clear_error() -> None:
    env = {**os.environ, "CDK_CONTEXT_JSON": '{"batchSize": "ten", "queueRetentionDays": 15}'}
    done = subprocess.run(
        [sys.executable, "app.py"],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "invalid s3ingest settings" in done.stderr
    assert "batchSize: expected a whole number, got 'ten'" in done.stderr
    assert "queueRetentionDays: 15 is outside 1..14" in done.stderr


def test_an_unknown_key_is_a_problem_that_names_the_closest_setting() -> None:
    # GIVEN a typo (cdk synth -c archiveRetentionDay=7), a case slip, and a bad value beside them
    context = {"archiveRetentionDay": "7", "BatchSize": 5, "queueRetentionDays": 0}
    # WHEN the settings are read
    with pytest.raises(SettingsError) as caught:
        Settings.from_context(context)
    # THEN each is one problem of the same error, with a suggestion
    assert caught.value.problems == [
        "BatchSize: unknown setting; did you mean batchSize?",
        "archiveRetentionDay: unknown setting; did you mean archiveRetentionDays?",
        "queueRetentionDays: 0 is outside 1..14 (SQS limit)",
    ]
    # and a key like no setting lists them all
    assert _problems({"zzz": 1}) == [f"zzz: unknown setting (known: {', '.join(DEFAULTS)})"]


def _problems(context: dict[str, object]) -> list[str]:
    with pytest.raises(SettingsError) as caught:
        Settings.from_context(context)
    return caught.value.problems


@pytest.mark.parametrize(
    "key",
    [
        "@aws-cdk/aws-lambda:recognizeLayerVersion",  # feature flags (cdk.json)
        "aws:cdk:enable-path-metadata",
        "aws:cdk:version-reporting",  # written by the CDK CLI
        "availability-zones:account=123456789012:region=us-east-1",  # cdk.context.json lookups
        "acknowledged-issue-numbers",  # cdk acknowledge
    ],
)
def test_the_cdks_own_context_keys_stay_allowed(key: str) -> None:
    assert Settings.from_context({key: "x"}) == Settings()


def test_synth_fails_on_an_unknown_key_before_building(tmp_path: Path) -> None:
    app = App(context={**cdk_json_context(), "archiveRetentionDay": "7"}, outdir=str(tmp_path))
    with pytest.raises(SettingsError, match="did you mean archiveRetentionDays"):
        compose(app, nag=False)
    assert not app.node.children


# --- Reconciliation settings ---------------------------------------------------------------------


def test_reconcile_defaults() -> None:
    settings = Settings()
    assert settings.reconcile_schedule == "rate(1 day)"
    assert settings.reconcile_fan_out is False
    assert settings.reconcile_memory_mb == 3008
    assert settings.reconcile_timeout_seconds == 900
    assert settings.owns_inventory is True


def test_fan_out_with_an_adopted_bucket_without_inventory_is_a_problem() -> None:
    # GIVEN fan-out asked for, with bucketName set and its inventory off
    with pytest.raises(SettingsError) as caught:
        Settings.from_context(
            {"reconcileFanOut": "true", "bucketName": "existing-bucket", "inventoryEnabled": False}
        )
    # THEN that is the one problem reported
    assert caught.value.problems == [
        "reconcileFanOut needs an S3 Inventory of every bucket: leave inventoryEnabled true "
        "(or each bucket's inventory on)"
    ]
    # an adopted bucket gets the stack's own inventory by default (issue 15), so fan-out is fine
    assert Settings.from_context(
        {"reconcileFanOut": "true", "bucketName": "existing-bucket"}
    ).reconcile_fan_out


def test_fan_out_without_inventory_is_a_problem() -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_context({"reconcileFanOut": True, "inventoryEnabled": False})
    assert [p.split(" ")[0] for p in caught.value.problems] == ["reconcileFanOut"]
    assert Settings.from_context({"reconcileFanOut": True}).reconcile_fan_out is True


def test_fan_out_rule_is_not_judged_when_inventory_enabled_is_unparsable() -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_context({"reconcileFanOut": True, "inventoryEnabled": "maybe"})
    assert caught.value.problems == ["inventoryEnabled: expected true or false, got 'maybe'"]


@pytest.mark.parametrize("schedule", ["rate(1 day)", "rate(6 hours)", "cron(0 3 * * ? *)"])
def test_reconcile_schedule_accepts_rate_and_cron(schedule: str) -> None:
    assert Settings.from_context({"reconcileSchedule": schedule}).reconcile_schedule == schedule


def test_reconcile_schedule_memory_and_timeout_are_validated() -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_context(
            {
                "reconcileSchedule": "every day",
                "reconcileMemoryMb": 64,
                "reconcileTimeoutSeconds": 901,
            }
        )
    assert caught.value.problems == [
        "reconcileSchedule: 'every day' is not an EventBridge schedule expression "
        "(rate(...) or cron(...))",
        "reconcileMemoryMb: 64 is outside 128..10240",
        "reconcileTimeoutSeconds: 901 is outside 60..900",
    ]
    with pytest.raises(SettingsError) as caught:
        Settings.from_context({"reconcileSchedule": "", "reconcileTimeoutSeconds": 59})
    assert [p.split(":")[0] for p in caught.value.problems] == [
        "reconcileSchedule",
        "reconcileTimeoutSeconds",
    ]


def test_compose_rejects_fan_out_with_an_adopted_bucket_without_inventory(tmp_path: Path) -> None:
    context = {
        **cdk_json_context(),
        "reconcileFanOut": True,
        "bucketName": "existing-bucket",
        "inventoryEnabled": False,
    }
    app = App(context=context, outdir=str(tmp_path))
    with pytest.raises(SettingsError) as caught:
        compose(app, nag=False)
    assert [p.split(" ")[0] for p in caught.value.problems] == ["reconcileFanOut"]
    assert not app.node.children


# --- Backfill settings ---------------------------------------------------------------------------


def test_backfill_defaults() -> None:
    settings = Settings()
    assert settings.backfill_engine == "batch-operations"
    assert settings.backfill_function_timeout_seconds == 60


@pytest.mark.parametrize("engine", ["batch-operations", "distributed-map"])
def test_backfill_engine_accepts_both_engines(engine: str) -> None:
    assert Settings.from_context({"backfillEngine": engine}).backfill_engine == engine


def test_backfill_engine_and_timeout_are_validated() -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_context(
            {"backfillEngine": "step-functions", "backfillFunctionTimeoutSeconds": 901}
        )
    assert caught.value.problems == [
        "backfillEngine: 'step-functions' is not one of batch-operations, distributed-map",
        "backfillFunctionTimeoutSeconds: 901 is outside 3..900",
    ]
    with pytest.raises(SettingsError) as caught:
        Settings.from_context({"backfillEngine": "", "backfillFunctionTimeoutSeconds": "2"})
    assert caught.value.problems == [
        "backfillEngine: None is not one of batch-operations, distributed-map",
        "backfillFunctionTimeoutSeconds: 2 is outside 3..900",
    ]
    assert (
        Settings.from_context(
            {"backfillFunctionTimeoutSeconds": "3"}
        ).backfill_function_timeout_seconds
        == 3
    )


def test_backfill_engine_with_an_adopted_bucket_is_no_problem() -> None:
    # The inventory backfill needs an inventory; an adopted bucket gets the stack's own.
    settings = Settings.from_context(
        {"backfillEngine": "distributed-map", "bucketName": "existing-bucket"}
    )
    assert settings.owns_inventory is True
    no_inventory = Settings.from_context(
        {"backfillEngine": "distributed-map", "bucketName": "b-1", "inventoryEnabled": "false"}
    )
    assert no_inventory.owns_inventory is False


# --- Alarm settings ------------------------------------------------------------------------------


def test_alarm_email_defaults_to_none() -> None:
    assert Settings().alarm_email is None
    assert Settings.from_context({"alarmEmail": ""}).alarm_email is None
    assert Settings.from_context({"alarmEmail": "null"}).alarm_email is None


@pytest.mark.parametrize("email", ["oncall@example.com", "first.last+s3ingest@ops.example.co.uk"])
def test_alarm_email_accepts_an_address(email: str) -> None:
    assert Settings.from_context({"alarmEmail": email}).alarm_email == email


@pytest.mark.parametrize(
    "email", ["oncall", "oncall@", "@example.com", "on call@example.com", "a@b@example.com", "a@b"]
)
def test_alarm_email_rejects_what_is_no_address(email: str) -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_context({"alarmEmail": email})
    assert caught.value.problems == [f"alarmEmail: {email!r} is not an e-mail address"]


# --- Operating settings: lag alarm, runbook URL, tracing -----------------------------------------


def test_operating_defaults() -> None:
    settings = Settings()
    assert settings.lag_alarm_seconds == 300
    assert settings.runbook_base_url.startswith("https://")
    assert settings.tracing is False


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com/runbook.md",  # not https
        "https://",  # no host
        "https://example.com/runbook.md#section",  # its own fragment
        "https://example.com/run book.md",  # whitespace
        "docs/runbook.md",  # relative
        "",  # empty
    ],
)
def test_runbook_base_url_must_be_an_absolute_https_url(url: str) -> None:
    problems = _problems({"runbookBaseUrl": url})
    assert len(problems) == 1
    assert problems[0].startswith("runbookBaseUrl: ")


def test_lag_alarm_seconds_and_tracing_are_checked() -> None:
    assert _problems({"lagAlarmSeconds": 0, "tracing": "sometimes"}) == [
        "tracing: expected true or false, got 'sometimes'",
        "lagAlarmSeconds: 0 is outside 1..86400",
    ]
    assert Settings.from_context({"tracing": "true", "lagAlarmSeconds": "60"}) == Settings(
        tracing=True, lag_alarm_seconds=60
    )


@pytest.mark.parametrize(
    ("schedule", "seconds"),
    [
        ("rate(1 day)", 25 * 3_600),
        ("rate(12 hours)", 13 * 3_600),
        ("rate(30 minutes)", 5_400),
        ("rate(2 days)", 49 * 3_600),
        ("rate(7 days)", 7 * 86_400),  # capped: CloudWatch's 7-day evaluation range
        ("cron(0 3 * * ? *)", 25 * 3_600),  # a cron is taken as daily
    ],
)
def test_heartbeat_period_follows_the_reconcile_schedule(schedule: str, seconds: int) -> None:
    assert Settings(reconcile_schedule=schedule).reconcile_heartbeat_seconds == seconds


# --- Listing backfill and ledger settings (issue 15) --------------------------------------------


def test_listing_and_ledger_defaults() -> None:
    settings = Settings()
    assert settings.listing_concurrency == 32
    assert settings.ledger_warm_write_units is None
    assert Settings.from_context({"ledgerWarmWriteUnits": "null"}).ledger_warm_write_units is None
    assert Settings.from_context({"ledgerWarmWriteUnits": ""}).ledger_warm_write_units is None


def test_listing_concurrency_and_warm_write_units_are_validated() -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_context({"listingConcurrency": 0, "ledgerWarmWriteUnits": "3999"})
    assert [p.split(":")[0] for p in caught.value.problems] == [
        "listingConcurrency",
        "ledgerWarmWriteUnits",
    ]
    assert "outside 1..1000" in caught.value.problems[0]
    assert "outside 4000..40000" in caught.value.problems[1]
    with pytest.raises(SettingsError) as caught:
        Settings.from_context({"listingConcurrency": "many", "ledgerWarmWriteUnits": "lots"})
    assert caught.value.problems == [
        "listingConcurrency: expected a whole number, got 'many'",
        "ledgerWarmWriteUnits: expected a whole number, got 'lots'",
    ]
    settings = Settings.from_context(
        {"listingConcurrency": "1000", "ledgerWarmWriteUnits": "12000"}
    )
    assert settings.listing_concurrency == 1000
    assert settings.ledger_warm_write_units == 12000
    assert Settings.from_context(settings.to_context()) == settings


def test_warm_write_units_reach_the_ledger_table(tmp_path: Path) -> None:
    # GIVEN ledgerWarmWriteUnits (built, not synthesized to disk)
    app = App(
        context={**cdk_json_context(), "ledgerWarmWriteUnits": 10000, "listingConcurrency": 7},
        outdir=str(tmp_path),
    )
    stack = compose(app, nag=False, code=lambda_.Code.from_inline("def handler(e, c): pass"))
    template = Template.from_stack(stack)
    # THEN the ledger table is pre-warmed for writes; without it, it is not (default synth)
    template.has_resource_properties(
        "AWS::DynamoDB::Table", {"WarmThroughput": {"WriteUnitsPerSecond": 10000}}
    )
    # AND the listing backfill lists that many shards at once
    machine = stack.pipeline.listing.state_machine.state_machine
    (resource,) = [
        r
        for r in template.find_resources("AWS::StepFunctions::StateMachine").values()
        if "ListShards" in json.dumps(r)
    ]
    _, parts = resource["Properties"]["DefinitionString"]["Fn::Join"]
    text = "".join(p if isinstance(p, str) else "x" for p in parts)
    assert json.loads(text)["States"]["ListShards"]["MaxConcurrency"] == 7
    assert machine.node.path.endswith("/Listing/ListingStateMachine/StateMachine")
