"""Exact, security-relevant properties of the synthesized default stack."""

from __future__ import annotations

import json
from typing import Any

import pytest

from s3ingest.settings import LOG_RETENTION_DAYS, Settings, ingest_event_pattern
from s3ingest.version import UNKNOWN, version
from s3ingest_cdk.constructs.python_function import RETENTION_DAYS
from s3ingest_cdk.stack import VERSION_TAG
from s3ingest_cdk.synth import Synth

from .conftest import VARIANTS
from .functions import common_environment, scope_environment, tracing_config, xray_grants


def _arn(logical_id: str) -> dict[str, Any]:
    return {"Fn::GetAtt": [logical_id, "Arn"]}


def _ref(logical_id: str) -> dict[str, Any]:
    return {"Ref": logical_id}


def _resource(synth: Synth, construct: Any) -> tuple[str, dict[str, Any]]:
    logical_id = synth.logical_id(construct)
    return logical_id, synth.template["Resources"][logical_id]


def _ingest_function(synth: Synth) -> tuple[str, dict[str, Any]]:
    return _resource(synth, synth.pipeline.ingest.function)


def _ingest_rule(synth: Synth) -> tuple[str, dict[str, Any]]:
    return _resource(synth, synth.pipeline.routing.rule)


def _bucket_id(synth: Synth) -> str:
    return synth.logical_id(synth.pipeline.landing.bucket)


def _queue_ids(synth: Synth) -> tuple[str, str, str]:
    return (
        synth.logical_id(synth.pipeline.ingest_queue.queue),
        synth.logical_id(synth.pipeline.ingest_queue.dead_letter_queue),
        synth.logical_id(synth.pipeline.routing.target_dead_letter_queue),
    )


# --- SQS -----------------------------------------------------------------------------------------


@pytest.mark.contract("C9")
def test_ingest_queue_redrives_to_its_dead_letter_queue(synth: Synth) -> None:
    # GIVEN the default settings
    queue_id, dlq_id, _ = _queue_ids(synth)
    # THEN the ingest queue moves a message to its DLQ after maxReceiveCount receives
    queue = synth.template["Resources"][queue_id]["Properties"]
    assert queue["RedrivePolicy"] == {
        "deadLetterTargetArn": _arn(dlq_id),
        "maxReceiveCount": Settings().max_receive_count,
    }
    assert queue["MessageRetentionPeriod"] == Settings().queue_retention_days * 86_400
    dlq = synth.template["Resources"][dlq_id]["Properties"]
    assert "RedrivePolicy" not in dlq
    assert dlq["MessageRetentionPeriod"] == Settings().dlq_retention_days * 86_400


def test_every_queue_uses_sqs_managed_encryption(synth: Synth) -> None:
    queues = synth.resources("AWS::SQS::Queue")
    assert set(queues) == set(_queue_ids(synth))
    for logical_id, queue in queues.items():
        props = queue["Properties"]
        assert props.get("SqsManagedSseEnabled") is True, logical_id
        assert "KmsMasterKeyId" not in props, logical_id


def test_every_queue_policy_denies_insecure_transport(synth: Synth) -> None:
    # GIVEN each queue's policy
    covered = set()
    for policy in synth.resources("AWS::SQS::QueuePolicy").values():
        props = policy["Properties"]
        (queue_ref,) = props["Queues"]
        queue_id = queue_ref["Ref"]
        # THEN it denies every SQS action on that queue for requests without TLS
        assert {
            "Action": "sqs:*",
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            "Effect": "Deny",
            "Principal": {"AWS": "*"},
            "Resource": _arn(queue_id),
        } in props["PolicyDocument"]["Statement"]
        covered.add(queue_id)
    assert covered == set(_queue_ids(synth))


def test_queue_visibility_timeout_is_six_function_timeouts(synth: Synth) -> None:
    queue_id, _, _ = _queue_ids(synth)
    _, function = _ingest_function(synth)
    visibility = synth.template["Resources"][queue_id]["Properties"]["VisibilityTimeout"]
    assert visibility >= 6 * function["Properties"]["Timeout"]
    assert visibility == Settings().queue_visibility_timeout_seconds


