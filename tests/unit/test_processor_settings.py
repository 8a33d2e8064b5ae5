"""The ``processors`` and ``processorPolicyStatements`` settings: parsing from context (a JSON
string as ``cdk -c`` gives it, or a list), normalisation, the single ``processor`` folded in,
the derived ingest-side timeouts, and every problem they can report."""

from __future__ import annotations

import json
from typing import Any

import pytest

from s3ingest.settings import (
    DEFAULT_PROCESSOR_NAME,
    PROCESSOR_KINDS,
    PROCESSOR_MODES,
    PROCESSOR_TIMEOUT_MARGIN_SECONDS,
    Settings,
    SettingsError,
    processor_entry,
    processors_env_size,
)
from s3ingest_fn.core import effects

ARN = "arn:aws:lambda:eu-west-1:123456789012:function:team-audit"
EXAMPLE = "s3ingest_examples.sidecar:handler"
MODULE = "s3ingest_examples.sidecar:process"
STATEMENT = {
    "Effect": "Allow",
    "Action": ["sqs:SendMessage"],
    "Resource": "arn:aws:sqs:eu-west-1:123456789012:team-queue",
}


def _problems(**context: Any) -> list[str]:
    with pytest.raises(SettingsError) as caught:
        Settings.from_context(context)
    return caught.value.problems


def _one_problem(**context: Any) -> str:
    problems = _problems(**context)
    assert len(problems) == 1, problems
    return problems[0]


def test_the_names_are_the_cores() -> None:
    # settings stays free of the function package; these must not drift apart
    assert PROCESSOR_MODES == effects.MODES
    assert PROCESSOR_KINDS == effects.KINDS
    assert DEFAULT_PROCESSOR_NAME == effects.DEFAULT_PROCESSOR


def test_defaults_no_processor() -> None:
    settings = Settings.from_context({})
    assert settings.processors == ()
    assert settings.processor_policy_statements == ()
    assert settings.processor_entries() == []
    assert settings.processor_timeout_floor_seconds == 0
    assert settings.ingest_timeout_seconds == settings.function_timeout_seconds


def test_entries_are_normalised_with_defaults_from_a_json_string() -> None:
    raw = [
        {"name": "audit", "functionArn": ARN},
        {"name": "thumbs", "handler": EXAMPLE, "mode": "every-change", "prefixes": ["in/"]},
        {"name": "index", "module": MODULE, "suffixes": [".csv"], "kinds": ["removed"]},
    ]
    settings = Settings.from_context({"processors": json.dumps(raw)})
    expected = [
        {
            "name": "audit",
            "mode": "latest",
            "prefixes": [],
            "suffixes": [],
            "kinds": ["created", "removed"],
            "timeoutSeconds": 30,
            "functionArn": ARN,
        },
        {
            "name": "thumbs",
            "mode": "every-change",
            "prefixes": ["in/"],
            "suffixes": [],
            "kinds": ["created", "removed"],
            "timeoutSeconds": 30,
            "handler": EXAMPLE,
        },
        {
            "name": "index",
            "mode": "latest",
            "prefixes": [],
            "suffixes": [".csv"],
            "kinds": ["removed"],
            "module": MODULE,
        },
    ]
    assert list(settings.processors) == expected
    assert settings.processor_entries() == expected
    # a list (cdk.json, or the prop's path) reads the same; normalising is idempotent
    assert Settings.from_context({"processors": raw}).processors == settings.processors
    assert [processor_entry(e, "x")[0] for e in expected] == expected
    # and the context form round-trips
    again = Settings.from_context({k: v for k, v in settings.to_context().items() if v is not None})
    assert again == settings


def test_entries_of_settings_built_directly_are_normalised_too() -> None:
    # the local runtime builds Settings(processors=...) from a scenario line
    settings = Settings(processors=({"name": "thumbs", "handler": EXAMPLE},))
    assert settings.problems() == []
    assert settings.processor_entries() == [
        {
            "name": "thumbs",
            "mode": "latest",
            "prefixes": [],
            "suffixes": [],
            "kinds": ["created", "removed"],
            "timeoutSeconds": 30,
            "handler": EXAMPLE,
        }
    ]


