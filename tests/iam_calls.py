"""Every AWS call made while a block runs, recorded as the IAM requests it makes (test-only).

:func:`recording` wraps botocore's one API call entry point
(``botocore.client.BaseClient._make_api_call``) for the block: each call is recorded with the
function invocation it ran in (the ``_HANDLER`` of the invocation's environment,
:func:`s3ingest_fn.config.invocation_env`, which the local Lambda service and the local runtime
set for every invocation) and then made as usual. Nothing of it is in a production code path.

:func:`requests` turns one call into the IAM requests (action, resource ARN) AWS authorizes for
it, after the Service Authorization Reference
(https://docs.aws.amazon.com/service-authorization/latest/reference/reference_policies_actions-resources-contextkeys.html;
S3: https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3.html, SQS:
.../list_amazonsqs.html, DynamoDB: .../list_amazondynamodb.html, Step Functions:
.../list_awsstepfunctions.html, EventBridge: .../list_amazoneventbridge.html).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from s3ingest_fn.config import LOCAL_RECORDER, invocation_env

#: Where the local stack lives (:mod:`s3ingest.local.emulator.server`): the ARNs of recorded calls.
REGION = "us-east-1"
ACCOUNT = "123456789012"


@dataclass(frozen=True)
class Call:
    """One AWS call: ``service`` (botocore's name, ``"s3"``), ``operation`` (``"HeadObject"``),
    its parameters, ``handler``: the ``_HANDLER`` of the function invocation it ran in
    (None: not a function's, the operator's or the local runtime's own), ``access_key``: the
    access key id it was signed with (None: unsigned), and ``deployment``: the local
    deployment the invocation belongs to (its ``S3INGEST_LOCAL_RECORDER``)."""

    service: str
    operation: str
    params: Mapping[str, Any] = field(hash=False, compare=False)
    handler: str | None
    access_key: str | None = None
    deployment: str | None = None


@dataclass(frozen=True)
class Request:
    """One IAM request: ``action`` (``"s3:GetObject"``) on ``resource`` (an ARN, ``"*"`` for an
    action without resource-level permissions)."""

    action: str
    resource: str


class Recording:
    """The calls of a :func:`recording` block, in order (thread-safe)."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self._lock = threading.Lock()

    def add(self, call: Call) -> None:
        with self._lock:
            self.calls.append(call)

    def by_handler(self, deployment: str) -> dict[str, set[Request]]:
        """Function handler -> the IAM requests its invocations of local deployment
        ``deployment`` made (its ``recorder_key``: not another test's invocation still
        running)."""
        out: dict[str, set[Request]] = {}
        for call in list(self.calls):
            if call.handler is not None and call.deployment == deployment:
                out.setdefault(call.handler, set()).update(requests(call))
        return out

    def made_with(self, access_key: str) -> set[Request]:
        """The IAM requests of the calls signed with ``access_key`` outside any function."""
        return {
            r
            for call in list(self.calls)
            if call.handler is None and call.access_key == access_key
            for r in requests(call)
        }


@contextmanager
def recording() -> Iterator[Recording]:
    """Record every botocore API call made by any thread while the block runs."""
    from botocore.client import BaseClient

    found = Recording()
    client_class: Any = BaseClient  # botocore's stubs do not declare _make_api_call
    original = client_class._make_api_call

    def make_api_call(self: Any, operation_name: str, api_params: Any) -> Any:
        env = invocation_env()
        handler, deployment = env.get("_HANDLER"), env.get(LOCAL_RECORDER)
        credentials = getattr(self._request_signer, "_credentials", None)
        key = getattr(credentials, "access_key", None)
        service = self.meta.service_model.service_name
        found.add(Call(service, operation_name, api_params, handler, key, deployment))
        return original(self, operation_name, api_params)

    client_class._make_api_call = make_api_call
    try:
        yield found
    finally:
        client_class._make_api_call = original


# -- operation -> IAM action ----------------------------------------------------------------

#: botocore service name -> IAM service prefix, where they differ.
PREFIX = {
    "stepfunctions": "states",
    "dynamodbstreams": "dynamodb",
    "s3control": "s3",
    "monitoring": "cloudwatch",
}

#: Operations whose IAM action is not ``prefix:Operation``.
ACTIONS = {
    ("s3", "HeadObject"): "s3:GetObject",
    ("s3", "HeadBucket"): "s3:ListBucket",
    ("s3", "ListObjects"): "s3:ListBucket",
    ("s3", "ListObjectsV2"): "s3:ListBucket",
    ("s3", "ListObjectVersions"): "s3:ListBucketVersions",
    ("s3", "GetBucketNotificationConfiguration"): "s3:GetBucketNotification",
    ("s3", "PutBucketNotificationConfiguration"): "s3:PutBucketNotification",
    ("s3", "ListBucketInventoryConfigurations"): "s3:GetInventoryConfiguration",
    ("s3", "GetBucketInventoryConfiguration"): "s3:GetInventoryConfiguration",
    ("s3", "PutBucketInventoryConfiguration"): "s3:PutInventoryConfiguration",
    ("s3", "CreateMultipartUpload"): "s3:PutObject",
    ("s3", "UploadPart"): "s3:PutObject",
    ("s3", "CompleteMultipartUpload"): "s3:PutObject",
    ("s3", "ListMultipartUploads"): "s3:ListBucketMultipartUploads",
    ("s3", "ListBuckets"): "s3:ListAllMyBuckets",
    ("s3", "CopyObject"): "s3:PutObject",  # and s3:GetObject on the source (below)
    ("sqs", "SendMessageBatch"): "sqs:SendMessage",
    ("sqs", "DeleteMessageBatch"): "sqs:DeleteMessage",
    ("sqs", "ChangeMessageVisibilityBatch"): "sqs:ChangeMessageVisibility",
    ("lambda", "Invoke"): "lambda:InvokeFunction",
}

#: S3 object operations whose action names the version when the call names one
#: (``s3:GetObjectVersion``: GET and HEAD with ``versionId``).
VERSIONED = {
    "s3:GetObject": "s3:GetObjectVersion",
    "s3:DeleteObject": "s3:DeleteObjectVersion",
    "s3:GetObjectTagging": "s3:GetObjectVersionTagging",
    "s3:GetObjectAttributes": "s3:GetObjectVersionAttributes",
}

#: Calls no IAM policy governs (``sts:GetCallerIdentity`` needs no permission:
#: https://docs.aws.amazon.com/STS/latest/APIReference/API_GetCallerIdentity.html).
UNGOVERNED = {("sts", "GetCallerIdentity")}


def _arn(service: str, resource: str) -> str:
    return f"arn:aws:{service}:{REGION}:{ACCOUNT}:{resource}"


def _queue_arn(params: Mapping[str, Any]) -> str:
    url = params.get("QueueUrl")
    name = urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1] if url else params["QueueName"]
    return _arn("sqs", name)


def _bus_arn(name: str | None) -> str:
    name = name or "default"
    return name if name.startswith("arn:") else _arn("events", f"event-bus/{name}")


def _s3(operation: str, params: Mapping[str, Any]) -> list[Request]:
    action = ACTIONS.get(("s3", operation), f"s3:{operation}")
    bucket = f"arn:aws:s3:::{params['Bucket']}" if "Bucket" in params else "*"
    if operation == "DeleteObjects":
        return [
            Request(
                "s3:DeleteObjectVersion" if o.get("VersionId") else "s3:DeleteObject",
                f"{bucket}/{o['Key']}",
            )
            for o in params["Delete"]["Objects"]
        ]
    if "Key" not in params:
        return [Request(action, bucket)]
    if params.get("VersionId"):
        action = VERSIONED.get(action, action)
    out = [Request(action, f"{bucket}/{params['Key']}")]
    if operation == "CopyObject":
        source = params["CopySource"]
        if isinstance(source, str):
            path, _, version = source.partition("?versionId=")
            source = {"Bucket": path.split("/", 1)[0], "Key": path.split("/", 1)[1]}
            if version:
                source["VersionId"] = version
        read = "s3:GetObjectVersion" if source.get("VersionId") else "s3:GetObject"
        out.append(Request(read, f"arn:aws:s3:::{source['Bucket']}/{source['Key']}"))
    return out


def _resource(service: str, operation: str, params: Mapping[str, Any]) -> list[str]:
    """The resource ARNs one call acts on (``"*"``: none named)."""
    if service == "sqs":
        return [_queue_arn(params)]
    if service == "dynamodb":
        if "TableName" in params:
            table = _arn("dynamodb", f"table/{params['TableName']}")
            index = params.get("IndexName")
            return [f"{table}/index/{index}" if index else table]
        if "RequestItems" in params:
            return [_arn("dynamodb", f"table/{t}") for t in params["RequestItems"]]
        return ["*"]
    if service == "dynamodbstreams":
        return [params["StreamArn"]] if "StreamArn" in params else ["*"]
    if service == "stepfunctions":
        for name in ("stateMachineArn", "executionArn", "mapRunArn"):
            if name in params:
                return [params[name]]
        return ["*"]
    if service == "events":
        if operation == "PutEvents":
            return sorted({_bus_arn(e.get("EventBusName")) for e in params["Entries"]})
        if operation in ("DescribeEventBus",):
            return [_bus_arn(params.get("Name"))]
        if operation == "DescribeArchive":
            return [_arn("events", f"archive/{params['ArchiveName']}")]
        if operation == "StartReplay":  # the replay and the archive it reads
            return [_arn("events", f"replay/{params['ReplayName']}"), params["EventSourceArn"]]
        if operation in ("DescribeReplay", "CancelReplay"):
            return [_arn("events", f"replay/{params['ReplayName']}")]
        return ["*"]
    if service == "logs" and "logGroupName" in params:
        return [_arn("logs", f"log-group:{params['logGroupName']}:*")]
    if service == "lambda" and "FunctionName" in params:
        name = params["FunctionName"]
        return [name if name.startswith("arn:") else _arn("lambda", f"function:{name}")]
    if service == "sts" and "RoleArn" in params:
        return [params["RoleArn"]]
    if service == "secretsmanager" and "SecretId" in params:
        return [params["SecretId"]]
    if service == "s3control" and "JobId" in params:
        return [_arn("s3", f"job/{params['JobId']}")]
    if service == "cloudformation" and "StackName" in params:
        return [params["StackName"]]
    return ["*"]


def requests(call: Call) -> list[Request]:
    """The IAM requests AWS authorizes for ``call`` (none for an ungoverned call)."""
    if (call.service, call.operation) in UNGOVERNED:
        return []
    if call.service == "s3":
        return _s3(call.operation, call.params)
    default = f"{PREFIX.get(call.service, call.service)}:{call.operation}"
    action = ACTIONS.get((call.service, call.operation), default)
    return [Request(action, r) for r in _resource(call.service, call.operation, call.params)]
