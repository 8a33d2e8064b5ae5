"""Backfill in the stack, the ``distributed-map`` engine (the fan-out synth; CONTRACT C13): its
state machine over the inventory's data files, the summary, its role and the control
function's grants, and no S3 Batch Operations resource. The shared start and end and the
``batch-operations`` engine are in ``test_infra_backfill.py``."""

from __future__ import annotations

import json

import pytest

from s3ingest_cdk.synth import Synth

from .asl import LAMBDA_RETRY, THROTTLE_RETRY, definition, reachable
from .backfill_template import BACKFILL_HANDLER, CONTROL_HANDLER, PARTITION
from .backfill_template import Ids as _Ids
from .backfill_template import arn as _arn
from .backfill_template import join as _join
from .backfill_template import ref as _ref
from .backfill_template import states as _states
from .functions import xray_grants
from .iam import expected as _grants
from .iam import role_allowed as _granted


@pytest.mark.contract("C13")
def test_distributed_map_state_names_types_and_order(fanout_synth: Synth) -> None:
    machine = fanout_synth.pipeline.backfill_state_machine
    assert machine is not None
    asl = definition(fanout_synth, machine.state_machine)
    walked = [(name, state["Type"]) for name, state in reachable(asl)]
    assert walked == [
        ("Defaults", "Choice"),
        ("DefaultMaxFailures", "Pass"),
        ("ManifestGiven", "Choice"),
        ("InvalidInput", "Fail"),
        ("PrepareManifest", "Task"),
        ("PrepareNewest", "Task"),
        ("BackfillFiles", "Map"),
        ("BackfillFile", "Task"),
        ("FileRetry", "Choice"),
        ("NextFileAttempt", "Pass"),
        ("FileResult", "Pass"),
        ("FileRetryWait", "Wait"),
        ("Summarize", "Task"),
        ("FailureThreshold", "Choice"),
        ("TooManyFailures", "Fail"),
        ("Output", "Pass"),
        ("Done", "Succeed"),
    ]
    # No S3 Batch Operations job in this engine.
    text = json.dumps(asl)
    assert "s3control" not in text and "CreateJob" not in text and "DescribeJob" not in text


