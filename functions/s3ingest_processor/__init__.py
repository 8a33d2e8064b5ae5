"""Write an s3ingest processor function in Python: a Lambda handler in a few lines.

The ingest side invokes a processor function synchronously, under the claim of one applied
change, with the versioned JSON request of ``docs/processor-api.md`` (the JSON Schemas are in
this package: :func:`schema`). :func:`processor` turns a plain function into such a handler::

    from s3ingest_processor import Change, Content, processor

    def thumbnail(change: Change, content: Content | None) -> None:
        if content is None:                  # a removal: no bytes
            return delete_thumbnail(change.key)
        make_thumbnail(change.key, content.read())

    handler = processor(thumbnail)           # the Lambda handler: "module.handler"

The function returns normally for ``done``. A :class:`Superseded` (raised by
:meth:`Content.read` / :meth:`Content.stream` when a newer write replaced the bytes, or by the
function itself) answers ``superseded``. Any other exception propagates: Lambda reports a
function error, the ingest side releases the claim and the change is retried.

Standard library only (urllib for the presigned GET): the package adds nothing to a function's
dependencies beyond itself.
"""

from __future__ import annotations

import functools
import http.client
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, overload

#: The request version this package writes handlers for: requests of major version 1 ("1",
#: "1.<minor>") are accepted; any other major is refused (:class:`UnsupportedRequest`).
REQUEST_VERSION = "1"
SUPPORTED_MAJOR = "1"
#: The response statuses (``{"status": ..., "detail"?: str}``).
DONE, SUPERSEDED = "done", "superseded"
#: Change kinds.
CREATED, REMOVED = "created", "removed"
#: Seconds a read waits for the content's server (connect, then each read of the body).
DEFAULT_READ_TIMEOUT = 30.0


class Superseded(Exception):
    """The change's bytes are no longer the key's (a newer write, or the version is gone): the
    function's effect is obsolete. Raised by :class:`Content` on a 412 or 404; a function may
    raise it too. The handler answers ``{"status": "superseded", "detail": str(exc)}``."""


class UnsupportedRequest(ValueError):
    """The request is not one this package understands: an unknown major version, or a
    missing/ill-typed field. Propagates (a function error): the change is retried, then
    dead-lettered; upgrade the function's s3ingest package."""


class ContentError(RuntimeError):
    """The content could not be read for another reason than a newer write (an expired URL: 403,
    a server error, a broken connection). Propagates: the change is retried."""


@dataclass(frozen=True)
class Change:
    """The applied change the function runs for (the request's ``change``).

    Attributes
    ----------
    change_id : str
        Deterministic id of the change (``id``, 32 hex chars): the same change always has the
        same id. Use it as the idempotency key of the effect downstream (the function may run
        more than once for a change: after a timeout, a crash, an error).
    bucket, key : str
        Bucket and decoded key.
    kind : str
        ``"created"`` or ``"removed"``.
    sequencer, version_id, etag : str or None
        S3's sequencer of the change's event (None for observations), the version (None:
        unversioned bucket) and the ETag without quotes.
    size : int or None
        Bytes.
    source, event_name : str
        ``live``/``replay``/``repair``/``backfill``, and what S3 reported.
    token : int
        Fencing token of this claim: increasing per key (the ledger row's revision plus the
        claim's epoch second << 20, below 2^53), also across a recreated row or a restored
        ledger. A downstream store that keeps the highest token per key can refuse a stale
        writer.
    lease_deadline_ms : int or None
        Epoch ms when the claim's lease ends: past it another worker may run a newer change.
    processor : str
        The processor's name in the stack.
    """

    change_id: str
    bucket: str
    key: str
    kind: str
    sequencer: str | None
    version_id: str | None
    etag: str | None
    size: int | None
    source: str
    event_name: str
    token: int
    lease_deadline_ms: int | None
    processor: str

    @classmethod
    def of(cls, request: dict[str, Any]) -> Change:
        """The change of a request (after :func:`check_request`)."""
        c = request["change"]
        return cls(
            change_id=c["id"],
            bucket=c["bucket"],
            key=c["key"],
            kind=c["kind"],
            sequencer=c.get("sequencer"),
            version_id=c.get("versionId"),
            etag=c.get("etag"),
            size=c.get("size"),
            source=c.get("source", ""),
            event_name=c.get("eventName", ""),
            token=c["token"],
            lease_deadline_ms=c.get("leaseDeadline"),
            processor=request.get("processor", ""),
        )

    def lease_remaining_ms(self, now_ms: int | None = None) -> int | None:
        """Milliseconds left on the claim's lease (negative once past), None when unknown."""
        if self.lease_deadline_ms is None:
            return None
        now = int(time.time() * 1000) if now_ms is None else now_ms
        return self.lease_deadline_ms - now


Opener = Callable[..., Any]


