"""Backfill in the stack (CONTRACT C13): the state machine's shared start and end, the
``batch-operations`` engine (its state machine, the S3 Batch Operations role, the functions,
their grants), an adopted bucket's backfill, and nothing of it without the stack's own
inventory. The ``distributed-map`` engine is in ``test_infra_backfill_distributed_map.py``."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from aws_cdk import App
from aws_cdk import aws_lambda as lambda_

from s3ingest.settings import Settings, inventory_report_prefix
from s3ingest_cdk.compose import compose
from s3ingest_cdk.constructs.backfill_state_machine import PREPARED_FIELDS
from s3ingest_cdk.synth import Synth, cdk_json_context

from .asl import LAMBDA_RETRY, THROTTLE_RETRY, definition, reachable
from .backfill_template import BACKFILL_HANDLER, CONTROL_HANDLER, PARTITION
from .backfill_template import Ids as _Ids
from .backfill_template import arn as _arn
from .backfill_template import join as _join
from .backfill_template import ref as _ref
from .backfill_template import resource as _resource
from .backfill_template import states as _states
from .conftest import ADOPTED_BUCKET
from .functions import (
    common_environment,
    inventories_environment,
    scope_environment,
    targets_environment,
    tracing_config,
    xray_grants,
)
from .iam import expected as _grants
from .iam import role_allowed as _granted
from .iam import statements_of as _statements

S3CONTROL_RETRY = {
    "ErrorEquals": [
        "S3Control.TooManyRequestsException",
        "S3Control.InternalServiceException",
        "S3Control.S3ControlException",
        "S3Control.SdkClientException",
    ],
    "IntervalSeconds": 2,
    "MaxAttempts": 6,
    "BackoffRate": 2,
    "JitterStrategy": "FULL",
}


# --- The shared start and end --------------------------------------------------------------------


@pytest.mark.contract("C13")
@pytest.mark.parametrize("variant", ["synth", "fanout_synth"])
def test_input_defaults_and_manifest_choice(variant: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(variant)
    machine = synth.pipeline.backfill_state_machine
    assert machine is not None
    asl = definition(synth, machine.state_machine)
    states = asl["States"]
    # GIVEN an execution input with or without maxFailures
    assert asl["StartAt"] == "Defaults"
    # THEN a missing maxFailures becomes 0, a number goes on, anything else fails at once
    assert states["Defaults"] == {
        "Type": "Choice",
        "Choices": [
            {"Variable": "$.maxFailures", "IsPresent": False, "Next": "DefaultMaxFailures"},
            {"Variable": "$.maxFailures", "IsNumeric": True, "Next": "ManifestGiven"},
        ],
        "Default": "InvalidInput",
    }
    assert states["DefaultMaxFailures"] == {
        "Type": "Pass",
        "Result": 0,
        "ResultPath": "$.maxFailures",
        "Next": "ManifestGiven",
    }
    assert states["InvalidInput"] == {
        "Type": "Fail",
        "Error": "InvalidInput",
        "Cause": "maxFailures must be a number",
    }
    # AND the manifest is passed on only when given ("manifest.$" on an absent field would fail)
    assert states["ManifestGiven"] == {
        "Type": "Choice",
        "Choices": [{"Variable": "$.manifest", "IsPresent": True, "Next": "PrepareManifest"}],
        "Default": "PrepareNewest",
    }


@pytest.mark.contract("C13")
@pytest.mark.parametrize(
    ("variant", "engine", "after"),
    [
        ("synth", "batch-operations", "CreateJob"),
        ("fanout_synth", "distributed-map", "BackfillFiles"),
    ],
)
def test_prepare_payloads_and_result(
    variant: str, engine: str, after: str, request: pytest.FixtureRequest
) -> None:
    synth: Synth = request.getfixturevalue(variant)
    assert synth.settings.backfill_engine == engine
    states = _states(synth)
    ids = _Ids(synth)
    selector = {f"{name}.$": f"$.Payload.{name}" for name in PREPARED_FIELDS[engine]}
    for name, payload in (
        (
            "PrepareManifest",
            {"action": "prepare", "partition": PARTITION, "manifest.$": "$.manifest"},
        ),
        ("PrepareNewest", {"action": "prepare", "partition": PARTITION}),
    ):
        assert states[name] == {
            "Type": "Task",
            "Resource": f"arn:{PARTITION}:states:::lambda:invoke",
            "Parameters": {"FunctionName": f"<{ids.control}.Arn>", "Payload": payload},
            "ResultSelector": selector,
            "ResultPath": "$.prepared",
            "Retry": [LAMBDA_RETRY, THROTTLE_RETRY],
            "Next": after,
        }, name


@pytest.mark.contract("C13")
def test_prepared_fields_are_what_prepare_returns() -> None:
    # GIVEN the control function's prepare step over a fake inventory
    from s3ingest_fn.adapters.inventory import S3InventoryStore
    from s3ingest_fn.services import backfill_control

    head = {"ETag": '"0123abcd"'}
    s3: Any = SimpleNamespace(head_object=lambda **_: head)  # HeadObject's answer
    reconciler = SimpleNamespace(
        inventory_bucket="inv",
        require_inventory_bucket=lambda: "inv",
        newest_manifest=lambda instead: (
            "inventory/b/s3ingest-daily/2026-01-01T01-00Z/manifest.json"
        ),
        manifest=lambda key: SimpleNamespace(files=("data/a.csv.gz",), created_ms=1),
        inventory=S3InventoryStore(s3),
    )
    event = {"action": "prepare", "partition": "aws-cn"}
    result = backfill_control.prepare(reconciler, event)  # type: ignore[arg-type]
    # THEN every field either engine selects is in its result, in the shape CreateJob takes
    for fields in PREPARED_FIELDS.values():
        assert set(fields) <= set(result)
    assert result["manifestEtag"] == "0123abcd"
    assert result["manifestObjectArn"] == (
        "arn:aws-cn:s3:::inv/inventory/b/s3ingest-daily/2026-01-01T01-00Z/manifest.json"
    )


@pytest.mark.contract("C13")
@pytest.mark.parametrize(
    ("variant", "failed", "output"),
    [
        (
            "synth",
            "$.report.failed",
            {
                "jobId.$": "$.job.JobId",
                "total.$": "$.describe.Job.ProgressSummary.TotalNumberOfTasks",
                "succeeded.$": "$.describe.Job.ProgressSummary.NumberOfTasksSucceeded",
                "failed.$": "$.describe.Job.ProgressSummary.NumberOfTasksFailed",
                "reportManifest.$": "$.report.reportManifest",
            },
        ),
        (
            "fanout_synth",
            "$.summary.failed",
            {
                "total.$": "$.summary.total",
                "succeeded.$": "$.summary.succeeded",
                "failed.$": "$.summary.failed",
                # effects_pending among them: rows written while a processor failed (issue 34)
                "outcomes.$": "$.summary.outcomes",
            },
        ),
    ],
)
def test_failure_threshold_and_output(
    variant: str, failed: str, output: dict[str, str], request: pytest.FixtureRequest
) -> None:
    states = _states(request.getfixturevalue(variant))
    # More failures than the input's maxFailures fails the execution ...
    assert states["FailureThreshold"] == {
        "Type": "Choice",
        "Choices": [
            {
                "Variable": failed,
                "NumericGreaterThanPath": "$.maxFailures",
                "Next": "TooManyFailures",
            }
        ],
        "Default": "Output",
    }
    assert states["TooManyFailures"] == {
        "Type": "Fail",
        "Error": "TooManyFailures",
        "Cause": "more objects failed to backfill than the execution input's maxFailures",
    }
    # ... otherwise the output is the counts (what `s3ingest backfill status` reads).
    assert states["Output"] == {"Type": "Pass", "Parameters": output, "Next": "Done"}
    assert states["Done"] == {"Type": "Succeed"}


@pytest.mark.parametrize("variant", ["synth", "fanout_synth"])
def test_state_machine_logging_tracing_and_encryption(
    variant: str, request: pytest.FixtureRequest
) -> None:
    synth: Synth = request.getfixturevalue(variant)
    machine = synth.pipeline.backfill_state_machine
    assert machine is not None
    _, resource = _resource(synth, machine.state_machine)
    log_group_id, log_group = _resource(synth, machine.log_group)
    key_id, key = _resource(synth, machine.log_key)
    props = resource["Properties"]
    assert props["StateMachineType"] == "STANDARD"
    assert props["TracingConfiguration"] == {"Enabled": True}
    assert props["LoggingConfiguration"] == {
        "Destinations": [{"CloudWatchLogsLogGroup": {"LogGroupArn": _arn(log_group_id)}}],
        "IncludeExecutionData": True,
        "Level": "ALL",
    }
    assert log_group["Properties"]["KmsKeyId"] == _arn(key_id)
    assert log_group["Properties"]["RetentionInDays"] == Settings().log_retention_days
    assert log_group["DeletionPolicy"] == "Retain"
    assert key["Properties"]["EnableKeyRotation"] is True
    assert key["DeletionPolicy"] == "Retain"
    # The machine waits for its role's policy, not for the role twice (cfn-lint W3005).
    (policy_id,) = [
        logical_id
        for logical_id, policy in synth.resources("AWS::IAM::Policy").items()
        if policy["Properties"]["Roles"] == [_ref(synth.logical_id(machine.state_machine.role))]
        and logical_id.startswith("BackfillStateMachineRoleDefaultPolicy")
    ]
    assert policy_id in resource["DependsOn"]


# --- Engine batch-operations (the default) -------------------------------------------------------


@pytest.mark.contract("C13")
def test_batch_state_names_types_and_order(synth: Synth) -> None:
    machine = synth.pipeline.backfill_state_machine
    assert machine is not None
    asl = definition(synth, machine.state_machine)
    walked = [(name, state["Type"]) for name, state in reachable(asl)]
    assert walked == [
        ("Defaults", "Choice"),
        ("DefaultMaxFailures", "Pass"),
        ("ManifestGiven", "Choice"),
        ("InvalidInput", "Fail"),
        ("PrepareManifest", "Task"),
        ("PrepareNewest", "Task"),
        ("CreateJob", "Task"),
        ("WaitForJob", "Wait"),
        ("DescribeJob", "Task"),
        ("JobStatus", "Choice"),
        ("Report", "Task"),
        ("JobFailed", "Fail"),
        ("FailureThreshold", "Choice"),
        ("TooManyFailures", "Fail"),
        ("Output", "Pass"),
        ("Done", "Succeed"),
    ]
    assert {name for name, _ in walked} == set(asl["States"])  # nothing unreachable
    assert "TimeoutSeconds" not in asl


@pytest.mark.contract("C13")
def test_create_job_is_a_direct_s3_control_call_with_the_job_spec(synth: Synth) -> None:
    states = _states(synth)
    ids = _Ids(synth)
    pipeline = synth.pipeline
    assert pipeline.backfill is not None and pipeline.batch_operations is not None
    function_id = synth.logical_id(pipeline.backfill.function)
    role_id = synth.logical_id(pipeline.batch_operations.role)
    assert states["CreateJob"] == {
        "Type": "Task",
        "Resource": f"arn:{PARTITION}:states:::aws-sdk:s3control:createJob",
        "Parameters": {
            "AccountId": "<AWS::AccountId>",
            # The same token for a retried state and a redriven execution: no second job.
            "ClientRequestToken.$": "States.Hash($$.Execution.Id, 'MD5')",
            "ConfirmationRequired": False,
            "Operation": {
                "LambdaInvoke": {
                    "FunctionArn": f"<{function_id}.Arn>",
                    "InvocationSchemaVersion": "2.0",
                }
            },
            "Manifest": {
                "Spec": {"Format": "S3InventoryReport_CSV_20161130"},
                "Location": {
                    "ObjectArn.$": "$.prepared.manifestObjectArn",
                    "ETag.$": "$.prepared.manifestEtag",
                },
            },
            "Report": {
                "Bucket": f"<{ids.inventory}.Arn>",
                "Format": "Report_CSV_20180820",
                "Enabled": True,
                "Prefix": "backfill-reports",
                "ReportScope": "FailedTasksOnly",
            },
            "Priority": 10,
            "RoleArn": f"<{role_id}.Arn>",
            "Description": "s3ingest backfill",
        },
        "ResultPath": "$.job",
        "Retry": [S3CONTROL_RETRY],
        "Next": "WaitForJob",
    }


@pytest.mark.contract("C13")
def test_report_prefix_is_where_the_control_function_reads() -> None:
    from s3ingest_cdk.constructs.backfill_state_machine import REPORT_PREFIX
    from s3ingest_fn.services.backfill_control import REPORT_PREFIX as HANDLER_PREFIX

    assert REPORT_PREFIX == HANDLER_PREFIX == "backfill-reports"


@pytest.mark.contract("C13")
def test_wait_describe_loop_until_the_job_ends(synth: Synth) -> None:
    states = _states(synth)
    assert states["WaitForJob"] == {"Type": "Wait", "Seconds": 30, "Next": "DescribeJob"}
    assert states["DescribeJob"] == {
        "Type": "Task",
        "Resource": f"arn:{PARTITION}:states:::aws-sdk:s3control:describeJob",
        "Parameters": {"AccountId": "<AWS::AccountId>", "JobId.$": "$.job.JobId"},
        "ResultPath": "$.describe",
        "Retry": [S3CONTROL_RETRY],
        "Next": "JobStatus",
    }
    # Complete -> the report; Failed or Cancelled -> fail; any other status -> wait again.
    assert states["JobStatus"] == {
        "Type": "Choice",
        "Choices": [
            {"Variable": "$.describe.Job.Status", "StringEquals": "Complete", "Next": "Report"},
            {
                "Or": [
                    {"Variable": "$.describe.Job.Status", "StringEquals": "Failed"},
                    {"Variable": "$.describe.Job.Status", "StringEquals": "Cancelled"},
                ],
                "Next": "JobFailed",
            },
        ],
        "Default": "WaitForJob",
    }
    assert states["JobFailed"] == {
        "Type": "Fail",
        "Error": "BackfillJobFailed",
        "Cause": "the S3 Batch Operations job failed or was cancelled (see its FailureReasons)",
    }


@pytest.mark.contract("C13")
def test_report_reads_the_jobs_completion_report(synth: Synth) -> None:
    states = _states(synth)
    ids = _Ids(synth)
    assert states["Report"] == {
        "Type": "Task",
        "Resource": f"arn:{PARTITION}:states:::lambda:invoke",
        "Parameters": {
            "FunctionName": f"<{ids.control}.Arn>",
            "Payload": {"action": "report", "jobId.$": "$.job.JobId"},
        },
        "ResultSelector": {
            "reportManifest.$": "$.Payload.reportManifest",
            "failed.$": "$.Payload.failed",
            "errors.$": "$.Payload.errors",
            "samples.$": "$.Payload.samples",
        },
        "ResultPath": "$.report",
        "Retry": [LAMBDA_RETRY, THROTTLE_RETRY],
        "Next": "FailureThreshold",
    }


def test_state_machine_role_creates_and_describes_jobs_with_the_batch_role_only(
    synth: Synth,
) -> None:
    machine = synth.pipeline.backfill_state_machine
    batch = synth.pipeline.batch_operations
    assert machine is not None and batch is not None
    ids = _Ids(synth)
    statements = _statements(synth, machine.state_machine.role)
    # GIVEN the state machine's role
    actions = {
        action
        for statement in statements
        for action in (
            [statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"]
        )
    }
    # THEN S3 Control's actions are in the s3 namespace (there is no "s3control:" IAM prefix)
    assert not [action for action in actions if action.startswith("s3control:")]
    assert {action for action in actions if action.startswith("s3:")} == {
        "s3:CreateJob",
        "s3:DescribeJob",
    }
    # AND iam:PassRole on the Batch Operations role only, to S3 Batch Operations only
    pass_role = [s for s in statements if "iam:PassRole" in json.dumps(s["Action"])]
    assert pass_role == [
        {
            "Action": "iam:PassRole",
            "Condition": {
                "StringEquals": {"iam:PassedToService": "batchoperations.s3.amazonaws.com"}
            },
            "Effect": "Allow",
            "Resource": _arn(synth.logical_id(batch.role)),
        }
    ]
    # AND CreateJob on "*" (it has no resource type), only for a LambdaInvoke job at the
    # backfill's priority (the condition keys CreateJob supports)
    create_job = [s for s in statements if "s3:CreateJob" in json.dumps(s["Action"])]
    assert create_job == [
        {
            "Action": "s3:CreateJob",
            "Condition": {
                "StringEquals": {"s3:RequestJobOperation": "LambdaInvoke"},
                "NumericEquals": {"s3:RequestJobPriority": 10},
            },
            "Effect": "Allow",
            "Resource": "*",
        }
    ]
    # AND the rest carries no condition: DescribeJob on this account's and region's jobs, the
    # control function, logging and tracing
    rest: dict[str, list[str]] = {}
    for statement in statements:
        if statement in pass_role or statement in create_job:
            continue
        assert statement["Effect"] == "Allow" and "Condition" not in statement
        acts = statement["Action"]
        resources = statement["Resource"]
        for action in [acts] if isinstance(acts, str) else acts:
            for resource in resources if isinstance(resources, list) else [resources]:
                rest.setdefault(action, []).append(json.dumps(resource, sort_keys=True))
    rest = {action: sorted(resources) for action, resources in rest.items()}
    wildcard = [
        "logs:CreateLogDelivery",
        "logs:DeleteLogDelivery",
        "logs:DescribeLogGroups",
        "logs:DescribeResourcePolicies",
        "logs:GetLogDelivery",
        "logs:ListLogDeliveries",
        "logs:PutResourcePolicy",
        "logs:UpdateLogDelivery",
        "xray:GetSamplingRules",
        "xray:GetSamplingTargets",
        "xray:PutTelemetryRecords",
        "xray:PutTraceSegments",
    ]
    assert rest == _grants(
        {
            **{action: ["*"] for action in wildcard},
            "s3:DescribeJob": [
                _join(
                    "arn:",
                    _ref("AWS::Partition"),
                    ":s3:",
                    _ref("AWS::Region"),
                    ":",
                    _ref("AWS::AccountId"),
                    ":job/*",
                )
            ],
            "lambda:InvokeFunction": [_arn(ids.control), _join(_arn(ids.control), ":*")],
        }
    )


def test_batch_role_trust_and_its_exact_statements(synth: Synth) -> None:
    batch = synth.pipeline.batch_operations
    backfill = synth.pipeline.backfill
    assert batch is not None and backfill is not None
    ids = _Ids(synth)
    _, role = _resource(synth, batch.role)
    # GIVEN the role the job runs as
    assert "ManagedPolicyArns" not in role["Properties"]
    assert "Policies" not in role["Properties"]
    # THEN only S3 Batch Operations, on behalf of this account's jobs, may assume it
    # (https://docs.aws.amazon.com/AmazonS3/latest/userguide/batch-ops-iam-role-policies.html)
    jobs = _join(
        "arn:",
        _ref("AWS::Partition"),
        ":s3:",
        _ref("AWS::Region"),
        ":",
        _ref("AWS::AccountId"),
        ":job/*",
    )
    assert role["Properties"]["AssumeRolePolicyDocument"] == {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Action": "sts:AssumeRole",
                "Condition": {
                    "StringEquals": {"aws:SourceAccount": _ref("AWS::AccountId")},
                    "ArnLike": {"aws:SourceArn": jobs},
                },
                "Effect": "Allow",
                "Principal": {"Service": "batchoperations.s3.amazonaws.com"},
            }
        ],
    }
    # AND it reads the inventory reports, invokes the backfill function, writes the completion
    # report, and nothing else
    assert _statements(synth, batch.role) == [
        {
            "Action": ["s3:GetObject", "s3:GetObjectVersion"],
            "Effect": "Allow",
            "Resource": ids.reports,
        },
        {
            "Action": "lambda:InvokeFunction",
            "Effect": "Allow",
            "Resource": _arn(synth.logical_id(backfill.function)),
        },
        {"Action": "s3:PutObject", "Effect": "Allow", "Resource": ids.completion_reports},
    ]


def test_only_the_batch_role_is_named_in_the_backfill_functions_policy(synth: Synth) -> None:
    batch = synth.pipeline.batch_operations
    backfill = synth.pipeline.backfill
    assert batch is not None and backfill is not None
    function_arn = _arn(synth.logical_id(backfill.function))
    permissions = [
        p["Properties"]
        for p in synth.resources("AWS::Lambda::Permission").values()
        if p["Properties"]["FunctionName"] == function_arn
    ]
    # No service principal (Batch Operations invokes as the role), no other account.
    assert permissions == [
        {
            "Action": "lambda:InvokeFunction",
            "FunctionName": function_arn,
            "Principal": _arn(synth.logical_id(batch.role)),
        }
    ]
    assert not synth.resources("AWS::Lambda::EventInvokeConfig")


def test_inventory_bucket_policy_blocks_nothing_the_batch_role_does(synth: Synth) -> None:
    ids = _Ids(synth)
    (policy,) = [
        p
        for p in synth.resources("AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == _ref(ids.inventory)
    ]
    denies = [
        s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"
    ]
    # Only requests without TLS (1.2 or later) are denied; S3 Batch Operations uses TLS.
    assert [d["Condition"] for d in denies] == [
        {"Bool": {"aws:SecureTransport": "false"}},
        {"NumericLessThan": {"s3:TlsVersion": 1.2}},
    ]


@pytest.mark.contract("C7", "C13")
def test_backfill_function_handler_environment_and_grants(synth: Synth) -> None:
    backfill = synth.pipeline.backfill
    assert backfill is not None
    settings = Settings()
    ids = _Ids(synth)
    log_group_id = synth.logical_id(backfill.log_group)
    _, function = _resource(synth, backfill.function)
    props = function["Properties"]
    assert props["Handler"] == BACKFILL_HANDLER
    assert props["Runtime"] == "python3.13"
    assert props["Architectures"] == ["arm64"]
    assert props.get("TracingConfig") == tracing_config(synth)
    assert props["LoggingConfig"] == {"LogFormat": "JSON", "LogGroup": _ref(log_group_id)}
    assert props["Timeout"] == settings.backfill_function_timeout_seconds == 60
    assert props["MemorySize"] == settings.function_memory_mb
    assert props["Environment"]["Variables"] == {
        "LEDGER_TABLE_NAME": _ref(ids.table),
        "DEAD_LETTER_QUEUE_URL": _ref(ids.dlq),
        "TOMBSTONE_TTL_SECONDS": str(settings.tombstone_ttl_seconds),
        "BUCKET_NAME": _ref(ids.bucket),
        "RECORD_CONCURRENCY": str(settings.record_concurrency),
        **scope_environment(_ref(ids.bucket)),
        **common_environment(synth, "s3ingest-backfill"),
    }
    _, ingest = _resource(synth, synth.pipeline.ingest.function)
    assert props["Code"] == ingest["Properties"]["Code"]
    # Ledger rules (C7) on the landing bucket's objects; no queue, no DLQ write.
    assert _granted(synth, backfill.role) == _grants(
        {
            **xray_grants(synth),
            "logs:CreateLogStream": [_arn(log_group_id)],
            "logs:PutLogEvents": [_arn(log_group_id)],
            "dynamodb:GetItem": [_arn(ids.table)],
            "dynamodb:PutItem": [_arn(ids.table)],
            "dynamodb:UpdateItem": [_arn(ids.table)],
            "s3:GetObject": [ids.objects],
            "s3:GetObjectVersion": [ids.objects],
            "s3:ListBucket": [_arn(ids.bucket)],
        }
    )


def _control_environment(synth: Synth) -> dict[str, Any]:
    ids = _Ids(synth)
    return {
        "LEDGER_TABLE_NAME": _ref(ids.table),
        "INGEST_QUEUE_URL": _ref(ids.queue),
        "DEAD_LETTER_QUEUE_URL": _ref(ids.dlq),
        "TOMBSTONE_TTL_SECONDS": str(Settings().tombstone_ttl_seconds),
        "BUCKET_NAME": _ref(ids.bucket),
        "INVENTORY_BUCKET_NAME": _ref(ids.inventory),
        "INVENTORY_PREFIX": _join("inventory/", _ref(ids.bucket), "/s3ingest-daily/"),
        "REPORT_BUCKET_NAME": _ref(ids.inventory),
        **scope_environment(_ref(ids.bucket)),
        **inventories_environment(_ref(ids.bucket), _ref(ids.inventory)),
        **common_environment(synth, "s3ingest-backfill"),
        **targets_environment(synth),
        # The distributed-map engine's backfill_file step runs the processor (fan-out synth).
        **(
            {"PROCESSOR": synth.settings.processor, "OUTPUT_BUCKET": _ref(ids.output)}
            if ids.output is not None and synth.settings.backfill_engine == "distributed-map"
            else {}
        ),
    }


@pytest.mark.parametrize("variant", ["synth", "fanout_synth"])
def test_control_function_handler_and_environment(
    variant: str, request: pytest.FixtureRequest
) -> None:
    synth: Synth = request.getfixturevalue(variant)
    control = synth.pipeline.backfill_control
    assert control is not None
    _, function = _resource(synth, control.function)
    props = function["Properties"]
    assert props["Handler"] == CONTROL_HANDLER
    assert props["Environment"]["Variables"] == _control_environment(synth)
    assert props["Timeout"] == Settings().reconcile_timeout_seconds
    assert props["MemorySize"] == Settings().reconcile_memory_mb


def test_control_function_grants_for_batch_operations(synth: Synth) -> None:
    control = synth.pipeline.backfill_control
    assert control is not None
    ids = _Ids(synth)
    # prepare (list, HEAD and read the inventory reports) and report (the completion reports);
    # no ledger and no landing-bucket access: Batch Operations' tasks go to the backfill function
    assert _granted(synth, control.role) == _grants(
        {
            **xray_grants(synth),
            "logs:CreateLogStream": [_arn(ids.control_log_group)],
            "logs:PutLogEvents": [_arn(ids.control_log_group)],
            "s3:ListBucket": [_arn(ids.inventory)],
            "s3:GetObject": [ids.reports, ids.completion_reports],
        }
    )


def test_batch_outputs(synth: Synth) -> None:
    pipeline = synth.pipeline
    machine = pipeline.backfill_state_machine
    assert machine is not None and pipeline.backfill is not None
    assert pipeline.batch_operations is not None
    ids = _Ids(synth)
    outputs = synth.template["Outputs"]
    assert outputs["BackfillStateMachineArn"]["Value"] == _ref(ids.machine)
    function_id = synth.logical_id(pipeline.backfill.function)
    role_id = synth.logical_id(pipeline.batch_operations.role)
    assert outputs["BackfillFunctionName"]["Value"] == _ref(function_id)
    assert outputs["BackfillRoleArn"]["Value"] == _arn(role_id)
    assert outputs["ReportBucketName"]["Value"] == _ref(ids.inventory)


# --- An adopted bucket has the backfill over the stack's own inventory (issue 15) ----------------


def test_adopted_bucket_has_the_backfill(adopted_synth: Synth) -> None:
    # GIVEN bucketName: the stack adds its own inventory configuration to the existing bucket
    pipeline = adopted_synth.pipeline
    # THEN the inventory backfill (batch-operations, the default engine) is deployed ...
    assert pipeline.backfill is not None and pipeline.backfill_control is not None
    assert pipeline.batch_operations is not None and pipeline.backfill_state_machine is not None
    machines = set(adopted_synth.resources("AWS::StepFunctions::StateMachine"))
    assert machines == {
        adopted_synth.logical_id(pipeline.backfill_state_machine.state_machine),
        adopted_synth.logical_id(pipeline.listing.state_machine.state_machine),
        adopted_synth.logical_id(pipeline.reprocess.state_machine.state_machine),
    }
    # ... over the adopted bucket's reports in the stack's inventory bucket ...
    variables = _resource(adopted_synth, pipeline.backfill_control.function)[1]["Properties"][
        "Environment"
    ]["Variables"]
    inventory_id = adopted_synth.logical_id(pipeline.landings.shared.inventory)
    assert variables["BUCKET_NAME"] == ADOPTED_BUCKET
    assert variables["INVENTORY_BUCKET_NAME"] == _ref(inventory_id)
    assert variables["INVENTORY_PREFIX"] == inventory_report_prefix(ADOPTED_BUCKET)
    # ... with the outputs the CLI reads
    outputs = adopted_synth.template["Outputs"]
    for name in (
        "BackfillStateMachineArn",
        "BackfillFunctionName",
        "BackfillRoleArn",
        "ReportBucketName",
        "InventoryBucketName",
        "ListingBackfillStateMachineArn",
    ):
        assert name in outputs, name
    assert outputs["InventoryBucketName"]["Value"] == _ref(inventory_id)


# --- No inventory backfill without an inventory ---------------------------------------------------


@pytest.mark.parametrize("engine", ["batch-operations", "distributed-map"])
def test_no_backfill_without_inventory(engine: str, tmp_path: Path) -> None:
    # GIVEN a stack that owns its bucket but configures no inventory (built, not synthesized)
    app = App(
        context={**cdk_json_context(), "inventoryEnabled": False, "backfillEngine": engine},
        outdir=str(tmp_path),
    )
    stack = compose(app, nag=False, code=lambda_.Code.from_inline("def handler(e, c): pass"))
    pipeline = stack.pipeline
    # THEN nothing of the inventory backfill is created (the listing backfill is, with ids of
    # its own)
    assert pipeline.backfill is None and pipeline.backfill_control is None
    assert pipeline.batch_operations is None and pipeline.backfill_state_machine is None
    assert pipeline.listing.state_machine.node.path.endswith("/Listing/ListingStateMachine")
    assert not [
        construct.node.path
        for construct in stack.node.find_all()
        if ("Backfill" in construct.node.id or "BatchOperations" in construct.node.id)
        # the listing backfill's output, which every stack has
        and construct.node.id != "ListingBackfillStateMachineArn"
    ]


@pytest.mark.contract("C13")
@pytest.mark.parametrize("handler", [BACKFILL_HANDLER, CONTROL_HANDLER])
def test_handlers_exist_in_the_function_package(handler: str) -> None:
    import importlib

    module, name = handler.rsplit(".", 1)
    assert callable(getattr(importlib.import_module(module), name))


@pytest.mark.contract("C13")
def test_every_action_the_state_machines_send_is_handled(synth: Synth, fanout_synth: Synth) -> None:
    from s3ingest_fn.handlers.backfill_control import ACTIONS

    sent = set()
    for variant in (synth, fanout_synth):
        machine = variant.pipeline.backfill_state_machine
        assert machine is not None
        for _, state in reachable(definition(variant, machine.state_machine)):
            payload = state.get("Parameters", {}).get("Payload")
            if isinstance(payload, dict):
                sent.add(payload["action"])
            if "ItemSelector" in state:
                sent.add(state["ItemSelector"]["action"])
    assert sent == set(ACTIONS) == {"prepare", "report", "backfill_file", "summarize"}
