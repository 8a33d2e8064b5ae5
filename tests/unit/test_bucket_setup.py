"""The bucket-setup custom resource keeps another team's configuration of an existing bucket.

A bucket with a foreign SQS queue notification and a foreign inventory configuration: Create
turns EventBridge delivery on and keeps both, Update keeps them, Delete leaves delivery as it was
before Create (off if it was off, on if it was on) and removes only the stack's inventory
configuration. Runs on moto (``mock_aws``), with two of its gaps closed
(:func:`moto_reports_event_bridge`): moto stores ``EventBridgeConfiguration`` but leaves it out
of its GetBucketNotificationConfiguration answer, which S3 includes
(https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetBucketNotificationConfiguration.html);
and moto routes DeleteBucketInventoryConfiguration (``DELETE /?inventory&id=``) to DeleteBucket,
which would delete an empty bucket instead of one configuration
(https://docs.aws.amazon.com/AmazonS3/latest/API/API_DeleteBucketInventoryConfiguration.html).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from s3ingest.local.emulator import moto_patches
from s3ingest_fn.handlers.bucket_setup import (
    handle,
    inventory_configuration,
    parse_physical_id,
    physical_id,
)
from s3ingest_fn.services import bucket_setup

BUCKET = "their-bucket"
OURS = "s3ingest-daily"
THEIRS = "their-weekly"


@pytest.fixture
def moto_reports_event_bridge() -> None:
    """moto's GetBucketNotificationConfiguration answering ``EventBridgeConfiguration`` when the
    bucket has it, and its DeleteBucketInventoryConfiguration deleting that configuration only:
    the local emulator's own fixes of those gaps (:mod:`s3ingest.local.emulator.moto_patches`),
    which patch moto's S3 responses for the whole process."""
    moto_patches.install(
        patches=moto_patches.named(
            "s3-notification-reports-eventbridge", "s3-delete-one-inventory-configuration"
        )
    )


@pytest.fixture
def s3(moto_reports_event_bridge: None) -> Iterator[Any]:
    """A moto S3 client with :data:`BUCKET` (another team's queue notification and inventory)
    and the stack's inventory bucket."""
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        sqs = boto3.client("sqs", region_name="us-east-1")
        queue_url = sqs.create_queue(QueueName="their-queue")["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        client.create_bucket(Bucket=BUCKET)
        client.create_bucket(Bucket="stack-inventory")
        client.create_bucket(Bucket="their-reports")
        client.put_bucket_notification_configuration(
            Bucket=BUCKET,
            NotificationConfiguration={
                "QueueConfigurations": [
                    {
                        "Id": "their-queue",
                        "QueueArn": queue_arn,
                        "Events": ["s3:ObjectCreated:*"],
                        "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": "in/"}]}},
                    }
                ]
            },
        )
        bucket_setup.put_inventory(client, BUCKET, _inventory(THEIRS, "their-reports"))
        yield client


def _inventory(ident: str, destination: str, enabled: Any = True) -> dict[str, Any]:
    return {
        "Id": ident,
        "IsEnabled": enabled,
        "Destination": {
            "S3BucketDestination": {
                "Bucket": f"arn:aws:s3:::{destination}",
                "Format": "CSV",
                "Prefix": "inventory",
                "AccountId": "123456789012",
            }
        },
        "IncludedObjectVersions": "All",
        "OptionalFields": ["Size", "LastModifiedDate", "ETag"],
        "Schedule": {"Frequency": "Daily"},
    }


def _props(event_bridge: str = "true", inventory: bool = True) -> dict[str, Any]:
    props: dict[str, Any] = {
        "ServiceToken": "arn:aws:lambda:us-east-1:123456789012:function:provider",
        "BucketName": BUCKET,
        "EventBridge": event_bridge,
    }
    if inventory:
        # as CloudFormation passes it: every scalar a string
        props["Inventory"] = _inventory(OURS, "stack-inventory", enabled="true")
    return props


def _request(kind: str, props: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"RequestType": kind, "ResourceProperties": props, **more}


def _foreign_queue(s3: Any) -> list[dict[str, Any]]:
    return list(bucket_setup.describe(s3, BUCKET)["notification"]["QueueConfigurations"])


def _inventory_ids(s3: Any) -> set[str]:
    return {c["Id"] for c in bucket_setup.describe(s3, BUCKET)["inventory"]}


def _delivery_on(s3: Any) -> bool:
    return bucket_setup.EVENT_BRIDGE in bucket_setup.describe(s3, BUCKET)["notification"]


