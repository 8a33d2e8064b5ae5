"""Invalid context fails early, with every problem in one SettingsError."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from aws_cdk import App

from infra.compose import compose, settings_from_app
from infra.synth import PROJECT_ROOT, cdk_json_context
from s3ingest.settings import DEFAULTS, Settings, SettingsError

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
    env.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "18,20")
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
