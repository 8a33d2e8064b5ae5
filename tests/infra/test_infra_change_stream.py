"""The ordered change stream (CONTRACT C11, ``changeStream``): the ledger's DynamoDB stream, the
relay and its event source mapping, the change bus, its archive and the change-stream rule; and
none of it without ``changeStream``."""

from __future__ import annotations

import importlib
import json
from typing import Any

import pytest

from s3ingest.function_roles import CHANGE_RELAY
from s3ingest.settings import CHANGE_SOURCE, Settings
from s3ingest_cdk.features.change_stream import CHANGE_MAX_RECORD_AGE, CHANGE_RETRY_ATTEMPTS
from s3ingest_cdk.synth import Synth
from s3ingest_fn.adapters.dynamo_ledger import EFFECT_STREAM_FILTER, STREAM_FILTER

from .functions import common_environment, tracing_config, xray_grants
from .iam import expected as _grants
from .iam import role_allowed as _granted

CHANGE_STREAM_HANDLER = CHANGE_RELAY.handler

FOURTEEN_DAYS = 14 * 86_400
#: How long DynamoDB Streams keeps a record, seconds
#: (https://docs.aws.amazon.com/lambda/latest/dg/services-ddb-params.html).
STREAM_RETENTION = 86_400


def _arn(logical_id: str) -> dict[str, Any]:
    return {"Fn::GetAtt": [logical_id, "Arn"]}


def _ref(logical_id: str) -> dict[str, Any]:
    return {"Ref": logical_id}


def _props(synth: Synth, construct: Any) -> dict[str, Any]:
    properties: dict[str, Any] = synth.template["Resources"][synth.logical_id(construct)][
        "Properties"
    ]
    return properties


def _relay(synth: Synth) -> Any:
    relay = synth.pipeline.change_relay
    assert relay is not None
    return relay


def _bus(synth: Synth) -> Any:
    bus = synth.pipeline.change_bus
    assert bus is not None
    return bus


def _relay_mapping(synth: Synth) -> dict[str, Any]:
    function = _ref(synth.logical_id(_relay(synth).function))
    (mapping,) = [
        resource
        for resource in synth.resources("AWS::Lambda::EventSourceMapping").values()
        if resource["Properties"]["FunctionName"] == function
    ]
    return mapping


# --- The ledger's stream -------------------------------------------------------------------------


@pytest.mark.contract("C11")
def test_ledger_table_streams_new_images(fanout_synth: Synth) -> None:
    # GIVEN changeStream
    props = _props(fanout_synth, fanout_synth.pipeline.ledger.table)
    # THEN the ledger is the outbox: its stream carries each row as written
    assert props["StreamSpecification"] == {"StreamViewType": "NEW_IMAGE"}


# --- The relay and its event source mapping ------------------------------------------------------


@pytest.mark.contract("C11")
def test_relay_mapping_is_ordered_filtered_and_bounded(fanout_synth: Synth) -> None:
    synth = fanout_synth
    relay = _relay(synth)
    mapping = _relay_mapping(synth)
    props = {key: value for key, value in mapping["Properties"].items() if key != "Tags"}
    filters = props.pop("FilterCriteria")
    # THEN the mapping reads the ledger's stream from its start, one batch per shard at a time,
    # halves a failing batch, resumes from the reported record, retries a bounded number of
    # times for a bounded record age, well inside the stream's retention, and then parks the
    # batch's position in the relay's own dead-letter queue: nothing expires unseen ...
    assert 0 < CHANGE_MAX_RECORD_AGE.to_seconds() <= STREAM_RETENTION // 2
    assert 0 < CHANGE_RETRY_ATTEMPTS <= 10_000
    assert props == {
        "EventSourceArn": {
            "Fn::GetAtt": [synth.logical_id(synth.pipeline.ledger.table), "StreamArn"]
        },
        "FunctionName": _ref(synth.logical_id(relay.function)),
        "StartingPosition": "TRIM_HORIZON",
        "BatchSize": 100,
        "ParallelizationFactor": 1,
        "BisectBatchOnFunctionError": True,
        "FunctionResponseTypes": ["ReportBatchItemFailures"],
        "MaximumRetryAttempts": 1000,
        "MaximumRecordAgeInSeconds": 6 * 3600,
        "DestinationConfig": {
            "OnFailure": {"Destination": _arn(synth.logical_id(relay.dead_letter_queue))}
        },
    }
    # ... and passes applied changes and reviews: exactly the relay's own filter; with the
    # history table (this variant has it) also effects committed done
    assert synth.settings.history_table
    changes, effects = filters["Filters"]
    assert json.loads(changes["Pattern"]) == STREAM_FILTER
    assert json.loads(effects["Pattern"]) == EFFECT_STREAM_FILTER


