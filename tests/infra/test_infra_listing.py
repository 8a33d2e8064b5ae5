"""The listing backfill in the stack (issue 15): its state machine's states and payloads, its
step functions' handlers, environment and grants."""

from __future__ import annotations

import json
from typing import Any

import pytest

from s3ingest.function_roles import LISTING_PLAN, LISTING_SHARD, LISTING_SUMMARIZE
from s3ingest.settings import Settings
from s3ingest_cdk.synth import Synth

from .asl import LAMBDA_RETRY, THROTTLE_RETRY, definition, reachable
from .functions import common_environment, scope_environment, xray_grants

PLAN_HANDLER = LISTING_PLAN.handler
LIST_SHARD_HANDLER = LISTING_SHARD.handler
SUMMARIZE_HANDLER = LISTING_SUMMARIZE.handler

#: A handler's own transient failure (throttling, a timed-out invocation): the step runs again
#: from the shard's checkpoint or the stored plan.
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


def _states(synth: Synth) -> dict[str, dict[str, Any]]:
    return dict(reachable(definition(synth, synth.pipeline.listing.state_machine.state_machine)))


def test_plan_list_every_shard_in_a_loop_then_summarize(synth: Synth) -> None:
    listing = synth.pipeline.listing
    asl = definition(synth, listing.state_machine.state_machine)
    states = _states(synth)
    plan_arn = f"<{synth.logical_id(listing.plan.function)}.Arn>"
    shard_arn = f"<{synth.logical_id(listing.shard.function)}.Arn>"
    summarize_arn = f"<{synth.logical_id(listing.summarize.function)}.Arn>"
    # Plan: {"bucket", "run"} from the execution input; its result kept at $.plan
    assert asl["StartAt"] == "Plan"
    plan = states["Plan"]
    assert plan["Parameters"] == {
        "FunctionName": plan_arn,
        "Payload": {"bucket.$": "$.bucket", "run.$": "$.run"},
    }
    assert plan["ResultSelector"] == {"plan.$": "$.Payload"}
    assert plan["Next"] == "ListShards"
    # ListShards: a Distributed Map over the plan's shards, at listingConcurrency, results
    # discarded (the checkpoints hold the counts)
    shards = states["ListShards"]
    assert shards["Type"] == "Map"
    assert shards["ItemsPath"] == "$.plan.shards"
    assert shards["ItemSelector"] == {"run.$": "$.plan.run", "shard.$": "$$.Map.Item.Value"}
    assert shards["MaxConcurrency"] == Settings().listing_concurrency == 32
    assert shards["Label"] == "ListingShards"
    assert shards["ResultPath"] is None
    processor = shards["ItemProcessor"]
    assert processor["ProcessorConfig"] == {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"}
    assert processor["StartAt"] == "ListShard"
    # each child: ListShard {"run", "shard"} until it answers done
    list_shard = states["ListShard"]
    assert list_shard["Parameters"] == {
        "FunctionName": shard_arn,
        "Payload": {"run.$": "$.run", "shard.$": "$.shard"},
    }
    assert list_shard["OutputPath"] == "$.Payload"
    assert list_shard["Retry"] == [LAMBDA_RETRY, THROTTLE_RETRY, HANDLER_RETRY]
    assert list_shard["Next"] == "ShardDone"
    done = states["ShardDone"]
    assert done["Choices"] == [{"Variable": "$.done", "BooleanEquals": True, "Next": "ShardListed"}]
    assert done["Default"] == "ListShard"
    assert states["ShardListed"]["Type"] == "Succeed"
    # Summarize: {"bucket", "run"} of the plan; its result is the execution's output
    assert shards["Next"] == "Summarize"
    summarize = states["Summarize"]
    assert summarize["Parameters"] == {
        "FunctionName": summarize_arn,
        "Payload": {"bucket.$": "$.plan.bucket", "run.$": "$.plan.run"},
    }
    assert summarize["OutputPath"] == "$.Payload"
    assert summarize["End"] is True
    assert states["Plan"]["Retry"] == [LAMBDA_RETRY, THROTTLE_RETRY, HANDLER_RETRY]
    assert states["Summarize"]["Retry"] == [LAMBDA_RETRY, THROTTLE_RETRY]


def test_machine_is_logged_traced_and_bounded(synth: Synth) -> None:
    machine = synth.pipeline.listing.state_machine
    props = synth.template["Resources"][synth.logical_id(machine.state_machine)]["Properties"]
    assert props["StateMachineType"] == "STANDARD"
    assert props["TracingConfiguration"] == {"Enabled": True}
    assert props["LoggingConfiguration"]["Level"] == "ALL"
    assert props["LoggingConfiguration"]["IncludeExecutionData"] is True
    asl = definition(synth, machine.state_machine)
    assert asl["TimeoutSeconds"] == 24 * 3600
    log_group = synth.template["Resources"][synth.logical_id(machine.log_group)]
    assert log_group["Properties"]["KmsKeyId"] == _arn(synth.logical_id(machine.log_key))


@pytest.mark.parametrize(
    ("step", "handler"),
    [("plan", PLAN_HANDLER), ("shard", LIST_SHARD_HANDLER), ("summarize", SUMMARIZE_HANDLER)],
)
def test_step_functions_handler_and_environment(synth: Synth, step: str, handler: str) -> None:
    pipeline = synth.pipeline
    owner = getattr(pipeline.listing, step)
    bucket = _ref(synth.logical_id(pipeline.landing.bucket))
    inventory = _ref(synth.logical_id(pipeline.landings.shared.inventory))
    props = synth.template["Resources"][synth.logical_id(owner.function)]["Properties"]
    assert props["Handler"] == handler
    settings = Settings()
    # Every step's handler builds the listing backfill service over the ingest service's
    # environment (wiring.function_listing_backfill); only the shard step is granted the ledger
    # (test_step_grants_are_least_privilege).
    expected: dict[str, Any] = {
        "BUCKET_NAME": bucket,
        "CHECKPOINT_BUCKET_NAME": inventory,
        **scope_environment(bucket),
        **common_environment(synth, "s3ingest-backfill-listing"),
        "LEDGER_TABLE_NAME": _ref(synth.logical_id(pipeline.ledger.table)),
        "DEAD_LETTER_QUEUE_URL": _ref(synth.logical_id(pipeline.ingest_queue.dead_letter_queue)),
        "TOMBSTONE_TTL_SECONDS": str(settings.tombstone_ttl_seconds),
        "RECORD_CONCURRENCY": str(settings.record_concurrency),
    }
    if step == "shard":
        assert props["Timeout"] == settings.reconcile_timeout_seconds
    else:
        assert props["Timeout"] == 300
    assert props["Environment"]["Variables"] == expected


def _granted(synth: Synth, role: Any) -> dict[str, list[str]]:
    role_ref = _ref(synth.logical_id(role))
    granted: dict[str, list[str]] = {}
    for policy in synth.resources("AWS::IAM::Policy").values():
        if role_ref not in policy["Properties"]["Roles"]:
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            assert statement["Effect"] == "Allow" and "Condition" not in statement
            actions = statement["Action"]
            resources = statement["Resource"]
            for action in [actions] if isinstance(actions, str) else actions:
                for resource in resources if isinstance(resources, list) else [resources]:
                    granted.setdefault(action, []).append(json.dumps(resource, sort_keys=True))
    return {action: sorted(resources) for action, resources in granted.items()}


def test_step_grants_are_least_privilege(synth: Synth) -> None:
    pipeline = synth.pipeline
    listing = pipeline.listing
    bucket = _arn(synth.logical_id(pipeline.landing.bucket))
    inventory = _arn(synth.logical_id(pipeline.landings.shared.inventory))
    table = _arn(synth.logical_id(pipeline.ledger.table))

    def dumps(*values: Any) -> list[str]:
        return sorted(json.dumps(v, sort_keys=True) for v in values)

    objects = {"Fn::Join": ["", [bucket, "/*"]]}
    checkpoints = {"Fn::Join": ["", [inventory, "/backfill-listing/*"]]}

    def logs(owner: Any) -> dict[str, list[str]]:
        log_group = _arn(synth.logical_id(owner.log_group))
        return {
            **{k: dumps(*v) for k, v in xray_grants(synth).items()},
            "logs:CreateLogStream": dumps(log_group),
            "logs:PutLogEvents": dumps(log_group),
        }

    listing_grants = {
        "s3:ListBucketVersions": dumps(bucket),
        "s3:GetBucketVersioning": dumps(bucket),
    }
    assert _granted(synth, listing.plan.role) == {
        **logs(listing.plan),
        **listing_grants,
        "s3:ListBucket": dumps(bucket, inventory),
        "s3:GetObject": dumps(checkpoints),
        "s3:PutObject": dumps(checkpoints),  # the run's plan.json
    }
    assert _granted(synth, listing.shard.role) == {
        **logs(listing.shard),
        **listing_grants,
        # listing, and the ledger rules (C7: HEAD of a key whose row differs)
        "s3:ListBucket": dumps(bucket, inventory),
        "s3:GetObject": dumps(objects, checkpoints),
        "s3:GetObjectVersion": dumps(objects),
        "s3:PutObject": dumps(checkpoints),
        "dynamodb:GetItem": dumps(table),
        "dynamodb:PutItem": dumps(table),
        "dynamodb:UpdateItem": dumps(table),
    }
    assert _granted(synth, listing.summarize.role) == {
        **logs(listing.summarize),
        "s3:ListBucket": dumps(inventory),
        "s3:GetObject": dumps(checkpoints),
    }
