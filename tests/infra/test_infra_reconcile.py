"""Reconciliation in the stack (CONTRACT C12): schedule, functions, grants, drift alarm, fan-out."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, CfnElement
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template

from s3ingest.settings import Settings, inventory_report_prefix
from s3ingest_cdk.compose import compose
from s3ingest_cdk.constructs.drift_alarm import DRIFT_KINDS
from s3ingest_cdk.constructs.reconcile_state_machine import WORK_PREFIX
from s3ingest_cdk.synth import Synth, cdk_json_context

from .asl import LAMBDA_RETRY, THROTTLE_RETRY, definition
from .conftest import ADOPTED_BUCKET
from .functions import (
    common_environment,
    function_asset,
    inventories_environment,
    scope_environment,
    targets_environment,
    tracing_config,
    xray_grants,
)

RECONCILE_HANDLER = "s3ingest_fn.handlers.reconcile.handler"
FANOUT_HANDLER = "s3ingest_fn.handlers.reconcile_fanout.handler"


def _arn(logical_id: str) -> dict[str, Any]:
    return {"Fn::GetAtt": [logical_id, "Arn"]}


def _ref(logical_id: str) -> dict[str, Any]:
    return {"Ref": logical_id}


def _cfn(construct: Any) -> CfnElement:
    element = construct.node.default_child
    assert isinstance(element, CfnElement)
    return element


def _objects(bucket_arn: Any, suffix: str = "/*") -> dict[str, Any]:
    return {"Fn::Join": ["", [bucket_arn, suffix]]}


def _resource(synth: Synth, construct: Any) -> tuple[str, dict[str, Any]]:
    logical_id = synth.logical_id(construct)
    return logical_id, synth.template["Resources"][logical_id]


def _granted(
    synth: Synth, role: Any, conditioned: dict[str, Any] | None = None
) -> dict[str, list[Any]]:
    """Action -> the resources it is allowed on, over every policy attached to ``role``; a
    statement with a condition only for an action of ``conditioned``, with that condition."""
    role_ref = _ref(synth.logical_id(role))
    granted: dict[str, list[Any]] = {}
    for policy in synth.resources("AWS::IAM::Policy").values():
        if role_ref not in policy["Properties"]["Roles"]:
            continue
        assert policy["Properties"]["Roles"] == [role_ref]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            assert statement["Effect"] == "Allow"
            actions = statement["Action"]
            if "Condition" in statement:
                assert conditioned is not None and actions in conditioned
                assert statement["Condition"] == conditioned[actions]
            resources = statement["Resource"]
            for action in [actions] if isinstance(actions, str) else actions:
                for resource in resources if isinstance(resources, list) else [resources]:
                    granted.setdefault(action, []).append(resource)
    return granted


def _reconcile_grants(synth: Synth) -> dict[str, list[Any]]:
    """What every reconcile function may do, on exactly which resources."""
    bucket_id = synth.logical_id(synth.pipeline.landing.bucket)
    table_id = synth.logical_id(synth.pipeline.ledger.table)
    queue_id = synth.logical_id(synth.pipeline.ingest_queue.queue)
    inventory = synth.pipeline.landing.inventory_bucket
    assert inventory is not None
    inventory_id = synth.logical_id(inventory)
    reports = {
        "Fn::Join": [
            "",
            [_arn(inventory_id), "/inventory/", _ref(bucket_id), "/s3ingest-daily/*"],
        ]
    }
    objects = _objects(_arn(bucket_id))
    return {
        **xray_grants(synth),
        "s3:ListBucket": [_arn(bucket_id), _arn(inventory_id)],
        "s3:ListBucketVersions": [_arn(bucket_id)],
        "s3:GetBucketVersioning": [_arn(bucket_id)],
        "s3:GetObject": [objects, reports],
        "s3:GetObjectVersion": [objects],
        "dynamodb:Scan": [_arn(table_id)],
        "sqs:SendMessage": [_arn(queue_id)],
    }


def _attestation_grants(synth: Synth) -> dict[str, list[Any]]:
    """The scheduled reconcile function's own (issue 38): PutObject under attestations/ of the
    stack's bucket only, the ingest queue's depth (its repairs left it), GetItem on the ledger
    table (the repaired keys' rows, read again after the repairs)."""
    store_id = synth.logical_id(synth.pipeline.landings.shared.inventory)
    queue_id = synth.logical_id(synth.pipeline.ingest_queue.queue)
    table_id = synth.logical_id(synth.pipeline.ledger.table)
    return {
        "s3:PutObject": [_objects(_arn(store_id), "/attestations/*")],
        "sqs:GetQueueAttributes": [_arn(queue_id)],
        "dynamodb:GetItem": [_arn(table_id)],
    }


def _sorted(granted: dict[str, list[Any]]) -> dict[str, list[str]]:
    return {
        action: sorted(json.dumps(r, sort_keys=True) for r in resources)
        for action, resources in granted.items()
    }


def _environment(synth: Synth) -> dict[str, Any]:
    bucket_id = synth.logical_id(synth.pipeline.landing.bucket)
    inventory = synth.pipeline.landing.inventory_bucket
    assert inventory is not None
    return {
        "LEDGER_TABLE_NAME": _ref(synth.logical_id(synth.pipeline.ledger.table)),
        "INGEST_QUEUE_URL": _ref(synth.logical_id(synth.pipeline.ingest_queue.queue)),
        "BUCKET_NAME": _ref(bucket_id),
        "INVENTORY_BUCKET_NAME": _ref(synth.logical_id(inventory)),
        "INVENTORY_PREFIX": {"Fn::Join": ["", ["inventory/", _ref(bucket_id), "/s3ingest-daily/"]]},
        **scope_environment(_ref(bucket_id)),
        **inventories_environment(_ref(bucket_id), _ref(synth.logical_id(inventory))),
        **common_environment(synth, "s3ingest-reconcile"),
        **targets_environment(synth),
    }


# --- The default stack: one scheduled Lambda run over the inventory ------------------------------


@pytest.mark.contract("C12")
def test_schedule_invokes_the_reconcile_function_with_the_inventory_source(synth: Synth) -> None:
    # GIVEN the default settings (the stack owns the bucket and its inventory)
    rule_id, rule = _resource(synth, synth.pipeline.reconcile_schedule.rule)
    function_id = synth.logical_id(synth.pipeline.reconcile.function)
    props = rule["Properties"]
    # THEN the rule runs on the settings' schedule and sends {"source": "inventory"}
    assert props["ScheduleExpression"] == "rate(1 day)" == Settings().reconcile_schedule
    assert props["State"] == "ENABLED"
    assert "EventPattern" not in props
    assert props.get("EventBusName", "default") == "default"
    (target,) = props["Targets"]
    assert {key: value for key, value in target.items() if key != "Id"} == {
        "Arn": _arn(function_id),
        "Input": '{"attest":true,"source":"inventory"}',
    }
    # the daily run attests each bucket after its repairs (issue 38)
    assert json.loads(target["Input"]) == {"source": "inventory", "attest": True}
    # AND only this rule may invoke the function
    permissions = [
        p["Properties"]
        for p in synth.resources("AWS::Lambda::Permission").values()
        if p["Properties"]["FunctionName"] == _arn(function_id)
    ]
    assert permissions == [
        {
            "Action": "lambda:InvokeFunction",
            "FunctionName": _arn(function_id),
            "Principal": "events.amazonaws.com",
            "SourceArn": _arn(rule_id),
            # the rule's account too (confused deputy, issue 34)
            "SourceAccount": {"Ref": "AWS::AccountId"},
        }
    ]


def test_reconcile_function_handler_runtime_and_environment(synth: Synth) -> None:
    settings = Settings()
    log_group_id, log_group = _resource(synth, synth.pipeline.reconcile.log_group)
    _, function = _resource(synth, synth.pipeline.reconcile.function)
    props = function["Properties"]
    assert props["Handler"] == RECONCILE_HANDLER
    assert props["Runtime"] == "python3.13"
    assert props["Architectures"] == ["arm64"]
    assert props.get("TracingConfig") == tracing_config(synth)
    assert props["LoggingConfig"] == {"LogFormat": "JSON", "LogGroup": _ref(log_group_id)}
    assert props["MemorySize"] == settings.reconcile_memory_mb == 3008
    assert props["Timeout"] == settings.reconcile_timeout_seconds == 900
    assert props["Environment"]["Variables"] == {
        **_environment(synth),
        # where the scheduled run's attestations go (issue 38): the stack's own bucket
        "ATTESTATION_BUCKET_NAME": _ref(synth.logical_id(synth.pipeline.landings.shared.inventory)),
    }
    assert props["Role"] == _arn(synth.logical_id(synth.pipeline.reconcile.role))
    # An asset of its own: the ingest function's package and pyarrow, for the columnar
    # reconciliation (FunctionRole.packages; tests/infra/test_infra_role_packages.py).
    _, ingest = _resource(synth, synth.pipeline.ingest.function)
    assert props["Code"]["S3Bucket"] == ingest["Properties"]["Code"]["S3Bucket"]
    assert props["Code"]["S3Key"] != ingest["Properties"]["Code"]["S3Key"]
    assert (function_asset(synth, "ReconcileFunction") / "pyarrow").is_dir()
    assert log_group["Properties"]["RetentionInDays"] == settings.log_retention_days
    assert log_group["DeletionPolicy"] == "Retain"
    (policy_id,) = [
        logical_id
        for logical_id, policy in synth.resources("AWS::IAM::Policy").items()
        if policy["Properties"]["Roles"] == [_ref(synth.logical_id(synth.pipeline.reconcile.role))]
    ]
    assert function["DependsOn"] == [policy_id]


@pytest.mark.contract("C12")
def test_inventory_prefix_is_where_s3_delivers_the_report() -> None:
    # S3 writes to <destination prefix>/<source bucket>/<configuration id>/, the same path the
    # operator CLI and the local runtime read.
    import boto3

    from s3ingest.deployed import DeployedStack

    expected = "inventory/b/s3ingest-daily/"
    assert inventory_report_prefix("b") == expected
    stack = DeployedStack(
        "S3Ingest-t",
        {"BucketName": "b", "LedgerTableName": "l", "QueueUrl": "q", "InventoryBucketName": "i"},
    )
    reconciler = stack.reconciler(boto3.session.Session(region_name="us-east-1"))
    assert reconciler.inventory_prefix == expected


def test_reconcile_role_is_least_privilege(synth: Synth) -> None:
    # GIVEN the reconcile function's role
    _, role = _resource(synth, synth.pipeline.reconcile.role)
    assert "ManagedPolicyArns" not in role["Properties"]
    assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"] == [
        {
            "Action": "sts:AssumeRole",
            "Effect": "Allow",
            "Principal": {"Service": "lambda.amazonaws.com"},
        }
    ]
    log_group_id = synth.logical_id(synth.pipeline.reconcile.log_group)
    granted = _granted(synth, synth.pipeline.reconcile.role)
    # THEN Scan on the ledger table only, SendMessage on the ingest queue only, reads of the
    # bucket and of this bucket's inventory reports, and nothing else
    assert _sorted(granted) == _sorted(
        {
            **_reconcile_grants(synth),
            **_attestation_grants(synth),
            "logs:CreateLogStream": [_arn(log_group_id)],
            "logs:PutLogEvents": [_arn(log_group_id)],
        }
    )
    table_id = synth.logical_id(synth.pipeline.ledger.table)
    queue_id = synth.logical_id(synth.pipeline.ingest_queue.queue)
    assert granted["dynamodb:Scan"] == [_arn(table_id)]
    assert granted["sqs:SendMessage"] == [_arn(queue_id)]
    assert not [action for action in granted if action.startswith("dynamodb:Put")]
    # s3:PutObject: the attestations only (issue 38), never the landing bucket
    assert granted["s3:PutObject"] == _attestation_grants(synth)["s3:PutObject"]


