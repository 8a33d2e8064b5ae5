"""Several processors per stack (issue 16: ``processors``, ``processorPolicyStatements``): the
``PROCESSORS`` environment of the functions that run them, ``lambda:InvokeFunction`` on exactly
the processor functions, the processor function the stack deploys for a ``handler`` (its own
role: the output bucket, no landing bucket), the team's extra statements, the ingest-side
timeouts derived from the processor functions', the outputs; the same through the
``S3IngestPipeline`` props; and the single ``processor`` setting unchanged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from cdk_nag import AwsSolutionsChecks
from cfnlint.api import ManualArgs, lint_file

from s3ingest.settings import SettingsError
from s3ingest_cdk import ProcessorConfig, S3IngestPipeline
from s3ingest_cdk.bundling import HELPER_DIR, ProcessorPackageError, processors_sources
from s3ingest_cdk.compose import compose
from s3ingest_cdk.stack import S3IngestStack
from s3ingest_cdk.synth import Synth, cdk_json_context
from s3ingest_fn.effect_targets import hold_names, parse_targets, targets_json

from .conftest import (
    AUDIT_HOLD,
    EXAMPLE_HANDLER,
    PROCESSORS,
    STACK_HOLD,
    TEAM_FUNCTION_ARN,
    TEAM_QUEUE_ARN,
    TRAIL_LENGTH,
)
from .iam import allowed, statements_of

INLINE = "def handler(event, context):\n    return None\n"


def _arn(logical_id: str) -> dict[str, Any]:
    return {"Fn::GetAtt": [logical_id, "Arn"]}


def _objects(logical_id: str) -> dict[str, Any]:
    return {"Fn::Join": ["", [_arn(logical_id), "/*"]]}


def _flatten(value: Any) -> str:
    """A template string value with its ``Fn::GetAtt`` parts as ``<Id.Arn>``."""
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        delimiter, parts = value["Fn::Join"]
        return str(delimiter).join(_flatten(part) for part in parts)
    if "Fn::GetAtt" in value:
        return "<{}.{}>".format(*value["Fn::GetAtt"])
    raise AssertionError(f"unexpected template value {value!r}")


def _function(synth: Synth, function: Any) -> dict[str, Any]:
    properties: dict[str, Any] = synth.template["Resources"][synth.logical_id(function)][
        "Properties"
    ]
    return properties


def _sidecar_id(synth: Synth) -> str:
    return synth.logical_id(synth.pipeline.processor_functions["sidecar"])


def _output_id(synth: Synth) -> str:
    output = synth.pipeline.processor_output
    assert output is not None
    return synth.logical_id(output.bucket)


def _findings(app: App) -> list[str]:
    report = AwsSolutionsChecks(verbose=True).validate_scope(app)
    return [
        f"{violation.rule_name} at {resource.construct_path}: {violation.description}"
        for violation in report.violations
        for resource in violation.violating_resources
    ]


# --- The three-processor synth -------------------------------------------------------------------


def test_three_processors_are_nag_clean(processors_synth: Synth) -> None:
    findings = _findings(processors_synth.app)
    assert not findings, "unacknowledged cdk-nag findings:\n" + "\n".join(findings)


def test_three_processors_are_cfn_lint_clean(processors_synth: Synth) -> None:
    matches = lint_file(
        processors_synth.template_path, config=ManualArgs(regions=["us-east-1", "eu-west-1"])
    )
    problems = [f"{m.rule.id}: {m.message}" for m in matches if m.rule.id[0] in "EW"]
    assert not problems, "cfn-lint:\n" + "\n".join(problems)


def test_functions_that_run_the_processors_get_processors(processors_synth: Synth) -> None:
    synth = processors_synth
    pipeline = synth.pipeline
    assert pipeline.backfill is not None
    runners = [
        pipeline.ingest.function,
        pipeline.backfill.function,
        pipeline.listing.shard.function,
        pipeline.reprocess.segment.function,
    ]
    assert pipeline.ingest_service_functions == runners
    expected = [
        {
            "name": "audit",
            "mode": "every-change",
            "prefixes": ["audit/"],
            "suffixes": [],
            "kinds": ["created", "removed"],
            "timeoutSeconds": 120,
            "functionArn": TEAM_FUNCTION_ARN,
            "hold": AUDIT_HOLD,
        },
        {
            # the handler entry as the ARN of the function the stack deployed for it
            "name": "sidecar",
            "mode": "latest",
            "prefixes": [],
            "suffixes": [],
            "kinds": ["created", "removed"],
            "timeoutSeconds": 60,
            "functionArn": f"<{_sidecar_id(synth)}.Arn>",
        },
        {
            "name": "thumbs",
            "mode": "latest",
            "prefixes": [],
            "suffixes": [".jpg"],
            "kinds": ["created"],
            "module": "s3ingest_examples.sidecar:process",
        },
    ]
    for function in runners:
        variables = _function(synth, function)["Environment"]["Variables"]
        assert json.loads(_flatten(variables["PROCESSORS"])) == expected
        # the in-process module writes to the output bucket, as the single processor does
        assert variables["OUTPUT_BUCKET"] == {"Ref": _output_id(synth)}
        assert "PROCESSOR" not in variables
        # hold for review: the stack's policy (compact JSON) and the trail's length
        assert variables["HOLD"] == json.dumps(STACK_HOLD, separators=(",", ":"))
        assert variables["TRAIL_LENGTH"] == str(TRAIL_LENGTH)
    # the reprocess plan names them (which are configured, their versions), without grants
    plan = _function(synth, pipeline.reprocess.plan.function)["Environment"]["Variables"]
    assert json.loads(_flatten(plan["PROCESSORS"])) == expected
    assert plan["HOLD"] == json.dumps(STACK_HOLD, separators=(",", ":"))
    assert "OUTPUT_BUCKET" not in plan
    # no other function has them
    named = {synth.logical_id(f) for f in [*runners, pipeline.reprocess.plan.function]}
    for logical_id, resource in synth.resources("AWS::Lambda::Function").items():
        if logical_id in named:
            continue
        variables = resource["Properties"]["Environment"]["Variables"]
        assert "PROCESSORS" not in variables and "PROCESSOR" not in variables, logical_id
        assert "HOLD" not in variables and "TRAIL_LENGTH" not in variables, logical_id


def test_invoke_grants_name_exactly_the_processor_functions(processors_synth: Synth) -> None:
    synth = processors_synth
    pipeline = synth.pipeline
    expected = sorted(
        json.dumps(arn, sort_keys=True) for arn in (TEAM_FUNCTION_ARN, _arn(_sidecar_id(synth)))
    )
    runner_roles = set()
    for function in pipeline.ingest_service_functions:
        granted = allowed(
            [s for s in statements_of(synth, function.role) if s["Effect"] == "Allow"]
        )
        assert granted["lambda:InvokeFunction"] == expected
        runner_roles.add(json.dumps({"Ref": synth.logical_id(function.role)}))
    # no other role may invoke them (nor, through a wildcard, any version of them)
    processor_arns = {TEAM_FUNCTION_ARN, f"<{_sidecar_id(synth)}.Arn>"}
    for policy in synth.resources("AWS::IAM::Policy").values():
        roles = {json.dumps(role) for role in policy["Properties"]["Roles"]}
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"]
            if "lambda:InvokeFunction" not in ([actions] if isinstance(actions, str) else actions):
                continue
            resources = statement["Resource"]
            for resource in resources if isinstance(resources, list) else [resources]:
                flat = _flatten(resource)
                if flat in processor_arns:
                    assert roles <= runner_roles, roles
                assert not any(flat.startswith(arn) and flat != arn for arn in processor_arns)


def test_the_deployed_processor_function(processors_synth: Synth) -> None:
    synth = processors_synth
    function = synth.pipeline.processor_functions["sidecar"]
    properties = _function(synth, function)
    assert properties["Handler"] == "s3ingest_examples.sidecar.handler"
    assert properties["Timeout"] == 60
    assert properties["Runtime"] == "python3.13"
    assert properties["Environment"]["Variables"]["OUTPUT_BUCKET"] == {"Ref": _output_id(synth)}
    assert "PROCESSORS" not in properties["Environment"]["Variables"]
    # its own role: its log group, and write/delete of the output objects; nothing of the
    # landing buckets (it reads the change through the presigned URL of its request)
    assert function.role is not None
    owner = synth.pipeline.processing
    assert owner is not None
    log_group = synth.logical_id(owner.functions["sidecar"].log_group)
    assert allowed(statements_of(synth, function.role)) == {
        "logs:CreateLogStream": [json.dumps(_arn(log_group), sort_keys=True)],
        "logs:PutLogEvents": [json.dumps(_arn(log_group), sort_keys=True)],
        "s3:DeleteObject": [json.dumps(_objects(_output_id(synth)), sort_keys=True)],
        "s3:PutObject": [json.dumps(_objects(_output_id(synth)), sort_keys=True)],
    }
    for bucket in synth.pipeline.landings.buckets:
        assert synth.logical_id(bucket) not in json.dumps(statements_of(synth, function.role))


def test_the_teams_statements_reach_the_in_process_runners_only(processors_synth: Synth) -> None:
    synth = processors_synth
    pipeline = synth.pipeline
    for function in pipeline.ingest_service_functions:
        granted = allowed(statements_of(synth, function.role))
        assert json.dumps(TEAM_QUEUE_ARN) in granted["sqs:SendMessage"]
    assert TEAM_QUEUE_ARN not in json.dumps(
        statements_of(synth, pipeline.processor_functions["sidecar"].role)
    )
    assert TEAM_QUEUE_ARN not in json.dumps(statements_of(synth, pipeline.reconcile.role))


def test_ingest_side_timeouts_are_derived(processors_synth: Synth) -> None:
    synth = processors_synth
    pipeline = synth.pipeline
    assert pipeline.backfill is not None and pipeline.backfill_control is not None
    floor = 120 + 15  # the longest processor function, and the margin
    assert _function(synth, pipeline.ingest.function)["Timeout"] == floor  # 30 configured
    assert _function(synth, pipeline.backfill.function)["Timeout"] == floor  # 60 configured
    assert _function(synth, pipeline.listing.shard.function)["Timeout"] == floor  # 100
    # the functions that run no processor keep theirs
    assert _function(synth, pipeline.reconcile.function)["Timeout"] == 100
    assert _function(synth, pipeline.backfill_control.function)["Timeout"] == 100
    # the queue's visibility timeout follows the ingest function's (6x)
    queue = synth.template["Resources"][synth.logical_id(pipeline.queue)]
    assert queue["Properties"]["VisibilityTimeout"] == 6 * floor
    # and the near-timeout alarms their functions' timeouts (80%, in ms)
    for what, seconds in (("ingest", floor), ("backfill", floor), ("backfill-control", 100)):
        alarm = synth.template["Resources"][synth.logical_id(pipeline.alarms.durations[what])]
        assert alarm["Properties"]["Threshold"] == seconds * 800, what


def test_outputs_name_the_deployed_processor_functions(processors_synth: Synth) -> None:
    synth = processors_synth
    outputs = synth.template["Outputs"]
    assert json.loads(_flatten(outputs["ProcessorFunctions"]["Value"])) == {
        "sidecar": f"<{_sidecar_id(synth)}.Arn>"
    }
    assert outputs["ProcessorOutputBucket"]["Value"] == {"Ref": _output_id(synth)}
    names = [e["name"] for e in synth.settings.processor_entries()]
    assert outputs["ProcessorNames"]["Value"] == ",".join(names) and len(names) == 3
    # their versions and filters, what `s3ingest explain` judges behind by
    targets = parse_targets(outputs["ProcessorTargets"]["Value"])
    assert [t.name for t in targets] == names
    assert targets == parse_targets(targets_json(synth.settings.processor_entries()))
    # the processors a hold policy applies to, what `s3ingest held` reports (all three here)
    held = json.loads(_flatten(outputs["HoldProcessors"]["Value"]))
    assert held == hold_names(synth.settings.processor_entries(), synth.settings.hold) == names
    # the roles a team's function in another account allows: those of the invoking functions
    invokers = json.loads(_flatten(outputs["ProcessorInvokerRoleArns"]["Value"]))
    roles = [synth.logical_id(f.role) for f in synth.pipeline.ingest_service_functions]
    assert invokers == [f"<{role}.Arn>" for role in roles] and len(roles) >= 3


# --- Built, not synthesized ----------------------------------------------------------------------


def _build(tmp_path: Path, **context: Any) -> tuple[App, S3IngestStack]:
    app = App(context={**cdk_json_context(), **context}, outdir=str(tmp_path))
    stack = compose(app, nag=False, code=lambda_.Code.from_inline(INLINE))
    return app, stack


def _template(app: App, stack: Stack) -> dict[str, Any]:
    template: dict[str, Any] = app.synth().get_stack_by_name(stack.stack_name).template
    return template


def test_the_single_processor_is_the_default_entry_with_its_own_variable(tmp_path: Path) -> None:
    # GIVEN the single processor, and the same as a one-entry processors list
    module = "s3ingest_examples.sidecar:process"
    app, stack = _build(tmp_path / "a", stage="same", processor=module)
    legacy = _template(app, stack)
    app, stack = _build(
        tmp_path / "b", stage="same", processors=[{"name": "default", "module": module}]
    )
    listed = _template(app, stack)
    # THEN the single processor keeps PROCESSOR (no PROCESSORS) ...
    functions = {
        k: v for k, v in legacy["Resources"].items() if v["Type"] == "AWS::Lambda::Function"
    }
    with_processor = [
        k
        for k, v in functions.items()
        if "PROCESSOR" in v["Properties"]["Environment"]["Variables"]
    ]
    # ingest, backfill, listing shard, reprocess segment, and the reprocess plan (it names the
    # processor)
    assert len(with_processor) == 5
    for logical_id in with_processor:
        variables = functions[logical_id]["Properties"]["Environment"]["Variables"]
        assert "PROCESSORS" not in variables
        # ... and the list gives the same template, but PROCESSORS for PROCESSOR
        listed_variables = listed["Resources"][logical_id]["Properties"]["Environment"]["Variables"]
        assert json.loads(listed_variables.pop("PROCESSORS")) == [
            {
                "name": "default",
                "mode": "latest",
                "prefixes": [],
                "suffixes": [],
                "kinds": ["created", "removed"],
                "module": module,
            }
        ]
        listed_variables["PROCESSOR"] = module
    assert json.dumps(listed, sort_keys=True) == json.dumps(legacy, sort_keys=True)


def test_timeout_over_the_lambda_limit_fails_before_building(tmp_path: Path) -> None:
    with pytest.raises(SettingsError) as caught:
        _build(
            tmp_path,
            processors=[{"name": "slow", "functionArn": TEAM_FUNCTION_ARN, "timeoutSeconds": 890}],
        )
    assert caught.value.problems == [
        "processors[0].timeoutSeconds: 890 + 15 s for the functions that invoke it passes "
        "Lambda's 900 s limit (at most 885)"
    ]


def test_a_missing_handler_fails_synth_naming_the_entry(tmp_path: Path) -> None:
    app = App(
        context={
            **cdk_json_context(),
            "processors": [{"name": "x", "handler": "s3ingest_examples.sidecar:no_such"}],
        },
        outdir=str(tmp_path),
    )
    with pytest.raises(ProcessorPackageError) as caught:
        compose(app, nag=False)  # the bundled code: its sources are checked first
    (problem,) = caught.value.problems
    assert problem.startswith("processors[0].handler: 's3ingest_examples.sidecar:no_such': ")
    assert problem.endswith("defines no 'no_such' at its top level")


def test_bundle_sources_of_handler_and_module_entries(tmp_path: Path) -> None:
    functions = tmp_path / "functions"
    (functions / "team_fx").mkdir(parents=True)
    (functions / "team_fx" / "__init__.py").write_text("")
    (functions / "team_fx" / "thumbs.py").write_text("def run(c, x):\n    pass\n")
    (functions / "team_fx" / "audit.py").write_text("def handler(e, c):\n    pass\n")
    (functions / "solo.py").write_text("def handler(e, c):\n    pass\n")
    entries = [
        {"name": "a", "functionArn": TEAM_FUNCTION_ARN},
        {"name": "b", "module": "team_fx.thumbs:run"},
        {"name": "c", "handler": "team_fx.audit:handler"},
        {"name": "d", "handler": "solo:handler"},
        {"name": "e", "module": "s3ingest_fn.effects:anything"},
    ]
    # each top-level package once; a functionArn needs nothing; the function package is there;
    # a handler brings the processor-function helper, which a module alone does not need
    (functions / "s3ingest_fn").mkdir()
    (functions / "s3ingest_fn" / "__init__.py").write_text("")
    (functions / "s3ingest_fn" / "effects.py").write_text("anything = 1\n")
    assert processors_sources(entries, functions_dir=functions) == [
        functions / "team_fx",
        functions / "solo.py",
        HELPER_DIR,
    ]
    assert HELPER_DIR.name == "s3ingest_processor" and (HELPER_DIR / "__init__.py").is_file()
    assert processors_sources(entries[:2], functions_dir=functions) == [functions / "team_fx"]
    with pytest.raises(ProcessorPackageError) as caught:
        processors_sources(
            [{"name": "a", "module": "team_fx.thumbs:gone"}, {"name": "b", "handler": "nope:h"}],
            functions_dir=functions,
        )
    assert [p.split(":")[0] for p in caught.value.problems] == [
        "processors[0].module",
        "processors[1].handler",
    ]


def test_the_example_handler_is_the_documented_one() -> None:
    assert PROCESSORS["processors"][1]["handler"] == EXAMPLE_HANDLER  # type: ignore[index]
    assert EXAMPLE_HANDLER == "s3ingest_examples.sidecar:handler"


# --- The props of S3IngestPipeline ---------------------------------------------------------------


def _team_stack(tmp_path: Path) -> tuple[App, Stack, lambda_.Function]:
    app = App(context=cdk_json_context(), outdir=str(tmp_path))
    stack = Stack(app, "Team")
    team = lambda_.Function(
        stack,
        "TeamAudit",
        runtime=lambda_.Runtime.NODEJS_22_X,
        handler="index.handler",
        code=lambda_.Code.from_inline("exports.handler = async () => ({status: 'done'});"),
    )
    return app, stack, team


def test_props_give_the_same_processors(tmp_path: Path) -> None:
    app, stack, team = _team_stack(tmp_path)
    pipeline = S3IngestPipeline(
        stack,
        "Ingest",
        stage="props",
        code=lambda_.Code.from_inline(INLINE),
        processors=[
            ProcessorConfig("audit", function=team, timeout_seconds=200, kinds=("created",)),
            ProcessorConfig("remote", function_arn=TEAM_FUNCTION_ARN, hold=AUDIT_HOLD),
            ProcessorConfig("sidecar", handler=EXAMPLE_HANDLER, mode="every-change"),
            ProcessorConfig("thumbs", module="s3ingest_examples.sidecar:process"),
        ],
        processor_policy_statements=[
            iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[TEAM_QUEUE_ARN])
        ],
        hold={"deletes": True},
        trail_length=3,
    )
    template = _template(app, stack)
    resolve = stack.resolve
    team_id = resolve(team.node.default_child.logical_id)  # type: ignore[union-attr]
    sidecar = pipeline.processor_functions["sidecar"]
    sidecar_id = resolve(sidecar.node.default_child.logical_id)  # type: ignore[union-attr]
    ingest = template["Resources"][resolve(pipeline.ingest_function.node.default_child.logical_id)]  # type: ignore[union-attr]
    entries = json.loads(_flatten(ingest["Properties"]["Environment"]["Variables"]["PROCESSORS"]))
    assert [(e["name"], e.get("functionArn"), e.get("module")) for e in entries] == [
        ("audit", f"<{team_id}.Arn>", None),
        ("remote", TEAM_FUNCTION_ARN, None),
        ("sidecar", f"<{sidecar_id}.Arn>", None),
        ("thumbs", None, "s3ingest_examples.sidecar:process"),
    ]
    assert ingest["Properties"]["Timeout"] == 215
    # hold for review: the processor's own in its entry, the pipeline's as HOLD, the trail's
    # length, and the held-changes alarm
    assert [e.get("hold") for e in entries] == [None, AUDIT_HOLD, None, None]
    variables = ingest["Properties"]["Environment"]["Variables"]
    assert (variables["HOLD"], variables["TRAIL_LENGTH"]) == ('{"deletes":true}', "3")
    assert pipeline.alarms.held_changes is not None
    policies = json.dumps(
        [
            policy
            for policy in template["Resources"].values()
            if policy["Type"] == "AWS::IAM::Policy"
            and policy["Properties"]["Roles"]
            == [{"Ref": resolve(pipeline.ingest.role.node.default_child.logical_id)}]  # type: ignore[union-attr]
        ],
        sort_keys=True,
    )
    assert TEAM_QUEUE_ARN in policies
    for arn in (TEAM_FUNCTION_ARN, f'"{team_id}", "Arn"', f'"{sidecar_id}", "Arn"'):
        assert arn in policies, arn
    assert f"{TEAM_FUNCTION_ARN}:*" not in policies


def test_from_settings_builds_the_props(tmp_path: Path) -> None:
    _app, stack = _build(tmp_path, **PROCESSORS)
    pipeline = stack.pipeline
    assert set(pipeline.processor_functions) == {"sidecar"}
    assert pipeline.settings.processor_entries() == stack.settings.processor_entries()
    assert [s.to_json() for s in pipeline.processor_policy_statements] == [
        {"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": TEAM_QUEUE_ARN}
    ]


def test_props_problems(tmp_path: Path) -> None:
    _app, stack, team = _team_stack(tmp_path)
    with pytest.raises(SettingsError) as caught:
        S3IngestPipeline(
            stack,
            "Ingest",
            code=lambda_.Code.from_inline(INLINE),
            processors=[
                ProcessorConfig("both", function=team, function_arn=TEAM_FUNCTION_ARN),
                ProcessorConfig("Bad", function=team),
                ProcessorConfig("arn", function_arn="team-audit"),
            ],
            processor_policy_statements=[iam.PolicyStatement(actions=["sqs:SendMessage"])],
        )
    assert caught.value.problems == [
        "processors[0]: processor 'both': give function or function_arn, not both",
        "processors[1].name: 'Bad' must be lower-case letters, digits and '-', starting with a "
        "letter, at most 32 (^[a-z][a-z0-9-]{0,31}$)",
        "processors[2].functionArn: 'team-audit' is not a Lambda function ARN "
        "(arn:<partition>:lambda:<region>:<account>:function:<name>[:<qualifier>])",
        "processorPolicyStatements is set but no in-process processor runs (processor, or a "
        "module in processors): a processor function has its own role",
        "processorPolicyStatements[0]: A PolicyStatement used in an identity-based policy must "
        "specify at least one resource.",
    ]


def test_hold_props_problems(tmp_path: Path) -> None:
    # the core's sentences, named by the entry for a processor's own
    _app, stack, _team = _team_stack(tmp_path)
    with pytest.raises(SettingsError) as caught:
        S3IngestPipeline(
            stack,
            "Ingest",
            code=lambda_.Code.from_inline(INLINE),
            processors=[
                ProcessorConfig("remote", function_arn=TEAM_FUNCTION_ARN, hold={"deletes": 1})
            ],
            hold={"prefixes": "in/"},
            trail_length=0,
            hold_alarm_seconds=30,
        )
    assert caught.value.problems == [
        "processors[0].hold.deletes must be true, false or {'above', 'windowSeconds'}: 1",
        "hold.prefixes must be a list of non-empty strings, got 'in/'",
        "trailLength: 0 is outside 1..20",
        "holdAlarmSeconds: 30 is below 60",
    ]
    # a hold without processors
    with pytest.raises(SettingsError) as caught:
        S3IngestPipeline(
            stack, "Other", code=lambda_.Code.from_inline(INLINE), hold={"deletes": True}
        )
    (problem,) = caught.value.problems
    assert problem.startswith("hold needs processors: ")


def test_a_processor_config_keeps_its_hold() -> None:
    config = ProcessorConfig("audit", function_arn=TEAM_FUNCTION_ARN, hold=AUDIT_HOLD)
    entry = config.to_entry()
    assert entry["hold"] == AUDIT_HOLD
    assert ProcessorConfig.from_entry(entry) == config
    assert "hold" not in ProcessorConfig("plain", module="a.b:c").to_entry()


def test_a_processor_config_keeps_its_version() -> None:
    config = ProcessorConfig("thumbs", module="a.b:c", version=3)
    entry = config.to_entry()
    assert entry["version"] == 3
    assert ProcessorConfig.from_entry(entry) == config
    # the default version leaves the entry as it was
    assert "version" not in ProcessorConfig("plain", module="a.b:c", version=1).to_entry()


def _variables(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each function's environment variables that name a processor, by logical id."""
    found = {
        logical_id: resource["Properties"].get("Environment", {}).get("Variables", {})
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == "AWS::Lambda::Function"
    }
    return {k: v for k, v in found.items() if {"PROCESSOR", "PROCESSORS"} & set(v)}


