"""Two landing buckets (issue 15): one the stack creates, with key filters, and an existing one
with another team's inventory configuration; the fan-out and the Distributed Map backfill.

cdk-nag and cfn-lint run on this variant too (``VARIANTS``: test_infra_nag, test_infra_cfn_lint).
"""

from __future__ import annotations

import json
from typing import Any

from s3ingest.settings import InventoryRef, ingest_event_pattern
from s3ingest_cdk.constructs.bucket_setup import RESOURCE_TYPE
from s3ingest_cdk.synth import Synth

from .conftest import PARTNER_BUCKET, PARTNER_INVENTORY


def _ref(logical_id: str) -> dict[str, Any]:
    return {"Ref": logical_id}


def _partition_arn(name: str) -> dict[str, Any]:
    return {"Fn::Join": ["", ["arn:", _ref("AWS::Partition"), f":s3:::{name}"]]}


def _variables(synth: Synth, function: Any) -> dict[str, Any]:
    resource = synth.template["Resources"][synth.logical_id(function)]
    variables: dict[str, Any] = resource["Properties"]["Environment"]["Variables"]
    return variables


def _granted(synth: Synth, role: Any) -> dict[str, list[str]]:
    """Action -> the JSON of every resource it is allowed on, for ``role``'s policies."""
    role_ref = _ref(synth.logical_id(role))
    granted: dict[str, list[str]] = {}
    for policy in synth.resources("AWS::IAM::Policy").values():
        if role_ref not in policy["Properties"]["Roles"]:
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"]
            resources = statement["Resource"]
            for action in [actions] if isinstance(actions, str) else actions:
                for resource in resources if isinstance(resources, list) else [resources]:
                    granted.setdefault(action, []).append(json.dumps(resource, sort_keys=True))
    return granted


def _resolved_json(synth: Synth, value: Any) -> Any:
    """A ``Stack.to_json_string`` value with each ``{"Ref": id}`` written ``<id>``: parsed."""
    if isinstance(value, str):
        return json.loads(value)
    sep, parts = value["Fn::Join"]
    text = sep.join(p if isinstance(p, str) else f"<{p['Ref']}>" for p in parts)
    return json.loads(text)


def test_one_landing_construct_per_bucket(two_bucket_synth: Synth) -> None:
    synth = two_bucket_synth
    created, existing = synth.pipeline.landings.entries
    # the first keeps the single-bucket stack's ids; the second is Landing2, imported
    assert created.node.id == "Landing" and created.owned
    assert synth.logical_id(created.bucket) == "LandingBucket6D60388F"
    assert existing.node.id == "Landing2" and not existing.owned
    assert existing.bucket.bucket_name == PARTNER_BUCKET
    # the existing bucket is not created; its owner's inventory is read, none is added
    assert len(synth.resources("AWS::S3::Bucket")) == 3  # landing, access logs, inventory
    assert existing.inventory_bucket is None
    assert existing.report_prefix == InventoryRef(**PARTNER_INVENTORY).report_prefix(PARTNER_BUCKET)
    ((_, setup),) = synth.resources(RESOURCE_TYPE).items()
    assert setup["Properties"]["BucketName"] == PARTNER_BUCKET
    assert setup["Properties"]["EventBridge"] == "true"
    assert "Inventory" not in setup["Properties"]


def test_rule_and_archive_apply_each_buckets_key_filters(two_bucket_synth: Synth) -> None:
    synth = two_bucket_synth
    bucket_id = synth.logical_id(synth.pipeline.landing.bucket)
    own = {"Ref": "AWS::AccountId"}
    pattern = ingest_event_pattern(
        [
            {
                "name": _ref(bucket_id),
                "prefixes": ["incoming/", "late arrivals/"],
                "suffixes": [".csv"],
                "account": own,
            },
            {"name": PARTNER_BUCKET, "account": own},
        ]
    )
    rule = synth.template["Resources"][synth.logical_id(synth.pipeline.routing.rule)]
    _, archive = synth.one("AWS::Events::Archive")
    assert rule["Properties"]["EventPattern"] == pattern
    assert archive["Properties"]["EventPattern"] == pattern
    # both buckets are the stack's account's: its events only (owners, not names)
    assert pattern["account"] == [own]
    # the filters are form-encoded as S3 sends keys; the unfiltered bucket matches by name
    alternatives = pattern["detail"]["$or"]
    assert {"bucket": {"name": [PARTNER_BUCKET]}} in alternatives
    assert {"wildcard": "late+arrivals/*.csv"} in alternatives[1]["object"]["key"]