@pytest.mark.contract("C12")
def test_drift_alarm_watches_the_daily_maximum_of_drift_total(synth: Synth) -> None:
    _, alarm = _resource(synth, synth.pipeline.drift.alarm)
    props = alarm["Properties"]
    assert {key: props[key] for key in props if key not in ("AlarmDescription", "Tags")} == {
        "AlarmName": f"s3ingest-{synth.settings.stage}-drift",
        "Namespace": "S3Ingest",
        "MetricName": "drift_total",
        # This stack's series only (the reconcile handlers emit stack=<S3INGEST_STACK>).
        "Dimensions": [
            {"Name": "service", "Value": "s3ingest"},
            {"Name": "stack", "Value": synth.stack.stack_name},
        ],
        "Statistic": "Maximum",
        "Period": 86_400,
        "Threshold": 1,
        "ComparisonOperator": "GreaterThanOrEqualToThreshold",
        "EvaluationPeriods": 1,
        "TreatMissingData": "notBreaching",
        # The alarm topic is notified on ALARM and on OK (test_infra_alarms.py has the topic).
        "AlarmActions": [_ref(synth.logical_id(synth.pipeline.alarm_topic.topic))],
        "OKActions": [_ref(synth.logical_id(synth.pipeline.alarm_topic.topic))],
    }
    assert props["AlarmDescription"].endswith(
        f"Runbook: {synth.settings.runbook_base_url}#events-lost-upstream"
    )


