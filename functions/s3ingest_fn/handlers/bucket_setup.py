"""The bucket-setup custom resource's ``onEvent`` handler (CDK ``custom_resources.Provider``).

For an existing bucket the stack adopts, it switches EventBridge delivery on and adds the stack's
own inventory configuration, keeping everything else the bucket's owners configured
(:mod:`s3ingest_fn.services.bucket_setup`); on deletion it leaves delivery as it found it and
removes only its own inventory configuration.

Resource properties (CloudFormation passes every scalar as a string):

- ``BucketName``: the bucket.
- ``EventBridge``: ``"true"`` to switch delivery on, ``"false"`` to leave it alone.
- ``Inventory`` (optional): an ``InventoryConfiguration`` of PutBucketInventoryConfiguration
  (``Id``, ``IsEnabled``, ``Destination``, ...), written under its own ``Id`` only.

The physical id, ``<bucket>|eventbridge-was-<on|off|untouched>``, records whether delivery was
on before Create, since only Create can see that; Update keeps it (a new ``BucketName`` is a
replacement: the new bucket is set up as on Create under a new id, and CloudFormation then
deletes the old one, which restores the old bucket). An Update that renames the inventory writes
the new configuration first and removes the old one only after, and only while it is still the
stack's (same destination); a refused write raises, which the Provider framework reports to
CloudFormation as ``FAILED`` with the message as the reason ("if onEvent throws, the framework
submits a FAILED response"), the old configuration untouched. Request shapes:
https://docs.aws.amazon.com/cdk/api/v2/docs/aws-cdk-lib.custom_resources-readme.html#handling-lifecycle-events-onevent
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from s3ingest_fn import wiring
from s3ingest_fn.contract import BUCKET_SETUP_SERVICE
from s3ingest_fn.handlers import resume
from s3ingest_fn.handlers.telemetry import function_logger
from s3ingest_fn.services import bucket_setup

_logger = function_logger(BUCKET_SETUP_SERVICE)

#: The physical id's separator and its three states.
_SEPARATOR = "|eventbridge-was-"
_STATES = ("on", "off", "untouched")


def physical_id(bucket: str, state: str) -> str:
    """``<bucket>|eventbridge-was-<state>`` (state one of ``on``, ``off``, ``untouched``)."""
    if state not in _STATES:
        raise ValueError(f"state must be one of {_STATES}, not {state!r}")
    return f"{bucket}{_SEPARATOR}{state}"


def parse_physical_id(value: str) -> tuple[str, str]:
    """``(bucket, state)`` of :func:`physical_id`'s value.

    Raises
    ------
    ValueError
        When ``value`` is not one (a resource this handler did not create).
    """
    bucket, sep, state = value.rpartition(_SEPARATOR)
    if not sep or not bucket or state not in _STATES:
        raise ValueError(f"not a bucket-setup physical id: {value!r}")
    return bucket, state


def _flag(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ValueError(f"{name} must be true or false, not {value!r}")


def inventory_configuration(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The ``Inventory`` property as S3 takes it: ``IsEnabled`` back to a boolean (the one
    non-string scalar of the shape); everything else is already a string or a list of them.

    Raises
    ------
    ValueError
        When ``Id`` is missing or ``IsEnabled`` is not a boolean or its string.
    """
    config = dict(raw)
    if not config.get("Id"):
        raise ValueError("Inventory needs an Id")
    config["IsEnabled"] = _flag(config.get("IsEnabled", True), "Inventory.IsEnabled")
    return config


def _inventory_id(props: Mapping[str, Any]) -> str | None:
    inventory = props.get("Inventory")
    return str(inventory["Id"]) if isinstance(inventory, Mapping) and "Id" in inventory else None


def _set_up(s3: Any, props: Mapping[str, Any]) -> str:
    """Create: delivery on (when asked) and our inventory; returns the physical id."""
    bucket = str(props["BucketName"])
    state = "untouched"
    if _flag(props.get("EventBridge", "true"), "EventBridge"):
        state = "on" if bucket_setup.enable_event_bridge(s3, bucket) else "off"
    if isinstance(props.get("Inventory"), Mapping):
        try:
            bucket_setup.put_inventory(s3, bucket, inventory_configuration(props["Inventory"]))
        except Exception:
            # A failed Create gets no Delete from the Provider framework: undo the delivery
            # switch here, so the bucket is left as found.
            if state != "untouched":
                bucket_setup.restore_event_bridge(s3, bucket, was_enabled=state == "on")
            raise
    return physical_id(bucket, state)


