"""An in-process AWS Lambda service on the emulator: registered functions run their real handler
in this process when anyone invokes them through the emulator's ``lambda:Invoke`` (a Step
Functions task, boto3's ``invoke``, a Batch Operations job). No Docker.

moto creates the functions (``CreateFunction``, so ``GetFunction`` and ARNs are real) and
:class:`LambdaService` replaces moto's ``LambdaBackend.invoke`` for the registered functions only
(any other function keeps moto's behaviour). An invocation behaves as Lambda's
(https://docs.aws.amazon.com/lambda/latest/api/API_Invoke.html):

* ``RequestResponse``: status 200 and the handler's JSON result; ``Event``: status 202 and an
  empty body, the handler running afterwards on its own thread;
* an exception in the handler: status 200, header ``X-Amz-Function-Error: Unhandled`` and the
  payload ``{"errorMessage", "errorType", "stackTrace"}``
  (https://docs.aws.amazon.com/lambda/latest/dg/python-exceptions.html);
* a handler still running at the end of its timeout: ``Unhandled`` with
  ``{"errorType": "Sandbox.Timedout", "errorMessage": "RequestId: <id> Error: Task timed out
  after N.00 seconds"}``, the shape the Lambda runtime reports for a timeout
  (https://docs.aws.amazon.com/lambda/latest/dg/troubleshooting-invocation.html); the next
  invocation starts cold, as Lambda replaces an execution environment after a timeout;
* an injected service failure: the ``Invoke`` API error itself (``TooManyRequestsException``
  429, ``ServiceException`` 500), which Step Functions names ``Lambda.<code>``
  (https://docs.aws.amazon.com/step-functions/latest/dg/bp-lambda-serviceexception.html).

Invocations run at once, as Lambda's do: each runs with its function's environment alone
(:meth:`s3ingest.local.emulator.server.Emulator.function_environment` plus what the function was
registered with, plus Lambda's reserved variables), set for its thread's context with
:func:`s3ingest_fn.config.use_env` (never in the process environment; ``os.environ`` reads it
through :mod:`s3ingest.local.emulator.environment`), and a context object. The handlers' cold-start
builders of :mod:`s3ingest_fn.wiring` cache what they build per configuration value, so a
function's second invocation is warm and two functions never share a graph.
"""

from __future__ import annotations

import contextvars
import importlib
import json
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from s3ingest.local.emulator import environment
from s3ingest.local.emulator.faults import Concurrency
from s3ingest.local.emulator.function_logs import FunctionLogs, Sink, routed
from s3ingest.local.emulator.server import ACCOUNT, REGION, Emulator
from s3ingest_fn.config import use_env

#: The role the local functions are created with (moto checks that it exists).
LOCAL_ROLE = "s3ingest-local-lambda"
#: Failure kinds :meth:`LambdaService.inject` accepts.
FAILURE_KINDS = ("raise", "timeout", "throttle", "service")
#: Lambda's reserved variables the runtime sets
#: (https://docs.aws.amazon.com/lambda/latest/dg/configuration-envvars.html#configuration-envvars-runtime).
RUNTIME = "AWS_Lambda_python3.13"

Handler = Callable[[Any, Any], Any]


@dataclass
class LocalFunction:
    """A registered function: ``name``, ``handler`` (``"pkg.mod.fn"``), its own ``environment``
    (as the stack gives it), ``timeout_seconds`` and ``memory_mb``; ``arn`` once created."""

    name: str
    handler: str
    environment: dict[str, str]
    timeout_seconds: float = 3.0
    memory_mb: int = 128
    arn: str = ""


@dataclass
class Invocation:
    """One invocation as it ended: ``outcome`` is ``"ok"``, ``"error"`` (``Unhandled``),
    ``"timeout"``, ``"throttle"`` or ``"service"``; ``seconds`` of handler time."""

    function: str
    request_id: str
    invocation_type: str
    outcome: str
    seconds: float
    error_type: str | None = None


@dataclass
class _Failure:
    kind: str
    remaining: int
    error: str = "InjectedFailure"


