"""cdk-nag AwsSolutions and Serverless: no unacknowledged finding; acknowledgements per resource,
with reasons."""

from __future__ import annotations

import re
from typing import Any

import pytest
from aws_cdk import App, Stack, Validations
from aws_cdk import aws_lambda as lambda_
from cdk_nag import AwsSolutionsChecks, NagPack, ServerlessChecks

from s3ingest_cdk.synth import Synth

from .conftest import VARIANTS


def _findings(app: App, pack: type[NagPack] = AwsSolutionsChecks) -> list[str]:
    report = pack(verbose=True).validate_scope(app)
    return [
        f"{violation.rule_name} at {resource.construct_path}: {violation.description}"
        for violation in report.violations
        for resource in violation.violating_resources
    ]


def _acknowledgements(app: App, pack: str = "AwsSolutions") -> dict[str, dict[str, Any]]:
    """Construct path -> {rule id: reason} of every acknowledgement of a rule of ``pack`` (the
    rule ids' prefix) in the tree.

    aws-cdk-lib records a cdk-nag id under an ``Annotation::`` prefix; cdk-nag strips it.
    """
    found: dict[str, dict[str, Any]] = {}
    for construct in app.node.find_all():
        for entry in construct.node.metadata:
            if entry.type == Validations.ACKNOWLEDGED_RULES_METADATA_KEY:
                rules = {re.sub(r"(?i)^annotation::", "", k): v for k, v in entry.data.items()}
                rules = {k: v for k, v in rules.items() if k.startswith(f"{pack}-")}
                if rules:
                    found.setdefault(construct.node.path, {}).update(rules)
    return found