@pytest.mark.contract("C11")
def test_without_the_history_table_the_relay_gets_changes_and_reviews_only(
    remote_kms_synth: Synth,
) -> None:
    # GIVEN changeStream without historyTable
    synth = remote_kms_synth
    assert synth.settings.change_stream and not synth.settings.history_table
    # THEN the mapping has the one filter it had, and the relay publishes no effect
    (only,) = _relay_mapping(synth)["Properties"]["FilterCriteria"]["Filters"]
    assert json.loads(only["Pattern"]) == STREAM_FILTER
    env = _props(synth, _relay(synth).function)["Environment"]["Variables"]
    assert "EFFECT_EVENTS" not in env


def test_relay_function_handler_and_environment(fanout_synth: Synth) -> None:
    synth = fanout_synth
    relay = _relay(synth)
    props = _props(synth, relay.function)
    assert props["Handler"] == CHANGE_STREAM_HANDLER
    assert props["Runtime"] == "python3.13"
    assert props["Architectures"] == ["arm64"]
    assert props.get("TracingConfig") == tracing_config(fanout_synth)
    assert props["LoggingConfig"] == {
        "LogFormat": "JSON",
        "LogGroup": _ref(synth.logical_id(relay.log_group)),
    }
    assert props["Environment"]["Variables"] == {
        "CHANGE_BUS_NAME": _ref(synth.logical_id(_bus(synth).bus)),
        # the relay's own DLQ: changes it can never publish, with their reason
        "DEAD_LETTER_QUEUE_URL": _ref(synth.logical_id(relay.dead_letter_queue)),
        # historyTable: effects done too, for the history table
        "EFFECT_EVENTS": "true",
        **common_environment(synth, "s3ingest"),
    }
    assert "ManagedPolicyArns" not in _props(synth, relay.role)


@pytest.mark.contract("C11")
def test_relay_handler_exists_in_the_function_package() -> None:
    module_name, _, attribute = CHANGE_STREAM_HANDLER.rpartition(".")
    assert callable(getattr(importlib.import_module(module_name), attribute))


def test_relay_role_is_least_privilege(fanout_synth: Synth) -> None:
    synth = fanout_synth
    relay = _relay(synth)
    table = synth.logical_id(synth.pipeline.ledger.table)
    bus = synth.logical_id(_bus(synth).bus)
    dlq = synth.logical_id(relay.dead_letter_queue)
    log_group = synth.logical_id(relay.log_group)
    stream = {"Fn::GetAtt": [table, "StreamArn"]}
    # THEN PutEvents on the change bus only; the ledger's stream, read; the DLQ, written
    assert _granted(synth, relay.role) == _grants(
        {
            **xray_grants(fanout_synth),
            "logs:CreateLogStream": [_arn(log_group)],
            "logs:PutLogEvents": [_arn(log_group)],
            "events:PutEvents": [_arn(bus)],
            "dynamodb:ListStreams": ["*"],
            "dynamodb:DescribeStream": [stream],
            "dynamodb:GetRecords": [stream],
            "dynamodb:GetShardIterator": [stream],
            "sqs:SendMessage": [_arn(dlq)],
            "sqs:GetQueueAttributes": [_arn(dlq)],
            "sqs:GetQueueUrl": [_arn(dlq)],
        }
    )