def test_create_update_delete_keep_foreign_configuration_and_restore_delivery(s3: Any) -> None:
    # GIVEN another team's queue notification and inventory, delivery off
    theirs = _foreign_queue(s3)
    assert theirs and theirs[0]["Id"] == "their-queue"
    assert not _delivery_on(s3)
    # WHEN the stack creates the resource
    created = handle(s3, _request("Create", _props()))
    # THEN delivery is on, the foreign queue configuration is intact, both inventories exist
    assert created["PhysicalResourceId"] == physical_id(BUCKET, "off")
    assert created["Data"] == {"BucketName": BUCKET, "EventBridgeWasEnabled": "false"}
    assert _delivery_on(s3)
    assert _foreign_queue(s3) == theirs
    assert _inventory_ids(s3) == {OURS, THEIRS}
    ours = s3.get_bucket_inventory_configuration(Bucket=BUCKET, Id=OURS)["InventoryConfiguration"]
    assert ours["IsEnabled"] is True
    # WHEN an update changes the stack's inventory (weekly)
    new_props = _props()
    new_props["Inventory"]["Schedule"] = {"Frequency": "Weekly"}
    updated = handle(
        s3,
        _request(
            "Update",
            new_props,
            OldResourceProperties=_props(),
            PhysicalResourceId=created["PhysicalResourceId"],
        ),
    )
    # THEN the physical id (the state before Create) stays, and nothing foreign moved
    assert updated["PhysicalResourceId"] == created["PhysicalResourceId"]
    assert _delivery_on(s3)
    assert _foreign_queue(s3) == theirs
    assert _inventory_ids(s3) == {OURS, THEIRS}
    ours = s3.get_bucket_inventory_configuration(Bucket=BUCKET, Id=OURS)["InventoryConfiguration"]
    assert ours["Schedule"] == {"Frequency": "Weekly"}
    # WHEN the stack is deleted
    handle(s3, _request("Delete", new_props, PhysicalResourceId=updated["PhysicalResourceId"]))
    # THEN delivery is off again (as found), their queue and inventory stay, ours is gone
    assert not _delivery_on(s3)
    assert _foreign_queue(s3) == theirs
    assert _inventory_ids(s3) == {THEIRS}


def test_delete_leaves_delivery_on_when_it_was_on_before_create(s3: Any) -> None:
    # GIVEN a bucket whose owner already sends its events to EventBridge
    assert bucket_setup.enable_event_bridge(s3, BUCKET) is False
    theirs = _foreign_queue(s3)
    # WHEN the stack creates then deletes the resource
    created = handle(s3, _request("Create", _props()))
    assert created["Data"]["EventBridgeWasEnabled"] == "true"
    handle(s3, _request("Delete", _props(), PhysicalResourceId=created["PhysicalResourceId"]))
    # THEN delivery is still on, and the foreign configuration with it
    assert _delivery_on(s3)
    assert _foreign_queue(s3) == theirs
    assert _inventory_ids(s3) == {THEIRS}


def test_event_bridge_false_leaves_delivery_alone(s3: Any) -> None:
    created = handle(s3, _request("Create", _props(event_bridge="false", inventory=False)))
    assert created["PhysicalResourceId"] == physical_id(BUCKET, "untouched")
    assert created["Data"]["EventBridgeWasEnabled"] == "unknown"
    assert not _delivery_on(s3)
    # the owner switches it on meanwhile; deleting the resource does not switch it off
    bucket_setup.enable_event_bridge(s3, BUCKET)
    handle(
        s3,
        _request(
            "Delete", _props("false", False), PhysicalResourceId=created["PhysicalResourceId"]
        ),
    )
    assert _delivery_on(s3)
    assert _inventory_ids(s3) == {THEIRS}


def test_update_to_another_bucket_sets_it_up_under_a_new_id(s3: Any) -> None:
    s3.create_bucket(Bucket="other-bucket")
    created = handle(s3, _request("Create", _props(inventory=False)))
    moved = {**_props(inventory=False), "BucketName": "other-bucket"}
    updated = handle(
        s3,
        _request(
            "Update",
            moved,
            OldResourceProperties=_props(inventory=False),
            PhysicalResourceId=created["PhysicalResourceId"],
        ),
    )
    # a new physical id: CloudFormation then deletes the old one, restoring the old bucket
    assert updated["PhysicalResourceId"] == physical_id("other-bucket", "off")
    assert bucket_setup.EVENT_BRIDGE in bucket_setup.describe(s3, "other-bucket")["notification"]
    handle(
        s3,
        _request(
            "Delete", _props(inventory=False), PhysicalResourceId=created["PhysicalResourceId"]
        ),
    )
    assert not _delivery_on(s3)


def test_delete_of_a_failed_create_touches_nothing(s3: Any) -> None:
    bucket_setup.enable_event_bridge(s3, BUCKET)
    result = handle(s3, _request("Delete", _props(), PhysicalResourceId="request-id-1234"))
    assert result == {"PhysicalResourceId": "request-id-1234"}
    assert _delivery_on(s3)
    assert _inventory_ids(s3) == {THEIRS}