# --- EventBridge ---------------------------------------------------------------------------------


def test_rule_matches_exactly_the_settings_pattern_and_targets_the_queue(synth: Synth) -> None:
    queue_id, _, target_dlq_id = _queue_ids(synth)
    _, rule = _ingest_rule(synth)
    props = rule["Properties"]
    assert props["EventPattern"] == ingest_event_pattern(
        [{"name": _ref(_bucket_id(synth)), "account": {"Ref": "AWS::AccountId"}}]
    )
    assert props.get("EventBusName", "default") == "default"
    assert props["State"] == "ENABLED"
    (target,) = props["Targets"]
    assert {key: value for key, value in target.items() if key != "Id"} == {
        "Arn": _arn(queue_id),
        "DeadLetterConfig": {"Arn": _arn(target_dlq_id)},
        "RetryPolicy": {"MaximumEventAgeInSeconds": 86_400, "MaximumRetryAttempts": 185},
    }


def test_rule_may_send_to_the_queue_and_its_dead_letter_queue(synth: Synth) -> None:
    rule_id, _ = _ingest_rule(synth)
    queue_id, _, target_dlq_id = _queue_ids(synth)
    allowed: dict[str, list[Any]] = {}
    for policy in synth.resources("AWS::SQS::QueuePolicy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if statement["Effect"] == "Allow":
                allowed.setdefault(statement["Resource"]["Fn::GetAtt"][0], []).append(statement)
    assert set(allowed) == {queue_id, target_dlq_id}
    for statements in allowed.values():
        (statement,) = statements
        assert statement["Principal"] == {"Service": "events.amazonaws.com"}
        assert "sqs:SendMessage" in statement["Action"]
        # the rule, in this account (confused deputy, issue 34)
        assert statement["Condition"] == {
            "ArnEquals": {"aws:SourceArn": _arn(rule_id)},
            "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}},
        }


@pytest.mark.contract("C14")
def test_archive_keeps_the_ingest_events_for_the_configured_retention(synth: Synth) -> None:
    _, archive = synth.one("AWS::Events::Archive")
    props = archive["Properties"]
    assert props["EventPattern"] == ingest_event_pattern(
        [{"name": _ref(_bucket_id(synth)), "account": {"Ref": "AWS::AccountId"}}]
    )
    assert props["RetentionDays"] == Settings().archive_retention_days
    assert props["SourceArn"] == {
        "Fn::Join": [
            "",
            [
                "arn:",
                _ref("AWS::Partition"),
                ":events:",
                _ref("AWS::Region"),
                ":",
                _ref("AWS::AccountId"),
                ":event-bus/default",
            ],
        ]
    }


# --- Lambda --------------------------------------------------------------------------------------


@pytest.mark.contract("C9")
def test_event_source_mapping_reports_partial_batch_failures(synth: Synth) -> None:
    queue_id, _, _ = _queue_ids(synth)
    function_id, _ = _ingest_function(synth)
    _, mapping = synth.one("AWS::Lambda::EventSourceMapping")
    settings = Settings()
    assert mapping["Properties"] == {
        "EventSourceArn": _arn(queue_id),
        "FunctionName": _ref(function_id),
        "FunctionResponseTypes": ["ReportBatchItemFailures"],
        "BatchSize": settings.batch_size,
        "MaximumBatchingWindowInSeconds": settings.max_batching_window_seconds,
        "ScalingConfig": {"MaximumConcurrency": settings.max_concurrency},
        **({"Tags": mapping["Properties"]["Tags"]} if "Tags" in mapping["Properties"] else {}),
    }


def test_function_runtime_tracing_logging_and_environment(synth: Synth) -> None:
    settings = Settings()
    table_id = synth.logical_id(synth.pipeline.ledger.table)
    _, dlq_id, _ = _queue_ids(synth)
    log_group_id, log_group = _resource(synth, synth.pipeline.ingest.log_group)
    _, function = _ingest_function(synth)
    props = function["Properties"]
    assert props["Architectures"] == ["arm64"]
    assert props["Runtime"] == "python3.13"
    assert props["Handler"] == "s3ingest_fn.handlers.ingest.handler"
    assert props.get("TracingConfig") == tracing_config(synth)
    assert props["LoggingConfig"] == {"LogFormat": "JSON", "LogGroup": _ref(log_group_id)}
    assert props["Timeout"] == settings.function_timeout_seconds
    assert props["MemorySize"] == settings.function_memory_mb
    assert "ReservedConcurrentExecutions" not in props
    assert props["Environment"]["Variables"] == {
        "LEDGER_TABLE_NAME": _ref(table_id),
        "DEAD_LETTER_QUEUE_URL": _ref(dlq_id),
        "TOMBSTONE_TTL_SECONDS": str(settings.tombstone_ttl_seconds),
        "RECORD_CONCURRENCY": str(settings.record_concurrency),
        "BUCKET_NAME": _ref(_bucket_id(synth)),
        **scope_environment(_ref(_bucket_id(synth))),
        **common_environment(synth, "s3ingest"),
    }
    assert log_group["Properties"]["RetentionInDays"] == settings.log_retention_days
    assert log_group["DeletionPolicy"] == "Retain"
    # Created after its policy; the role itself is ordered by the Role property's GetAtt.
    role_id = synth.logical_id(synth.pipeline.ingest.role)
    (policy_id,) = [
        logical_id
        for logical_id, policy in synth.resources("AWS::IAM::Policy").items()
        if policy["Properties"]["Roles"] == [_ref(role_id)]
    ]
    assert function["DependsOn"] == [policy_id]
    assert log_group["DeletionPolicy"] == "Retain"


def test_every_allowed_log_retention_has_a_cdk_value() -> None:
    assert set(RETENTION_DAYS) == set(LOG_RETENTION_DAYS)


# --- DynamoDB ------------------------------------------------------------------------------------


@pytest.mark.contract("C6")
def test_ledger_table(synth: Synth) -> None:
    _, table = synth.one("AWS::DynamoDB::Table")
    props = table["Properties"]
    assert props["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"}]
    assert props["AttributeDefinitions"] == [{"AttributeName": "pk", "AttributeType": "S"}]
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert props["DeletionProtectionEnabled"] is True
    assert table["DeletionPolicy"] == "Retain"
    assert table["UpdateReplacePolicy"] == "Retain"


