"""Processor functions: a team's own Lambda (any runtime) run as a processor, under the claim.

The ingest side invokes the function synchronously with the versioned JSON request of
``docs/processor-api.md`` (schemas: ``functions/s3ingest_processor/schema/``)::

    {"version": "1", "processor": "<name>",
     "change": {"id", "bucket", "key", "kind", "sequencer", "versionId", "etag", "size",
                "source", "eventName", "token", "leaseDeadline"},
     "content": null | {"url": "<presigned GET>", "headers": {"If-Match": "\\"<etag>\\""},
                        "expiresAt": <epoch ms>}}

and reads ``{"status": "done" | "superseded", "detail"?: str}`` back. :class:`FunctionProcessor`
is a :class:`~s3ingest_fn.core.effects.Processor` over an *invoker* (request dict -> the
function's JSON answer): :func:`lambda_invoker` (Lambda ``Invoke``, ``RequestResponse``) in AWS,
:func:`handler_invoker` (the handler imported and called in this process) in the local runtime.
Everything that is not ``done`` or ``superseded`` (a function error, a timeout, throttling, a
failed Invoke, an answer that is not a response) raises :class:`ProcessorFunctionError`, a
:class:`~s3ingest_fn.core.model.TransientError`: the claim is released and the message retried.
"""

from __future__ import annotations

import importlib
import json
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from s3ingest_fn.core.effects import CREATED, AppliedChange, PinnedContent, SupersededError
from s3ingest_fn.core.model import TransientError

if TYPE_CHECKING:
    from botocore.config import Config  # pragma: no cover

#: The request version the ingest side sends (``docs/processor-api.md``, versioning).
REQUEST_VERSION = "1"
#: Response statuses.
DONE, SUPERSEDED = "done", "superseded"
STATUSES = (DONE, SUPERSEDED)
#: How long a presigned content URL is valid when no timeout is given, seconds: Lambda's longest
#: timeout.
DEFAULT_URL_SECONDS = 900
#: Seconds a presigned content URL outlives the processor function's timeout
#: (:func:`url_seconds_for`): the URL is signed before ``Invoke`` and must still work at the
#: function's last moment, after a cold start's init phase (up to 10 s before the handler runs,
#: https://docs.aws.amazon.com/lambda/latest/dg/lambda-runtime-environment.html), the Invoke's
#: own connection and read slack (:data:`INVOKE_READ_SLACK_S`), a GET retried near the end and
#: clock skew between the signer and S3 (S3 checks ``X-Amz-Date`` + ``X-Amz-Expires`` against
#: its own clock): 60 s covers them with room.
URL_MARGIN_S = 60
#: Seconds the Invoke's HTTP read waits beyond the function's timeout: Lambda answers a timed-out
#: function itself (a function error) after the timeout; the read must not give up first.
INVOKE_READ_SLACK_S = 15
#: Seconds to open the connection to the Lambda endpoint.
INVOKE_CONNECT_TIMEOUT_S = 5
#: Invoke error codes that mean "throttled": the function did not run
#: (https://docs.aws.amazon.com/lambda/latest/api/API_Invoke.html, Errors: 429).
THROTTLE_CODES = frozenset({"TooManyRequestsException", "ThrottlingException", "Throttling"})
#: At most this many characters of a function's error or an invalid answer go into a message.
DETAIL_CHARS = 500

#: The classifications of :attr:`ProcessorFunctionError.reason`.
FUNCTION_ERROR = "function-error"
TIMEOUT = "timeout"
THROTTLED = "throttled"
INVOKE_FAILED = "invoke-failed"
INVALID_RESPONSE = "invalid-response"
REASONS = (FUNCTION_ERROR, TIMEOUT, THROTTLED, INVOKE_FAILED, INVALID_RESPONSE)

#: An invoker: the request (JSON-ready) -> the function's answer, parsed from JSON.
Invoke = Callable[[dict[str, Any]], Any]


