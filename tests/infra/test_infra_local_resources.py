"""The local runtime provisions from the stack's own description (:mod:`s3ingest.stack_resources`):
the description equals the synthesized template's properties, and what the local provisioner
creates from the same settings (:func:`s3ingest.local.stack.provisioning.provision`) has them
too."""

from __future__ import annotations

import json
from typing import Any

import pytest

from s3ingest import stack_resources
from s3ingest.local.emulator.server import ACCOUNT, Emulator
from s3ingest.local.stack.provisioning import provision
from s3ingest.settings import INVENTORY_ID, BucketSpec
from s3ingest_cdk.synth import Synth


def _props(synth: Synth, construct: Any) -> dict[str, Any]:
    properties: dict[str, Any] = synth.template["Resources"][synth.logical_id(construct)][
        "Properties"
    ]
    return properties


def _subset(expected: dict[str, Any], actual: dict[str, Any]) -> dict[str, Any]:
    return {name: actual.get(name) for name in expected}


def _entries(synth: Synth) -> list[dict[str, Any]]:
    resolved: list[dict[str, Any]] = synth.stack.resolve(
        [e.pattern_entry for e in synth.pipeline.landings.entries]
    )
    return resolved


@pytest.fixture(params=["synth", "fanout_synth", "two_bucket_synth"])
def synthesized(request: pytest.FixtureRequest) -> Synth:
    synth: Synth = request.getfixturevalue(request.param)
    return synth


def test_the_description_is_the_synthesized_template(synthesized: Synth) -> None:
    synth, p = synthesized, synthesized.pipeline
    described = stack_resources.describe(synth.settings, _entries(synth))
    dlq_arn = {"Fn::GetAtt": [synth.logical_id(p.dead_letter_queue), "Arn"]}
    for spec, construct, arn in (
        (described.ingest_queue, p.queue, dlq_arn),
        (described.dead_letter_queue, p.dead_letter_queue, None),
    ):
        expected = spec.properties(arn)
        assert _subset(expected, _props(synth, construct)) == expected
    expected = described.ledger.properties()
    assert _subset(expected, _props(synth, p.table)) == expected
    rule, archive = _props(synth, p.routing.rule), _props(synth, p.routing.archive)
    assert rule["EventPattern"] == described.ingest_rule.pattern
    assert archive["EventPattern"] == described.ingest_rule.pattern
    assert archive["RetentionDays"] == described.ingest_rule.archive_retention_days
    if p.change_bus is None:
        assert described.change_rule is None and described.change_dead_letter_queue is None
        return
    assert described.change_rule is not None and described.change_dead_letter_queue is not None
    change_rule = _props(synth, p.change_bus.rule)
    change_archive = _props(synth, p.change_bus.archive)
    assert change_rule["EventPattern"] == described.change_rule.pattern
    assert change_archive["EventPattern"] == described.change_rule.pattern
    assert change_archive["RetentionDays"] == described.change_rule.archive_retention_days
    assert p.change_relay is not None
    expected = described.change_dead_letter_queue.properties()
    assert _subset(expected, _props(synth, p.change_relay.dead_letter_queue)) == expected


def _local_pattern(synth: Synth, template_pattern: Any, names: dict[str, str]) -> Any:
    """The template's pattern with each landing bucket's name and the account as the local
    deployment has them (``names``: template bucket reference -> local name)."""
    text = json.dumps(template_pattern)
    text = text.replace(json.dumps({"Ref": "AWS::AccountId"}), json.dumps(ACCOUNT))
    for reference, name in names.items():
        text = text.replace(reference, json.dumps(name))
    return json.loads(text)