# --- S3 ------------------------------------------------------------------------------------------


def test_landing_bucket_versioning_eventbridge_logging_and_inventory(synth: Synth) -> None:
    landing = synth.pipeline.landing
    assert landing.access_logs_bucket is not None and landing.inventory_bucket is not None
    logs_id = synth.logical_id(landing.access_logs_bucket)
    inventory_id = synth.logical_id(landing.inventory_bucket)
    bucket = synth.template["Resources"][_bucket_id(synth)]
    props = bucket["Properties"]
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    assert props["NotificationConfiguration"] == {
        "EventBridgeConfiguration": {"EventBridgeEnabled": True}
    }
    assert props["LoggingConfiguration"] == {
        "DestinationBucketName": _ref(logs_id),
        "LogFilePrefix": "landing/",
    }
    assert props["InventoryConfigurations"] == [
        {
            "Id": "s3ingest-daily",
            "Enabled": True,
            "ScheduleFrequency": "Daily",
            "IncludedObjectVersions": "All",
            "OptionalFields": [
                "Size",
                "LastModifiedDate",
                "ETag",
                "IsMultipartUploaded",
                "StorageClass",
            ],
            "Destination": {
                "BucketArn": _arn(inventory_id),
                "BucketAccountId": _ref("AWS::AccountId"),
                "Format": "CSV",
                "Prefix": "inventory",
            },
        }
    ]
    assert bucket["DeletionPolicy"] == "Retain"


