"""The local Lambda service: registered functions run in-process, as Lambda runs them
(:mod:`s3ingest.local.lambda_service`)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from s3ingest.local.lambda_service import LambdaService

PREFIX = "tests.integration.test_lambda_service"
#: What the Event handler saw, by marker.
SEEN: dict[str, Any] = {}


def echo(event: Any, context: Any) -> dict[str, Any]:
    """Returns its event, a variable of its environment and its context's fields."""
    return {
        "event": event,
        "who": os.environ.get("WHO"),
        "other": os.environ.get("ONLY_B"),
        "endpoint": os.environ.get("AWS_ENDPOINT_URL"),
        "function_name": context.function_name,
        "arn": context.invoked_function_arn,
        "memory": context.memory_limit_in_mb,
        "request_id": context.aws_request_id,
        "remaining_ms": context.get_remaining_time_in_millis(),
    }


def fail(event: Any, context: Any) -> None:
    raise KeyError("missing field")


#: Set by :func:`sleepy` when it returns: an answer given before is the timeout's, not the end's.
SLEPT = threading.Event()


def sleepy(event: Any, context: Any) -> dict[str, Any]:
    time.sleep(float(event["seconds"]))
    SLEPT.set()
    return {"slept": event["seconds"]}


def record(event: Any, context: Any) -> None:
    SEEN[event["marker"]] = os.environ.get("WHO")


@pytest.fixture
def service(emulator: Any) -> Iterator[LambdaService]:
    with LambdaService(emulator) as svc:
        yield svc


def _no_retry_client(emulator: Any) -> Any:
    return boto3.client(
        "lambda",
        endpoint_url=emulator.endpoint_url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"total_max_attempts": 1}),
    )


def test_request_response_runs_the_handler_with_its_context(
    emulator: Any, service: LambdaService
) -> None:
    arn = service.register(
        "echo", f"{PREFIX}.echo", {"WHO": "a"}, timeout_seconds=30, memory_mb=512
    )
    response = service.invoke("echo", {"key": "café +%"})
    assert response["StatusCode"] == 200
    assert "FunctionError" not in response
    out = response["Payload"]
    assert out["event"] == {"key": "café +%"}
    assert out["who"] == "a"
    assert out["endpoint"] == emulator.endpoint_url
    assert out["arn"] == arn and arn.endswith(":function:" + out["function_name"])
    assert out["memory"] == 512
    assert 25_000 < out["remaining_ms"] <= 30_000
    assert [i.outcome for i in service.invocations] == ["ok"]


def test_an_exception_is_an_unhandled_function_error(service: LambdaService) -> None:
    service.register("fail", f"{PREFIX}.fail")
    response = service.invoke("fail", {})
    assert response["StatusCode"] == 200
    assert response["FunctionError"] == "Unhandled"
    payload = response["Payload"]
    assert set(payload) == {"errorMessage", "errorType", "requestId", "stackTrace"}
    assert payload["requestId"] == service.invocations[-1].request_id
    assert payload["errorType"] == "KeyError"
    assert "missing field" in payload["errorMessage"]
    assert any("fail" in line for line in payload["stackTrace"])


def test_a_handler_over_its_timeout_reports_sandbox_timedout(service: LambdaService) -> None:
    service.register("sleepy", f"{PREFIX}.sleepy", timeout_seconds=1)
    SLEPT.clear()
    response = service.invoke("sleepy", {"seconds": 5})
    # answered at the budget, while the handler still sleeps (no wall-clock bound: shared CI)
    assert not SLEPT.is_set()
    assert response["FunctionError"] == "Unhandled"
    assert response["Payload"]["errorType"] == "Sandbox.Timedout"
    assert "Task timed out after 1.00 seconds" in response["Payload"]["errorMessage"]
    # the next invocation waits for the runaway handler (one environment at a time), then runs
    assert service.invoke("sleepy", {"seconds": 0})["Payload"] == {"slept": 0}
    assert [i.outcome for i in service.invocations] == ["timeout", "ok"]


def test_event_invocation_answers_202_and_runs_later(service: LambdaService) -> None:
    service.register("record", f"{PREFIX}.record", {"WHO": "event"})
    response = service.invoke("record", {"marker": "m1"}, invocation_type="Event")
    assert response["StatusCode"] == 202
    assert response["Payload"] is None
    deadline = time.monotonic() + 10
    while "m1" not in SEEN and time.monotonic() < deadline:
        time.sleep(0.05)
    assert SEEN["m1"] == "event"


def test_two_functions_see_only_their_own_environment(service: LambdaService) -> None:
    service.register("a", f"{PREFIX}.echo", {"WHO": "a"})
    service.register("b", f"{PREFIX}.echo", {"WHO": "b", "ONLY_B": "yes"})
    a1, b, a2 = (service.invoke(n, {})["Payload"] for n in ("a", "b", "a"))
    assert (a1["who"], a1["other"]) == ("a", None)
    assert (b["who"], b["other"]) == ("b", "yes")
    assert (a2["who"], a2["other"]) == ("a", None)
    assert "ONLY_B" not in os.environ and os.environ.get("WHO") is None


def test_a_changed_environment_clears_the_cold_start_builders(service: LambdaService) -> None:
    from s3ingest_fn import wiring

    service.register("a", f"{PREFIX}.echo", {"WHO": "a"})
    service.register("b", f"{PREFIX}.echo", {"WHO": "b"})
    service.invoke("a", {})
    wiring.function_change_publisher()  # a cold-start builder cached in this environment
    assert wiring.function_change_publisher.cache_info().currsize == 1
    service.invoke("a", {})  # warm: same environment
    assert wiring.function_change_publisher.cache_info().currsize == 1
    service.invoke("b", {})  # another environment: cold
    assert wiring.function_change_publisher.cache_info().currsize == 0


@pytest.mark.parametrize(
    ("kind", "code", "status"),
    [("throttle", "TooManyRequestsException", 429), ("service", "ServiceException", 500)],
)
def test_injected_invoke_errors_are_api_errors(
    emulator: Any, service: LambdaService, kind: str, code: str, status: int
) -> None:
    arn = service.register("echo", f"{PREFIX}.echo")
    service.inject("echo", kind)
    client = _no_retry_client(emulator)
    with pytest.raises(ClientError) as caught:
        client.invoke(FunctionName=arn, Payload=b"{}")
    assert caught.value.response["Error"]["Code"] == code
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == status
    # only the next invocation failed
    assert client.invoke(FunctionName=arn, Payload=b"{}")["StatusCode"] == 200


def test_injected_raise_and_timeout_count_down(service: LambdaService) -> None:
    service.register("echo", f"{PREFIX}.echo", timeout_seconds=60)
    service.inject("echo", "raise", times=2, error="Boom")
    service.inject("echo", "timeout")
    errors = [service.invoke("echo", {})["Payload"].get("errorType") for _ in range(4)]
    assert errors == ["Boom", "Boom", "Sandbox.Timedout", None]


def test_unregistered_functions_keep_motos_behaviour(emulator: Any, service: LambdaService) -> None:
    arn = service.register("echo", f"{PREFIX}.echo")
    assert "function_name" in service.invoke("echo", {})["Payload"]
    service.close()
    # moto's own invoke again (a Docker run, or its canned answer): never our handler
    try:
        body = _no_retry_client(emulator).invoke(FunctionName=arn, Payload=b"{}")["Payload"].read()
    except ClientError:
        body = b""
    assert b"function_name" not in body
    assert len(service.invocations) == 1