def test_versions_reach_the_functions_that_run_the_processors(tmp_path: Path) -> None:
    module = "s3ingest_examples.sidecar:process"
    # GIVEN the single processor at version 2, and a processors entry at version 3
    app, stack, _team = _team_stack(tmp_path / "single")
    S3IngestPipeline(
        stack,
        "Ingest",
        code=lambda_.Code.from_inline(INLINE),
        processor=module,
        processor_version=2,
    )
    single = _variables(_template(app, stack))
    app, stack, _team = _team_stack(tmp_path / "listed")
    S3IngestPipeline(
        stack,
        "Ingest",
        code=lambda_.Code.from_inline(INLINE),
        processors=[ProcessorConfig("thumbs", module=module, version=3)],
    )
    listed = _variables(_template(app, stack))
    # THEN every function that runs it (ingest, backfill, listing shard, and the reprocess
    # run's plan, which records the version, and segment) gets PROCESSORS with the version,
    # and the single processor no PROCESSOR beside it
    assert len(single) == len(listed) == 5
    for variables in single.values():
        assert "PROCESSOR" not in variables
        (entry,) = json.loads(variables["PROCESSORS"])
        assert (entry["name"], entry["module"], entry["version"]) == ("default", module, 2)
    for variables in listed.values():
        (entry,) = json.loads(variables["PROCESSORS"])
        assert (entry["name"], entry["version"]) == ("thumbs", 3)