def test_the_single_processor_is_the_default_entry() -> None:
    settings = Settings.from_context({"processor": MODULE})
    assert settings.processors == ()
    assert settings.processor_entries() == [
        {
            "name": "default",
            "mode": "latest",
            "prefixes": [],
            "suffixes": [],
            "kinds": ["created", "removed"],
            "module": MODULE,
        }
    ]
    # an in-process processor derives no timeout
    assert settings.processor_timeout_floor_seconds == 0


def test_processor_and_processors_together_is_a_problem() -> None:
    problem = _one_problem(
        processor=MODULE, processors=json.dumps([{"name": "a", "functionArn": ARN}])
    )
    assert problem == (
        "processor and processors are both set: list the processor in processors as "
        f'{{"name": "default", "module": "{MODULE}"}}'
    )


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("[{", "processors: not JSON (Expecting property name enclosed in double quotes)"),
        ('{"name": "a"}', "processors: expected a list of objects, got {'name': 'a'}"),
        ("[3]", "processors[0]: expected an object, got 3"),
    ],
)
def test_unreadable_processors(raw: str, expected: str) -> None:
    assert _one_problem(processors=raw) == expected


def _entry_problem(**entry: Any) -> str:
    return _one_problem(processors=[entry])


@pytest.mark.parametrize("name", ["", "Thumbs", "1st", "a_b", "a" * 33, None, 7])
def test_name_pattern(name: Any) -> None:
    assert _entry_problem(name=name, functionArn=ARN) == (
        f"processors[0].name: {name!r} must be lower-case letters, digits and '-', starting "
        "with a letter, at most 32 (^[a-z][a-z0-9-]{0,31}$)"
    )


def test_names_are_unique() -> None:
    problem = _one_problem(
        processors=[{"name": "a", "functionArn": ARN}, {"name": "a", "module": MODULE}]
    )
    assert problem == "processors: 'a' is named twice"


def test_unknown_field() -> None:
    assert _entry_problem(name="a", functionArn=ARN, prefix=["in/"]) == (
        "processors[0].prefix: unknown field (known: name, mode, prefixes, suffixes, kinds, "
        "timeoutSeconds, functionArn, handler, module, hold, version)"
    )


def test_mode() -> None:
    assert _entry_problem(name="a", functionArn=ARN, mode="every") == (
        "processors[0].mode: 'every' is not one of latest, every-change"
    )


@pytest.mark.parametrize("kinds", [[], ["created", "created"], ["deleted"], "created"])
def test_kinds(kinds: Any) -> None:
    assert _entry_problem(name="a", functionArn=ARN, kinds=kinds) == (
        f"processors[0].kinds: {kinds!r} is not a non-empty list of created, removed (each once)"
    )


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["in/", ""], "expected a list of non-empty strings"),
        ("in/", "expected a list of non-empty strings"),
        (["in/", "in/"], "listed twice"),
        (["x" * 1025], "longer than a key can be (1024 bytes)"),
    ],
)
@pytest.mark.parametrize("key", ["prefixes", "suffixes"])
def test_key_filters(key: str, values: Any, expected: str) -> None:
    assert _entry_problem(name="a", functionArn=ARN, **{key: values}) == (
        f"processors[0].{key}: {expected}"
    )


def test_exactly_one_way_to_run() -> None:
    assert _entry_problem(name="a") == (
        "processors[0]: give exactly one of functionArn, handler, module"
    )
    assert _entry_problem(name="a", functionArn=ARN, module=MODULE) == (
        "processors[0]: give exactly one of functionArn, handler, module (got functionArn, module)"
    )


