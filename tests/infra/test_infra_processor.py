"""The team's processor (CONTRACT C8, C11, ``processor``): its environment on the functions that
run it, their grants, the output bucket; and none of it without ``processor``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_lambda as lambda_
from cdk_nag import AwsSolutionsChecks

from s3ingest_cdk.compose import compose
from s3ingest_cdk.stack import S3IngestStack
from s3ingest_cdk.synth import Synth, cdk_json_context

from .conftest import ADOPTED_BUCKET, PROCESSOR
from .functions import xray_grants
from .iam import allowed as _granted
from .iam import expected as _grants
from .iam import statements_of as _role_statements


def _arn(logical_id: str) -> dict[str, Any]:
    return {"Fn::GetAtt": [logical_id, "Arn"]}


def _ref(logical_id: str) -> dict[str, Any]:
    return {"Ref": logical_id}


def _objects(logical_id: str) -> dict[str, Any]:
    return {"Fn::Join": ["", [_arn(logical_id), "/*"]]}


def _output_id(synth: Synth) -> str:
    output = synth.pipeline.processor_output
    assert output is not None
    return synth.logical_id(output.bucket)


def _variables(synth: Synth, function: Any) -> dict[str, Any]:
    variables: dict[str, Any] = synth.template["Resources"][synth.logical_id(function)][
        "Properties"
    ]["Environment"]["Variables"]
    return variables


# --- The fan-out synth: the example processor ----------------------------------------------------


@pytest.mark.contract("C11")
def test_processor_runs_where_the_ingest_service_is_built(fanout_synth: Synth) -> None:
    # GIVEN processor = the example, and the distributed-map backfill
    synth = fanout_synth
    pipeline = synth.pipeline
    assert pipeline.backfill_control is not None and pipeline.reconcile_fan_out is not None
    assert pipeline.change_relay is not None
    output = _ref(_output_id(synth))
    # THEN the ingest function, the backfill_file step and the listing backfill's shard step
    # run it, with its output bucket ...
    runners = [
        pipeline.ingest.function,
        pipeline.backfill_control.function,
        pipeline.listing.shard.function,
        pipeline.reprocess.segment.function,
    ]
    assert pipeline.ingest_service_functions == runners
    for function in pipeline.ingest_service_functions:
        variables = _variables(synth, function)
        assert variables["PROCESSOR"] == PROCESSOR
        assert variables["OUTPUT_BUCKET"] == output
    # ... and no other function does
    for function in (
        pipeline.reconcile.function,
        pipeline.reconcile_fan_out.function,
        pipeline.change_relay.function,
    ):
        variables = _variables(synth, function)
        assert "PROCESSOR" not in variables and "OUTPUT_BUCKET" not in variables


@pytest.mark.contract("C8")
def test_ingest_role_reads_pinned_content_and_writes_outputs_only(fanout_synth: Synth) -> None:
    synth = fanout_synth
    pipeline = synth.pipeline
    bucket = synth.logical_id(pipeline.landing.bucket)
    output = _output_id(synth)
    queue = synth.logical_id(pipeline.ingest_queue.queue)
    dlq = synth.logical_id(pipeline.ingest_queue.dead_letter_queue)
    table = synth.logical_id(pipeline.ledger.table)
    log_group = synth.logical_id(pipeline.ingest.log_group)
    # THEN the ledger rules' grants (GetObject + GetObjectVersion on the landing objects already
    # serve the pinned reads, C8) plus read, write and delete of the output objects, nothing more
    assert _granted(_role_statements(synth, pipeline.ingest.role)) == _grants(
        {
            **xray_grants(fanout_synth),
            "logs:CreateLogStream": [_arn(log_group)],
            "logs:PutLogEvents": [_arn(log_group)],
            "dynamodb:GetItem": [_arn(table)],
            "dynamodb:PutItem": [_arn(table)],
            "dynamodb:UpdateItem": [_arn(table)],
            "s3:GetObject": [_objects(bucket), _objects(output)],
            "s3:GetObjectVersion": [_objects(bucket)],
            "s3:PutObject": [_objects(output)],
            "s3:DeleteObject": [_objects(output)],
            "s3:ListBucket": [_arn(bucket), _arn(output)],
            "sqs:SendMessage": [_arn(dlq)],
            "sqs:ReceiveMessage": [_arn(queue)],
            "sqs:DeleteMessage": [_arn(queue)],
            "sqs:ChangeMessageVisibility": [_arn(queue)],
            "sqs:GetQueueAttributes": [_arn(queue)],
            "sqs:GetQueueUrl": [_arn(queue)],
        }
    )


def test_only_the_processor_functions_may_write_outputs(fanout_synth: Synth) -> None:
    synth = fanout_synth
    output = json.dumps(_objects(_output_id(synth)), sort_keys=True)
    writers: set[str] = set()
    for policy in synth.resources("AWS::IAM::Policy").values():
        granted = _granted(policy["Properties"]["PolicyDocument"]["Statement"])
        if output in granted.get("s3:PutObject", []):
            writers.update(json.dumps(role) for role in policy["Properties"]["Roles"])
    assert writers == {
        json.dumps(_ref(synth.logical_id(function.role)))
        for function in synth.pipeline.ingest_service_functions
    }


def test_output_bucket_is_private_encrypted_logged_and_retained(fanout_synth: Synth) -> None:
    synth = fanout_synth
    landing = synth.pipeline.landing
    assert landing.access_logs_bucket is not None
    logs_id = synth.logical_id(landing.access_logs_bucket)
    output_id = _output_id(synth)
    bucket = synth.template["Resources"][output_id]
    props = {key: value for key, value in bucket["Properties"].items() if key != "Tags"}
    assert props == {
        "BucketEncryption": {
            "ServerSideEncryptionConfiguration": [
                {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
            ]
        },
        "PublicAccessBlockConfiguration": {
            "BlockPublicAcls": True,
            "BlockPublicPolicy": True,
            "IgnorePublicAcls": True,
            "RestrictPublicBuckets": True,
        },
        "OwnershipControls": {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]},
        # Into the stack's access-logs bucket, beside the landing bucket's; no versioning.
        "LoggingConfiguration": {
            "DestinationBucketName": _ref(logs_id),
            "LogFilePrefix": "processor-output/",
        },
    }
    assert bucket["DeletionPolicy"] == "Retain"
    assert bucket["UpdateReplacePolicy"] == "Retain"
    # Its policy denies requests without TLS 1.2 or later ...
    resources = [_arn(output_id), _objects(output_id)]
    (policy,) = [
        p
        for p in synth.resources("AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == _ref(output_id)
    ]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statements == [
        {
            "Action": "s3:*",
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            "Effect": "Deny",
            "Principal": {"AWS": "*"},
            "Resource": resources,
        },
        {
            "Action": "s3:*",
            "Condition": {"NumericLessThan": {"s3:TlsVersion": 1.2}},
            "Effect": "Deny",
            "Principal": {"AWS": "*"},
            "Resource": resources,
        },
    ]
    # ... and the access-logs bucket admits S3 server access logging from it
    (logs_policy,) = [
        p
        for p in synth.resources("AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == _ref(logs_id)
    ]
    logging_sources = [
        statement["Condition"]["ArnLike"]["aws:SourceArn"]
        for statement in logs_policy["Properties"]["PolicyDocument"]["Statement"]
        if statement.get("Principal") == {"Service": "logging.s3.amazonaws.com"}
    ]
    assert _arn(output_id) in logging_sources


def test_output_names_the_bucket(fanout_synth: Synth) -> None:
    outputs = fanout_synth.template["Outputs"]
    assert outputs["ProcessorOutputBucket"]["Value"] == _ref(_output_id(fanout_synth))


# --- Nothing of it without processor -------------------------------------------------------------


@pytest.mark.parametrize("variant", ["synth", "adopted_synth"])
def test_no_processor_by_default(variant: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(variant)
    assert synth.settings.processor is None
    assert synth.pipeline.processor_output is None
    for logical_id, function in synth.resources("AWS::Lambda::Function").items():
        variables = function["Properties"]["Environment"]["Variables"]
        assert "PROCESSOR" not in variables and "OUTPUT_BUCKET" not in variables, logical_id
    assert "ProcessorOutputBucket" not in synth.template["Outputs"]
    assert not [
        logical_id for logical_id in synth.template["Resources"] if "ProcessorOutput" in logical_id
    ]


# --- Built, not synthesized: the other engine, an adopted bucket ---------------------------------


def _build(tmp_path: Path, **context: Any) -> tuple[App, S3IngestStack]:
    app = App(context={**cdk_json_context(), **context}, outdir=str(tmp_path))
    stack = compose(app, nag=False, code=lambda_.Code.from_inline("def handler(e, c): pass"))
    return app, stack


def _policy_statements(stack: Stack, function: lambda_.Function) -> list[dict[str, Any]]:
    assert function.role is not None
    document: dict[str, Any] = stack.resolve(
        function.role.node.find_child("DefaultPolicy").document  # type: ignore[attr-defined]
    )
    statements: list[dict[str, Any]] = document["Statement"]
    return statements


def _findings(app: App) -> list[str]:
    report = AwsSolutionsChecks(verbose=True).validate_scope(app)
    return [
        f"{violation.rule_name} at {resource.construct_path}"
        for violation in report.violations
        for resource in violation.violating_resources
    ]


@pytest.mark.contract("C11", "C13")
def test_batch_operations_backfill_runs_the_processor(tmp_path: Path) -> None:
    # GIVEN the batch-operations engine (the default) with a processor and the change stream
    app, stack = _build(tmp_path, stage="batchfx", processor=PROCESSOR, changeStream=True)
    pipeline = stack.pipeline
    assert pipeline.backfill is not None and pipeline.backfill_control is not None
    output = pipeline.processor_output
    assert output is not None
    output_id = stack.resolve(output.bucket.node.default_child.logical_id)  # type: ignore[union-attr]
    # THEN the backfill function (and the listing's shard step) runs it with the output grants;
    # the control function does not
    assert pipeline.ingest_service_functions == [
        pipeline.ingest.function,
        pipeline.backfill.function,
        pipeline.listing.shard.function,
        pipeline.reprocess.segment.function,
    ]
    granted = _granted(_policy_statements(stack, pipeline.backfill.function))
    for action in ("s3:GetObject", "s3:PutObject", "s3:DeleteObject"):
        assert json.dumps(_objects(output_id), sort_keys=True) in granted[action], action
    control = json.dumps(_policy_statements(stack, pipeline.backfill_control.function))
    assert output_id not in control
    # AND cdk-nag has nothing unacknowledged to say
    assert _findings(app) == []


def test_adopted_bucket_processor_output_logs_to_its_own_bucket(tmp_path: Path) -> None:
    # GIVEN an adopted bucket (no access-logs bucket of its own: the shared one logs the
    # inventory bucket) with a processor
    app, stack = _build(
        tmp_path,
        stage="adoptedfx",
        bucketName=ADOPTED_BUCKET,
        processor=PROCESSOR,
        changeStream=True,
    )
    pipeline = stack.pipeline
    output = pipeline.processor_output
    assert output is not None and pipeline.landing.access_logs_bucket is None
    # THEN its access logs go to a bucket of its own (no S3 server access logs is cdk-nag S1)
    assert output.access_logs_bucket.node.scope is output
    assert _findings(app) == []
