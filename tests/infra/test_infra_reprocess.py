"""The reprocess run in the stack (issue 27): its state machine's states and payloads, its step
functions' handlers, environment and grants, its failure alarm and the output the CLI reads."""

from __future__ import annotations

import json
from typing import Any

import pytest

from s3ingest.function_roles import REPROCESS_PLAN, REPROCESS_SEGMENT, REPROCESS_SUMMARIZE
from s3ingest.settings import Settings
from s3ingest_cdk.synth import Synth

from .asl import LAMBDA_RETRY, THROTTLE_RETRY, definition, reachable
from .conftest import BACKFILL_RESERVED
from .functions import common_environment, scope_environment, xray_grants
from .iam import role_allowed

PLAN_HANDLER = REPROCESS_PLAN.handler
SEGMENT_HANDLER = REPROCESS_SEGMENT.handler
SUMMARIZE_HANDLER = REPROCESS_SUMMARIZE.handler

#: A handler's own transient failure: the step runs again from the segment's checkpoint or the
#: stored plan.
HANDLER_RETRY = {
    "ErrorEquals": ["TransientError", "Sandbox.Timedout"],
    "IntervalSeconds": 5,
    "MaxAttempts": 6,
    "BackoffRate": 2,
    "JitterStrategy": "FULL",
}


def _ref(logical_id: str) -> dict[str, Any]:
    return {"Ref": logical_id}


def _arn(logical_id: str) -> dict[str, Any]:
    return {"Fn::GetAtt": [logical_id, "Arn"]}


def _dumps(*values: Any) -> list[str]:
    return sorted(json.dumps(v, sort_keys=True) for v in values)