def test_every_bucket_is_encrypted_private_and_retained(synth: Synth) -> None:
    buckets = synth.resources("AWS::S3::Bucket")
    assert len(buckets) == 3  # landing, access logs, inventory
    for logical_id, bucket in buckets.items():
        props = bucket["Properties"]
        assert props["BucketEncryption"] == {
            "ServerSideEncryptionConfiguration": [
                {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
            ]
        }, logical_id
        assert props["PublicAccessBlockConfiguration"] == {
            "BlockPublicAcls": True,
            "BlockPublicPolicy": True,
            "IgnorePublicAcls": True,
            "RestrictPublicBuckets": True,
        }, logical_id
        assert props["OwnershipControls"] == {
            "Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]
        }, logical_id
        assert bucket["DeletionPolicy"] == "Retain", logical_id


def test_every_bucket_policy_denies_insecure_transport(synth: Synth) -> None:
    covered = set()
    for policy in synth.resources("AWS::S3::BucketPolicy").values():
        props = policy["Properties"]
        bucket_id = props["Bucket"]["Ref"]
        resources = [_arn(bucket_id), {"Fn::Join": ["", [_arn(bucket_id), "/*"]]}]
        statements = props["PolicyDocument"]["Statement"]
        assert {
            "Action": "s3:*",
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            "Effect": "Deny",
            "Principal": {"AWS": "*"},
            "Resource": resources,
        } in statements
        assert {
            "Action": "s3:*",
            "Condition": {"NumericLessThan": {"s3:TlsVersion": 1.2}},
            "Effect": "Deny",
            "Principal": {"AWS": "*"},
            "Resource": resources,
        } in statements
        covered.add(bucket_id)
    assert covered == set(synth.resources("AWS::S3::Bucket"))


def test_inventory_bucket_admits_only_this_buckets_inventory(synth: Synth) -> None:
    inventory_bucket = synth.pipeline.landing.inventory_bucket
    assert inventory_bucket is not None
    inventory_id = synth.logical_id(inventory_bucket)
    (policy,) = [
        p
        for p in synth.resources("AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == _ref(inventory_id)
    ]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    allows = [statement for statement in statements if statement["Effect"] == "Allow"]
    assert allows == [
        {
            "Sid": "AllowS3InventoryDelivery",
            "Effect": "Allow",
            "Principal": {"Service": "s3.amazonaws.com"},
            "Action": "s3:PutObject",
            "Resource": {"Fn::Join": ["", [_arn(inventory_id), "/inventory/*"]]},
            "Condition": {
                "ArnLike": {"aws:SourceArn": _arn(_bucket_id(synth))},
                "StringEquals": {
                    "aws:SourceAccount": _ref("AWS::AccountId"),
                    "s3:x-amz-acl": "bucket-owner-full-control",
                },
            },
        }
    ]


# --- IAM -----------------------------------------------------------------------------------------


def test_function_role_is_least_privilege(synth: Synth) -> None:
    # GIVEN the function's role and the policies attached to it
    role_id = synth.logical_id(synth.pipeline.ingest.role)
    role = synth.template["Resources"][role_id]["Properties"]
    assert "ManagedPolicyArns" not in role
    assert role["AssumeRolePolicyDocument"]["Statement"] == [
        {
            "Action": "sts:AssumeRole",
            "Effect": "Allow",
            "Principal": {"Service": "lambda.amazonaws.com"},
        }
    ]
    granted: dict[str, list[Any]] = {}
    policies = [
        policy
        for policy in synth.resources("AWS::IAM::Policy").values()
        if _ref(role_id) in policy["Properties"]["Roles"]
    ]
    assert policies
    for policy in policies:
        assert policy["Properties"]["Roles"] == [_ref(role_id)]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            assert statement["Effect"] == "Allow"
            actions = statement["Action"]
            for action in [actions] if isinstance(actions, str) else actions:
                granted.setdefault(action, []).append(statement["Resource"])
    # THEN it holds exactly these actions, each on exactly these resources
    bucket_id = _bucket_id(synth)
    queue_id, dlq_id, _ = _queue_ids(synth)
    log_group_id = synth.logical_id(synth.pipeline.ingest.log_group)
    table_id = synth.logical_id(synth.pipeline.ledger.table)
    objects = {"Fn::Join": ["", [_arn(bucket_id), "/*"]]}
    assert granted == {
        **xray_grants(synth),
        "logs:CreateLogStream": [_arn(log_group_id)],
        "logs:PutLogEvents": [_arn(log_group_id)],
        "dynamodb:GetItem": [_arn(table_id)],
        "dynamodb:PutItem": [_arn(table_id)],
        "dynamodb:UpdateItem": [_arn(table_id)],
        "s3:GetObject": [objects],
        "s3:GetObjectVersion": [objects],
        "s3:ListBucket": [_arn(bucket_id)],
        "sqs:SendMessage": [_arn(dlq_id)],
        "sqs:ReceiveMessage": [_arn(queue_id)],
        "sqs:DeleteMessage": [_arn(queue_id)],
        "sqs:ChangeMessageVisibility": [_arn(queue_id)],
        "sqs:GetQueueAttributes": [_arn(queue_id)],
        "sqs:GetQueueUrl": [_arn(queue_id)],
    }
    # AND, the role's one inline policy, nothing of a bucket of the landing bucket's name
    # another account owns (an explicit deny unless s3:ResourceAccount is the stack's account:
    # owners, not names)
    assert role["Policies"] == [
        {
            "PolicyName": "s3ingest-own-buckets-only",
            "PolicyDocument": {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Sid": "OwnBucketsOnly",
                        "Effect": "Deny",
                        "Action": "s3:*",
                        "Resource": [_arn(bucket_id), objects],
                        "Condition": {
                            "StringNotEquals": {"s3:ResourceAccount": {"Ref": "AWS::AccountId"}}
                        },
                    }
                ],
            },
        }
    ]