def test_enable_is_idempotent_and_restore_keeps_foreign_entries(s3: Any) -> None:
    theirs = _foreign_queue(s3)
    assert bucket_setup.enable_event_bridge(s3, BUCKET) is False
    assert bucket_setup.enable_event_bridge(s3, BUCKET) is True
    assert bucket_setup.restore_event_bridge(s3, BUCKET, was_enabled=True) is False
    assert _delivery_on(s3)
    assert bucket_setup.restore_event_bridge(s3, BUCKET, was_enabled=False) is True
    assert bucket_setup.restore_event_bridge(s3, BUCKET, was_enabled=False) is False
    assert not _delivery_on(s3)
    assert _foreign_queue(s3) == theirs
    assert bucket_setup.delete_inventory(s3, BUCKET, "never-there") is False


def test_malformed_requests_are_refused() -> None:
    with pytest.raises(ValueError, match="RequestType"):
        handle(object(), {"RequestType": "Rollback", "ResourceProperties": {}})
    with pytest.raises(ValueError, match="EventBridge"):
        handle(object(), _request("Create", {"BucketName": BUCKET, "EventBridge": "yes"}))
    with pytest.raises(ValueError, match="Id"):
        inventory_configuration({"IsEnabled": "true"})
    with pytest.raises(ValueError, match="IsEnabled"):
        inventory_configuration({"Id": "x", "IsEnabled": "maybe"})
    with pytest.raises(ValueError, match="physical id"):
        parse_physical_id("their-bucket")
    assert parse_physical_id(physical_id("a.b-c", "on")) == ("a.b-c", "on")


# --- Why not CDK's own notifications handler ----------------------------------------------------

#: CDK's handler of ``Custom::S3BucketNotifications`` (``Bucket.from_bucket_name(...)
#: .enable_event_bridge_notification()`` on an imported bucket), inside aws-cdk-lib's package.
CDK_HANDLER = "package/custom-resource-handlers/dist/aws-s3/notifications-resource-handler/index.py"


def _cdk_notifications_handler() -> Any:
    """aws-cdk-lib's notifications handler module, loaded from the installed jsii package (its
    module-level S3 client is made when loaded: call under ``mock_aws``)."""
    import tarfile
    import types
    from pathlib import Path

    import aws_cdk

    (archive,) = (Path(aws_cdk.__file__).parent / "_jsii").glob("aws-cdk-lib@*.jsii.tgz")
    with tarfile.open(archive) as tar:
        member = tar.extractfile(CDK_HANDLER)
        assert member is not None
        source = member.read().decode()
    module = types.ModuleType("cdk_notifications_handler")
    exec(compile(source, CDK_HANDLER, "exec"), module.__dict__)  # CDK's own code, as shipped
    return module


@pytest.mark.allow_hosts(["127.0.0.1"])  # CDK's handler posts its reply to the ResponseURL
def test_cdk_notifications_handler_merges_but_leaves_delivery_on_after_delete(s3: Any) -> None:
    # GIVEN the bucket (delivery off, another team's queue) and CDK's handler as it would run
    # for an imported bucket (Managed "false": merge with the existing configuration)
    cdk = _cdk_notifications_handler()
    theirs = _foreign_queue(s3)
    props = {
        "BucketName": BUCKET,
        "Managed": "false",
        "SkipDestinationValidation": "true",
        "NotificationConfiguration": {"EventBridgeConfiguration": {}},
    }
    stack_id = "arn:aws:cloudformation:us-east-1:123456789012:stack/S3Ingest-dev/1"

    class Context:
        log_stream_name = "test"

    def run(kind: str) -> None:
        cdk.handler(
            {
                "RequestType": kind,
                "ResourceProperties": props,
                "StackId": stack_id,
                "RequestId": "1",
                "LogicalResourceId": "Notifications",
                "ResponseURL": "http://127.0.0.1:9/",  # nothing listens: the reply is dropped
            },
            Context(),
        )

    # WHEN CloudFormation creates, then deletes its resource
    run("Create")
    # THEN it merged: delivery on, the foreign queue kept
    assert _delivery_on(s3) and _foreign_queue(s3) == theirs
    run("Delete")
    # BUT on deletion it keeps any EventBridgeConfiguration it finds ("always treat EventBridge
    # configuration as an external config if it already exists"): delivery stays on although
    # it was off before; and it has no inventory configuration to manage. Hence our own resource.
    assert _delivery_on(s3) and _foreign_queue(s3) == theirs