def _destination(config: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """``(bucket ARN, prefix)`` an inventory configuration delivers to, or None."""
    if not isinstance(config, Mapping):
        return None
    dest = (config.get("Destination") or {}).get("S3BucketDestination") or {}
    return str(dest.get("Bucket", "")), str(dest.get("Prefix", ""))


def _existing(s3: Any, bucket: str, ident: str) -> dict[str, Any] | None:
    """The bucket's inventory configuration ``ident`` as S3 holds it, or None."""
    for config in bucket_setup.inventory_configurations(s3, bucket):
        if config.get("Id") == ident:
            return config
    return None


def _update_inventory(
    s3: Any, bucket: str, old: Mapping[str, Any], props: Mapping[str, Any]
) -> None:
    """Update's inventory part: the new configuration is written first, the old one (another
    ``Id``) removed only after, and only while it is still the one the stack wrote (the same
    destination): a failed write leaves the bucket with the old configuration, and no other
    owner's configuration is ever removed or overwritten.

    Raises
    ------
    RuntimeError
        When S3 refuses the new configuration (the Provider reports the resource ``FAILED``
        with this message as its reason; CloudFormation's rollback Update keeps the old one).
    ValueError
        When the new ``Id`` names a configuration another owner holds.
    """
    old_id, new_id = _inventory_id(old), _inventory_id(props)
    if new_id is not None:
        new = inventory_configuration(props["Inventory"])
        if new_id != old_id:
            held = _existing(s3, bucket, new_id)
            if held is not None and _destination(held) != _destination(new):
                raise ValueError(
                    f"inventory configuration {new_id!r} of {bucket} delivers to "
                    f"{_destination(held)}, not the stack's {_destination(new)}: it belongs to "
                    "another owner and is left alone; name the stack's inventory differently"
                )
        try:
            bucket_setup.put_inventory(s3, bucket, new)
        except Exception as exc:
            kept = f"; {old_id!r} is kept" if old_id is not None else ""
            raise RuntimeError(
                f"inventory configuration {new_id!r} of {bucket} not written "
                f"({type(exc).__name__}: {exc}){kept}"
            ) from exc
    if old_id is not None and old_id != new_id:
        held = _existing(s3, bucket, old_id)
        if held is not None and _destination(held) == _destination(old.get("Inventory")):
            bucket_setup.delete_inventory(s3, bucket, old_id)


def handle(s3: Any, event: Mapping[str, Any]) -> dict[str, Any]:
    """One Create, Update or Delete request with the S3 client ``s3``.

    Returns
    -------
    dict
        ``{"PhysicalResourceId": ..., "Data": {"BucketName", "EventBridgeWasEnabled"}}``
        (``EventBridgeWasEnabled``: ``"true"``, ``"false"`` or ``"unknown"`` when delivery was
        left alone).

    Raises
    ------
    ValueError
        For an unknown request type or malformed properties (the Provider reports the failure to
        CloudFormation).
    botocore.exceptions.ClientError
        When S3 refuses a request.
    RuntimeError
        When an Update's new inventory configuration is refused (the old one is kept).
    """
    request = event.get("RequestType")
    props: Mapping[str, Any] = event.get("ResourceProperties") or {}
    if request == "Create":
        pid = _set_up(s3, props)
    elif request == "Update":
        old: Mapping[str, Any] = event.get("OldResourceProperties") or {}
        bucket, state = parse_physical_id(str(event["PhysicalResourceId"]))
        if str(props["BucketName"]) != bucket:
            # a replacement: CloudFormation deletes the old physical id afterwards
            pid = _set_up(s3, props)
        else:
            pid = physical_id(bucket, state)
            if _flag(props.get("EventBridge", "true"), "EventBridge"):
                if state == "untouched":
                    # Where delivery stood before could only be recorded in a new physical id,
                    # and CloudFormation's Delete of the old one would remove the inventory.
                    raise ValueError(
                        f"eventBridge of {bucket} cannot change from false to true on a "
                        "deployed stack: switch delivery on with `s3ingest onboard` (it keeps "
                        "every other notification configuration), or remove the bucket from "
                        "the stack and add it again"
                    )
                bucket_setup.enable_event_bridge(s3, bucket)
            elif state != "untouched":
                bucket_setup.restore_event_bridge(s3, bucket, was_enabled=state == "on")
            _update_inventory(s3, bucket, old, props)
    elif request == "Delete":
        pid = str(event["PhysicalResourceId"])
        try:
            bucket, state = parse_physical_id(pid)
        except ValueError:
            # Create failed before a physical id existed: the Provider sends Delete with the
            # one it made up; there is nothing of ours to undo.
            return {"PhysicalResourceId": pid}
        if state != "untouched":
            bucket_setup.restore_event_bridge(s3, bucket, was_enabled=state == "on")
        if (ident := _inventory_id(props)) is not None:
            bucket_setup.delete_inventory(s3, bucket, ident)
    else:
        raise ValueError(f"unknown RequestType {request!r}")
    bucket, state = parse_physical_id(pid)
    was = {"on": "true", "off": "false", "untouched": "unknown"}[state]
    return {"PhysicalResourceId": pid, "Data": {"BucketName": bucket, "EventBridgeWasEnabled": was}}


def on_event(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Lambda entry point (``s3ingest_fn.handlers.bucket_setup.on_event``), invoked by the CDK
    Provider framework's function; see :func:`handle`. The stack sets up buckets of its own
    account only: every call names that account (``ExpectedBucketOwner``, the account of the
    function's ARN), so a bucket of that name another account owns answers 403."""
    arn = str(getattr(context, "invoked_function_arn", "") or "")
    bucket = (event.get("ResourceProperties") or {}).get("BucketName")
    owners = {bucket: arn.split(":")[4]} if arn.count(":") >= 5 and isinstance(bucket, str) else {}
    s3 = wiring.s3_client(owners)
    result = handle(s3, event)
    _logger.info("bucket setup %s: %s", event.get("RequestType"), result)
    return result


#: the cold start ends with this module (see :mod:`s3ingest_fn.handlers`)
resume()