class LambdaContext:
    """The context object a Python handler receives
    (https://docs.aws.amazon.com/lambda/latest/dg/python-context.html)."""

    def __init__(self, fn: LocalFunction, request_id: str, deadline: float) -> None:
        self.function_name = fn.name
        self.function_version = "$LATEST"
        self.invoked_function_arn = fn.arn
        self.memory_limit_in_mb = fn.memory_mb
        self.aws_request_id = request_id
        self.log_group_name = f"/aws/lambda/{fn.name}"
        self.log_stream_name = f"local/[$LATEST]{request_id.replace('-', '')}"
        self._deadline = deadline

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds left before the function's timeout (0 once past it)."""
        return max(0, int((self._deadline - time.monotonic()) * 1000))


class InvokeError(Exception):
    """An error of the ``Invoke`` API itself (not of the function): ``code`` and HTTP
    ``status``."""

    def __init__(self, code: str, status: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


# -- process-wide state: moto's backends are shared by every server in the process ----------

#: Function name -> (service, function). Names are unique per service (a suffix).
_REGISTRY: dict[str, tuple[LambdaService, LocalFunction]] = {}
_REGISTRY_LOCK = threading.Lock()
#: Guards the injected failures.
_FAILURES_LOCK = threading.Lock()
#: Invocations under way, and when one last started or ended (:meth:`LambdaService.quiesce`).
_ACTIVITY = threading.Condition()
_in_flight = 0
_last_activity = 0.0


def _activity(delta: int) -> None:
    global _in_flight, _last_activity
    with _ACTIVITY:
        _in_flight += delta
        _last_activity = time.monotonic()
        _ACTIVITY.notify_all()


def route_moto_invoke() -> None:
    """Route moto's ``LambdaBackend.invoke`` to the registered functions (others go to moto's);
    idempotent. Installed by :mod:`s3ingest.local.emulator.moto_patches` when an emulator starts."""
    from moto.awslambda.models import LambdaBackend
    from moto.core.exceptions import JsonRESTError

    original = LambdaBackend.invoke
    if getattr(original, "_s3ingest_local", False):
        return

    def invoke(
        self: Any,
        function_name: str,
        qualifier: str | None,
        body: Any,
        headers: Any,
        response_headers: Any,
    ) -> Any:
        name = function_name.rsplit(":function:", 1)[-1].split(":", 1)[0]
        with _REGISTRY_LOCK:
            found = _REGISTRY.get(name)
        if found is None:
            return original(self, function_name, qualifier, body, headers, response_headers)
        service, fn = found
        invocation_type = headers.get("X-Amz-Invocation-Type") or "RequestResponse"
        try:
            payload, error = service._invoke(fn, body, invocation_type)
        except InvokeError as exc:
            raise _rest_error(exc) from exc
        if error:
            response_headers["x-amz-function-error"] = "Unhandled"
        response_headers["x-amz-executed-version"] = "$LATEST"
        response_headers["Content-Length"] = str(len(payload))
        return payload

    def _rest_error(exc: InvokeError) -> Exception:
        error = JsonRESTError(exc.code, str(exc))
        error.code = exc.status
        return error

    invoke._s3ingest_local = True  # type: ignore[attr-defined]
    LambdaBackend.invoke = invoke  # type: ignore[method-assign]


class LambdaService:
    """The emulator's Lambda service for the functions registered here.

    Parameters
    ----------
    emu : Emulator
        A started emulator; the functions' boto3 clients reach it.

    Use :meth:`close` (or the context manager) to unregister the functions.
    """

    def __init__(self, emu: Emulator, logs: FunctionLogs | None = None) -> None:
        self.emu = emu
        self.suffix = uuid.uuid4().hex[:8]
        self.functions: dict[str, LocalFunction] = {}
        #: Every invocation, in the order they ended.
        self.invocations: list[Invocation] = []
        #: The handlers' output, per function (their CloudWatch logs, locally).
        self.logs = logs or FunctionLogs()
        self._failures: dict[str, list[_Failure]] = {}
        #: The account's concurrency limits, when set
        #: (:func:`s3ingest.local.emulator.faults.limit_concurrency`): an invocation beyond its
        #: function's reserved concurrency or the unreserved pool answers
        #: ``TooManyRequestsException``.
        self.concurrency: Concurrency | None = None
        self._lambda = emu.client("lambda")
        self._role_arn = self._role()
        environment.install()

    def __enter__(self) -> LambdaService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def quiesce(self, quiet_seconds: float = 0.2, timeout_seconds: float = 60.0) -> bool:
        """Wait until no invocation has run for ``quiet_seconds`` (a handler left running past
        its timeout included); ``False`` if that did not happen within ``timeout_seconds``.

        A state machine that ends ``FAILED`` can still have Map iterations finishing their
        current task; callers wait for them before the next step (or before the emulator they
        reach stops)."""
        deadline = time.monotonic() + timeout_seconds
        with _ACTIVITY:
            while True:
                now = time.monotonic()
                quiet = now - _last_activity
                if _in_flight == 0 and quiet >= quiet_seconds:
                    break
                if now > deadline:
                    return False
                _ACTIVITY.wait(max(0.01, quiet_seconds - quiet) if _in_flight == 0 else 0.1)
        return True

    def close(self) -> None:
        """Wait for this process's invocations to end (:meth:`quiesce`), then unregister this
        service's functions (moto's functions stay, inert)."""
        self.quiesce()
        with _REGISTRY_LOCK:
            for fn in self.functions.values():
                _REGISTRY.pop(fn.name, None)

    def _role(self) -> str:
        iam = self.emu.client("iam")
        trust = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "lambda.amazonaws.com"},
                    "Action": "sts:AssumeRole",
                }
            ],
        }
        try:
            return str(
                iam.create_role(RoleName=LOCAL_ROLE, AssumeRolePolicyDocument=json.dumps(trust))[
                    "Role"
                ]["Arn"]
            )
        except iam.exceptions.EntityAlreadyExistsException:
            return str(iam.get_role(RoleName=LOCAL_ROLE)["Role"]["Arn"])

    # -- registration ------------------------------------------------------------------------

    def register(
        self,
        name: str,
        handler: str,
        environment: dict[str, str] | None = None,
        *,
        timeout_seconds: float = 3.0,
        memory_mb: int = 128,
    ) -> str:
        """Create ``name`` (made unique with this service's suffix) in the emulator's Lambda
        backend, to run ``handler`` (``"pkg.mod.fn"``) with ``environment``; return its ARN.

        Raises
        ------
        ValueError
            When ``handler`` is not ``module.function``.
        """
        if "." not in handler:
            raise ValueError(f"handler must be module.function, not {handler!r}")
        local_name = f"{name}-{self.suffix}"
        fn = LocalFunction(
            name=local_name,
            handler=handler,
            environment=dict(environment or {}),
            timeout_seconds=timeout_seconds,
            memory_mb=memory_mb,
        )
        created = self._lambda.create_function(
            FunctionName=local_name,
            Runtime="python3.13",
            Role=self._role_arn,
            Handler=handler,
            Code={"ZipFile": b"local: runs in-process"},
            Timeout=max(1, int(timeout_seconds)),
            MemorySize=memory_mb,
            Environment={"Variables": fn.environment},
        )
        fn.arn = str(created["FunctionArn"])
        self.functions[name] = fn
        with _REGISTRY_LOCK:
            _REGISTRY[local_name] = (self, fn)
        return fn.arn

    def arn(self, name: str) -> str:
        """The ARN of the function registered as ``name``."""
        return self.functions[name].arn

    # -- failure injection --------------------------------------------------------------------

    def inject(self, name: str, kind: str, times: int = 1, error: str = "InjectedFailure") -> None:
        """Make the next ``times`` invocations of ``name`` fail, without running the handler:

        * ``"raise"``: the handler raises ``error`` (an ``Unhandled`` function error of that
          ``errorType``);
        * ``"timeout"``: the handler runs past its timeout (reported at once, not after waiting);
        * ``"throttle"``: ``Invoke`` answers ``TooManyRequestsException`` (429);
        * ``"service"``: ``Invoke`` answers ``ServiceException`` (500).

        Raises
        ------
        ValueError
            For an unknown kind or function.
        """
        if kind not in FAILURE_KINDS:
            raise ValueError(f"kind must be one of {FAILURE_KINDS}, not {kind!r}")
        if name not in self.functions:
            raise ValueError(f"no function {name!r} registered")
        with _FAILURES_LOCK:
            self._failures.setdefault(name, []).append(_Failure(kind, times, error))

    def _take_failure(self, fn: LocalFunction) -> _Failure | None:
        key = next(k for k, v in self.functions.items() if v is fn)
        with _FAILURES_LOCK:
            for failure in self._failures.get(key, []):
                if failure.remaining > 0:
                    failure.remaining -= 1
                    return failure
        return None

    # -- invocation ---------------------------------------------------------------------------

    def invoke(
        self, name: str, payload: Any, invocation_type: str = "RequestResponse"
    ) -> dict[str, Any]:
        """Invoke ``name`` through the emulator's ``lambda:Invoke`` (boto3): the response
        with ``Payload`` decoded (JSON, or ``None`` for an empty body)."""
        response: dict[str, Any] = self._lambda.invoke(
            FunctionName=self.functions[name].arn,
            InvocationType=invocation_type,
            Payload=json.dumps(payload).encode(),
        )
        body = response["Payload"].read()
        response["Payload"] = json.loads(body) if body else None
        return response

    def _invoke(self, fn: LocalFunction, body: Any, invocation_type: str) -> tuple[bytes, bool]:
        """Run one invocation; return ``(payload, function_error)``. Raises InvokeError."""
        if isinstance(body, bytes):
            body = body.decode("utf-8")
        event = json.loads(body) if body else {}
        request_id = str(uuid.uuid4())
        if invocation_type == "Event":
            threading.Thread(
                target=self._run,
                args=(fn, event, request_id, invocation_type),
                name=f"lambda-event-{fn.name}",
                daemon=True,
            ).start()
            return b"", False
        return self._run(fn, event, request_id, invocation_type)

    def _run(
        self, fn: LocalFunction, event: Any, request_id: str, invocation_type: str
    ) -> tuple[bytes, bool]:
        _activity(+1)
        pool, name = self.concurrency, self._name_of(fn)
        try:
            if pool is not None and not pool.acquire(name):
                self._record(fn, request_id, invocation_type, "throttle", 0.0, None)
                raise InvokeError("TooManyRequestsException", 429, "Rate Exceeded.")
            try:
                return self._run_locked(fn, event, request_id, invocation_type)
            finally:
                if pool is not None:
                    pool.release(name)
        finally:
            _activity(-1)

    def _name_of(self, fn: LocalFunction) -> str:
        return next(k for k, v in self.functions.items() if v is fn)

    def _run_locked(
        self, fn: LocalFunction, event: Any, request_id: str, invocation_type: str
    ) -> tuple[bytes, bool]:
        failure = self._take_failure(fn)
        if failure and failure.kind in ("throttle", "service"):
            self._record(fn, request_id, invocation_type, failure.kind, 0.0, None)
            if failure.kind == "throttle":
                raise InvokeError("TooManyRequestsException", 429, "Rate Exceeded.")
            raise InvokeError("ServiceException", 500, "injected service exception")
        if failure and failure.kind == "timeout":
            self._record(fn, request_id, invocation_type, "timeout", 0.0, "Sandbox.Timedout")
            return _timeout_payload(fn, request_id), True
        if failure:
            self._record(fn, request_id, invocation_type, "error", 0.0, failure.error)
            return _error_payload(failure.error, "injected failure", [], request_id), True
        start = time.monotonic()
        context = LambdaContext(fn, request_id, start + fn.timeout_seconds)
        outcome = run_with_timeout(
            lambda: _load(fn.handler)(event, context),
            fn.timeout_seconds,
            self.environment_of(fn),
            self.logs.sink(self._name_of(fn)),
            name=f"lambda-{fn.name}",
            request_id=request_id,
        )
        seconds = time.monotonic() - start
        if outcome.timed_out:
            self._record(
                fn, request_id, invocation_type, "timeout", fn.timeout_seconds, "Sandbox.Timedout"
            )
            return _timeout_payload(fn, request_id), True
        if outcome.error is not None:
            exc = outcome.error
            self._record(fn, request_id, invocation_type, "error", seconds, type(exc).__name__)
            return (
                _error_payload(
                    type(exc).__name__,
                    str(exc),
                    traceback.format_list(traceback.extract_tb(exc.__traceback__)),
                    request_id,
                ),
                True,
            )
        self._record(fn, request_id, invocation_type, "ok", seconds, None)
        return json.dumps(outcome.result).encode("utf-8"), False

    def _record(
        self,
        fn: LocalFunction,
        request_id: str,
        invocation_type: str,
        outcome: str,
        seconds: float,
        error_type: str | None,
    ) -> None:
        self.invocations.append(
            Invocation(
                function=next(k for k, v in self.functions.items() if v is fn),
                request_id=request_id,
                invocation_type=invocation_type,
                outcome=outcome,
                seconds=seconds,
                error_type=error_type,
            )
        )

    def environment_of(self, fn: LocalFunction) -> dict[str, str]:
        """The whole environment ``fn`` runs with: its own, the emulator's endpoint and
        credentials, Lambda's reserved variables."""
        return {**fn.environment, **self.emu.function_environment(), **reserved_environment(fn)}