def test_failed_create_switches_delivery_back_off(s3: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN delivery off, and S3 refusing the stack's inventory configuration (as it does when
    # the destination's policy does not let the bucket deliver; moto does not check that)
    from botocore.exceptions import ClientError

    def refuse(*args: Any, **kwargs: Any) -> None:
        error: Any = {"Error": {"Code": "AccessDenied", "Message": "destination refused"}}
        raise ClientError(error, "PutBucketInventoryConfiguration")

    monkeypatch.setattr(bucket_setup, "put_inventory", refuse)
    theirs = _foreign_queue(s3)
    # WHEN Create fails on the inventory (the Provider sends no Delete for a failed Create)
    with pytest.raises(ClientError, match="destination refused"):
        handle(s3, _request("Create", _props()))
    # THEN delivery is off again, as found, and the foreign configuration is intact
    assert not _delivery_on(s3)
    assert _foreign_queue(s3) == theirs
    assert _inventory_ids(s3) == {THEIRS}


def test_update_from_untouched_to_managed_delivery_is_refused(s3: Any) -> None:
    created = handle(s3, _request("Create", _props(event_bridge="false", inventory=False)))
    with pytest.raises(ValueError, match="cannot change from false to true"):
        handle(
            s3,
            _request(
                "Update",
                _props(event_bridge="true", inventory=False),
                OldResourceProperties=_props(event_bridge="false", inventory=False),
                PhysicalResourceId=created["PhysicalResourceId"],
            ),
        )
    # nothing changed: delivery stays off
    assert not _delivery_on(s3)


def _renamed(ident: str = "s3ingest-daily-v2") -> dict[str, Any]:
    props = _props()
    props["Inventory"] = {**props["Inventory"], "Id": ident}
    return props


def _update(s3: Any, new: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
    return handle(
        s3,
        _request(
            "Update", new, OldResourceProperties=old, PhysicalResourceId=physical_id(BUCKET, "off")
        ),
    )


def test_update_writes_the_new_inventory_before_it_removes_the_old(
    s3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    handle(s3, _request("Create", _props()))
    calls: list[tuple[str, str]] = []
    put, delete = bucket_setup.put_inventory, bucket_setup.delete_inventory

    def put_spy(client: Any, bucket: str, config: Any) -> None:
        calls.append(("put", config["Id"]))
        put(client, bucket, config)

    def delete_spy(client: Any, bucket: str, ident: str) -> bool:
        calls.append(("delete", ident))
        return delete(client, bucket, ident)

    monkeypatch.setattr(bucket_setup, "put_inventory", put_spy)
    monkeypatch.setattr(bucket_setup, "delete_inventory", delete_spy)
    _update(s3, _renamed(), _props())
    assert calls == [("put", "s3ingest-daily-v2"), ("delete", OURS)]
    assert _inventory_ids(s3) == {"s3ingest-daily-v2", THEIRS}


def test_failed_update_keeps_the_old_inventory_and_fails_with_a_reason(
    s3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the stack's inventory in place, then S3 refusing the renamed one
    from botocore.exceptions import ClientError

    handle(s3, _request("Create", _props()))

    def refuse(*args: Any, **kwargs: Any) -> None:
        error: Any = {"Error": {"Code": "AccessDenied", "Message": "destination refused"}}
        raise ClientError(error, "PutBucketInventoryConfiguration")

    monkeypatch.setattr(bucket_setup, "put_inventory", refuse)
    # WHEN the Update fails (the Provider reports FAILED with the exception's message)
    with pytest.raises(RuntimeError) as failed:
        _update(s3, _renamed(), _props())
    # THEN the reason names the configuration, S3's refusal and what was kept
    reason = str(failed.value)
    assert "'s3ingest-daily-v2'" in reason and "destination refused" in reason
    assert f"{OURS!r} is kept" in reason
    # AND the old configuration is still there, the foreign one too
    assert _inventory_ids(s3) == {OURS, THEIRS}
    ours = s3.get_bucket_inventory_configuration(Bucket=BUCKET, Id=OURS)["InventoryConfiguration"]
    assert ours["Destination"]["S3BucketDestination"]["Bucket"] == "arn:aws:s3:::stack-inventory"


def test_update_never_removes_or_overwrites_another_owners_inventory(s3: Any) -> None:
    handle(s3, _request("Create", _props()))
    # another owner took the stack's old id over (their own destination): it stays
    bucket_setup.put_inventory(s3, BUCKET, _inventory(OURS, "their-reports"))
    _update(s3, _renamed(), _props())
    assert _inventory_ids(s3) == {OURS, "s3ingest-daily-v2", THEIRS}
    # a new id that is another owner's is refused, theirs left as it is
    with pytest.raises(ValueError, match="belongs to another owner"):
        _update(s3, _renamed(THEIRS), _renamed())
    theirs = s3.get_bucket_inventory_configuration(Bucket=BUCKET, Id=THEIRS)
    dest = theirs["InventoryConfiguration"]["Destination"]["S3BucketDestination"]
    assert dest["Bucket"] == "arn:aws:s3:::their-reports"
    assert _inventory_ids(s3) == {OURS, "s3ingest-daily-v2", THEIRS}