def test_only_the_relay_may_put_events(fanout_synth: Synth) -> None:
    relay_role = _ref(fanout_synth.logical_id(_relay(fanout_synth).role))
    putters = []
    for policy in fanout_synth.resources("AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"]
            if "events:PutEvents" in ([actions] if isinstance(actions, str) else actions):
                putters.extend(policy["Properties"]["Roles"])
    # ... and the scheduled reconcile function's, which publishes attestations (issue 38)
    reconcile_role = _ref(fanout_synth.logical_id(fanout_synth.pipeline.reconcile.role))
    # ... and the fan-out's, whose summarize step attests (issue 38)
    assert fanout_synth.pipeline.reconcile_fan_out is not None
    fan_out_role = _ref(fanout_synth.logical_id(fanout_synth.pipeline.reconcile_fan_out.role))
    assert sorted(putters, key=str) == sorted([relay_role, reconcile_role, fan_out_role], key=str)


def test_the_reconcile_role_may_put_attestations_only(fanout_synth: Synth) -> None:
    """Input from inside the account is not trusted: the reconcile role publishes on the
    change bus events of source s3ingest and detail-type Attestation Made, never a change
    subscribers would act on (events:source, events:detail-type)."""
    from .iam import role_allowed

    assert fanout_synth.pipeline.change_bus is not None
    bus = fanout_synth.logical_id(fanout_synth.pipeline.change_bus.bus)
    granted = role_allowed(fanout_synth, fanout_synth.pipeline.reconcile.role)
    condition = {
        "StringEquals": {"events:detail-type": "Attestation Made", "events:source": "s3ingest"}
    }
    assert granted["events:PutEvents"] == [
        json.dumps({"Condition": condition, "Resource": _arn(bus)}, sort_keys=True)
    ]


def test_relay_dead_letter_queue_is_encrypted_tls_only_and_kept_14_days(
    fanout_synth: Synth,
) -> None:
    synth = fanout_synth
    dlq = synth.logical_id(_relay(synth).dead_letter_queue)
    props = synth.template["Resources"][dlq]["Properties"]
    assert props["SqsManagedSseEnabled"] is True
    assert "KmsMasterKeyId" not in props
    assert props["MessageRetentionPeriod"] == FOURTEEN_DAYS
    assert "RedrivePolicy" not in props
    (policy,) = [
        p
        for p in synth.resources("AWS::SQS::QueuePolicy").values()
        if p["Properties"]["Queues"] == [_ref(dlq)]
    ]
    assert policy["Properties"]["PolicyDocument"]["Statement"] == [
        {
            "Action": "sqs:*",
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            "Effect": "Deny",
            "Principal": {"AWS": "*"},
            "Resource": _arn(dlq),
        }
    ]


# --- The change bus, its archive and the change-stream rule --------------------------------------


def test_bus_is_the_stages_own(fanout_synth: Synth) -> None:
    props = _props(fanout_synth, _bus(fanout_synth).bus)
    assert props["Name"] == "s3ingest-changes-fanout"
    assert "Policy" not in props  # the bus's policy is its own resource (below)


def _matches(pattern: str, action: str) -> bool:
    return pattern in ("*", action) or (pattern.endswith("*") and action.startswith(pattern[:-1]))


def _applies(statement: dict[str, Any], caller: Any, is_service: bool) -> bool:
    """Whether ``statement`` applies to ``events:PutEvents`` by ``caller`` (a principal ARN, as
    a literal or a template value) on the bus: actions, principal and every condition."""
    actions = statement["Action"]
    if not any(
        _matches(a, "events:PutEvents")
        for a in ([actions] if isinstance(actions, str) else actions)
    ):
        return False
    assert statement["Principal"] in ("*", {"AWS": "*"}), statement  # no other form here
    context = {"aws:principalarn": caller, "aws:principalisawsservice": str(is_service).lower()}
    for operator, tests in statement.get("Condition", {}).items():
        for key, wanted in tests.items():
            value = context[key.lower()]
            wanted = wanted if isinstance(wanted, list) else [wanted]
            if operator == "StringNotEquals":
                holds = value not in wanted
            elif operator in ("StringEquals", "Bool"):
                holds = value in wanted
            else:
                raise AssertionError(f"operator {operator} not understood by this test")
            if not holds:
                return False
    return True