def reserved_environment(fn: LocalFunction) -> dict[str, str]:
    """Lambda's reserved variables of ``fn``'s invocations: its name, version, memory, log
    group, the runtime and ``_HANDLER``
    (https://docs.aws.amazon.com/lambda/latest/dg/configuration-envvars.html#configuration-envvars-runtime).
    ``_HANDLER`` names the function an AWS call made during the invocation belongs to."""
    return {
        "AWS_LAMBDA_FUNCTION_NAME": fn.name,
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(fn.memory_mb),
        "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{fn.name}",
        "AWS_EXECUTION_ENV": RUNTIME,
        "_HANDLER": fn.handler,
    }


@dataclass
class Outcome:
    """How :func:`run_with_timeout`'s call ended: its ``result``, the ``error`` it raised, or
    ``timed_out`` (it runs on, its answer dropped)."""

    result: Any = None
    error: BaseException | None = None
    timed_out: bool = False


def run_with_timeout(
    call: Callable[[], Any],
    timeout_seconds: float,
    env: Mapping[str, str],
    logs: Sink,
    *,
    name: str = "lambda",
    request_id: str | None = None,
) -> Outcome:
    """Run ``call`` as one invocation: on a thread of its own, in a copy of the caller's
    context with ``env`` as its whole environment (:func:`s3ingest_fn.config.use_env`), what it
    prints going to ``logs`` (its CloudWatch log, locally:
    :func:`~s3ingest.local.emulator.function_logs.routed`; between Lambda's ``START`` and ``END
    RequestId`` lines given ``request_id``); wait at most ``timeout_seconds``.
    A call still running then has timed out, as Lambda's ``Sandbox.Timedout``: it runs on, on
    its own thread (Python cannot stop it), and nothing it returns is used."""
    outcome = Outcome()
    done = threading.Event()

    def work() -> None:
        try:
            with use_env(env), routed(logs):
                if request_id:  # to the log itself: never to a stream swapped meanwhile
                    logs.write(f"START RequestId: {request_id} Version: $LATEST\n")
                try:
                    outcome.result = call()
                finally:
                    if request_id:
                        logs.flush()
                        logs.write(f"END RequestId: {request_id}\n")
        except BaseException as exc:
            outcome.error = exc
        finally:
            done.set()

    context = contextvars.copy_context()
    worker = threading.Thread(target=context.run, args=(work,), name=name, daemon=True)
    worker.start()
    if not done.wait(timeout_seconds):
        return Outcome(timed_out=True)
    return outcome


def _load(handler: str) -> Handler:
    module, _, name = handler.rpartition(".")
    fn: Handler = getattr(importlib.import_module(module), name)
    return fn


def _error_payload(error_type: str, message: str, stack: list[str], request_id: str) -> bytes:
    # the shape of https://docs.aws.amazon.com/lambda/latest/dg/python-exceptions.html
    return json.dumps(
        {
            "errorMessage": message,
            "errorType": error_type,
            "requestId": request_id,
            "stackTrace": stack,
        }
    ).encode("utf-8")


def _timeout_payload(fn: LocalFunction, request_id: str) -> bytes:
    return json.dumps(
        {
            "errorType": "Sandbox.Timedout",
            "errorMessage": (
                f"RequestId: {request_id} Error: Task timed out after "
                f"{fn.timeout_seconds:.2f} seconds"
            ),
        }
    ).encode("utf-8")


__all__ = [
    "ACCOUNT",
    "FAILURE_KINDS",
    "REGION",
    "Invocation",
    "InvokeError",
    "LambdaContext",
    "LambdaService",
    "LocalFunction",
    "reserved_environment",
]