@pytest.mark.parametrize(
    "arn",
    [
        "arn:aws:lambda:eu-west-1:123456789012:function:team-audit",
        "arn:aws:lambda:eu-west-1:123456789012:function:team-audit:live",
        "arn:aws:lambda:eu-west-1:123456789012:function:team_audit:7",
        "arn:aws:lambda:eu-west-1:123456789012:function:team-audit:$LATEST",
        "arn:aws-cn:lambda:cn-north-1:123456789012:function:f",
        "arn:aws-us-gov:lambda:us-gov-west-1:123456789012:function:f",
    ],
)
def test_function_arns_accepted(arn: str) -> None:
    assert Settings(processors=({"name": "a", "functionArn": arn},)).problems() == []


@pytest.mark.parametrize(
    "arn",
    [
        "team-audit",
        "arn:aws:lambda:eu-west-1:123456789012:team-audit",
        "arn:aws:lambda:eu-west-1:1234:function:team-audit",
        "arn:aws:s3:::bucket",
        "arn:aws:lambda:eu-west-1:123456789012:function:team.audit",
        "arn:aws:lambda:eu-west-1:123456789012:function:" + "f" * 65,
        "arn:aws:lambda:eu-west-1:123456789012:function:f:a:b",
    ],
)
def test_function_arn_shape(arn: str) -> None:
    assert _entry_problem(name="a", functionArn=arn) == (
        f"processors[0].functionArn: {arn!r} is not a Lambda function ARN "
        "(arn:<partition>:lambda:<region>:<account>:function:<name>[:<qualifier>])"
    )


@pytest.mark.parametrize("key", ["handler", "module"])
@pytest.mark.parametrize("value", ["pkg.mod", "pkg.mod:", "pkg-x.mod:fn", "pkg.mod:fn.x"])
def test_handler_and_module_shape(key: str, value: str) -> None:
    assert _entry_problem(name="a", **{key: value}) == (
        f"processors[0].{key}: {value!r} is not 'package.module:function'"
    )


@pytest.mark.parametrize("timeout", [0, 901, -1, "ten", True, 1.5])
def test_timeout_range(timeout: Any) -> None:
    assert _entry_problem(name="a", functionArn=ARN, timeoutSeconds=timeout) == (
        f"processors[0].timeoutSeconds: {timeout!r} is not a whole number in 1..900 "
        "(Lambda's timeout range)"
    )


def test_timeout_as_a_string_is_read() -> None:
    settings = Settings.from_context(
        {"processors": [{"name": "a", "functionArn": ARN, "timeoutSeconds": "45"}]}
    )
    assert settings.processor_entries()[0]["timeoutSeconds"] == 45


def test_a_module_has_no_timeout() -> None:
    assert _entry_problem(name="a", module=MODULE, timeoutSeconds=30) == (
        "processors[0].timeoutSeconds: only a processor function (functionArn or handler) has a "
        "timeout; a module runs within the ingest-side functions' own"
    )


@pytest.mark.parametrize(("given", "version"), [(2, 2), ("3", 3), (" 4 ", 4), (1, None)])
def test_an_entry_version_is_read_and_the_default_left_out(given: Any, version: Any) -> None:
    settings = Settings.from_context({"processors": [{"name": "a", "module": MODULE}]})
    plain = settings.processor_entries()[0]
    raw = {"name": "a", "module": MODULE, "version": given}
    entry = Settings.from_context({"processors": [raw]}).processor_entries()[0]
    # version 1 leaves the entry (and so the PROCESSORS bytes) as without one
    assert entry == (plain if version is None else {**plain, "version": version})
    assert processor_entry(entry, "")[0] == entry  # normalised entries normalise to themselves


@pytest.mark.parametrize("version", [0, -1, True, False, 2.0, 1.5, "two", "", "2.5"])
def test_an_entry_version_that_is_no_whole_number_of_at_least_1(version: Any) -> None:
    assert _entry_problem(name="a", module=MODULE, version=version) == (
        f"processors[0].version: {version!r} is not a whole number of at least 1"
    )