@pytest.mark.contract("C13")
def test_distributed_map_over_the_inventory_data_files(fanout_synth: Synth) -> None:
    states = _states(fanout_synth)
    ids = _Ids(fanout_synth)
    backfill_files = states["BackfillFiles"]
    processor = backfill_files.pop("ItemProcessor")
    # One child per data file; "$" in ItemSelector is the Map's input, the item the file's key.
    assert backfill_files == {
        "Type": "Map",
        "ItemsPath": "$.prepared.files",
        "ItemSelector": {
            "action": "backfill_file",
            "manifest.$": "$.prepared.manifestKey",
            "file.$": "$$.Map.Item.Value",
            "attempt": 1,
        },
        "MaxConcurrency": 50,
        "Label": "BackfillFiles",
        "ResultPath": "$.files",
        "Next": "Summarize",
    }
    assert processor["ProcessorConfig"] == {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"}
    assert processor["StartAt"] == "BackfillFile"
    child = processor["States"]
    # The child's result is the file's counts only (small: one per data file in the Map's output).
    assert child["BackfillFile"] == {
        "Type": "Task",
        "Resource": f"arn:{PARTITION}:states:::lambda:invoke",
        "Parameters": {"FunctionName": f"<{ids.control}.Arn>", "Payload.$": "$"},
        "ResultSelector": {
            "file.$": "$.Payload.file",
            "keys.$": "$.Payload.keys",
            "outcomes.$": "$.Payload.outcomes",
            "temporaryFailures.$": "$.Payload.temporaryFailures",
        },
        "ResultPath": "$.result",
        "Retry": [LAMBDA_RETRY, THROTTLE_RETRY],
        "Next": "FileRetry",
    }
    # Keys that kept failing temporarily: the file again, at most 3 runs in all.
    assert child["FileRetry"] == {
        "Type": "Choice",
        "Choices": [
            {
                "And": [
                    {"Variable": "$.result.temporaryFailures", "NumericGreaterThan": 0},
                    {"Variable": "$.attempt", "NumericLessThan": 3},
                ],
                "Next": "NextFileAttempt",
            }
        ],
        "Default": "FileResult",
    }
    assert child["NextFileAttempt"] == {
        "Type": "Pass",
        "Parameters": {
            "action.$": "$.action",
            "manifest.$": "$.manifest",
            "file.$": "$.file",
            "attempt.$": "States.MathAdd($.attempt, 1)",
        },
        "Next": "FileRetryWait",
    }
    assert child["FileRetryWait"] == {"Type": "Wait", "Seconds": 30, "Next": "BackfillFile"}
    assert child["FileResult"] == {"Type": "Pass", "OutputPath": "$.result", "End": True}


@pytest.mark.contract("C13")
def test_distributed_map_summary(fanout_synth: Synth) -> None:
    states = _states(fanout_synth)
    ids = _Ids(fanout_synth)
    assert states["Summarize"] == {
        "Type": "Task",
        "Resource": f"arn:{PARTITION}:states:::lambda:invoke",
        "Parameters": {
            "FunctionName": f"<{ids.control}.Arn>",
            "Payload": {"action": "summarize", "files.$": "$.files"},
        },
        "ResultSelector": {
            "total.$": "$.Payload.total",
            "succeeded.$": "$.Payload.succeeded",
            "failed.$": "$.Payload.failed",
            "outcomes.$": "$.Payload.outcomes",
        },
        "ResultPath": "$.summary",
        "Retry": [LAMBDA_RETRY, THROTTLE_RETRY],
        "Next": "FailureThreshold",
    }


@pytest.mark.contract("C13")
def test_summarize_counts_what_the_children_return() -> None:
    # GIVEN two children's results as FileResult passes them on
    from s3ingest_fn.services import backfill_control

    files = [
        {
            "file": "a",
            "keys": 3,
            "outcomes": {"applied": 2, "duplicate": 1},
            "temporaryFailures": 0,
        },
        {"file": "b", "keys": 2, "outcomes": {"applied": 1}, "temporaryFailures": 1},
    ]
    # THEN summarize counts a key still failing after the retries as failed
    assert backfill_control.summarize({"action": "summarize", "files": files}) == {
        "total": 5,
        "succeeded": 4,
        "failed": 1,
        "outcomes": {"applied": 3, "duplicate": 1},
    }


def test_distributed_map_creates_no_batch_operations_resources(fanout_synth: Synth) -> None:
    pipeline = fanout_synth.pipeline
    assert pipeline.backfill is None and pipeline.batch_operations is None
    assert pipeline.backfill_state_machine is not None
    assert pipeline.backfill_state_machine.create_job is None
    for resource in fanout_synth.resources("AWS::IAM::Role").values():
        assert "batchoperations" not in json.dumps(resource)
    handlers = {
        f["Properties"]["Handler"] for f in fanout_synth.resources("AWS::Lambda::Function").values()
    }
    assert BACKFILL_HANDLER not in handlers and CONTROL_HANDLER in handlers
    outputs = fanout_synth.template["Outputs"]
    assert outputs["BackfillStateMachineArn"]["Value"] == _ref(_Ids(fanout_synth).machine)
    assert not {"BackfillFunctionName", "BackfillRoleArn", "ReportBucketName"} & set(outputs)


def test_distributed_map_state_machine_role(fanout_synth: Synth) -> None:
    machine = fanout_synth.pipeline.backfill_state_machine
    assert machine is not None
    ids = _Ids(fanout_synth)
    granted = _granted(fanout_synth, machine.state_machine.role)
    assert not [a for a in granted if a.startswith(("s3", "iam:"))]
    assert (
        granted["lambda:InvokeFunction"]
        == _grants({"a": [_arn(ids.control), _join(_arn(ids.control), ":*")]})["a"]
    )
    executions = [
        "arn:",
        _ref("AWS::Partition"),
        ":states:us-east-1:",
        _ref("AWS::AccountId"),
        ":execution:",
        {"Fn::Select": [6, {"Fn::Split": [":", _ref(ids.machine)]}]},
    ]
    assert granted["states:StartExecution"] == _grants({"a": [_ref(ids.machine)]})["a"]
    assert (
        granted["states:RedriveExecution"]
        == _grants({"a": [_join(*executions, "/BackfillFiles:*")]})["a"]
    )


def test_control_function_grants_for_distributed_map(fanout_synth: Synth) -> None:
    control = fanout_synth.pipeline.backfill_control
    assert control is not None
    ids = _Ids(fanout_synth)
    assert ids.output is not None
    outputs = _join(_arn(ids.output), "/*")
    # prepare, and backfill_file: the data files, then each key by the ledger rules (C7) and the
    # processor's output (the fan-out synth has the example processor); no completion reports in
    # this engine
    assert _granted(fanout_synth, control.role) == _grants(
        {
            **xray_grants(fanout_synth),
            "logs:CreateLogStream": [_arn(ids.control_log_group)],
            "logs:PutLogEvents": [_arn(ids.control_log_group)],
            "s3:ListBucket": [_arn(ids.inventory), _arn(ids.bucket), _arn(ids.output)],
            "s3:GetObject": [ids.reports, ids.objects, outputs],
            "s3:GetObjectVersion": [ids.objects],
            "s3:PutObject": [outputs],
            "s3:DeleteObject": [outputs],
            "dynamodb:GetItem": [_arn(ids.table)],
            "dynamodb:PutItem": [_arn(ids.table)],
            "dynamodb:UpdateItem": [_arn(ids.table)],
        }
    )