@pytest.mark.contract("C12")
def test_per_kind_drift_metrics_match_the_handlers() -> None:
    from s3ingest_fn.core.diff import DRIFT_KINDS as HANDLER_KINDS

    assert DRIFT_KINDS == HANDLER_KINDS


def test_reconcile_outputs(synth: Synth) -> None:
    outputs = synth.template["Outputs"]
    assert outputs["ReconcileFunctionName"]["Value"] == _ref(
        synth.logical_id(synth.pipeline.reconcile.function)
    )
    assert outputs["DriftAlarmName"]["Value"] == _ref(synth.logical_id(synth.pipeline.drift.alarm))
    assert "ReconcileStateMachineArn" not in outputs


def test_no_fan_out_without_the_setting(synth: Synth) -> None:
    assert synth.pipeline.reconcile_fan_out is None
    assert synth.pipeline.reconcile_state_machine is None
    # The only state machines (and the only keys besides the alarm topic's) are the
    # backfills' (the inventory's and the listing's) and the reprocess run's.
    backfill = synth.pipeline.backfill_state_machine
    assert backfill is not None
    listing = synth.pipeline.listing.state_machine
    reprocess = synth.pipeline.reprocess.state_machine
    assert set(synth.resources("AWS::StepFunctions::StateMachine")) == {
        synth.logical_id(backfill.state_machine),
        synth.logical_id(listing.state_machine),
        synth.logical_id(reprocess.state_machine),
    }
    assert set(synth.resources("AWS::KMS::Key")) == {
        synth.logical_id(backfill.log_key),
        synth.logical_id(listing.log_key),
        synth.logical_id(reprocess.log_key),
        synth.logical_id(synth.pipeline.alarm_topic.key),
    }
    inventory = synth.pipeline.landing.inventory_bucket
    assert inventory is not None
    _, bucket = _resource(synth, inventory)
    # no work to expire: only the checkpoints' old versions (the bucket is versioned, issue 38)
    rules = bucket["Properties"]["LifecycleConfiguration"]["Rules"]
    assert [r["Id"] for r in rules] == [
        "ExpireOldReconcileWorkVersions",
        "ExpireOldBackfillListingVersions",
        "ExpireOldReprocessVersions",
    ]
    assert all("ExpirationInDays" not in r for r in rules)
    assert bucket["Properties"]["VersioningConfiguration"] == {"Status": "Enabled"}