def test_plan_every_segment_in_a_loop_then_summarize(synth: Synth) -> None:
    reprocess = synth.pipeline.reprocess
    asl = definition(synth, reprocess.state_machine.state_machine)
    states = dict(reachable(asl))
    plan_arn = f"<{synth.logical_id(reprocess.plan.function)}.Arn>"
    segment_arn = f"<{synth.logical_id(reprocess.segment.function)}.Arn>"
    summarize_arn = f"<{synth.logical_id(reprocess.summarize.function)}.Arn>"
    # Plan: the whole execution input (optional fields may be left out) and the execution's
    # id, its owner (no reserved concurrency here: no limit); its result at $.plan
    assert asl["StartAt"] == "Plan"
    plan = states["Plan"]
    assert plan["Parameters"] == {
        "FunctionName": plan_arn,
        "Payload": {"request.$": "$", "owner.$": "$$.Execution.Id"},
    }
    assert plan["ResultSelector"] == {"plan.$": "$.Payload"}
    assert plan["Next"] == "Segments"
    # Segments: a Distributed Map over the plan's segments, at the plan's concurrency (the
    # input's, default 16), results discarded (the checkpoints hold the counts)
    segments = states["Segments"]
    assert segments["Type"] == "Map"
    assert segments["ItemsPath"] == "$.plan.segments"
    assert segments["ItemSelector"] == {
        "run.$": "$$.Map.Item.Value.run",
        "segment.$": "$$.Map.Item.Value.segment",
        "processor.$": "$.plan.processor",
        "owner.$": "$.plan.owner",
    }
    assert segments["MaxConcurrencyPath"] == "$.plan.concurrency"
    assert "MaxConcurrency" not in segments
    assert segments["Label"] == "ReprocessSegments"
    assert segments["ResultPath"] is None
    processor = segments["ItemProcessor"]
    assert processor["ProcessorConfig"] == {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"}
    assert processor["StartAt"] == "Segment"
    # each child: Segment {"run", "segment", "processor", "owner"} until it answers done (the
    # input kept for the next call, the answer's done at $.progress)
    segment = states["Segment"]
    assert segment["Parameters"] == {
        "FunctionName": segment_arn,
        "Payload": {
            "run.$": "$.run",
            "segment.$": "$.segment",
            "processor.$": "$.processor",
            "owner.$": "$.owner",
        },
    }
    assert segment["ResultSelector"] == {"done.$": "$.Payload.done"}
    assert segment["ResultPath"] == "$.progress"
    assert segment["Retry"] == [LAMBDA_RETRY, THROTTLE_RETRY, HANDLER_RETRY]
    done = states["SegmentDone"]
    assert done["Choices"] == [
        {"Variable": "$.progress.done", "BooleanEquals": True, "Next": "SegmentReprocessed"}
    ]
    assert done["Default"] == "Segment"
    assert states["SegmentReprocessed"]["Type"] == "Succeed"
    # Summarize: {"run"} of the plan; its result is the execution's output
    assert segments["Next"] == "Summarize"
    summarize = states["Summarize"]
    assert summarize["Parameters"] == {
        "FunctionName": summarize_arn,
        "Payload": {"run.$": "$.plan.run"},
    }
    assert summarize["OutputPath"] == "$.Payload"
    assert summarize["End"] is True
    assert plan["Retry"] == [LAMBDA_RETRY, THROTTLE_RETRY, HANDLER_RETRY]
    assert summarize["Retry"] == [LAMBDA_RETRY, THROTTLE_RETRY]


def test_the_plan_caps_the_workers_at_the_segment_functions_reservation(
    processors_synth: Synth,
) -> None:
    reprocess = processors_synth.pipeline.reprocess
    states = dict(reachable(definition(processors_synth, reprocess.state_machine.state_machine)))
    assert states["Plan"]["Parameters"]["Payload"]["limit"] == BACKFILL_RESERVED
    logical_id = processors_synth.logical_id(reprocess.segment.function)
    function = processors_synth.template["Resources"][logical_id]
    assert function["Properties"]["ReservedConcurrentExecutions"] == BACKFILL_RESERVED


def test_machine_is_logged_traced_and_bounded(synth: Synth) -> None:
    machine = synth.pipeline.reprocess.state_machine
    props = synth.template["Resources"][synth.logical_id(machine.state_machine)]["Properties"]
    assert props["StateMachineType"] == "STANDARD"
    assert props["TracingConfiguration"] == {"Enabled": True}
    assert props["LoggingConfiguration"]["Level"] == "ALL"
    assert definition(synth, machine.state_machine)["TimeoutSeconds"] == 24 * 3600
    log_group = synth.template["Resources"][synth.logical_id(machine.log_group)]
    assert log_group["Properties"]["KmsKeyId"] == _arn(synth.logical_id(machine.log_key))


@pytest.mark.parametrize(
    ("step", "handler"),
    [("plan", PLAN_HANDLER), ("segment", SEGMENT_HANDLER), ("summarize", SUMMARIZE_HANDLER)],
)
def test_step_functions_handler_and_environment(synth: Synth, step: str, handler: str) -> None:
    pipeline = synth.pipeline
    owner = getattr(pipeline.reprocess, step)
    bucket = _ref(synth.logical_id(pipeline.landing.bucket))
    props = synth.template["Resources"][synth.logical_id(owner.function)]["Properties"]
    assert props["Handler"] == handler
    settings = Settings()
    assert props["Environment"]["Variables"] == {
        "BUCKET_NAME": bucket,
        "CHECKPOINT_BUCKET_NAME": _ref(synth.logical_id(pipeline.landings.shared.inventory)),
        **scope_environment(bucket),
        **common_environment(synth, "s3ingest-reprocess"),
        "LEDGER_TABLE_NAME": _ref(synth.logical_id(pipeline.ledger.table)),
        "DEAD_LETTER_QUEUE_URL": _ref(synth.logical_id(pipeline.ingest_queue.dead_letter_queue)),
        "TOMBSTONE_TTL_SECONDS": str(settings.tombstone_ttl_seconds),
        "RECORD_CONCURRENCY": str(settings.record_concurrency),
    }
    assert props["Timeout"] == (settings.reconcile_timeout_seconds if step == "segment" else 300)


def test_step_grants_are_least_privilege(synth: Synth) -> None:
    pipeline = synth.pipeline
    reprocess = pipeline.reprocess
    bucket = _arn(synth.logical_id(pipeline.landing.bucket))
    inventory = _arn(synth.logical_id(pipeline.landings.shared.inventory))
    table = _arn(synth.logical_id(pipeline.ledger.table))
    objects = {"Fn::Join": ["", [bucket, "/*"]]}
    checkpoints = {"Fn::Join": ["", [inventory, "/reprocess/*"]]}

    def logs(owner: Any) -> dict[str, list[str]]:
        log_group = _arn(synth.logical_id(owner.log_group))
        return {
            **{k: _dumps(*v) for k, v in xray_grants(synth).items()},
            "logs:CreateLogStream": _dumps(log_group),
            "logs:PutLogEvents": _dumps(log_group),
        }

    assert role_allowed(synth, reprocess.plan.role) == {
        **logs(reprocess.plan),
        "s3:ListBucket": _dumps(inventory),
        "s3:GetObject": _dumps(checkpoints),
        "s3:PutObject": _dumps(checkpoints),  # the run's plan.json
    }
    assert role_allowed(synth, reprocess.segment.role) == {
        **logs(reprocess.segment),
        # the ledger rules and the processors' pinned reads (grant_ingest_service) ...
        "s3:ListBucket": _dumps(bucket, inventory),
        "s3:GetObject": _dumps(objects, checkpoints),
        "s3:GetObjectVersion": _dumps(objects),
        "s3:PutObject": _dumps(checkpoints),
        "dynamodb:GetItem": _dumps(table),
        "dynamodb:PutItem": _dumps(table),
        "dynamodb:UpdateItem": _dumps(table),
        # ... and the ledger's parallel Scan
        "dynamodb:Scan": _dumps(table),
    }
    assert role_allowed(synth, reprocess.summarize.role) == {
        **logs(reprocess.summarize),
        "s3:ListBucket": _dumps(inventory),
        "s3:GetObject": _dumps(checkpoints),
    }
    assert reprocess.ingest_service_functions == [reprocess.segment.function]
    assert reprocess.segment.function in pipeline.ingest_service_functions


def test_with_a_processor_the_segment_runs_it_and_the_plan_only_names_it(
    fanout_synth: Synth,
) -> None:
    synth = fanout_synth
    pipeline = synth.pipeline
    reprocess = pipeline.reprocess
    resources = synth.template["Resources"]

    def variables(owner: Any) -> dict[str, Any]:
        env: dict[str, Any] = resources[synth.logical_id(owner.function)]["Properties"][
            "Environment"
        ]["Variables"]
        return env

    processor = synth.settings.processor
    assert variables(reprocess.plan)["PROCESSOR"] == processor
    assert variables(reprocess.segment)["PROCESSOR"] == processor
    assert "PROCESSOR" not in variables(reprocess.summarize)
    assert pipeline.processor_output is not None
    output = _arn(synth.logical_id(pipeline.processor_output.bucket))
    outputs = json.dumps({"Fn::Join": ["", [output, "/*"]]}, sort_keys=True)
    assert outputs in role_allowed(synth, reprocess.segment.role)["s3:PutObject"]
    assert outputs not in json.dumps(role_allowed(synth, reprocess.plan.role))


def test_named_processors_are_invoked_by_the_segment_only(processors_synth: Synth) -> None:
    synth = processors_synth
    reprocess = synth.pipeline.reprocess
    resources = synth.template["Resources"]

    def variables(owner: Any) -> dict[str, Any]:
        env: dict[str, Any] = resources[synth.logical_id(owner.function)]["Properties"][
            "Environment"
        ]["Variables"]
        return env

    assert variables(reprocess.plan)["PROCESSORS"] == variables(reprocess.segment)["PROCESSORS"]
    assert "lambda:InvokeFunction" in role_allowed(synth, reprocess.segment.role)
    assert "lambda:InvokeFunction" not in role_allowed(synth, reprocess.plan.role)


def test_the_failure_alarm_watches_the_machine(synth: Synth) -> None:
    alarms = synth.pipeline.alarms
    assert alarms.reprocess_failed is not None
    props = synth.template["Resources"][synth.logical_id(alarms.reprocess_failed)]["Properties"]
    assert props["AlarmName"] == f"s3ingest-{synth.settings.stage}-reprocess-executions-failed"
    assert props["AlarmDescription"].endswith("#reprocess-run-failed")
    machine = _ref(synth.logical_id(synth.pipeline.reprocess.state_machine.state_machine))
    watched = {
        m["MetricStat"]["Metric"]["MetricName"]
        for m in props["Metrics"]
        if "MetricStat" in m
        and m["MetricStat"]["Metric"]["Dimensions"]
        == [{"Name": "StateMachineArn", "Value": machine}]
    }
    assert watched == {"ExecutionsFailed", "ExecutionsTimedOut", "ExecutionsAborted"}


@pytest.mark.parametrize("variant", ["synth", "fanout_synth", "bare_synth"])
def test_every_stack_outputs_the_machine_arn(variant: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(variant)
    machine = synth.pipeline.reprocess.state_machine.state_machine
    outputs = synth.template["Outputs"]
    assert outputs["ReprocessStateMachineArn"]["Value"] == _ref(synth.logical_id(machine))