def test_the_single_processor_version_is_the_default_entrys() -> None:
    settings = Settings.from_context({"processor": MODULE, "processorVersion": "3"})
    assert settings.processor_version == 3
    (entry,) = settings.processor_entries()
    assert (entry["name"], entry["module"], entry["version"]) == ("default", MODULE, 3)
    # at version 1 PROCESSOR carries the processor; above it, PROCESSORS (with the version)
    assert settings.processors_variable
    assert not Settings.from_context({"processor": MODULE}).processors_variable
    assert "version" not in Settings(processor=MODULE, processor_version=1).processor_entries()[0]


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("x", "processorVersion: expected a whole number, got 'x'"),
        ("1.5", "processorVersion: expected a whole number, got '1.5'"),
        (1.5, "processorVersion: expected a whole number, got 1.5"),
        (True, "processorVersion: expected a whole number, got True"),
        (0, "processorVersion: 0 is not a whole number of at least 1"),
        ("-2", "processorVersion: -2 is not a whole number of at least 1"),
    ],
)
def test_processor_version_problems(version: Any, expected: str) -> None:
    assert _one_problem(processor=MODULE, processorVersion=version) == expected


def test_processor_version_needs_the_single_processor() -> None:
    assert _one_problem(processorVersion=2) == "processorVersion is set but processor is not"
    entries = [{"name": "a", "module": MODULE, "version": 2}]
    assert _one_problem(processorVersion=2, processors=entries) == (
        "processorVersion is set but processor is not (a processors entry takes its own version)"
    )
    assert Settings.from_context({"processorVersion": 1}).processor_entries() == []


def test_problems_of_several_entries_are_reported_together() -> None:
    problems = _problems(
        processors=[
            {"name": "A", "functionArn": ARN},
            {"name": "b", "handler": "nope", "mode": "x"},
        ]
    )
    assert [p.split(":")[0] for p in problems] == [
        "processors[0].name",
        "processors[1].mode",
        "processors[1].handler",
    ]


# --- Derived timeouts ----------------------------------------------------------------------------


def test_ingest_side_timeouts_follow_the_longest_processor_function() -> None:
    settings = Settings.from_context(
        {
            "processors": [
                {"name": "a", "functionArn": ARN, "timeoutSeconds": 120},
                {"name": "b", "handler": EXAMPLE, "timeoutSeconds": 40},
                {"name": "c", "module": MODULE},
            ]
        }
    )
    floor = 120 + PROCESSOR_TIMEOUT_MARGIN_SECONDS
    assert PROCESSOR_TIMEOUT_MARGIN_SECONDS == 15
    assert settings.processor_timeout_floor_seconds == floor
    # raised where lower (functionTimeoutSeconds 30, backfillFunctionTimeoutSeconds 60) ...
    assert settings.ingest_timeout_seconds == floor
    assert settings.ingest_side_timeout(settings.backfill_function_timeout_seconds) == floor
    # ... kept where longer (reconcileTimeoutSeconds 900)
    assert settings.ingest_side_timeout(settings.reconcile_timeout_seconds) == 900
    # and the queue's visibility timeout follows the ingest function's
    assert settings.queue_visibility_timeout_seconds == 6 * floor
    longer = Settings.from_context(
        {"processors": [{"name": "a", "functionArn": ARN}], "functionTimeoutSeconds": 100}
    )
    assert longer.ingest_timeout_seconds == 100


def test_a_processor_function_too_long_for_its_invokers_is_a_problem() -> None:
    assert _entry_problem(name="a", functionArn=ARN, timeoutSeconds=886) == (
        "processors[0].timeoutSeconds: 886 + 15 s for the functions that invoke it passes "
        "Lambda's 900 s limit (at most 885)"
    )
    ok = Settings(processors=({"name": "a", "functionArn": ARN, "timeoutSeconds": 885},))
    assert ok.problems() == []
    assert ok.ingest_timeout_seconds == 900


def test_the_in_process_minimum_timeout_applies_to_module_entries() -> None:
    problems = _problems(processors=[{"name": "a", "module": MODULE}], functionTimeoutSeconds=5)
    assert problems == [
        "functionTimeoutSeconds: at least 10 with a processor (an effect is started only "
        "with 3 s or more left in the invocation)"
    ]
    # a processor function raises the timeout itself
    Settings.from_context(
        {
            "processors": [{"name": "a", "module": MODULE}, {"name": "b", "functionArn": ARN}],
            "functionTimeoutSeconds": 5,
        }
    )