class ProcessorFunctionError(TransientError):
    """A processor function's run that answered neither ``done`` nor ``superseded``.

    The message starts with :attr:`reason` (one of :data:`REASONS`): ``function-error`` (the
    function raised, or Lambda reported ``X-Amz-Function-Error``), ``timeout`` (the function
    ran out of time, or no answer came), ``throttled`` (Lambda refused the Invoke: 429),
    ``invoke-failed`` (any other Invoke failure) or ``invalid-response``.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message


def _change_of(change: AppliedChange) -> dict[str, Any]:
    return {
        "id": change.change_id,
        "bucket": change.bucket,
        "key": change.key,
        "kind": change.kind,
        "sequencer": change.sequencer,
        "versionId": change.version_id,
        "etag": change.etag,
        "size": change.size,
        "source": change.source,
        "eventName": change.event_name,
        "token": change.token,
        "leaseDeadline": change.lease_until_ms,
    }


def request_of(
    change: AppliedChange, content: PinnedContent | None, *, url_seconds: int
) -> dict[str, Any]:
    """The request (version :data:`REQUEST_VERSION`) of one run of a processor function.

    Parameters
    ----------
    change : AppliedChange
        The change under the claim (``processor`` names the processor; ``lease_until_ms`` is the
        request's ``leaseDeadline``).
    content : PinnedContent or None
        The change's bytes (creates); None for removals (``"content": null``).
    url_seconds : int
        How long the presigned URL is valid.

    Raises
    ------
    SupersededError
        A create whose bytes cannot be pinned (neither version nor ETag), as
        :meth:`PinnedContent.read` does.
    TransientError
        The URL cannot be signed.
    ValueError
        ``content`` given for a removal, or missing for a create.
    """
    if (change.kind == CREATED) != (content is not None):
        raise ValueError(f"{change.kind} change of {change.key!r}: content given only for creates")
    return {
        "version": REQUEST_VERSION,
        "processor": change.processor,
        "change": _change_of(change),
        "content": None if content is None else content.presigned(url_seconds),
    }


def response_of(answer: Any) -> tuple[str, str | None]:
    """(status, detail) of a function's answer.

    Raises
    ------
    ProcessorFunctionError
        ``invalid-response``: not an object, no known ``status``, or a ``detail`` that is not a
        string.
    """
    if not isinstance(answer, dict):
        raise ProcessorFunctionError(
            INVALID_RESPONSE, f"the answer is not a JSON object: {_clip(answer)}"
        )
    status = answer.get("status")
    if status not in STATUSES:
        raise ProcessorFunctionError(
            INVALID_RESPONSE,
            f"status {_clip(status)} is not one of {list(STATUSES)} in {_clip(answer)}",
        )
    detail = answer.get("detail")
    if detail is not None and not isinstance(detail, str):
        raise ProcessorFunctionError(INVALID_RESPONSE, f"detail is not a string: {_clip(answer)}")
    return status, detail


class FunctionProcessor:
    """A :class:`~s3ingest_fn.core.effects.Processor` that runs a processor function.

    Parameters
    ----------
    invoke : callable
        ``invoke(request) -> answer``: :func:`lambda_invoker` or :func:`handler_invoker` (or any
        callable raising :class:`ProcessorFunctionError` when the function did not answer).
    url_seconds : int
        Validity of the presigned content URL: :func:`url_seconds_for` of the function's
        timeout (what :func:`s3ingest_fn.wiring.processor_specs` gives).

    A call returns for ``done``, raises :class:`~s3ingest_fn.core.effects.SupersededError` for
    ``superseded`` (and for a create that cannot be pinned, without invoking), and
    :class:`ProcessorFunctionError` (a ``TransientError``) otherwise, its message naming the
    processor, the key, the change id and the token.
    """

    def __init__(self, invoke: Invoke, *, url_seconds: int = DEFAULT_URL_SECONDS) -> None:
        self.invoke = invoke
        self.url_seconds = url_seconds

    def __call__(self, change: AppliedChange, content: PinnedContent | None) -> None:
        request = request_of(change, content, url_seconds=self.url_seconds)
        where = (
            f"processor {change.processor!r} for {change.key!r} "
            f"(change {change.change_id}, token {change.token})"
        )
        try:
            status, detail = response_of(self.invoke(request))
        except ProcessorFunctionError as exc:
            raise ProcessorFunctionError(exc.reason, f"{where}: {exc.message}") from exc
        if status == SUPERSEDED:
            raise SupersededError(f"{where}: the function answered superseded: {detail or '-'}")


def url_seconds_for(timeout_s: int) -> int:
    """How long a presigned content URL for a processor function of timeout ``timeout_s``
    (seconds, the entry's ``timeoutSeconds``) is valid: ``timeout_s`` + :data:`URL_MARGIN_S`,
    at most 7 days (SigV4's longest ``X-Amz-Expires``,
    https://docs.aws.amazon.com/AmazonS3/latest/userguide/ShareObjectPreSignedURL.html).

    Raises
    ------
    ValueError
        For a timeout below 1 s.
    """
    if timeout_s < 1:
        raise ValueError(f"a processor function's timeout is at least 1 s, not {timeout_s}")
    return min(int(timeout_s) + URL_MARGIN_S, 7 * 24 * 3600)


def invoke_config(timeout_s: int) -> Config:
    """The botocore ``Config`` of a Lambda client that invokes processor functions whose
    timeout is at most ``timeout_s``.

    A synchronous Invoke holds the connection while the function runs (up to its timeout, 900 s
    at most): the read waits ``timeout_s`` + :data:`INVOKE_READ_SLACK_S` (boto3's default, 60 s,
    would give up on a longer function and retry it, running it twice), TCP keep-alive holds
    the idle connection open, and the client makes one attempt only (``total_max_attempts`` 1):
    a failed run is retried by the queue, after the claim is released, never behind the
    claim's back
    (https://docs.aws.amazon.com/lambda/latest/dg/invocation-sync.html,
    https://repost.aws/knowledge-center/lambda-function-retry-timeout-sdk).
    """
    from botocore.config import Config

    return Config(
        read_timeout=int(timeout_s) + INVOKE_READ_SLACK_S,
        connect_timeout=INVOKE_CONNECT_TIMEOUT_S,
        retries={"total_max_attempts": 1, "mode": "standard"},
        tcp_keepalive=True,
    )


def lambda_invoker(client: Any, function_arn: str, *, timeout_s: int) -> Invoke:
    """An invoker over Lambda's ``Invoke`` API, ``InvocationType=RequestResponse``.

    Parameters
    ----------
    client : LambdaClient
        A boto3 Lambda client built with :func:`invoke_config` for at least ``timeout_s`` (the
        role needs ``lambda:InvokeFunction`` on ``function_arn``).
    function_arn : str
        The function (name, ARN, or qualified ARN).
    timeout_s : int
        The function's timeout, seconds.

    The Invoke API answers 200 for a function that ran, also when it failed: a failed run is
    told by the ``X-Amz-Function-Error`` header (boto3's ``FunctionError``: ``Unhandled``, or
    the legacy ``Handled``), the payload then being ``{"errorType", "errorMessage", ...}``; a
    function that ran out of time is reported that way too (``Sandbox.Timedout``, "Task timed
    out after ..."). Errors that kept the function from running are HTTP errors, 429
    ``TooManyRequestsException`` for throttling
    (https://docs.aws.amazon.com/lambda/latest/api/API_Invoke.html).

    Raises
    ------
    ValueError
        When the client's read timeout does not outlast ``timeout_s`` (build it with
        :func:`invoke_config`).
    """
    read_timeout = getattr(getattr(client, "meta", None), "config", None)
    read_timeout = getattr(read_timeout, "read_timeout", None)
    if read_timeout is not None and read_timeout <= timeout_s:
        raise ValueError(
            f"the Lambda client's read_timeout ({read_timeout} s) does not outlast the processor "
            f"function's timeout ({timeout_s} s): build it with invoke_config({timeout_s})"
        )

    def invoke(request: dict[str, Any]) -> Any:
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            ConnectTimeoutError,
            ReadTimeoutError,
        )

        try:
            resp = client.invoke(
                FunctionName=function_arn,
                InvocationType="RequestResponse",
                Payload=json.dumps(request).encode("utf-8"),
            )
            payload = resp["Payload"].read()
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code = str(error.get("Code", ""))
            text = f"{function_arn}: Invoke {code}: {error.get('Message', '')}"
            raise ProcessorFunctionError(
                THROTTLED if code in THROTTLE_CODES else INVOKE_FAILED, text
            ) from exc
        except ReadTimeoutError as exc:
            raise ProcessorFunctionError(
                TIMEOUT, f"{function_arn}: no answer to Invoke in time ({exc})"
            ) from exc
        except (ConnectTimeoutError, BotoCoreError) as exc:
            raise ProcessorFunctionError(
                INVOKE_FAILED, f"{function_arn}: Invoke {exc.__class__.__name__}: {exc}"
            ) from exc
        function_error = resp.get("FunctionError")
        if function_error:
            error_type, message = _error_of(payload)
            timed_out = error_type == "Sandbox.Timedout" or "Task timed out" in message
            raise ProcessorFunctionError(
                TIMEOUT if timed_out else FUNCTION_ERROR,
                f"{function_arn}: {function_error} {error_type}: {message}",
            )
        try:
            return json.loads(payload)
        except ValueError as exc:
            raise ProcessorFunctionError(
                INVALID_RESPONSE, f"{function_arn}: the answer is not JSON: {_clip(payload)}"
            ) from exc

    return invoke


def _error_of(payload: bytes) -> tuple[str, str]:
    """(errorType, errorMessage) of a function error's payload (Lambda's error object)."""
    try:
        body = json.loads(payload)
    except ValueError:
        return "", _clip(payload)
    if not isinstance(body, dict):
        return "", _clip(body)
    return str(body.get("errorType", "")), _clip(body.get("errorMessage", body))


def _clip(value: Any) -> str:
    """``value`` as text for a message (JSON for a parsed answer), cut at :data:`DETAIL_CHARS`."""
    if isinstance(value, bytes):
        text = value.decode("utf-8", "replace")
    elif isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, default=repr)
    return text if len(text) <= DETAIL_CHARS else text[:DETAIL_CHARS] + "..."


class LocalContext:
    """The Lambda context a locally run handler gets: ``get_remaining_time_in_millis`` counts
    down from the function's timeout
    (https://docs.aws.amazon.com/lambda/latest/dg/python-context.html)."""

    def __init__(self, function_name: str, timeout_s: int, clock: Callable[[], float]) -> None:
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.invoked_function_arn = f"arn:aws:lambda:local:000000000000:function:{function_name}"
        self.memory_limit_in_mb = 128
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = "local"
        self._clock = clock
        self._deadline = clock() + timeout_s

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - self._clock()) * 1000))


def load_handler(spec: str) -> Callable[[Any, Any], Any]:
    """Import ``"package.module:handler"`` (a Lambda handler ``handler(event, context)``).

    Raises
    ------
    ValueError
        When the spec is malformed, the module cannot be imported or the attribute is not
        callable.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"handler {spec!r} is not 'package.module:handler'")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, or the module failing while it loads
        raise ValueError(
            f"handler module {module_name!r} cannot be imported: {exc.__class__.__name__}: {exc}"
        ) from exc
    func = getattr(module, attr, None)
    if not callable(func):
        raise ValueError(f"handler {spec!r}: {attr!r} is not a callable in {module_name}")
    return func


def handler_invoker(
    handler: str, *, timeout_s: int, clock: Callable[[], float] = time.monotonic
) -> Invoke:
    """An invoker that runs a Python Lambda handler in this process (the local runtime).

    The request and the answer make a JSON round trip, as through Lambda; the handler gets a
    :class:`LocalContext` counting down from ``timeout_s``. An exception from the handler is a
    ``function-error`` (as Lambda's ``Unhandled``); a handler that returns after its timeout
    has passed is a ``timeout`` (Lambda would have stopped it: what it did stays done, its
    answer is dropped); an answer that is not JSON is an ``invalid-response``. The handler is
    imported now (``ValueError`` as :func:`load_handler`). ``clock`` is monotonic seconds.
    """
    func = load_handler(handler)
    name = handler.partition(":")[0].rsplit(".", 1)[-1]

    def invoke(request: dict[str, Any]) -> Any:
        event = json.loads(json.dumps(request))
        context = LocalContext(name, timeout_s, clock)
        try:
            answer = func(event, context)
        except Exception as exc:
            raise ProcessorFunctionError(
                FUNCTION_ERROR, f"{handler}: Unhandled {exc.__class__.__name__}: {_clip(str(exc))}"
            ) from exc
        if context.get_remaining_time_in_millis() <= 0:
            raise ProcessorFunctionError(TIMEOUT, f"{handler}: Task timed out after {timeout_s} s")
        try:
            return json.loads(json.dumps(answer))
        except (TypeError, ValueError) as exc:
            raise ProcessorFunctionError(
                INVALID_RESPONSE, f"{handler}: the answer is not JSON: {_clip(answer)}"
            ) from exc

    return invoke


__all__ = [
    "DEFAULT_URL_SECONDS",
    "DONE",
    "FUNCTION_ERROR",
    "INVALID_RESPONSE",
    "INVOKE_FAILED",
    "REQUEST_VERSION",
    "SUPERSEDED",
    "THROTTLED",
    "TIMEOUT",
    "URL_MARGIN_S",
    "FunctionProcessor",
    "LocalContext",
    "ProcessorFunctionError",
    "handler_invoker",
    "invoke_config",
    "lambda_invoker",
    "load_handler",
    "request_of",
    "response_of",
    "url_seconds_for",
]