# --- An adopted bucket: the stack's own inventory, so the schedule reads it -----------------------


@pytest.mark.contract("C12")
def test_adopted_bucket_is_reconciled_from_its_inventory(adopted_synth: Synth) -> None:
    # GIVEN bucketName (an existing bucket): the stack adds its own inventory configuration
    synth = adopted_synth
    _, rule = _resource(synth, synth.pipeline.reconcile_schedule.rule)
    (target,) = rule["Properties"]["Targets"]
    assert json.loads(target["Input"]) == {"source": "inventory", "attest": True}
    _, function = _resource(synth, synth.pipeline.reconcile.function)
    variables = function["Properties"]["Environment"]["Variables"]
    assert variables["BUCKET_NAME"] == ADOPTED_BUCKET
    inventory_id = synth.logical_id(synth.pipeline.landings.shared.inventory)
    assert variables["INVENTORY_BUCKET_NAME"] == _ref(inventory_id)
    assert variables["INVENTORY_PREFIX"] == inventory_report_prefix(ADOPTED_BUCKET)
    assert json.loads(variables["SCOPE"]) == [
        {"name": ADOPTED_BUCKET, "prefixes": [], "suffixes": []}
    ]


@pytest.mark.contract("C12")
def test_a_bucket_without_inventory_is_reconciled_by_listing(tmp_path: Path) -> None:
    # GIVEN an adopted bucket with inventoryEnabled false (built, not synthesized to disk)
    app = App(
        context={**cdk_json_context(), "bucketName": ADOPTED_BUCKET, "inventoryEnabled": False},
        outdir=str(tmp_path),
    )
    stack = compose(app, nag=False, code=lambda_.Code.from_inline("def handler(e, c): pass"))
    template = Template.from_stack(stack).to_json()
    pipeline = stack.pipeline
    rule = template["Resources"][stack.get_logical_id(_cfn(pipeline.reconcile_schedule.rule))]
    (target,) = rule["Properties"]["Targets"]
    # THEN the schedule lists the bucket, and the function has no inventory to read
    assert json.loads(target["Input"]) == {"source": "listing", "attest": True}
    function = template["Resources"][stack.get_logical_id(_cfn(pipeline.reconcile.function))]
    variables = function["Properties"]["Environment"]["Variables"]
    assert variables["BUCKET_NAME"] == ADOPTED_BUCKET
    assert "INVENTORY_BUCKET_NAME" not in variables
    assert "INVENTORY_PREFIX" not in variables
    assert json.loads(variables["INVENTORIES"]) == []


