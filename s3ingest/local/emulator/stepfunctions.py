"""moto's Step Functions executor, set up for the local runtime.

moto runs state machines with an ASL interpreter once its configuration says
``{"stepfunctions": {"execute_state_machine": true}}`` (:func:`enable_executor` posts it to the
emulator's ``/moto-api/config``). Three things are adjusted, process-wide and idempotently, by
the patches :mod:`s3ingest.local.emulator.moto_patches` installs when an emulator starts:

* **Endpoint.** The interpreter's SDK clients (Lambda tasks, ``aws-sdk:*`` integrations) go to
  ``http://localhost:$MOTO_PORT`` (5000 by default); here they go to a running emulator of this
  process (moto's backends are shared by every server of a process, so any live one will do),
  S3 Control's endpoint rules put the account in the host name (``{AccountId}.127.0.0.1``, which
  does not resolve); its requests go to the emulator's own host (the account travels in
  ``x-amz-account-id`` as well, and the emulator routes ``/v20180820/`` to S3 Control).
* **Error names.** Step Functions names an ``aws-sdk`` integration's error
  ``<Service>.<Exception>`` with the service's own capitalisation (``S3Control.TooManyRequests
  Exception``,
  https://docs.aws.amazon.com/step-functions/latest/dg/supported-services-awssdk.html); moto
  knows that spelling for DynamoDB and Step Functions only, so ``S3Control`` is added: the
  backfill machine's retriers name S3 Control's errors that way.
* **Time.** ``Wait`` states and retry intervals really sleep in moto; the local runtime scales
  them by :data:`TIME_SCALE` (``S3INGEST_LOCAL_TIME_SCALE``, 0.01 by default: a 30 s ``Wait``
  lasts 0.3 s, a 2 s retry interval 20 ms; ``1`` for real time). Only durations change: the
  order of states, the retry counts and back-off ratios stay the machine's. Execution history
  timestamps are the scaled ones.
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.request
from types import SimpleNamespace
from typing import Any

#: Local time per state-machine second (``S3INGEST_LOCAL_TIME_SCALE``).
TIME_SCALE = float(os.environ.get("S3INGEST_LOCAL_TIME_SCALE", "0.01"))

_PORTS: list[int] = []
_LOCK = threading.Lock()


def register_port(port: int) -> None:
    """A started emulator's port: the interpreter's clients may use it."""
    with _LOCK:
        _PORTS.append(port)


def unregister_port(port: int) -> None:
    """A stopped emulator's port."""
    with _LOCK:
        if port in _PORTS:
            _PORTS.remove(port)


def _current_port() -> str:
    with _LOCK:
        if not _PORTS:
            raise RuntimeError("no local emulator is running for the state machine's clients")
        return str(_PORTS[-1])


_CLIENTS_LOCK = threading.Lock()
_CLIENTS: dict[tuple[str, str, str | None], Any] = {}
_SESSION: Any = None


def _scaled_sleep(seconds: float) -> None:
    time.sleep(max(0.0, seconds) * TIME_SCALE)


def boto_client_for(region: str, service: str, state_credentials: Any = None) -> Any:
    """moto's ``boto_client_for`` (``moto/stepfunctions/parser/asl/utils/boto_client.py``) with
    the emulator's endpoint (:func:`~s3ingest.local.emulator.s3control_jobs.local_host` for S3
    Control)."""
    import boto3
    from botocore.config import Config
    from moto.core.models import botocore_stubber
    from moto.stepfunctions.parser.asl.component.common.timeouts.timeout import TimeoutSeconds

    from s3ingest.local.emulator.s3control_jobs import local_host

    endpoint = None if botocore_stubber.enabled else f"http://127.0.0.1:{_current_port()}"
    key = (service, region, endpoint)
    # boto3's default session is not thread-safe and the executor's Map iterations run on
    # threads: one session, clients made under a lock and reused (a client is thread-safe)
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            global _SESSION
            if _SESSION is None:
                _SESSION = boto3.session.Session()
            session: Any = _SESSION
            client = session.client(
                service,
                aws_access_key_id="ak",
                aws_secret_access_key="sk",
                region_name=region,
                endpoint_url=endpoint,
                config=Config(
                    parameter_validation=False,
                    retries={"max_attempts": 0, "total_max_attempts": 1},
                    connect_timeout=TimeoutSeconds.DEFAULT_TIMEOUT_SECONDS,
                    read_timeout=TimeoutSeconds.DEFAULT_TIMEOUT_SECONDS,
                ),
            )
            if service == "s3control" and endpoint is not None:
                local_host(client)
            _CLIENTS[key] = client
    return client