def test_every_function_gets_the_scope_and_the_inventories(two_bucket_synth: Synth) -> None:
    synth = two_bucket_synth
    pipeline = synth.pipeline
    bucket_id = synth.logical_id(pipeline.landing.bucket)
    inventory_id = synth.logical_id(pipeline.landings.shared.inventory)
    scope = [
        {
            "name": f"<{bucket_id}>",
            "prefixes": ["incoming/", "late arrivals/"],
            "suffixes": [".csv"],
        },
        {"name": PARTNER_BUCKET, "prefixes": [], "suffixes": []},
    ]
    inventories = [
        {
            "name": f"<{bucket_id}>",
            "bucket": f"<{inventory_id}>",
            "prefix": f"inventory/<{bucket_id}>/s3ingest-daily/",
        },
        {
            "name": PARTNER_BUCKET,
            "bucket": PARTNER_INVENTORY["bucket"],
            "prefix": f"reports/{PARTNER_BUCKET}/partner-daily/",
        },
    ]
    assert pipeline.backfill_control is not None and pipeline.reconcile_fan_out is not None
    for name, function in pipeline.functions.items():
        if name == "change-relay":  # pragma: no cover - no change stream here
            continue
        variables = _variables(synth, function)
        assert _resolved_json(synth, variables["SCOPE"]) == scope, name
        if name != "delivery-check":  # it reads DELIVERY_CHECK_BUCKETS (below)
            assert variables["BUCKET_NAME"] == _ref(bucket_id), name
    for function in (
        pipeline.reconcile.function,
        pipeline.reconcile_fan_out.function,
        pipeline.backfill_control.function,
    ):
        variables = _variables(synth, function)
        assert _resolved_json(synth, variables["INVENTORIES"]) == inventories
        # the first bucket's inventory, as before
        assert variables["INVENTORY_BUCKET_NAME"] == _ref(inventory_id)
    for step in (pipeline.listing.plan, pipeline.listing.shard, pipeline.listing.summarize):
        assert _variables(synth, step.function)["CHECKPOINT_BUCKET_NAME"] == _ref(inventory_id)
    check = _variables(synth, pipeline.delivery_check.function)
    assert check["DELIVERY_CHECK_BUCKETS"] == {
        "Fn::Join": ["", [_ref(bucket_id), f",{PARTNER_BUCKET}"]]
    }