def test_adopted_bucket_reconcile_grants(adopted_synth: Synth) -> None:
    synth = adopted_synth
    bucket_arn = {"Fn::Join": ["", ["arn:", _ref("AWS::Partition"), f":s3:::{ADOPTED_BUCKET}"]]}
    objects = {"Fn::Join": ["", ["arn:", _ref("AWS::Partition"), f":s3:::{ADOPTED_BUCKET}/*"]]}
    log_group_id = synth.logical_id(synth.pipeline.reconcile.log_group)
    inventory_id = synth.logical_id(synth.pipeline.landings.shared.inventory)
    reports = _objects(_arn(inventory_id), f"/{inventory_report_prefix(ADOPTED_BUCKET)}*")
    assert _sorted(_granted(synth, synth.pipeline.reconcile.role)) == _sorted(
        {
            **xray_grants(synth),
            "logs:CreateLogStream": [_arn(log_group_id)],
            "logs:PutLogEvents": [_arn(log_group_id)],
            "s3:ListBucket": [bucket_arn, _arn(inventory_id)],
            "s3:ListBucketVersions": [bucket_arn],
            "s3:GetBucketVersioning": [bucket_arn],
            "s3:GetObject": [objects, reports],
            "s3:GetObjectVersion": [objects],
            "dynamodb:Scan": [_arn(synth.logical_id(synth.pipeline.ledger.table))],
            "sqs:SendMessage": [_arn(synth.logical_id(synth.pipeline.ingest_queue.queue))],
            **_attestation_grants(synth),
        }
    )


# --- The fan-out: a Step Functions state machine over the inventory ------------------------------


def _definition(synth: Synth) -> dict[str, Any]:
    """The state machine's ASL, its ``Fn::Join`` rendered with ``<Id>`` / ``<Id.Attr>`` tokens."""
    machine = synth.pipeline.reconcile_state_machine
    assert machine is not None
    return definition(synth, machine.state_machine)