@pytest.mark.contract("C11")
def test_the_change_bus_admits_only_the_relay(fanout_synth: Synth) -> None:
    synth = fanout_synth
    bus = _bus(synth)
    relay_role = _arn(synth.logical_id(_relay(synth).role))
    policies = [
        policy["Properties"]
        for policy in synth.resources("AWS::Events::EventBusPolicy").values()
        if policy["Properties"]["EventBusName"] == _ref(synth.logical_id(bus.bus))
    ]
    statements = [props["Statement"] for props in policies]
    for statement in statements:
        assert statement["Resource"] == _arn(synth.logical_id(bus.bus))
    # GIVEN every role of the stack, a role and a user of the account the stack does not know
    callers = [_arn(logical_id) for logical_id in synth.resources("AWS::IAM::Role")] + [
        "arn:aws:iam::123456789012:role/intruder",
        "arn:aws:iam::123456789012:user/admin",
    ]
    # THEN the bus's policy denies PutEvents to each of them but the relay's role ...
    admitted = [
        caller
        for caller in callers
        if not any(
            s["Effect"] == "Deny" and _applies(s, caller, is_service=False) for s in statements
        )
    ]
    # (and the scheduled reconcile function's role, which publishes attestations: issue 38)
    reconcile_role = _arn(synth.logical_id(synth.pipeline.reconcile.role))
    # (and the fan-out's, whose summarize step attests too)
    assert synth.pipeline.reconcile_fan_out is not None
    fan_out_role = _arn(synth.logical_id(synth.pipeline.reconcile_fan_out.role))
    assert sorted(admitted, key=str) == sorted([relay_role, reconcile_role, fan_out_role], key=str)
    # ... and grants nothing (the relay's own IAM policy allows it; no one else's does) ...
    assert all(s["Effect"] == "Deny" for s in statements)
    # ... and leaves AWS services acting for EventBridge (an archive's replay) alone
    assert not any(_applies(s, None, is_service=True) for s in statements)


def test_archive_keeps_every_change_for_the_archive_retention(fanout_synth: Synth) -> None:
    synth = fanout_synth
    bus = _bus(synth)
    props = _props(synth, bus.archive)
    assert props["SourceArn"] == _arn(synth.logical_id(bus.bus))
    assert props["EventPattern"] == {"source": [CHANGE_SOURCE]}
    assert props["RetentionDays"] == Settings().archive_retention_days
    assert "ArchiveName" not in props


def test_change_stream_rule_sends_every_change_to_the_audit_log(fanout_synth: Synth) -> None:
    synth = fanout_synth
    bus = _bus(synth)
    rule_id = synth.logical_id(bus.rule)
    rule = synth.template["Resources"][rule_id]
    log_group_id = synth.logical_id(bus.audit_log_group)
    policy_id = synth.logical_id(bus.audit_log_policy)
    props = {key: value for key, value in rule["Properties"].items() if key != "Tags"}
    # THEN the rule on the change bus matches every change and targets the log group by ARN ...
    assert props == {
        "Description": "s3ingest: the change-stream rule: every change to the change audit log",
        "EventBusName": _ref(synth.logical_id(bus.bus)),
        "EventPattern": {"source": [CHANGE_SOURCE]},
        "State": "ENABLED",
        "Targets": [
            {
                "Arn": {
                    "Fn::Join": [
                        "",
                        [
                            "arn:",
                            _ref("AWS::Partition"),
                            ":logs:",
                            _ref("AWS::Region"),
                            ":",
                            _ref("AWS::AccountId"),
                            ":log-group:",
                            _ref(log_group_id),
                        ],
                    ]
                },
                "Id": "Target0",
            }
        ],
    }
    # ... created after the log group's resource policy lets EventBridge write to it
    assert rule["DependsOn"] == [policy_id]