# --- processorPackageDir -------------------------------------------------------------------------


def test_package_dir_needs_a_bundled_processor() -> None:
    assert _one_problem(processorPackageDir="processors") == (
        "processorPackageDir is set but processor is not"
    )
    assert _one_problem(
        processorPackageDir="processors", processors=[{"name": "a", "functionArn": ARN}]
    ) == ("processorPackageDir is set but processor is not (nor a module or handler in processors)")
    for entry in ({"name": "a", "module": MODULE}, {"name": "a", "handler": EXAMPLE}):
        Settings.from_context({"processorPackageDir": "processors", "processors": [entry]})


# --- processorPolicyStatements -------------------------------------------------------------------


def test_statements_from_a_json_string() -> None:
    settings = Settings.from_context(
        {"processor": MODULE, "processorPolicyStatements": json.dumps([STATEMENT])}
    )
    assert settings.processor_policy_statements == (STATEMENT,)
    assert settings.to_context()["processorPolicyStatements"] == [STATEMENT]


def test_statements_need_an_in_process_processor() -> None:
    expected = (
        "processorPolicyStatements is set but no in-process processor runs (processor, or a "
        "module in processors): a processor function has its own role"
    )
    assert _one_problem(processorPolicyStatements=[STATEMENT]) == expected
    assert (
        _one_problem(
            processorPolicyStatements=[STATEMENT],
            processors=[{"name": "a", "handler": EXAMPLE}],
        )
        == expected
    )
    Settings.from_context(
        {"processorPolicyStatements": [STATEMENT], "processors": [{"name": "a", "module": MODULE}]}
    )


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"Effect": "allow"}, "processorPolicyStatements[0].Effect: 'allow' is not Allow or Deny"),
        ({"Effect": None}, "processorPolicyStatements[0].Effect: None is not Allow or Deny"),
        (
            {"Action": []},
            "processorPolicyStatements[0].Action: expected a string or a non-empty list of strings",
        ),
        (
            {"Action": None},
            "processorPolicyStatements[0].Action: expected a string or a non-empty list of strings",
        ),
        (
            {"Action": ["sqs:SendMessage", "sendmessage"]},
            "processorPolicyStatements[0].Action: 'sendmessage': each must be 'service:Action' "
            "(wildcards * and ? allowed) or '*'",
        ),
        (
            {"Resource": []},
            "processorPolicyStatements[0].Resource: expected a string or a non-empty list of "
            "strings",
        ),
        (
            {"Resource": ["team-queue", 3]},
            "processorPolicyStatements[0].Resource: 'team-queue', 3: each must be an ARN "
            "('arn:...') or '*'",
        ),
        (
            {"Condition": {"StringEquals": "x"}},
            "processorPolicyStatements[0].Condition: expected {operator: {key: value}} (an IAM "
            "condition block)",
        ),
        (
            {"Principal": "*"},
            "processorPolicyStatements[0].Principal: unknown field (known: Sid, Effect, Action, "
            "Resource, Condition)",
        ),
    ],
)
def test_statement_problems(change: dict[str, Any], expected: str) -> None:
    statement = {**STATEMENT, **change}
    assert _one_problem(processor=MODULE, processorPolicyStatements=[statement]) == expected


def test_statement_that_is_no_object_and_unreadable_statements() -> None:
    assert _one_problem(processor=MODULE, processorPolicyStatements=["x"]) == (
        "processorPolicyStatements[0]: expected an object, got 'x'"
    )
    assert _one_problem(processor=MODULE, processorPolicyStatements="[") == (
        "processorPolicyStatements: not JSON (Expecting value)"
    )


def test_statements_accepted() -> None:
    for statement in (
        STATEMENT,
        {**STATEMENT, "Effect": "Deny", "Action": "s3:*", "Resource": "*"},
        {**STATEMENT, "Sid": "Team", "Condition": {"StringEquals": {"aws:RequestTag/t": "x"}}},
    ):
        Settings.from_context({"processor": MODULE, "processorPolicyStatements": [statement]})