def _walk(block: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every state in the order it runs: the chain from StartAt, each container before its
    branches' or its item processor's states."""
    name: str | None = block["StartAt"]
    while name is not None:
        state = block["States"][name]
        yield name, state
        for branch in state.get("Branches", []):
            yield from _walk(branch)
        if "ItemProcessor" in state:
            yield from _walk(state["ItemProcessor"])
        name = state.get("Next")
        assert name is not None or state.get("End") is True, name


def _task_actions(block: dict[str, Any], given: str | None = None) -> Iterator[tuple[str, str]]:
    """(task, the ``action`` its Lambda payload carries), in the order the tasks run."""
    action = given
    name: str | None = block["StartAt"]
    while name is not None:
        state = block["States"][name]
        if state["Type"] == "Pass" and state.get("ResultPath") == "$.action":
            action = state["Result"]
        elif state["Type"] == "Task":
            parameters = state["Parameters"]
            if "Payload" in parameters:
                yield name, parameters["Payload"]["action"]
            else:
                assert parameters["Payload.$"] == "$", name  # the state's input as built
                assert action is not None, name
                yield name, action
        for branch in state.get("Branches", []):
            yield from _task_actions(branch, action)
        if "ItemProcessor" in state:
            yield from _task_actions(state["ItemProcessor"], state["ItemSelector"]["action"])
        name = state.get("Next")


@pytest.mark.contract("C12")
def test_fanout_state_names_types_and_order(fanout_synth: Synth) -> None:
    definition = _definition(fanout_synth)
    assert [(name, state["Type"]) for name, state in _walk(definition)] == [
        ("PlanRequest", "Pass"),
        ("Plan", "Task"),
        ("Shard", "Parallel"),
        ("ShardInventory", "Map"),
        ("ShardInventoryFile", "Task"),
        ("ShardLedger", "Map"),
        ("ShardLedgerSegment", "Task"),
        ("DiffPartitions", "Map"),
        ("DiffPartition", "Task"),
        ("Summarize", "Task"),
    ]
    assert definition["TimeoutSeconds"] == 86_400


@pytest.mark.contract("C12")
def test_fanout_payload_actions_in_order(fanout_synth: Synth) -> None:
    assert list(_task_actions(_definition(fanout_synth))) == [
        ("Plan", "plan"),
        ("ShardInventoryFile", "shard_inventory"),
        ("ShardLedgerSegment", "shard_ledger"),
        ("DiffPartition", "diff_partition"),
        ("Summarize", "summarize"),
    ]


def test_fanout_plan_keeps_the_input_and_its_result_at_plan(fanout_synth: Synth) -> None:
    states = _definition(fanout_synth)["States"]
    # The execution input (manifest, partitions, segments, prefix, dryRun, marginSeconds: any of
    # them, none required) plus action "plan" is the plan's payload ...
    assert states["PlanRequest"] == {
        "Type": "Pass",
        "Result": "plan",
        "ResultPath": "$.action",
        "Next": "Plan",
    }
    assert states["Plan"]["Parameters"]["Payload.$"] == "$"
    # ... and the state after it is {"plan": <the function's result>}.
    assert states["Plan"]["ResultSelector"] == {"plan.$": "$.Payload"}
    assert "ResultPath" not in states["Plan"] and "OutputPath" not in states["Plan"]
    assert states["Shard"]["ResultPath"] == "$.shards"
    assert states["DiffPartitions"]["ResultPath"] == "$.partitions"


@pytest.mark.contract("C12")
def test_fanout_distributed_map_over_the_inventory_files(fanout_synth: Synth) -> None:
    (inventory_branch, ledger_branch) = _definition(fanout_synth)["States"]["Shard"]["Branches"]
    shard_inventory = inventory_branch["States"]["ShardInventory"]
    assert shard_inventory["ItemsPath"] == "$.plan.files"
    # "$" in ItemSelector is the Map state's input ({"plan": ...}); the item is the file key.
    assert shard_inventory["ItemSelector"] == {
        "action": "shard_inventory",
        "runId.$": "$.plan.runId",
        "manifest.$": "$.plan.manifest",
        "partitions.$": "$.plan.partitions",
        "prefix.$": "$.plan.prefix",
        "file.$": "$$.Map.Item.Value",
    }
    assert shard_inventory["MaxConcurrency"] == 100
    assert shard_inventory["Label"] == "ShardInventory"
    assert "ToleratedFailurePercentage" not in shard_inventory  # any failed file fails the run
    processor = shard_inventory["ItemProcessor"]
    assert processor["ProcessorConfig"] == {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"}
    child = processor["States"]["ShardInventoryFile"]
    assert child["Retry"] == [LAMBDA_RETRY, THROTTLE_RETRY]
    assert child["ResultSelector"] == {"keys.$": "$.Payload.keys", "shards.$": "$.Payload.shards"}

    shard_ledger = ledger_branch["States"]["ShardLedger"]
    assert shard_ledger["ItemsPath"] == "$.plan.segmentList"
    assert shard_ledger["ItemSelector"] == {
        "action": "shard_ledger",
        "runId.$": "$.plan.runId",
        "segment.$": "$$.Map.Item.Value",
        "segments.$": "$.plan.segments",
        "partitions.$": "$.plan.partitions",
        "prefix.$": "$.plan.prefix",
    }
    assert shard_ledger["ItemProcessor"]["ProcessorConfig"] == {"Mode": "INLINE"}


@pytest.mark.contract("C12")
def test_fanout_diff_map_and_summary(fanout_synth: Synth) -> None:
    states = _definition(fanout_synth)["States"]
    diff = states["DiffPartitions"]
    assert diff["ItemsPath"] == "$.plan.partitionList"
    assert diff["MaxConcurrency"] == 40
    assert diff["ItemSelector"] == {
        "action": "diff_partition",
        "runId.$": "$.plan.runId",
        "partition.$": "$$.Map.Item.Value",
        "createdMs.$": "$.plan.createdMs",
        "marginMs.$": "$.plan.marginMs",
        "dryRun.$": "$.plan.dryRun",
        "compareVersions.$": "$.plan.compareVersions",
        "compareEtags.$": "$.plan.compareEtags",
        "prefix.$": "$.plan.prefix",
        "attest.$": "$.plan.attest",
    }
    assert states["Summarize"]["Parameters"]["Payload"] == {
        "action": "summarize",
        "plan.$": "$.plan",
        "inventory.$": "$.shards[0]",
        "ledger.$": "$.shards[1]",
        "partitions.$": "$.partitions",
    }
    assert states["Summarize"]["OutputPath"] == "$.Payload"
    assert states["Summarize"]["End"] is True


def test_fanout_every_task_invokes_the_step_function_with_retries(fanout_synth: Synth) -> None:
    assert fanout_synth.pipeline.reconcile_fan_out is not None
    function_id = fanout_synth.logical_id(fanout_synth.pipeline.reconcile_fan_out.function)
    tasks = [state for _, state in _walk(_definition(fanout_synth)) if state["Type"] == "Task"]
    assert len(tasks) == 5
    for task in tasks:
        assert task["Resource"] == "arn:<AWS::Partition>:states:::lambda:invoke"
        assert task["Parameters"]["FunctionName"] == f"<{function_id}.Arn>"
        assert task["Retry"] == [LAMBDA_RETRY, THROTTLE_RETRY]


def test_fanout_state_machine_logging_tracing_and_encryption(fanout_synth: Synth) -> None:
    synth = fanout_synth
    machine_construct = synth.pipeline.reconcile_state_machine
    assert machine_construct is not None
    _, machine = _resource(synth, machine_construct.state_machine)
    log_group_id, log_group = _resource(synth, machine_construct.log_group)
    key_id, key = _resource(synth, machine_construct.log_key)
    props = machine["Properties"]
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
    logs_statements = [
        s
        for s in key["Properties"]["KeyPolicy"]["Statement"]
        if s.get("Principal", {}).get("Service") is not None
    ]
    assert logs_statements == [
        {
            "Sid": "AllowCloudWatchLogsOfThisAccountAndRegion",
            "Effect": "Allow",
            "Principal": {
                "Service": {"Fn::Join": ["", ["logs.", _ref("AWS::Region"), ".amazonaws.com"]]}
            },
            "Action": [
                "kms:Decrypt*",
                "kms:Describe*",
                "kms:Encrypt*",
                "kms:GenerateDataKey*",
                "kms:ReEncrypt*",
            ],
            "Resource": "*",
            "Condition": {
                "ArnLike": {
                    "kms:EncryptionContext:aws:logs:arn": {
                        "Fn::Join": [
                            "",
                            [
                                "arn:",
                                _ref("AWS::Partition"),
                                ":logs:",
                                _ref("AWS::Region"),
                                ":",
                                _ref("AWS::AccountId"),
                                ":log-group:*",
                            ],
                        ]
                    }
                }
            },
        }
    ]


def test_fanout_state_machine_role(fanout_synth: Synth) -> None:
    synth = fanout_synth
    machine = synth.pipeline.reconcile_state_machine
    assert machine is not None and synth.pipeline.reconcile_fan_out is not None
    machine_id = synth.logical_id(machine.state_machine)
    function_arn = _arn(synth.logical_id(synth.pipeline.reconcile_fan_out.function))
    granted = _granted(synth, machine.state_machine.role)
    # The step function (and its versions) only; child executions of this state machine only.
    assert granted["lambda:InvokeFunction"] == [
        function_arn,
        {"Fn::Join": ["", [function_arn, ":*"]]},
    ]
    assert granted["states:StartExecution"] == [_ref(machine_id)]
    executions = [
        "arn:",
        _ref("AWS::Partition"),
        ":states:us-east-1:",
        _ref("AWS::AccountId"),
        ":execution:",
        {"Fn::Select": [6, {"Fn::Split": [":", _ref(machine_id)]}]},
    ]
    assert granted["states:DescribeExecution"] == [{"Fn::Join": ["", [*executions, ":*"]]}]
    assert granted["states:StopExecution"] == [{"Fn::Join": ["", [*executions, ":*"]]}]
    assert granted["states:RedriveExecution"] == [
        {"Fn::Join": ["", [*executions, "/ShardInventory:*"]]}
    ]
    wildcard_only = {action for action, resources in granted.items() if resources == ["*"]}
    assert wildcard_only == {
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
    }
    assert set(granted) == wildcard_only | {
        "lambda:InvokeFunction",
        "states:StartExecution",
        "states:DescribeExecution",
        "states:StopExecution",
        "states:RedriveExecution",
    }


@pytest.mark.contract("C12")
def test_fanout_schedule_starts_the_state_machine(fanout_synth: Synth) -> None:
    synth = fanout_synth
    machine = synth.pipeline.reconcile_state_machine
    assert machine is not None
    machine_id = synth.logical_id(machine.state_machine)
    _, rule = _resource(synth, synth.pipeline.reconcile_schedule.rule)
    (target,) = rule["Properties"]["Targets"]
    assert target["Arn"] == _ref(machine_id)
    # one target per bucket, naming it (the one bucket here)
    bucket_id = synth.logical_id(synth.pipeline.landing.bucket)
    # and asking for the bucket's attestation after the repairs (issue 38)
    assert target["Input"] == {
        "Fn::Join": ["", ['{"bucket":"', _ref(bucket_id), '","attest":true}']]
    }
    role_id = target["RoleArn"]["Fn::GetAtt"][0]
    role = synth.template["Resources"][role_id]["Properties"]
    # only this account's rules may assume the schedule's role (confused deputy, issue 34:
    # https://docs.aws.amazon.com/eventbridge/latest/userguide/cross-service-confused-deputy-prevention.html)
    rules = {
        "Fn::Join": [
            "",
            [
                "arn:",
                {"Ref": "AWS::Partition"},
                ":events:",
                {"Ref": "AWS::Region"},
                ":",
                {"Ref": "AWS::AccountId"},
                ":rule/*",
            ],
        ]
    }
    assert role["AssumeRolePolicyDocument"]["Statement"] == [
        {
            "Action": "sts:AssumeRole",
            "Condition": {
                "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}},
                "ArnLike": {"aws:SourceArn": rules},
            },
            "Effect": "Allow",
            "Principal": {"Service": "events.amazonaws.com"},
        }
    ]
    events_role = next(
        construct
        for construct in machine.state_machine.node.children
        if synth.stack.resolve(getattr(construct.node.default_child, "logical_id", None)) == role_id
    )
    assert _granted(synth, events_role) == {"states:StartExecution": [_ref(machine_id)]}
    # The single-run function stays deployed for on-demand runs, without a schedule.
    reconcile_arn = _arn(synth.logical_id(synth.pipeline.reconcile.function))
    assert not [
        p
        for p in synth.resources("AWS::Lambda::Permission").values()
        if p["Properties"]["FunctionName"] == reconcile_arn
    ]


def test_fanout_function_env_handler_and_grants(fanout_synth: Synth) -> None:
    synth = fanout_synth
    fan_out = synth.pipeline.reconcile_fan_out
    assert fan_out is not None
    inventory = synth.pipeline.landing.inventory_bucket
    assert inventory is not None
    bus = synth.pipeline.bus
    assert bus is not None
    _, function = _resource(synth, fan_out.function)
    props = function["Properties"]
    assert props["Handler"] == FANOUT_HANDLER
    assert props["Environment"]["Variables"] == {
        **_environment(synth),
        # the work files' bucket: the stack's own, whoever owns the inventory (issue 15)
        "CHECKPOINT_BUCKET_NAME": _ref(synth.logical_id(inventory)),
        # its summarize step attests the bucket (issue 38): where, and the bus it announces on
        "ATTESTATION_BUCKET_NAME": _ref(synth.logical_id(synth.pipeline.landings.shared.inventory)),
        "CHANGE_BUS_NAME": _ref(synth.logical_id(bus)),
    }
    assert props["MemorySize"] == 3008 and props["Timeout"] == 900
    log_group_id = synth.logical_id(fan_out.log_group)
    grants = _reconcile_grants(synth)
    work = _objects(_arn(synth.logical_id(inventory)), f"/{WORK_PREFIX}*")
    grants["s3:GetObject"] = [*grants["s3:GetObject"], work]
    attesting = _attestation_grants(synth)
    # the attestation's event on the change bus, of its source and detail-type only
    announces = {
        "events:PutEvents": {
            "StringEquals": {
                "events:source": "s3ingest",
                "events:detail-type": "Attestation Made",
            }
        }
    }
    assert _sorted(_granted(synth, fan_out.role, announces)) == _sorted(
        {
            **grants,
            **attesting,
            "s3:PutObject": [work, *attesting["s3:PutObject"]],
            "events:PutEvents": [_arn(synth.logical_id(bus))],
            "logs:CreateLogStream": [_arn(log_group_id)],
            "logs:PutLogEvents": [_arn(log_group_id)],
        }
    )


def test_fanout_work_prefix_expires(fanout_synth: Synth) -> None:
    from s3ingest_fn.services.fanout import WORK_PREFIX as FANOUT_WORK_PREFIX

    assert WORK_PREFIX == FANOUT_WORK_PREFIX
    inventory = fanout_synth.pipeline.landing.inventory_bucket
    assert inventory is not None
    _, bucket = _resource(fanout_synth, inventory)
    assert bucket["Properties"]["LifecycleConfiguration"] == {
        "Rules": [
            # the stack's bucket is versioned (issue 38): the checkpoints' old versions expire
            *(
                {
                    "Id": f"ExpireOld{name}Versions",
                    "Prefix": prefix,
                    "NoncurrentVersionExpiration": {"NoncurrentDays": 7},
                    "Status": "Enabled",
                }
                for name, prefix in (
                    ("ReconcileWork", "reconcile-work/"),
                    ("BackfillListing", "backfill-listing/"),
                    ("Reprocess", "reprocess/"),
                )
            ),
            {
                "Id": "ExpireReconcileWork",
                "Prefix": "reconcile-work/",
                "ExpirationInDays": 7,
                "Status": "Enabled",
            },
            # the history table (the fanout variant has it): its deleted files' versions, never
            # its current files; Athena's results
            {
                "Id": "ExpireDeletedHistoryFiles",
                "Prefix": "history/",
                "NoncurrentVersionExpiration": {"NoncurrentDays": 7},
                "ExpiredObjectDeleteMarker": True,
                "Status": "Enabled",
            },
            {
                "Id": "ExpireAthenaResults",
                "Prefix": "athena-results/",
                "ExpirationInDays": 7,
                "NoncurrentVersionExpiration": {"NoncurrentDays": 1},
                "Status": "Enabled",
            },
        ]
    }


def test_fanout_outputs(fanout_synth: Synth) -> None:
    machine = fanout_synth.pipeline.reconcile_state_machine
    assert machine is not None
    outputs = fanout_synth.template["Outputs"]
    assert outputs["ReconcileStateMachineArn"]["Value"] == _ref(
        fanout_synth.logical_id(machine.state_machine)
    )
    assert outputs["ReconcileFunctionName"]["Value"] == _ref(
        fanout_synth.logical_id(fanout_synth.pipeline.reconcile.function)
    )
    assert "DriftAlarmName" in outputs


@pytest.mark.contract("C12")
@pytest.mark.parametrize("handler", [RECONCILE_HANDLER, FANOUT_HANDLER])
def test_handlers_exist_in_the_function_package(handler: str) -> None:
    import importlib

    module, name = handler.rsplit(".", 1)
    assert callable(getattr(importlib.import_module(module), name))
