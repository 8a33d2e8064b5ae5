"""The hold for review settings (``hold``, a ``processors`` entry's ``hold``, ``trailLength``,
``holdAlarmSeconds``): parsing from context, validation by the core's ``hold_errors``, the
functions' variables (:meth:`Settings.hold_env`) and the environment budget."""

from __future__ import annotations

import json
from typing import Any

import pytest

from s3ingest.settings import (
    DEFAULTS,
    MAX_PROCESSORS_ENV_BYTES,
    Settings,
    SettingsError,
    processors_env_size,
)
from s3ingest_fn import wiring
from s3ingest_fn.core.hold import HoldPolicy, hold_errors
from s3ingest_fn.core.row import MAX_TRAIL, TRAIL_SLOTS

MODULE = "s3ingest_examples.sidecar:process"
BREAKER = {"deletes": {"above": 100, "windowSeconds": 300}}


def _problems(**context: Any) -> list[str]:
    with pytest.raises(SettingsError) as caught:
        Settings.from_context(context)
    return caught.value.problems


def test_defaults_hold_nothing_and_add_no_variable() -> None:
    settings = Settings.from_context({"processor": MODULE})
    assert settings.hold is None
    assert settings.trail_length == TRAIL_SLOTS == DEFAULTS["trailLength"] == 5
    assert settings.hold_alarm_seconds == 86_400
    assert settings.hold_env() == {}
    assert not settings.holds


@pytest.mark.parametrize("raw", [BREAKER, json.dumps(BREAKER)])
def test_hold_from_an_object_or_a_json_string(raw: Any) -> None:
    settings = Settings.from_context({"processor": MODULE, "hold": raw})
    assert settings.hold == BREAKER
    assert settings.holds
    # the variable is compact JSON the functions read back into the same policy
    env = settings.hold_env()
    assert env == {"HOLD": '{"deletes":{"above":100,"windowSeconds":300}}'}
    (entry,) = settings.processor_entries()
    policies = wiring.hold_policies([entry], env)
    assert policies["default"] == HoldPolicy(above=100, window_seconds=300)


def test_trail_length_other_than_the_default_is_a_variable() -> None:
    settings = Settings.from_context({"processor": MODULE, "trailLength": "12"})
    assert settings.trail_length == 12
    assert settings.hold_env() == {"TRAIL_LENGTH": "12"}


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ({"deletes": "yes"}, "hold.deletes must be true, false"),
        ({"deletes": {"above": -1}}, "hold.deletes.above must be an integer 0..1000000"),
        ({"deletes": {"above": 1_000_001}}, "hold.deletes.above must be an integer 0..1000000"),
        ({"policy": "pkg.mod:"}, "hold.policy must be 'package.module:function'"),
        ({"prefixes": "in/"}, "hold.prefixes must be a list of non-empty strings"),
        ({"policy": "no-colon"}, "hold.policy must be 'package.module:function'"),
        ({"holdAll": True}, "hold: unknown key 'holdAll'"),
        ([1], "hold must be a JSON object, got list"),
    ],
)
def test_each_hold_error_of_the_core_is_a_settings_problem(doc: Any, expected: str) -> None:
    problems = _problems(processor=MODULE, hold=json.dumps(doc))
    # the core's sentences, as they are, and nothing else
    assert problems == hold_errors(doc)
    assert problems[0].startswith(expected)


def test_hold_that_is_not_json_is_a_problem() -> None:
    (problem,) = _problems(processor=MODULE, hold="{deletes: true}")
    assert problem.startswith("hold: not JSON")


def test_hold_needs_processors() -> None:
    (problem,) = _problems(hold={"policy": "team.review:decide"})
    assert problem.startswith("hold needs processors: ")
    # with a processor the same hold is valid
    Settings.from_context({"hold": {"policy": "team.review:decide"}, "processor": MODULE})


def test_a_processor_entry_has_its_own_hold() -> None:
    raw = [
        {"name": "audit", "module": MODULE, "hold": {"prefixes": ["locked/"]}},
        {"name": "thumbs", "module": MODULE},
    ]
    settings = Settings.from_context({"processors": json.dumps(raw), "hold": {"deletes": True}})
    audit, thumbs = settings.processor_entries()
    assert audit["hold"] == {"prefixes": ["locked/"]}
    assert "hold" not in thumbs
    # the entry's own wins; the other gets the stack's
    policies = wiring.hold_policies([audit, thumbs], settings.hold_env())
    assert policies["audit"] == HoldPolicy(prefixes=("locked/",))
    assert policies["thumbs"] == HoldPolicy(deletes=True)


def test_an_entry_hold_alone_deploys_the_alarm() -> None:
    raw = [{"name": "audit", "module": MODULE, "hold": {"deletes": True}}]
    settings = Settings.from_context({"processors": raw})
    assert settings.hold is None and settings.hold_env() == {}
    assert settings.holds


def test_an_entry_hold_is_validated_and_named_by_its_entry() -> None:
    raw = [{"name": "audit", "module": MODULE, "hold": {"deletes": {"above": 1, "x": 2}}}]
    problems = _problems(processors=json.dumps(raw))
    assert problems == ["processors[0].hold.deletes: unknown keys ['x']"]


@pytest.mark.parametrize(
    ("context", "expected"),
    [
        ({"trailLength": 0}, "trailLength: 0 is outside 1..20"),
        ({"trailLength": MAX_TRAIL + 1}, "trailLength: 21 is outside 1..20"),
        ({"trailLength": "five"}, "trailLength: expected a whole number, got 'five'"),
        ({"holdAlarmSeconds": 59}, "holdAlarmSeconds: 59 is below 60"),
    ],
)
def test_trail_length_and_alarm_bounds(context: dict[str, Any], expected: str) -> None:
    assert _problems(processor=MODULE, **context) == [expected]


def test_the_bounds_themselves_are_valid() -> None:
    for trail in (1, MAX_TRAIL):
        Settings.from_context({"trailLength": trail, "holdAlarmSeconds": 60})


def test_the_hold_variable_counts_in_the_environment_budget() -> None:
    # GIVEN processors that fit the budget alone
    prefixes = [f"incoming/region-{i:03d}/" for i in range(40)]
    raw = [{"name": f"p{i}", "module": MODULE, "prefixes": prefixes[:10]} for i in range(4)]
    settings = Settings.from_context({"processors": json.dumps(raw)})
    alone = processors_env_size(settings.processor_entries())
    assert alone <= MAX_PROCESSORS_ENV_BYTES
    # WHEN a stack-wide hold pushes PROCESSORS + HOLD over it
    hold = {"prefixes": prefixes * 2}
    assert alone + len(json.dumps(hold, separators=(",", ":"))) > MAX_PROCESSORS_ENV_BYTES
    problems = _problems(processors=json.dumps(raw), hold=hold)
    # THEN it is one problem naming both variables
    (problem,) = problems
    assert problem.startswith("processors: the PROCESSORS and HOLD environment variables would")
    assert processors_env_size(settings.processor_entries(), hold) == alone + len(
        json.dumps(hold, separators=(",", ":")).encode()
    )


def test_to_context_round_trips() -> None:
    context = {
        "processor": MODULE,
        "hold": BREAKER,
        "trailLength": 9,
        "holdAlarmSeconds": 3600,
    }
    settings = Settings.from_context(context)
    again = Settings.from_context({k: v for k, v in settings.to_context().items() if v is not None})
    assert again == settings
    assert (again.hold, again.trail_length, again.hold_alarm_seconds) == (BREAKER, 9, 3600)