@dataclass
class Content:
    """The bytes of a created change, through the presigned GET of the request's ``content``.

    Parameters
    ----------
    url : str
        Presigned GET pinned to the change.
    headers : dict
        Headers the GET must carry (``If-Match`` for an ETag pin).
    expires_at_ms : int
        When the URL stops working, epoch ms.
    timeout : float
        Seconds to wait for the server (connect, each read).
    opener : callable
        ``urllib.request.urlopen``-like (tests inject one).
    """

    url: str
    headers: dict[str, str] = field(default_factory=dict)
    expires_at_ms: int | None = None
    timeout: float = DEFAULT_READ_TIMEOUT
    opener: Opener = urllib.request.urlopen

    @classmethod
    def of(cls, request: dict[str, Any], **kw: Any) -> Content | None:
        """The content of a request; None for a removal."""
        c = request.get("content")
        if c is None:
            return None
        return cls(
            url=c["url"],
            headers=dict(c.get("headers") or {}),
            expires_at_ms=c.get("expiresAt"),
            **kw,
        )

    def _open(self) -> Any:
        req = urllib.request.Request(self.url, headers=self.headers, method="GET")
        try:
            return self.opener(req, timeout=self.timeout)
        except urllib.error.HTTPError as exc:
            if exc.code in (404, 412):
                raise Superseded(f"content: HTTP {exc.code} (a newer write, or gone)") from exc
            raise ContentError(f"content: HTTP {exc.code} {exc.reason}") from exc
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            raise ContentError(f"content: {exc.__class__.__name__}: {exc}") from exc

    def read(self) -> bytes:
        """The whole object.

        Raises
        ------
        Superseded
            412 (the ETag no longer matches) or 404 (the version or key is gone).
        ContentError
            Any other failure (403: the URL expired; 5xx; the connection broke).
        """
        with self._open() as resp:
            try:
                return bytes(resp.read())
            except (OSError, http.client.HTTPException) as exc:
                raise ContentError(f"content body: {exc.__class__.__name__}: {exc}") from exc

    def stream(self, chunk_size: int = 1 << 20) -> Iterator[bytes]:
        """The object in chunks of at most ``chunk_size`` bytes.

        Raises
        ------
        Superseded, ContentError
            As :meth:`read`.
        """
        with self._open() as resp:
            length = resp.headers.get("Content-Length")
            got = 0
            while True:
                try:
                    chunk = resp.read(chunk_size)
                except (OSError, http.client.HTTPException) as exc:
                    raise ContentError(f"content body: {exc.__class__.__name__}: {exc}") from exc
                if not chunk:
                    break
                got += len(chunk)
                yield bytes(chunk)
            if length is not None and got != int(length):
                # a read in parts ends quietly when the connection closes early
                raise ContentError(f"content body: IncompleteRead: {got} bytes of {int(length)}")


def check_request(request: Any) -> dict[str, Any]:
    """``request`` if it is a request this package understands (major version 1, the fields a
    :class:`Change` needs); raises :class:`UnsupportedRequest` naming what is wrong."""
    if not isinstance(request, dict):
        raise UnsupportedRequest(f"request is a {type(request).__name__}, not a JSON object")
    version = request.get("version")
    if not isinstance(version, str) or version.split(".", 1)[0] != SUPPORTED_MAJOR:
        raise UnsupportedRequest(
            f"request version {version!r} is not supported: this s3ingest_processor handles "
            f"version {SUPPORTED_MAJOR} (and {SUPPORTED_MAJOR}.x); upgrade the s3ingest "
            "package your function ships"
        )
    change = request.get("change")
    if not isinstance(change, dict):
        raise UnsupportedRequest("request has no 'change' object")
    wanted = {"id": str, "bucket": str, "key": str, "kind": str, "token": int}
    for name, kind in wanted.items():
        if not isinstance(change.get(name), kind) or isinstance(change.get(name), bool):
            raise UnsupportedRequest(f"request change.{name} is missing or not a {kind.__name__}")
    if change["kind"] not in (CREATED, REMOVED):
        raise UnsupportedRequest(f"request change.kind {change['kind']!r} is unknown")
    content = request.get("content")
    if change["kind"] == REMOVED and content is not None:
        raise UnsupportedRequest("request content of a removed change is not null")
    if change["kind"] == CREATED and not (
        isinstance(content, dict) and isinstance(content.get("url"), str)
    ):
        raise UnsupportedRequest(
            "request content of a created change is not an object with a 'url'"
        )
    return request


Handler = Callable[[Any, Any], dict[str, Any]]
Function = Callable[[Change, Content | None], object]


@overload
def processor(fn: Function, *, read_timeout: float = ...) -> Handler: ...


@overload
def processor(fn: None = None, *, read_timeout: float = ...) -> Callable[[Function], Handler]: ...


def processor(fn: Function | None = None, *, read_timeout: float = DEFAULT_READ_TIMEOUT) -> Any:
    """Turn ``fn(change, content)`` into a Lambda handler ``handler(event, context)`` speaking
    the processor request/response (``docs/processor-api.md``).

    Usable as ``handler = processor(fn)``, ``@processor`` or ``@processor(read_timeout=10)``.
    The handler answers ``{"status": "done"}`` when ``fn`` returns, ``{"status":
    "superseded", "detail": ...}`` when it raises :class:`Superseded`; any other exception
    propagates (a function error: the change is retried). A request of an unknown major version
    raises :class:`UnsupportedRequest`. The function given stays reachable as
    ``handler.__wrapped__``.
    """

    def wrap(f: Function) -> Handler:
        @functools.wraps(f)
        def handler(event: Any, context: Any = None) -> dict[str, Any]:
            request = check_request(event)
            change = Change.of(request)
            content = Content.of(request, timeout=read_timeout)
            try:
                f(change, content)
            except Superseded as exc:
                detail = str(exc)
                return {"status": SUPERSEDED, **({"detail": detail} if detail else {})}
            return {"status": DONE}

        return handler

    return wrap(fn) if fn is not None else wrap


def schema(name: str) -> dict[str, Any]:
    """One of the package's JSON Schemas (draft 2020-12) by file name: ``request-v1.json`` or
    ``response-v1.json``."""
    text = resources.files(__name__).joinpath("schema", name).read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


__all__ = [
    "CREATED",
    "DONE",
    "REMOVED",
    "REQUEST_VERSION",
    "SUPERSEDED",
    "Change",
    "Content",
    "ContentError",
    "Superseded",
    "UnsupportedRequest",
    "check_request",
    "processor",
    "schema",
]