@pytest.mark.parametrize("variant", ["synth", "fanout_synth"])
def test_the_local_provisioner_creates_what_the_template_deploys(
    request: pytest.FixtureRequest, emulator: Emulator, variant: str
) -> None:
    synth: Synth = request.getfixturevalue(variant)
    p = synth.pipeline
    r = provision(emulator, synth.settings)
    sqs, ddb, events = (emulator.client(s) for s in ("sqs", "dynamodb", "events"))

    def queue(url: str) -> dict[str, Any]:
        attributes: dict[str, Any] = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])[
            "Attributes"
        ]
        return attributes

    def assert_queue(url: str, construct: Any, redrive_to: str | None = None) -> None:
        deployed = _props(synth, construct)
        local = queue(url)
        for name in ("MessageRetentionPeriod", "VisibilityTimeout", "MaximumMessageSize"):
            if name in deployed:
                assert int(local[name]) == deployed[name], name
        if "RedrivePolicy" in deployed:
            policy = json.loads(local["RedrivePolicy"])
            assert policy["maxReceiveCount"] == deployed["RedrivePolicy"]["maxReceiveCount"]
            assert policy["deadLetterTargetArn"] == redrive_to

    dlq_arn = queue(r.dlq_url)["QueueArn"]
    assert_queue(r.queue_url, p.queue, redrive_to=dlq_arn)
    assert_queue(r.dlq_url, p.dead_letter_queue)
    table = ddb.describe_table(TableName=r.table)["Table"]
    deployed_table = _props(synth, p.table)
    assert table["KeySchema"] == deployed_table["KeySchema"]
    assert table["AttributeDefinitions"] == deployed_table["AttributeDefinitions"]
    assert table["BillingModeSummary"]["BillingMode"] == deployed_table["BillingMode"]
    ttl = ddb.describe_time_to_live(TableName=r.table)["TimeToLiveDescription"]
    assert ttl["AttributeName"] == deployed_table["TimeToLiveSpecification"]["AttributeName"]
    stream = deployed_table.get("StreamSpecification")
    assert table.get("StreamSpecification", {}).get("StreamViewType") == (
        stream and stream["StreamViewType"]
    )
    bucket_ref = json.dumps({"Ref": synth.logical_id(p.landing.bucket)})
    local_rule = json.loads(events.describe_rule(Name=r.rule)["EventPattern"])
    deployed_rule = _props(synth, p.routing.rule)["EventPattern"]
    assert local_rule == _local_pattern(synth, deployed_rule, {bucket_ref: r.bucket})
    archive = events.describe_archive(ArchiveName=r.archive)
    deployed_archive = _props(synth, p.routing.archive)
    assert archive["RetentionDays"] == deployed_archive["RetentionDays"]
    assert json.loads(archive["EventPattern"]) == local_rule
    if p.change_bus is None:
        assert r.change_bus is None
        return
    assert r.change_bus and r.change_dlq_url and p.change_relay is not None
    assert_queue(r.change_dlq_url, p.change_relay.dead_letter_queue)
    rules = events.list_rules(EventBusName=r.change_bus, NamePrefix="changes-")["Rules"]
    deployed_change = _props(synth, p.change_bus.rule)["EventPattern"]
    assert [json.loads(rule["EventPattern"]) for rule in rules] == [deployed_change]
    bus_arn = events.describe_event_bus(Name=r.change_bus)["Arn"]
    (change_archive,) = events.list_archives(EventSourceArn=bus_arn)["Archives"]
    described = events.describe_archive(ArchiveName=change_archive["ArchiveName"])
    deployed_archive = _props(synth, p.change_bus.archive)
    assert described["RetentionDays"] == deployed_archive["RetentionDays"]
    assert json.loads(described["EventPattern"]) == deployed_change


def test_a_local_landing_bucket_has_the_stacks_inventory_configuration(
    adopted_synth: Synth, emulator: Emulator
) -> None:
    # an existing, unversioned bucket: the stack's configuration is the custom resource's
    synth, p = adopted_synth, adopted_synth.pipeline
    ((_, setup),) = synth.resources("Custom::S3IngestBucketSetup").items()
    r = provision(emulator, synth.settings, buckets=[BucketSpec(existing=True, versioned=False)])
    local = emulator.client("s3").get_bucket_inventory_configuration(
        Bucket=r.bucket, Id=INVENTORY_ID
    )["InventoryConfiguration"]
    text = json.dumps(setup["Properties"]["Inventory"])
    text = text.replace(json.dumps({"Ref": "AWS::AccountId"}), json.dumps(ACCOUNT))
    inventory_arn = {"Fn::GetAtt": [synth.logical_id(p.landings.shared.inventory), "Arn"]}
    text = text.replace(json.dumps(inventory_arn), json.dumps(f"arn:aws:s3:::{r.inventory_bucket}"))
    assert local == json.loads(text)
