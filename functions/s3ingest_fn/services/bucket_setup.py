"""Set up an existing (adopted) bucket for the pipeline without clobbering its owner's settings.

A bucket that other stacks already use has a notification configuration (queues, topics,
functions) and perhaps inventory configurations of its own. S3 replaces a bucket's whole
notification configuration on every PutBucketNotificationConfiguration
(https://docs.aws.amazon.com/AmazonS3/latest/API/API_PutBucketNotificationConfiguration.html),
so switching "Send notifications to Amazon EventBridge" on is a read-modify-write here: every
``TopicConfigurations``, ``QueueConfigurations`` and ``LambdaFunctionConfigurations`` entry is
written back as read, only ``EventBridgeConfiguration`` changes. Inventory configurations are
per id (https://docs.aws.amazon.com/AmazonS3/latest/API/API_PutBucketInventoryConfiguration.html):
the pipeline writes and deletes only its own id.

S3 has no conditional write of a notification configuration: a change another writer makes
between our read and our write is lost. Each function reads immediately before it writes, and
writes nothing when there is nothing to change.

Used by the stack's bucket-setup custom resource (:mod:`s3ingest_fn.handlers.bucket_setup`)
and by the local runtime's onboarding. The client needs ``s3:GetBucketNotification``,
``s3:PutBucketNotification``, ``s3:GetInventoryConfiguration`` and
``s3:PutInventoryConfiguration`` (which also covers DeleteBucketInventoryConfiguration and
ListBucketInventoryConfigurations, Service Authorization Reference for Amazon S3).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: A boto3 S3 client (``s3ingest_fn.wiring.s3_client``); services import no AWS SDK.
S3Client = Any

#: The key of the EventBridge switch in a notification configuration (an empty object when on).
EVENT_BRIDGE = "EventBridgeConfiguration"
#: The notification configurations other owners may have; always written back as read.
FOREIGN_CONFIGURATIONS = (
    "TopicConfigurations",
    "QueueConfigurations",
    "LambdaFunctionConfigurations",
)
_NO_INVENTORY = frozenset({"NoSuchConfiguration", "404", "NotFound"})


def notification_configuration(s3: S3Client, bucket: str) -> dict[str, Any]:
    """The bucket's notification configuration as PutBucketNotificationConfiguration takes it:
    the three foreign lists (when present) and ``EventBridgeConfiguration`` (when on)."""
    answer: Mapping[str, Any] = s3.get_bucket_notification_configuration(Bucket=bucket)
    config: dict[str, Any] = {k: list(answer[k]) for k in FOREIGN_CONFIGURATIONS if answer.get(k)}
    if EVENT_BRIDGE in answer:
        config[EVENT_BRIDGE] = {}
    return config


def _put_notification(s3: S3Client, bucket: str, config: Mapping[str, Any]) -> None:
    # SkipDestinationValidation: the foreign destinations are written back unchanged; S3 need
    # not test-message them again (and a destination that is gone must not fail our write).
    s3.put_bucket_notification_configuration(
        Bucket=bucket,
        NotificationConfiguration=dict(config),
        SkipDestinationValidation=True,
    )


def enable_event_bridge(s3: S3Client, bucket: str) -> bool:
    """Switch the bucket's EventBridge delivery on, keeping every other notification
    configuration (https://docs.aws.amazon.com/AmazonS3/latest/userguide/enable-event-notifications-eventbridge.html).

    Returns
    -------
    bool
        Whether delivery was already on (then nothing is written).

    Raises
    ------
    botocore.exceptions.ClientError
        When S3 refuses the read or the write (no such bucket, access denied).
    """
    config = notification_configuration(s3, bucket)
    if EVENT_BRIDGE in config:
        return True
    _put_notification(s3, bucket, {**config, EVENT_BRIDGE: {}})
    return False


def restore_event_bridge(s3: S3Client, bucket: str, was_enabled: bool) -> bool:
    """Leave the bucket's EventBridge delivery as it was before :func:`enable_event_bridge`:
    on when ``was_enabled``; otherwise off, every other notification configuration kept.

    Returns
    -------
    bool
        Whether a configuration was written.

    Raises
    ------
    botocore.exceptions.ClientError
        When S3 refuses the read or the write.
    """
    if was_enabled:
        return False
    config = notification_configuration(s3, bucket)
    if EVENT_BRIDGE not in config:
        return False
    del config[EVENT_BRIDGE]
    _put_notification(s3, bucket, config)
    return True


def put_inventory(s3: S3Client, bucket: str, configuration: Mapping[str, Any]) -> None:
    """Write one inventory configuration (its ``Id`` only; the bucket's others untouched).

    Parameters
    ----------
    configuration : Mapping
        PutBucketInventoryConfiguration's ``InventoryConfiguration``: ``Id``, ``IsEnabled``,
        ``Destination.S3BucketDestination`` (``Bucket`` ARN, ``Format``, ``Prefix``,
        ``AccountId``), ``IncludedObjectVersions``, ``OptionalFields``, ``Schedule``.

    Raises
    ------
    ValueError
        When the configuration has no ``Id``.
    botocore.exceptions.ClientError
        When S3 refuses it.
    """
    ident = configuration.get("Id")
    if not isinstance(ident, str) or not ident:
        raise ValueError("an inventory configuration needs its Id")
    s3.put_bucket_inventory_configuration(
        Bucket=bucket,
        Id=ident,
        InventoryConfiguration=dict(configuration),
    )


def delete_inventory(s3: S3Client, bucket: str, configuration_id: str) -> bool:
    """Delete the inventory configuration ``configuration_id`` (only it).

    Returns
    -------
    bool
        Whether it existed.

    Raises
    ------
    botocore.exceptions.ClientError
        When S3 refuses the request (other than "no such configuration").
    """
    try:
        s3.delete_bucket_inventory_configuration(Bucket=bucket, Id=configuration_id)
    except Exception as error:  # botocore's ClientError, matched by its response's code
        response = getattr(error, "response", None) or {}
        if str(response.get("Error", {}).get("Code")) in _NO_INVENTORY:
            return False
        raise
    return True


def inventory_configurations(s3: S3Client, bucket: str) -> list[dict[str, Any]]:
    """Every inventory configuration of the bucket (all pages of
    ListBucketInventoryConfigurations)."""
    found: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        kwargs: dict[str, Any] = {"Bucket": bucket}
        if token:
            kwargs["ContinuationToken"] = token
        page = s3.list_bucket_inventory_configurations(**kwargs)
        found.extend(dict(c) for c in page.get("InventoryConfigurationList", []))
        token = page.get("NextContinuationToken")
        if not page.get("IsTruncated") or not token:
            return found


def describe(s3: S3Client, bucket: str) -> dict[str, Any]:
    """``{"notification": <configuration>, "inventory": [<configurations>]}``: what the bucket
    holds now (:func:`notification_configuration`, :func:`inventory_configurations`)."""
    return {
        "notification": notification_configuration(s3, bucket),
        "inventory": inventory_configurations(s3, bucket),
    }
