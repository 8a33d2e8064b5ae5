"""The emulator's own boto3 clients answered in this process, without HTTP.

A request from :meth:`s3ingest.local.emulator.server.Emulator.client` goes through botocore as usual
(parameter validation, serialization, signing, the response's parsing and errors), and then,
instead of a socket to moto's server, to the same WSGI application the server runs
(``moto.moto_server.werkzeug_app.DomainDispatcherApplication``, which routes by the request's
host, path and signature) in the caller's thread: moto's backends are the process's, so the
answer is the server's. What it saves is the HTTP layer: moto's werkzeug server closes every
connection (``Connection: close``), so each call paid a TCP connection, a new server thread and
HTTP parsing on both sides, several milliseconds of CPU per call on this project's 2-core CI
machine. Clients made elsewhere (a processor's ``boto3.client()`` through
``AWS_ENDPOINT_URL``, moto's Step Functions executor, the Lambda service's functions) still use
HTTP, so the server path stays exercised.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

_APP: Any = None
_APP_LOCK = threading.Lock()
#: The event emitters of the clients :func:`serve_in_process` answers.
_SERVED: weakref.WeakSet[Any] = weakref.WeakSet()


def _app() -> Any:
    global _APP
    with _APP_LOCK:
        if _APP is None:
            from moto.moto_server.werkzeug_app import (
                DomainDispatcherApplication,
                create_backend_app,
            )

            _APP = DomainDispatcherApplication(create_backend_app)
        return _APP


def _body(body: Any) -> bytes:
    if body is None:
        return b""
    if isinstance(body, bytes | bytearray):
        return bytes(body)
    if isinstance(body, str):
        return body.encode("utf-8")
    data = body.read()  # a file-like body (botocore streams uploads from it)
    return data.encode("utf-8") if isinstance(data, str) else bytes(data)


def send(request: Any, **_: Any) -> Any:
    """botocore ``before-send`` handler: answer ``request`` (an ``AWSPreparedRequest``) from
    moto's WSGI application; returns a ``botocore.awsrequest.AWSResponse``."""
    from botocore.awsrequest import AWSResponse, HTTPHeaders
    from moto.core.botocore_stubber import MockRawResponse
    from werkzeug.test import EnvironBuilder, run_wsgi_app

    parts = urlsplit(request.url)
    headers = {
        key: value.decode("utf-8") if isinstance(value, bytes) else value
        for key, value in request.headers.items()
    }
    environ = EnvironBuilder(
        method=request.method,
        base_url=f"{parts.scheme}://{parts.netloc}",
        path=parts.path,
        query_string=parts.query,
        headers=headers,
        data=_body(request.body),
    ).get_environ()
    app_iter, status, response_headers = run_wsgi_app(_app(), environ)
    try:
        data = b"".join(app_iter)
    finally:
        close = getattr(app_iter, "close", None)
        if close is not None:
            close()
    reply_headers = HTTPHeaders()
    for key, value in response_headers.items():
        reply_headers[key] = value
    return AWSResponse(
        request.url, int(status.split(" ", 1)[0]), reply_headers, MockRawResponse(data)
    )


def serve_in_process(client: Any) -> Any:
    """Make ``client`` (bound to an emulator) send its requests to :func:`send`; returns it."""
    client.meta.events.register_first("before-send", send)
    _SERVED.add(client.meta.events)
    return client


def answer_before(client: Any, handler: Callable[..., Any]) -> None:
    """Let ``handler`` (a botocore ``before-send`` handler) answer ``client``'s requests first:
    a request it answers (a non-None response) never reaches the emulator. botocore calls every
    ``before-send`` handler and uses the first response (``botocore.endpoint.Endpoint.
    _do_get_response``), so a handler merely registered beside :func:`send` would answer a
    request moto had already applied."""
    events = client.meta.events
    served = events in _SERVED
    if served:
        events.unregister("before-send", send)

    def first(request: Any, **kwargs: Any) -> Any:
        answer = handler(request=request, **kwargs)
        if answer is not None or not served:
            return answer
        return send(request)

    events.register_first("before-send", first)