@pytest.mark.parametrize("variant", VARIANTS)
def test_no_unacknowledged_nag_finding(variant: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(variant)
    findings = _findings(synth.app)
    assert not findings, "unacknowledged cdk-nag findings:\n" + "\n".join(findings)


#: The feature (attribute of the pipeline) that owns each construct acknowledged.
_FEATURES = {
    "DeliveryCheck": "monitoring",
    "Ingest": "ingestion",
    "IngestFunction": "ingestion",
    "Routing": "ingestion",
    "ReconcileSchedule": "reconciliation",
    "ReconcileFunction": "reconciliation",
    "ReconcileFanOutFunction": "reconciliation",
    "ReconcileStateMachine": "reconciliation",
    "BackfillControlFunction": "backfilling",
    "BackfillFunction": "backfilling",
    "BatchOperations": "backfilling",
    "BackfillStateMachine": "backfilling",
    "ChangeBus": "change_stream",
    "ChangeRelay": "change_stream",
    "HistoryWriter": "history",
    "ListingPlan": "listing",
    "ListingShard": "listing",
    "ListingSummarize": "listing",
    "ListingStateMachine": "listing",
    "ReprocessPlan": "reprocess",
    "ReprocessSegment": "reprocess",
    "ReprocessSummarize": "reprocess",
    "ReprocessStateMachine": "reprocess",
}


def _path(synth: Synth, relative: str) -> str:
    """The construct path of ``relative`` (``"IngestFunction/Role"``) in its feature."""
    feature = getattr(synth.pipeline, _FEATURES[relative.split("/")[0]])
    return f"{feature.node.path}/{relative}"


def _xray(synth: Synth) -> set[str]:
    """A function role's X-Ray wildcard acknowledgement: with ``tracing`` only (off, the role
    has no xray:* statement)."""
    return {"AwsSolutions-IAM5[Resource::*]"} if synth.settings.tracing else set()


def _attestations(synth: Synth) -> str:
    """The scheduled reconcile function's wildcard on the stack's bucket (issue 38)."""
    store_id = synth.logical_id(synth.pipeline.landings.shared.inventory)
    return f"AwsSolutions-IAM5[Resource::<{store_id}.Arn>/attestations/*]"


def _expected_function_acknowledgements(synth: Synth) -> dict[str, set[str]]:
    bucket_id = synth.logical_id(synth.pipeline.landing.bucket)
    inventory = synth.pipeline.landing.inventory_bucket
    assert inventory is not None
    inventory_id = synth.logical_id(inventory)
    objects = f"AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/*]"
    reports = (
        f"AwsSolutions-IAM5[Resource::<{inventory_id}.Arn>/inventory/<{bucket_id}>/"
        "s3ingest-daily/*]"
    )
    xray = _xray(synth)
    # the scheduled run's attestations: written under attestations/ of the stack's bucket only
    reconcile_role = {*xray, objects, reports, _attestations(synth)}
    # The delivery check: its runtime, and X-Ray on its role with tracing (its one grant,
    # s3:GetBucketNotification, names the landing bucket).
    delivery_check = {_path(synth, "DeliveryCheck/Function"): {"AwsSolutions-L1"}}
    if xray:
        delivery_check[_path(synth, "DeliveryCheck/Role")] = xray
    return {
        **delivery_check,
        _path(synth, "IngestFunction/Role"): {*xray, objects},
        _path(synth, "IngestFunction/Function"): {"AwsSolutions-L1"},
        _path(synth, "ReconcileFunction/Role"): reconcile_role,
        _path(synth, "ReconcileFunction/Function"): {"AwsSolutions-L1"},
        _path(synth, "Routing/TargetDeadLetterQueue"): {"AwsSolutions-SQS3"},
    }


def _expected_backfill_acknowledgements(synth: Synth) -> dict[str, set[str]]:
    """The backfill's: the control function's and (batch-operations) the backfill function's,
    the Batch Operations role's and the state machine's wildcards; (distributed-map) the
    Distributed Map policy's."""
    bucket_id = synth.logical_id(synth.pipeline.landing.bucket)
    inventory = synth.pipeline.landing.inventory_bucket
    control = synth.pipeline.backfill_control
    machine = synth.pipeline.backfill_state_machine
    assert inventory is not None and control is not None and machine is not None
    inventory_id = synth.logical_id(inventory)
    control_id = synth.logical_id(control.function)
    machine_id = synth.logical_id(machine.state_machine)
    objects = f"AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/*]"
    reports = (
        f"AwsSolutions-IAM5[Resource::<{inventory_id}.Arn>/inventory/<{bucket_id}>/"
        "s3ingest-daily/*]"
    )
    completion_reports = f"AwsSolutions-IAM5[Resource::<{inventory_id}.Arn>/backfill-reports/*]"
    machine_role = {
        "AwsSolutions-IAM5[Resource::*]",
        f"AwsSolutions-IAM5[Resource::<{control_id}.Arn>:*]",
    }
    expected = {_path(synth, "BackfillControlFunction/Function"): {"AwsSolutions-L1"}}
    if synth.settings.backfill_engine == "batch-operations":
        expected[_path(synth, "BackfillControlFunction/Role")] = {
            *_xray(synth),
            reports,
            completion_reports,
        }
        expected[_path(synth, "BackfillFunction/Role")] = {*_xray(synth), objects}
        expected[_path(synth, "BackfillFunction/Function")] = {"AwsSolutions-L1"}
        expected[_path(synth, "BatchOperations/Role")] = {reports, completion_reports}
        expected[_path(synth, "BackfillStateMachine/StateMachine/Role")] = machine_role | {
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:<AWS::Region>:"
            "<AWS::AccountId>:job/*]"
        }
    else:
        expected[_path(synth, "BackfillControlFunction/Role")] = {
            *_xray(synth),
            reports,
            objects,
        }
        expected[_path(synth, "BackfillStateMachine/StateMachine/Role")] = machine_role
        executions = (
            "arn:<AWS::Partition>:states:us-east-1:<AWS::AccountId>:execution:"
            f'{{"Fn::Select":[6,{{"Fn::Split":[":",{{"Ref":"{machine_id}"}}]}}]}}'
        )
        expected[_path(synth, "BackfillStateMachine/StateMachine/DistributedMapPolicy")] = {
            f"AwsSolutions-IAM5[Resource::{executions}:*]",
            f"AwsSolutions-IAM5[Resource::{executions}/BackfillFiles:*]",
        }
    return expected


def _expected_listing_acknowledgements(synth: Synth) -> dict[str, set[str]]:
    """The listing backfill's: each step's runtime and checkpoint wildcard, the shard step's
    landing objects, the state machine's invokes and its Distributed Map's executions."""
    listing = synth.pipeline.listing
    bucket_id = synth.logical_id(synth.pipeline.landing.bucket)
    inventory_id = synth.logical_id(synth.pipeline.landings.shared.inventory)
    machine_id = synth.logical_id(listing.state_machine.state_machine)
    checkpoints = f"AwsSolutions-IAM5[Resource::<{inventory_id}.Arn>/backfill-listing/*]"
    objects = f"AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/*]"
    xray = _xray(synth)
    expected: dict[str, set[str]] = {}
    for step in ("ListingPlan", "ListingShard", "ListingSummarize"):
        expected[_path(synth, f"{step}/Function")] = {"AwsSolutions-L1"}
        expected[_path(synth, f"{step}/Role")] = {*xray, checkpoints}
    expected[_path(synth, "ListingShard/Role")] |= {objects}
    expected[_path(synth, "ListingStateMachine/StateMachine/Role")] = {
        "AwsSolutions-IAM5[Resource::*]",
        *(
            f"AwsSolutions-IAM5[Resource::<{synth.logical_id(step.function)}.Arn>:*]"
            for step in (listing.plan, listing.shard, listing.summarize)
        ),
    }
    executions = (
        "arn:<AWS::Partition>:states:us-east-1:<AWS::AccountId>:execution:"
        f'{{"Fn::Select":[6,{{"Fn::Split":[":",{{"Ref":"{machine_id}"}}]}}]}}'
    )
    expected[_path(synth, "ListingStateMachine/StateMachine/DistributedMapPolicy")] = {
        f"AwsSolutions-IAM5[Resource::{executions}:*]",
        f"AwsSolutions-IAM5[Resource::{executions}/ListingShards:*]",
    }
    return expected


def _expected_reprocess_acknowledgements(synth: Synth) -> dict[str, set[str]]:
    """The reprocess run's: each step's runtime and checkpoint wildcard, the segment step's
    landing objects, the state machine's invokes and its Distributed Map's executions."""
    reprocess = synth.pipeline.reprocess
    bucket_id = synth.logical_id(synth.pipeline.landing.bucket)
    inventory_id = synth.logical_id(synth.pipeline.landings.shared.inventory)
    machine_id = synth.logical_id(reprocess.state_machine.state_machine)
    checkpoints = f"AwsSolutions-IAM5[Resource::<{inventory_id}.Arn>/reprocess/*]"
    objects = f"AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/*]"
    xray = _xray(synth)
    expected: dict[str, set[str]] = {}
    for step in ("ReprocessPlan", "ReprocessSegment", "ReprocessSummarize"):
        expected[_path(synth, f"{step}/Function")] = {"AwsSolutions-L1"}
        expected[_path(synth, f"{step}/Role")] = {*xray, checkpoints}
    expected[_path(synth, "ReprocessSegment/Role")] |= {objects}
    expected[_path(synth, "ReprocessStateMachine/StateMachine/Role")] = {
        "AwsSolutions-IAM5[Resource::*]",
        *(
            f"AwsSolutions-IAM5[Resource::<{synth.logical_id(step.function)}.Arn>:*]"
            for step in (reprocess.plan, reprocess.segment, reprocess.summarize)
        ),
    }
    executions = (
        "arn:<AWS::Partition>:states:us-east-1:<AWS::AccountId>:execution:"
        f'{{"Fn::Select":[6,{{"Fn::Split":[":",{{"Ref":"{machine_id}"}}]}}]}}'
    )
    expected[_path(synth, "ReprocessStateMachine/StateMachine/DistributedMapPolicy")] = {
        f"AwsSolutions-IAM5[Resource::{executions}:*]",
        f"AwsSolutions-IAM5[Resource::{executions}/ReprocessSegments:*]",
    }
    return expected


def _assert_reasons(acknowledgements: dict[str, dict[str, Any]]) -> None:
    for path, rules in acknowledgements.items():
        for rule, reason in rules.items():
            assert isinstance(reason, str) and len(reason) >= 60, (path, rule)


def test_acknowledgements_are_on_resources_with_reasons(synth: Synth) -> None:
    acknowledgements = _acknowledgements(synth.app)
    # Each acknowledgement is on the one construct it is about, never on the stack or the app.
    assert {path: set(rules) for path, rules in acknowledgements.items()} == {
        **_expected_function_acknowledgements(synth),
        **_expected_backfill_acknowledgements(synth),
        **_expected_listing_acknowledgements(synth),
        **_expected_reprocess_acknowledgements(synth),
    }
    _assert_reasons(acknowledgements)


def test_fanout_acknowledgements_are_on_resources_with_reasons(fanout_synth: Synth) -> None:
    # GIVEN the fan-out reconciliation, the distributed-map backfill, the processor and the
    # change stream
    synth = fanout_synth
    acknowledgements = _acknowledgements(synth.app)
    inventory = synth.pipeline.landing.inventory_bucket
    assert inventory is not None and synth.pipeline.reconcile_fan_out is not None
    machine = synth.pipeline.reconcile_state_machine
    assert machine is not None
    inventory_id = synth.logical_id(inventory)
    fan_out_id = synth.logical_id(synth.pipeline.reconcile_fan_out.function)
    machine_id = synth.logical_id(machine.state_machine)
    expected = {
        **_expected_function_acknowledgements(synth),
        **_expected_backfill_acknowledgements(synth),
        **_expected_listing_acknowledgements(synth),
        **_expected_reprocess_acknowledgements(synth),
    }
    # THEN the fan-out function has the reconcile function's plus its work prefix ...
    # (its summarize step attests as the scheduled function does: issue 38)
    expected[_path(synth, "ReconcileFanOutFunction/Role")] = expected[
        _path(synth, "ReconcileFunction/Role")
    ] | {f"AwsSolutions-IAM5[Resource::<{inventory_id}.Arn>/reconcile-work/*]"}
    expected[_path(synth, "ReconcileFanOutFunction/Function")] = {"AwsSolutions-L1"}
    # ... and the state machine's role and Distributed Map policy carry their own wildcards only
    expected[_path(synth, "ReconcileStateMachine/StateMachine/Role")] = {
        "AwsSolutions-IAM5[Resource::*]",
        f"AwsSolutions-IAM5[Resource::<{fan_out_id}.Arn>:*]",
    }
    executions = (
        "arn:<AWS::Partition>:states:us-east-1:<AWS::AccountId>:execution:"
        f'{{"Fn::Select":[6,{{"Fn::Split":[":",{{"Ref":"{machine_id}"}}]}}]}}'
    )
    expected[_path(synth, "ReconcileStateMachine/StateMachine/DistributedMapPolicy")] = {
        f"AwsSolutions-IAM5[Resource::{executions}:*]",
        f"AwsSolutions-IAM5[Resource::{executions}/ShardInventory:*]",
    }
    # ... the processor's output objects on each role that runs it (ingest, distributed-map
    # backfill control) ...
    output = synth.pipeline.processor_output
    assert output is not None
    outputs = f"AwsSolutions-IAM5[Resource::<{synth.logical_id(output.bucket)}.Arn>/*]"
    for role in (
        "IngestFunction/Role",
        "BackfillControlFunction/Role",
        "ListingShard/Role",
        "ReprocessSegment/Role",
    ):
        expected[_path(synth, role)] = expected[_path(synth, role)] | {outputs}
    # ... and the change relay: X-Ray and dynamodb:ListStreams, its runtime, its on-failure DLQ
    expected[_path(synth, "ChangeRelay/Role")] = {"AwsSolutions-IAM5[Resource::*]"}
    expected[_path(synth, "ChangeRelay/Function")] = {"AwsSolutions-L1"}
    expected[_path(synth, "ChangeRelay/DeadLetterQueue")] = {"AwsSolutions-SQS3"}
    # ... and the history writer (historyTable): X-Ray, the table's files, its runtime
    history = synth.pipeline.history
    assert history is not None
    stack_bucket = synth.logical_id(synth.pipeline.landings.shared.inventory)
    expected[_path(synth, "HistoryWriter/Role")] = {
        "AwsSolutions-IAM5[Resource::*]",
        f"AwsSolutions-IAM5[Resource::<{stack_bucket}.Arn>/history/*]",
    }
    expected[_path(synth, "HistoryWriter/Function")] = {"AwsSolutions-L1"}
    assert {path: set(rules) for path, rules in acknowledgements.items()} == expected
    _assert_reasons(acknowledgements)
    relay_role = acknowledgements[_path(synth, "ChangeRelay/Role")]
    assert "dynamodb:ListStreams" in relay_role["AwsSolutions-IAM5[Resource::*]"]


def test_create_job_wildcard_is_acknowledged_with_its_evidence(synth: Synth) -> None:
    # GIVEN the batch-operations backfill: s3:CreateJob shares the role's Resource "*" statement
    machine = synth.pipeline.backfill_state_machine
    assert machine is not None and machine.create_job is not None
    rules = _acknowledgements(synth.app)[machine.state_machine.role.node.path]
    reason = rules["AwsSolutions-IAM5[Resource::*]"]
    # THEN the reason names it, the reference that shows it has no resource type, and the bound
    assert "s3:CreateJob" in reason
    assert "service-authorization/latest/reference/list_amazons3.html" in reason
    assert "iam:PassRole" in reason


def test_no_acknowledgement_on_stack_or_app(synth: Synth) -> None:
    for construct in (synth.app, synth.stack):
        assert isinstance(construct, (App, Stack))
        assert not [
            entry
            for entry in construct.node.metadata
            if entry.type == Validations.ACKNOWLEDGED_RULES_METADATA_KEY
        ]


# --- cdk-nag Serverless (``ServerlessChecks``): a team that runs that pack in CI too ---------


@pytest.mark.parametrize("variant", VARIANTS)
def test_no_unacknowledged_serverless_finding(variant: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(variant)
    findings = _findings(synth.app, ServerlessChecks)
    assert not findings, "unacknowledged cdk-nag Serverless findings:\n" + "\n".join(findings)


#: What every s3ingest function acknowledges of the Serverless pack (tracing off).
_FUNCTION_SERVERLESS = {
    "Serverless-LambdaLatestVersion",
    "Serverless-LambdaDLQ",
    "Serverless-LambdaTracing",
}


def test_serverless_acknowledgements_are_on_resources_with_reasons(synth: Synth) -> None:
    acknowledgements = _acknowledgements(synth.app, "Serverless")
    functions = [
        c.node.path for c in synth.stack.node.find_all() if isinstance(c, lambda_.Function)
    ]
    assert len(functions) >= 10
    mapping = synth.pipeline.ingestion.ingest.function.node.children
    (esm,) = (c for c in mapping if isinstance(c, lambda_.EventSourceMapping))
    # Each on the one construct it is about: every function, the ingest queue's mapping, the two
    # dead-letter queues, the two schedules' rules.
    assert {path: set(rules) for path, rules in acknowledgements.items()} == {
        **{path: _FUNCTION_SERVERLESS for path in functions},
        esm.node.path: {"Serverless-LambdaEventSourceMappingDestination"},
        _path(synth, "Ingest/DeadLetterQueue"): {"Serverless-SQSRedrivePolicy"},
        _path(synth, "Routing/TargetDeadLetterQueue"): {"Serverless-SQSRedrivePolicy"},
        _path(synth, "DeliveryCheck/Schedule"): {"Serverless-EventBusDLQ"},
        _path(synth, "ReconcileSchedule/Rule"): {"Serverless-EventBusDLQ"},
    }
    _assert_reasons(acknowledgements)
    # The dead-letter reason says who invokes the function, and how
    dlq = {path: str(rules.get("Serverless-LambdaDLQ")) for path, rules in acknowledgements.items()}
    assert "event source mapping" in dlq[_path(synth, "IngestFunction/Function")]
    assert "schedule" in dlq[_path(synth, "ReconcileFunction/Function")]
    assert "schedule" in dlq[_path(synth, "DeliveryCheck/Function")]
    assert "state machine" in dlq[_path(synth, "ListingShard/Function")]
    assert "Batch Operations" in dlq[_path(synth, "BackfillFunction/Function")]


def test_serverless_acknowledges_tracing_only_where_it_is_off(fanout_synth: Synth) -> None:
    # GIVEN tracing on (and the change stream, the alarm e-mail)
    acknowledgements = _acknowledgements(fanout_synth.app, "Serverless")
    rules = {rule for found in acknowledgements.values() for rule in found}
    # THEN no function acknowledges tracing; the relay's queue, the audit rule and the e-mail
    # subscription carry their own reasons
    assert "Serverless-LambdaTracing" not in rules
    assert {
        "Serverless-SQSRedrivePolicy",
        "Serverless-SNSRedrivePolicy",
        "Serverless-EventBusDLQ",
    } <= rules
    assert (
        "archive"
        in acknowledgements[_path(fanout_synth, "ChangeBus/Rule")]["Serverless-EventBusDLQ"]
    )
    _assert_reasons(acknowledgements)