def route_sdk_clients() -> None:
    """Send the interpreter's SDK clients to a running emulator of this process (see the
    module): ``boto_client_for`` and ``moto_server_port`` of
    ``moto/stepfunctions/parser/asl/utils/boto_client.py``, rebound in the modules that imported
    them. Idempotent."""
    import sys

    from moto.stepfunctions.parser.asl.utils import boto_client

    if getattr(boto_client, "_s3ingest_local", False):
        return
    original = boto_client.boto_client_for
    # modules imported from now on take ours; those already imported are rebound
    boto_client.boto_client_for = boto_client_for
    for module in list(sys.modules.values()):
        if getattr(module, "boto_client_for", None) is original:
            module.boto_client_for = boto_client_for  # type: ignore[attr-defined]
    boto_client.moto_server_port = _current_port
    boto_client._s3ingest_local = True  # type: ignore[attr-defined]


def name_s3control_errors() -> None:
    """Name an ``aws-sdk:s3control`` task's errors ``S3Control.<Exception>`` as Step Functions
    does (``_SERVICE_ERROR_NAMES`` of moto's ``state_task_service_aws_sdk``). Idempotent."""
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
        state_task_service_aws_sdk as aws_sdk,
    )

    aws_sdk._SERVICE_ERROR_NAMES.setdefault("s3control", "S3Control")


def scale_time() -> None:
    """Scale retry intervals (``time`` of moto's ``retrier_decl``) and ``Wait`` states
    (``WaitFunction._wait_interval``) by :data:`TIME_SCALE`. Idempotent."""
    from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl
    from moto.stepfunctions.parser.asl.component.state.wait.wait_function import wait_function

    retrier_decl.time = SimpleNamespace(sleep=_scaled_sleep)  # type: ignore[assignment]

    def wait_interval(self: Any, env: Any, wait_seconds: float) -> None:
        # As moto's, scaled: the wait ends early when the execution stops (the event is set).
        if wait_seconds > 0:
            env.program_state_event.wait(wait_seconds * TIME_SCALE)

    wait_function.WaitFunction._wait_interval = wait_interval  # type: ignore[method-assign]


def fail_map_runs_over_tolerance() -> None:
    """Fail a Distributed Map whose failed or timed-out child executions exceed its tolerated
    failures (``ToleratedFailureCount``, ``ToleratedFailurePercentage``; both 0 by default),
    with ``States.ExceedToleratedFailureThreshold``, as Step Functions does
    (https://docs.aws.amazon.com/step-functions/latest/dg/state-map-distributed.html#maprun-fail-threshold);
    moto's ``DistributedIterationComponent._map_run`` counts them and succeeds. Idempotent."""
    from moto.stepfunctions.parser.api import ExecutionFailedEventDetails, HistoryEventType
    from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import (
        FailureEvent,
        FailureEventException,
    )
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import (
        StatesErrorName,
    )
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import (
        StatesErrorNameType,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration import (
        distributed_iteration_component as distributed,
    )
    from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails

    component = distributed.DistributedIterationComponent
    original = component._map_run
    if getattr(original, "_s3ingest_tolerance", False):
        return

    def map_run(self: Any, env: Any, eval_input: Any) -> None:
        original(self, env, eval_input)
        items = eval_input.map_run_record.item_counter
        failed = items.failed.get() + items.timed_out.get()
        total = max(items.total.get(), 1)
        count = int(eval_input.tolerated_failure_count or 0)
        percentage = float(eval_input.tolerated_failure_percentage or 0)
        if failed <= count and failed * 100 / total <= percentage:
            return
        error = StatesErrorNameType.StatesExceedToleratedFailureThreshold
        raise FailureEventException(
            failure_event=FailureEvent(
                env=env,
                error_name=StatesErrorName(typ=error),
                event_type=HistoryEventType.ExecutionFailed,
                event_details=EventDetails(  # type: ignore[typeddict-item]
                    executionFailedEventDetails=ExecutionFailedEventDetails(
                        error=error.to_name(),
                        cause=f"The Map Run failed: {failed} of {total} items failed, more "
                        f"than the {count} (or {percentage:g}%) tolerated",
                    )
                ),
            )
        )

    map_run._s3ingest_tolerance = True  # type: ignore[attr-defined]
    component._map_run = map_run  # type: ignore[method-assign]


def enable_executor(endpoint_url: str) -> None:
    """Turn on moto's state machine executor through the emulator's configuration API
    (``POST /moto-api/config``). The adjustments of the module are in force from the
    emulator's start (:mod:`s3ingest.local.emulator.moto_patches`)."""
    request = urllib.request.Request(
        f"{endpoint_url}/moto-api/config",
        data=json.dumps({"stepfunctions": {"execute_state_machine": True}}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        response.read()