def test_no_managed_policies_no_custom_resources_eleven_functions(synth: Synth) -> None:
    for logical_id, resource in synth.template["Resources"].items():
        assert not resource["Type"].startswith("Custom::"), logical_id
        assert resource["Type"] != "AWS::IAM::ManagedPolicy", logical_id
        assert "ManagedPolicyArns" not in resource.get("Properties", {}), logical_id
    # The ingest, reconcile, backfill, backfill control and delivery check functions, and the
    # listing backfill's plan, shard and summarize, and the reprocess run's plan, segment and
    # summarize; only ingest reads the queue.
    synth.assertions.resource_count_is("AWS::Lambda::Function", 11)
    synth.assertions.resource_count_is("AWS::Lambda::EventSourceMapping", 1)


# --- Template-wide -------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_no_literal_partition_in_arns(variant: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(variant)
    text = json.dumps(synth.template)
    # the operator roles are the settings' own ARNs, written as given
    for arn in synth.settings.operator_role_arns:
        text = text.replace(arn, "")
    assert "arn:aws:" not in text


def test_outputs(synth: Synth) -> None:
    outputs = synth.template["Outputs"]
    required = {
        "BucketName",
        "QueueUrl",
        "DeadLetterQueueUrl",
        "LedgerTableName",
        "FunctionName",
        "ArchiveName",
        "RuleName",
    }
    assert required <= set(outputs)
    queue_id, dlq_id, _ = _queue_ids(synth)
    rule_id, _ = _ingest_rule(synth)
    archive_id, _ = synth.one("AWS::Events::Archive")
    function_id, _ = _ingest_function(synth)
    assert outputs["BucketName"]["Value"] == _ref(_bucket_id(synth))
    assert outputs["QueueUrl"]["Value"] == _ref(queue_id)
    assert outputs["DeadLetterQueueUrl"]["Value"] == _ref(dlq_id)
    assert outputs["LedgerTableName"]["Value"] == _ref(
        synth.logical_id(synth.pipeline.ledger.table)
    )
    assert outputs["FunctionName"]["Value"] == _ref(function_id)
    assert outputs["ArchiveName"]["Value"] == _ref(archive_id)
    assert outputs["RuleName"]["Value"] == _ref(rule_id)
    # the outputs the CLI reads for several buckets and the listing backfill (issue 15)
    assert outputs["BucketNames"]["Value"] == _ref(_bucket_id(synth))
    assert outputs["InventoryBucketName"]["Value"] == _ref(
        synth.logical_id(synth.pipeline.landings.shared.inventory)
    )
    assert outputs["ListingBackfillStateMachineArn"]["Value"] == _ref(
        synth.logical_id(synth.pipeline.listing.state_machine.state_machine)
    )


