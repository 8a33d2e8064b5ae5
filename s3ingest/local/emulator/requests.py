"""Requests the emulator answered, by kind (``s3:ListObjectVersions``, ``dynamodb:PutItem`` …).

Every request to an emulator, from its in-process clients
(:mod:`s3ingest.local.emulator.in_process`) or over HTTP (moto's Step Functions executor, the local
Lambda service's functions, a processor's ``boto3.client()``), goes through moto's WSGI application
(``moto.moto_server.werkzeug_app.DomainDispatcherApplication``); :func:`install` wraps it once per
process and counts each request for the emulator its ``Host`` names (port). The kind comes from
the request's signature (service in the SigV4 credential scope) and, for JSON protocols, the
``X-Amz-Target`` header; for S3, from the method and the query
(https://docs.aws.amazon.com/AmazonS3/latest/API/API_Operations_Amazon_Simple_Storage_Service.html).
Onboarding and the bench read these counts as the requests a run made.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from typing import Any
from urllib.parse import parse_qs

_COUNTS: dict[int, Counter[str]] = {}
_LOCK = threading.Lock()
_SERVICE = re.compile(r"Credential=[^/]+/[^/]+/[^/]+/([^/]+)/aws4_request")


def install() -> None:
    """Count every request moto's WSGI application answers (idempotent)."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    original = DomainDispatcherApplication.__call__
    if getattr(original, "_s3ingest_counted", False):
        return

    def counted(self: Any, environ: dict[str, Any], start_response: Any) -> Any:
        _count(environ)
        return original(self, environ, start_response)

    counted._s3ingest_counted = True  # type: ignore[attr-defined]
    DomainDispatcherApplication.__call__ = counted  # type: ignore[method-assign]


def counts(port: int) -> Counter[str]:
    """A copy of the counts of the emulator on ``port`` so far."""
    with _LOCK:
        return Counter(_COUNTS.get(port, Counter()))


def forget(port: int) -> None:
    """Drop the counts of the emulator on ``port`` (it stopped)."""
    with _LOCK:
        _COUNTS.pop(port, None)


def _count(environ: dict[str, Any]) -> None:
    host = str(environ.get("HTTP_HOST") or "")
    try:
        port = int(host.rsplit(":", 1)[1])
    except (IndexError, ValueError):
        return
    kind = request_kind(environ)
    with _LOCK:
        _COUNTS.setdefault(port, Counter())[kind] += 1


def request_kind(environ: dict[str, Any]) -> str:
    """``service:Operation`` of one WSGI request (``service:other`` when unknown)."""
    match = _SERVICE.search(str(environ.get("HTTP_AUTHORIZATION") or ""))
    service = match.group(1) if match else "unsigned"
    target = environ.get("HTTP_X_AMZ_TARGET")
    if target:
        return f"{service}:{str(target).rsplit('.', 1)[-1]}"
    if service == "s3":
        return f"s3:{_s3_operation(environ)}"
    if service == "lambda" and str(environ.get("PATH_INFO") or "").endswith("/invocations"):
        return "lambda:Invoke"
    return f"{service}:other"


def _s3_operation(environ: dict[str, Any]) -> str:
    method = str(environ.get("REQUEST_METHOD") or "GET")
    query = parse_qs(str(environ.get("QUERY_STRING") or ""), keep_blank_values=True)
    path = str(environ.get("PATH_INFO") or "/").strip("/")
    has_key = "/" in path
    for name, operation in (
        ("versions", "ListObjectVersions"),
        ("notification", "BucketNotificationConfiguration"),
        ("inventory", "BucketInventoryConfiguration"),
        ("versioning", "BucketVersioning"),
        ("uploads", "MultipartUpload"),
        ("delete", "DeleteObjects"),
    ):
        if name in query:
            if name == "inventory" and method == "GET" and "id" not in query:
                return "ListBucketInventoryConfigurations"
            verb = {"GET": "Get", "PUT": "Put", "DELETE": "Delete", "POST": ""}.get(method, "")
            if operation.startswith(("List", "Delete", "Multipart")):
                return operation
            return f"{verb}{operation}"
    if not has_key:
        if method == "GET":
            return "ListObjectsV2" if query.get("list-type") == ["2"] else "ListObjects"
        return {"PUT": "CreateBucket", "HEAD": "HeadBucket", "DELETE": "DeleteBucket"}.get(
            method, "other"
        )
    return {
        "GET": "GetObject",
        "HEAD": "HeadObject",
        "PUT": "CopyObject" if environ.get("HTTP_X_AMZ_COPY_SOURCE") else "PutObject",
        "DELETE": "DeleteObject",
    }.get(method, "other")