def test_a_processors_list_too_large_for_the_lambda_environment_is_a_problem() -> None:
    arn = "arn:aws:lambda:eu-west-1:123456789012:function:team-notifier-{i}"
    prefixes = ["incoming/region-a/", "incoming/region-b/", "archive/2026/", "tmp/uploads/"]
    many = [
        {"name": f"p{i}", "functionArn": arn.format(i=i), "prefixes": prefixes} for i in range(20)
    ]
    (problem,) = [p for p in _problems(processors=json.dumps(many)) if "PROCESSORS" in p]
    assert "Lambda allows 4 KB" in problem
    few = [*many[:3], {"name": "h", "handler": "s3ingest_examples.sidecar:handler"}]
    entries = Settings.from_context({"processors": json.dumps(few)}).processor_entries()
    # a deployed handler counts as the ARN it becomes
    assert processors_env_size(entries) > len(json.dumps(entries[:3], separators=(",", ":")))


def test_versions_are_counted_in_the_processors_variable() -> None:
    arn = "arn:aws:lambda:eu-west-1:123456789012:function:team-notifier-{i}"
    prefixes = ["incoming/region-a/", "incoming/region-b/", "archive/2026/"]
    entries = tuple(
        {"name": f"p{i}", "functionArn": arn.format(i=i), "prefixes": prefixes} for i in range(10)
    )
    versioned = tuple({**e, "version": 10**12} for e in entries)
    grown = processors_env_size(Settings(processors=versioned).processor_entries())
    assert grown - processors_env_size(Settings(processors=entries).processor_entries()) == (
        len(',"version":1000000000000') * len(entries)
    )
    # the versions take the list past the budget
    assert Settings(processors=entries).problems() == []
    (problem,) = Settings(processors=versioned).problems()
    assert problem.startswith("processors: the PROCESSORS environment variable would take")
    # the single processor at a version above 1 is carried (and counted) as PROCESSORS too
    hold = {"prefixes": [f"held/{i:04}/" + "x" * 40 for i in range(46)]}
    assert Settings(processor=MODULE, hold=hold).problems() == []
    (problem,) = Settings(processor=MODULE, processor_version=2, hold=hold).problems()
    assert problem.startswith("hold: the PROCESSORS and HOLD environment variables would take")


# --- in-process processors beside buckets of other accounts --------------------------------------

REMOTE_BUCKETS = [{}, {"name": "producer-drop", "existing": True, "account": "222222222222"}]


def test_in_process_processors_beside_remote_buckets_are_refused_unless_allowed() -> None:
    # GIVEN a bucket of another account, a module processor and the single processor
    # THEN each in-process one is refused, naming the setting that accepts it
    for context, where in (
        ({"processors": [{"name": "a", "module": MODULE}]}, "processors[0].module"),
        ({"processor": MODULE}, "processor"),
    ):
        problem = _one_problem(buckets=REMOTE_BUCKETS, **context)
        assert problem.startswith(f"{where}: an in-process processor runs inside the pipeline")
        assert "(buckets[1])" in problem
        assert "allowModuleProcessorsWithRemoteBuckets" in problem
        assert "handler or functionArn" in problem
        # AND the explicit setting accepts it
        settings = Settings.from_context(
            {"buckets": REMOTE_BUCKETS, "allowModuleProcessorsWithRemoteBuckets": "true", **context}
        )
        assert settings.allow_module_processors_with_remote_buckets is True
    # AND handler and functionArn processors (roles of their own) need no opt-in
    Settings.from_context(
        {
            "buckets": REMOTE_BUCKETS,
            "processors": [
                {"name": "a", "handler": EXAMPLE},
                {"name": "b", "functionArn": ARN},
            ],
        }
    )
    # AND without a remote bucket a module needs none either
    Settings.from_context({"processors": [{"name": "a", "module": MODULE}]})
