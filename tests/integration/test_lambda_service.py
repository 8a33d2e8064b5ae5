"""The local Lambda service: registered functions run in-process, as Lambda runs them
(:mod:`s3ingest.local.emulator.lambda_service`)."""

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

from s3ingest.local.emulator.lambda_service import LambdaService

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


def relay_config(event: Any, context: Any) -> dict[str, Any]:
    """The change relay's configuration and publisher as this invocation's cold start built
    them."""
    from s3ingest_fn import wiring
    from s3ingest_fn.config_roles import ChangeRelayConfig

    config = wiring.function_config(ChangeRelayConfig)
    return {
        "bus": config.change_bus_name,
        "config": id(config),
        "publisher": id(wiring.function_change_publisher()),
    }


def processors_seen(event: Any, context: Any) -> dict[str, Any]:
    """What of ``PROCESSOR`` the function sees: os.environ, its invocation's environment and
    wiring's processor entries."""
    from s3ingest_fn import wiring
    from s3ingest_fn.config import invocation_env

    return {
        "environ": os.environ.get("PROCESSOR"),
        "invocation": invocation_env().get("PROCESSOR"),
        "entries": wiring.processor_entries(),
        "who": os.environ.get("WHO"),
    }


#: Two :func:`rendezvous` handlers wait here for each other.
RENDEZVOUS = threading.Barrier(2, timeout=20)


def rendezvous(event: Any, context: Any) -> dict[str, Any]:
    RENDEZVOUS.wait()
    return {"met": True}


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
    # the next invocation runs beside the runaway handler (each in its own environment)
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


def test_each_configuration_keeps_its_own_warm_graph(service: LambdaService) -> None:
    # a second invocation of a function is warm (same graph); another function's
    # configuration gets its own, and nothing is cleared for it
    service.register("a", f"{PREFIX}.relay_config", {"CHANGE_BUS_NAME": "bus-a"})
    service.register("b", f"{PREFIX}.relay_config", {"CHANGE_BUS_NAME": "bus-b"})
    a1, b, a2 = (service.invoke(n, {})["Payload"] for n in ("a", "b", "a"))
    assert (a1["bus"], b["bus"], a2["bus"]) == ("bus-a", "bus-b", "bus-a")
    assert a1["config"] == a2["config"] != b["config"]
    assert a1["publisher"] == a2["publisher"]


def test_the_host_environment_does_not_reach_a_function(
    service: LambdaService, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROCESSOR", "host.module:leaked")
    monkeypatch.setenv("WHO", "host")
    service.register("a", f"{PREFIX}.processors_seen", {"WHO": "a"})
    seen = service.invoke("a", {})["Payload"]
    assert seen == {"environ": None, "invocation": None, "entries": [], "who": "a"}
    assert os.environ["PROCESSOR"] == "host.module:leaked"  # the host's own is untouched


def test_invocations_overlap(service: LambdaService) -> None:
    # no invocation lock: two handlers that wait for each other both finish
    service.register("w", f"{PREFIX}.rendezvous", timeout_seconds=30)
    RENDEZVOUS.reset()
    results: list[Any] = []
    threads = [
        threading.Thread(target=lambda: results.append(service.invoke("w", {})["Payload"]))
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [{"met": True}, {"met": True}]


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