@pytest.mark.parametrize("variant", VARIANTS)
def test_no_hard_coded_physical_names(variant: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(variant)
    name_properties = {
        "AWS::S3::Bucket": "BucketName",
        "AWS::SQS::Queue": "QueueName",
        "AWS::DynamoDB::Table": "TableName",
        "AWS::Lambda::Function": "FunctionName",
        "AWS::IAM::Role": "RoleName",
        "AWS::Logs::LogGroup": "LogGroupName",
        "AWS::Events::Rule": "Name",
        "AWS::Events::Archive": "ArchiveName",
        "AWS::StepFunctions::StateMachine": "StateMachineName",
    }
    for logical_id, resource in synth.template["Resources"].items():
        name_property = name_properties.get(resource["Type"])
        if name_property:
            assert name_property not in resource["Properties"], logical_id
    # Alarms are the exception: named s3ingest-<stage>-<what> so an operator paged by one knows
    # the stage and the signal (test_infra_alarms.py; stage-scoped, test_infra_stages.py).


@pytest.mark.parametrize("variant", VARIANTS)
def test_stack_records_the_version_as_a_stack_tag_and_an_output(
    variant: str, request: pytest.FixtureRequest
) -> None:
    synth: Synth = request.getfixturevalue(variant)
    assert synth.template["Outputs"]["Version"] == {"Value": version()}
    manifest = json.loads((synth.outdir / "manifest.json").read_text())
    (artifact,) = [
        a for a in manifest["artifacts"].values() if a["type"] == "aws:cloudformation:stack"
    ]
    assert artifact["properties"]["tags"][VERSION_TAG] == version() != UNKNOWN
    # a stack tag, not a resource tag: a release changes no resource
    for logical_id, resource in synth.template["Resources"].items():
        tags = resource.get("Properties", {}).get("Tags", [])
        keys = [t["Key"] for t in tags] if isinstance(tags, list) else list(tags)
        assert VERSION_TAG not in keys, logical_id


@pytest.mark.parametrize("variant", VARIANTS)
def test_tracing_is_a_setting(variant: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(variant)
    functions = {
        logical_id: function["Properties"]
        for logical_id, function in synth.resources("AWS::Lambda::Function").items()
        if function["Properties"].get("Handler", "").startswith("s3ingest_fn.")
    }
    assert functions
    xray_roles = {
        json.dumps(role, sort_keys=True)
        for policy in synth.resources("AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if any(
            str(action).startswith("xray:")
            for action in (
                statement["Action"]
                if isinstance(statement["Action"], list)
                else [statement["Action"]]
            )
        )
        for role in policy["Properties"]["Roles"]
    }
    for logical_id, props in functions.items():
        variables = props["Environment"]["Variables"]
        role = json.dumps({"Ref": props["Role"]["Fn::GetAtt"][0]}, sort_keys=True)
        if synth.settings.tracing:
            # On: active tracing (the Powertools tracer in the ingest function), as before
            assert props["TracingConfig"] == {"Mode": "Active"}, logical_id
            assert "POWERTOOLS_TRACE_DISABLED" not in variables, logical_id
            assert role in xray_roles, logical_id
        else:
            # Off (the default): no tracing configuration, the tracer disabled, no X-Ray grant
            assert "TracingConfig" not in props, logical_id
            assert variables["POWERTOOLS_TRACE_DISABLED"] == "true", logical_id
            assert role not in xray_roles, logical_id