def test_version_props_problems(tmp_path: Path) -> None:
    _app, stack, _team = _team_stack(tmp_path)
    with pytest.raises(SettingsError) as caught:
        S3IngestPipeline(
            stack,
            "Ingest",
            code=lambda_.Code.from_inline(INLINE),
            processor="a.b:c",
            processor_version=0,
        )
    assert caught.value.problems == ["processorVersion: 0 is not a whole number of at least 1"]
    with pytest.raises(SettingsError) as caught:
        S3IngestPipeline(
            stack,
            "Other",
            code=lambda_.Code.from_inline(INLINE),
            processors=[ProcessorConfig("thumbs", module="a.b:c", version=True)],
        )
    assert caught.value.problems == [
        "processors[0].version: True is not a whole number of at least 1"
    ]


def test_the_teams_wildcard_actions_are_left_to_the_team(tmp_path: Path) -> None:
    # GIVEN an in-process processor whose statements use wildcards (actions and resources)
    app, stack = _build(
        tmp_path,
        stage="wild",
        processor="s3ingest_examples.sidecar:process",
        processorPolicyStatements=[
            {"Effect": "Allow", "Action": "s3:Get*", "Resource": "arn:aws:s3:::team-assets/*"},
            {"Effect": "Deny", "Action": "s3:*", "Resource": "arn:aws:s3:::team-secrets/*"},
        ],
    )
    template = _template(app, stack)
    ingest_role = stack.resolve(stack.pipeline.ingest.role.node.default_child.logical_id)  # type: ignore[union-attr]
    statements = [
        statement
        for policy in template["Resources"].values()
        if policy["Type"] == "AWS::IAM::Policy"
        and policy["Properties"]["Roles"] == [{"Ref": ingest_role}]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
    # THEN they are on the role as given, the single processor's PROCESSOR kept ...
    assert {
        "Action": "s3:Get*",
        "Effect": "Allow",
        "Resource": "arn:aws:s3:::team-assets/*",
    } in statements
    assert {"Action": "s3:*", "Effect": "Deny", "Resource": "arn:aws:s3:::team-secrets/*"} in (
        statements
    )
    # ... and cdk-nag reports the wildcard action (and its statement's resource wildcard) on
    # each role that runs the processor: never acknowledged for the team (issue 24)
    findings = _findings(app)
    assert findings
    assert all(
        f.startswith(
            (
                "AwsSolutions-IAM5[Action::s3:Get*]",
                "AwsSolutions-IAM5[Resource::arn:aws:s3:::team-assets/*]",
            )
        )
        for f in findings
    ), findings