def test_grants_cover_each_bucket_and_each_inventory(two_bucket_synth: Synth) -> None:
    synth = two_bucket_synth
    pipeline = synth.pipeline
    bucket_arn = {"Fn::GetAtt": [synth.logical_id(pipeline.landing.bucket), "Arn"]}
    partner_arn = _partition_arn(PARTNER_BUCKET)
    reports_arn = _partition_arn(PARTNER_INVENTORY["bucket"])

    def objects(arn: Any, suffix: str = "/*") -> str:
        if arn is partner_arn:  # an imported bucket's objects: one flat join
            return json.dumps(_partition_arn(f"{PARTNER_BUCKET}{suffix}"), sort_keys=True)
        if arn is reports_arn:
            name = PARTNER_INVENTORY["bucket"]
            return json.dumps(_partition_arn(f"{name}{suffix}"), sort_keys=True)
        return json.dumps({"Fn::Join": ["", [arn, suffix]]}, sort_keys=True)

    for role in (pipeline.ingest.role, pipeline.listing.shard.role, pipeline.reconcile.role):
        granted = _granted(synth, role)
        for action in ("s3:GetObject", "s3:GetObjectVersion"):
            assert objects(bucket_arn) in granted[action]
            assert objects(partner_arn) in granted[action]
        assert json.dumps(partner_arn, sort_keys=True) in granted["s3:ListBucket"]
    for role in (pipeline.listing.shard.role, pipeline.reconcile.role):
        granted = _granted(synth, role)
        for action in ("s3:ListBucketVersions", "s3:GetBucketVersioning"):
            assert json.dumps(partner_arn, sort_keys=True) in granted[action]
    # the other team's reports: listed and read under the configuration's folder only
    assert pipeline.backfill_control is not None
    for role in (pipeline.reconcile.role, pipeline.backfill_control.role):
        granted = _granted(synth, role)
        assert json.dumps(reports_arn, sort_keys=True) in granted["s3:ListBucket"]
        assert (
            objects(reports_arn, f"/reports/{PARTNER_BUCKET}/partner-daily/*")
            in granted["s3:GetObject"]
        )
    # the delivery check reads both buckets' notification configuration, nothing else
    check = _granted(synth, pipeline.delivery_check.role)
    assert sorted(check["s3:GetBucketNotification"]) == sorted(
        json.dumps(arn, sort_keys=True) for arn in (bucket_arn, partner_arn)
    )


def test_fan_out_runs_once_per_bucket(two_bucket_synth: Synth) -> None:
    synth = two_bucket_synth
    machine = synth.pipeline.reconcile_state_machine
    assert machine is not None
    (rule,) = synth.pipeline.reconcile_schedule.rules
    targets = synth.template["Resources"][synth.logical_id(rule)]["Properties"]["Targets"]
    bucket_id = synth.logical_id(synth.pipeline.landing.bucket)
    assert [t["Arn"] for t in targets] == [_ref(synth.logical_id(machine.state_machine))] * 2
    assert [t["Input"] for t in targets] == [
        {"Fn::Join": ["", ['{"bucket":"', _ref(bucket_id), '","attest":true}']]},
        json.dumps({"bucket": PARTNER_BUCKET, "attest": True}, separators=(",", ":")),
    ]


def test_inventory_bucket_accepts_reports_of_the_stacks_own_inventories_only(
    two_bucket_synth: Synth,
) -> None:
    synth = two_bucket_synth
    shared = synth.pipeline.landings.shared
    policy = next(
        p
        for p in synth.resources("AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == _ref(synth.logical_id(shared.inventory))
    )
    (delivery,) = [
        s
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
        if s.get("Sid") == "AllowS3InventoryDelivery"
    ]
    # the created bucket has the stack's inventory; the partner's reports go to its own bucket
    assert delivery["Condition"]["ArnLike"] == {
        "aws:SourceArn": {"Fn::GetAtt": [synth.logical_id(synth.pipeline.landing.bucket), "Arn"]}
    }


def test_outputs_name_every_bucket(two_bucket_synth: Synth) -> None:
    synth = two_bucket_synth
    outputs = synth.template["Outputs"]
    bucket_id = synth.logical_id(synth.pipeline.landing.bucket)
    assert outputs["BucketName"]["Value"] == _ref(bucket_id)
    assert outputs["BucketNames"]["Value"] == {
        "Fn::Join": ["", [_ref(bucket_id), f",{PARTNER_BUCKET}"]]
    }
    for name in (
        "InventoryBucketName",
        "ListingBackfillStateMachineArn",
        "BackfillStateMachineArn",
        "ReconcileStateMachineArn",
    ):
        assert name in outputs, name
    # the buckets and their key filters, as the functions get them (`s3ingest explain` reads it)
    ingest = synth.template["Resources"][synth.logical_id(synth.pipeline.ingest_function)]
    scope = ingest["Properties"]["Environment"]["Variables"]["SCOPE"]
    assert outputs["BucketScope"]["Value"] == scope and "late arrivals/" in json.dumps(scope)