def test_audit_log_is_retained_for_the_log_retention(fanout_synth: Synth) -> None:
    synth = fanout_synth
    log_group = synth.template["Resources"][synth.logical_id(_bus(synth).audit_log_group)]
    assert log_group["Properties"]["RetentionInDays"] == Settings().log_retention_days
    assert "LogGroupName" not in log_group["Properties"]
    assert log_group["DeletionPolicy"] == "Retain"


def test_audit_log_policy_admits_eventbridge_to_that_log_group_only(fanout_synth: Synth) -> None:
    synth = fanout_synth
    bus = _bus(synth)
    log_group_id = synth.logical_id(bus.audit_log_group)
    props = _props(synth, bus.audit_log_policy)
    # The document is a JSON string joined around the log group's ARN.
    delimiter, parts = props["PolicyDocument"]["Fn::Join"]
    document = json.loads(
        delimiter.join(
            part
            if isinstance(part, str)
            else f"<{part['Ref']}>"
            if "Ref" in part
            else f"<{part['Fn::GetAtt'][0]}.Arn>"
            for part in parts
        )
    )
    assert document["Statement"] == [
        {
            "Sid": "AllowEventBridgeToWriteTheChangeAuditLog",
            "Effect": "Allow",
            "Principal": {"Service": "events.amazonaws.com"},
            "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
            "Resource": f"<{log_group_id}.Arn>",
            # confused deputy: a rule of the change bus, in this account
            "Condition": {
                "StringEquals": {"aws:SourceAccount": "<AWS::AccountId>"},
                "ArnLike": {
                    "aws:SourceArn": "arn:<AWS::Partition>:events:<AWS::Region>:"
                    f"<AWS::AccountId>:rule/s3ingest-changes-{synth.settings.stage}/*"
                },
            },
        }
    ]


def test_no_custom_resource_or_managed_policy(fanout_synth: Synth) -> None:
    # The log group target's resource policy is native (no AwsCustomResource singleton).
    for logical_id, resource in fanout_synth.template["Resources"].items():
        assert not resource["Type"].startswith("Custom::"), logical_id
        assert resource["Type"] != "AWS::IAM::ManagedPolicy", logical_id
        assert "ManagedPolicyArns" not in resource.get("Properties", {}), logical_id


def test_outputs_name_the_bus_and_what_the_runbook_reads(fanout_synth: Synth) -> None:
    synth = fanout_synth
    bus = _bus(synth)
    relay = _relay(synth)
    outputs = synth.template["Outputs"]
    assert outputs["ChangeBusName"]["Value"] == _ref(synth.logical_id(bus.bus))
    assert outputs["ChangeBusArn"]["Value"] == _arn(synth.logical_id(bus.bus))
    assert outputs["ChangeArchiveName"]["Value"] == _ref(synth.logical_id(bus.archive))
    assert outputs["ChangeAuditLogGroupName"]["Value"] == _ref(
        synth.logical_id(bus.audit_log_group)
    )
    assert outputs["ChangeDeadLetterQueueUrl"]["Value"] == _ref(
        synth.logical_id(relay.dead_letter_queue)
    )
    assert outputs["ChangeRelayFunctionName"]["Value"] == _ref(synth.logical_id(relay.function))


# --- Nothing of it without changeStream ----------------------------------------------------------


@pytest.mark.parametrize("variant", ["synth", "adopted_synth"])
def test_no_change_stream_by_default(variant: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(variant)
    assert synth.settings.change_stream is False
    pipeline = synth.pipeline
    assert (
        pipeline.change_bus is None
        and pipeline.change_relay is None
        and pipeline.change_source is None
    )
    _, table = synth.one("AWS::DynamoDB::Table")
    assert "StreamSpecification" not in table["Properties"]
    assert not synth.resources("AWS::Events::EventBus")
    assert not synth.resources("AWS::Logs::ResourcePolicy")
    # The ingest queue's mapping only.
    synth.one("AWS::Lambda::EventSourceMapping")
    handlers = {
        function["Properties"]["Handler"]
        for function in synth.resources("AWS::Lambda::Function").values()
    }
    assert CHANGE_STREAM_HANDLER not in handlers
    assert not [name for name in synth.template["Outputs"] if name.startswith("Change")]
