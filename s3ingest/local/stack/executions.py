"""The stack's state machines, executed on the emulator by moto's executor.

:class:`LocalMachines` belongs to one :class:`~s3ingest.local.stack.runtime.LocalRuntime`: it takes
a machine's definition as synthesized (:mod:`s3ingest.local.machines`), fills its placeholders with
the runtime's resources, registers the functions the machine invokes with an in-process
:class:`~s3ingest.local.emulator.lambda_service.LambdaService` (the handler and environment the
stack gives them, pointed at the emulator), creates the machine in moto with a local role, and runs
executions to their end (:meth:`LocalMachines.run`).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from s3ingest.local import machines
from s3ingest.local.emulator.function_logs import FunctionLogs
from s3ingest.local.emulator.lambda_service import LambdaService
from s3ingest.local.emulator.server import ACCOUNT, REGION, Emulator
from s3ingest.local.emulator.stepfunctions import enable_executor
from s3ingest.local.stack.provisioning import Resources
from s3ingest_fn import config as fn_config

#: Execution statuses that end :meth:`LocalMachines.run`'s wait.
TERMINAL = ("SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED")
#: Environment variables a function gets from the runtime's settings and buckets, not from the
#: synthesized variant (which has the example processor and one bucket): see
#: :meth:`LocalMachines.register_functions`.
SETTINGS_ENVIRONMENT = (
    fn_config.PROCESSOR,
    fn_config.PROCESSORS,
    fn_config.PROCESSOR_TARGETS,
    fn_config.HOLD,
    fn_config.TRAIL_LENGTH,
    fn_config.OUTPUT_BUCKET,
    fn_config.SCOPE,
    fn_config.INVENTORIES,
    fn_config.CHECKPOINT_BUCKET_NAME,
)
#: The local roles: the state machines' and the Batch Operations job's (moto checks they exist).
STATES_ROLE = "s3ingest-local-states"
BATCH_OPERATIONS_ROLE = "s3ingest-local-batch-operations"


@dataclass
class Execution:
    """One finished execution: ``arn``, ``status``, ``output`` (parsed), ``error`` and ``cause``
    (a failed one), ``states_entered`` (state name -> times entered, in first-entry order, from
    the history's ``*StateEntered`` events) and ``map_runs`` (``describe_map_run`` of each).
    """

    arn: str
    status: str
    output: Any = None
    error: str | None = None
    cause: str | None = None
    states_entered: dict[str, int] = field(default_factory=dict)
    map_runs: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """``{"arn", "status", "states_entered", "map_runs"}`` (plus ``error``, ``cause`` when
        it failed): what reports and ``--json`` show."""
        out: dict[str, Any] = {
            "arn": self.arn,
            "status": self.status,
            "states_entered": self.states_entered,
            "map_runs": self.map_runs,
        }
        if self.error or self.cause:
            out["error"] = self.error
            out["cause"] = self.cause
        return out


class ExecutionTimeout(TimeoutError):
    """An execution did not end in time (it is stopped)."""


class LocalMachines:
    """The runtime's state machines and the functions they invoke.

    Parameters
    ----------
    emu : Emulator
    resources : Resources
        The runtime's provisioned resources (they fill the definitions' placeholders).
    function_environment : mapping
        What the runtime's settings add to every function's environment (``PROCESSOR``,
        ``OUTPUT_BUCKET``; see :data:`SETTINGS_ENVIRONMENT`).
    logs : FunctionLogs, optional
        Where the functions print (the runtime's :attr:`~LocalRuntime.logs`; default: memory).
    """

    def __init__(
        self,
        emu: Emulator,
        resources: Resources,
        function_environment: Mapping[str, str],
        logs: FunctionLogs | None = None,
    ) -> None:
        self.emu = emu
        self.resources = resources
        self.settings_environment = dict(function_environment)
        enable_executor(emu.endpoint_url)
        self.lambdas = LambdaService(emu, logs)
        self.sfn = emu.client("stepfunctions")
        self._iam = emu.client("iam")
        self._arns: dict[str, str] = {}
        self._values = self._resource_values()

    def close(self) -> None:
        """Unregister the functions (the machines stay in moto, inert)."""
        self.lambdas.close()

    def _role(self, name: str, service: str) -> str:
        trust = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": service},
                    "Action": "sts:AssumeRole",
                }
            ],
        }
        try:
            role = self._iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))
        except self._iam.exceptions.EntityAlreadyExistsException:
            role = self._iam.get_role(RoleName=name)
        return str(role["Role"]["Arn"])

    def _resource_values(self) -> dict[str, str]:
        """Placeholder -> value for the stack's resources as this runtime provisioned them."""
        r = self.resources
        return {
            "AWS::Partition": "aws",
            "AWS::Region": REGION,
            "AWS::AccountId": ACCOUNT,
            "Pipeline/Landing/Bucket": r.bucket,
            "Pipeline/Landing/Inventory": r.inventory_bucket,
            "Pipeline/Landing/Inventory.Arn": f"arn:aws:s3:::{r.inventory_bucket}",
            "Pipeline/Ingestion/Ingest/Queue": r.queue_url,
            "Pipeline/Ingestion/Ingest/DeadLetterQueue": r.dlq_url,
            "Pipeline/Ledger/Table": r.table,
            # the fan-out announces its attestations there (none: no change stream, no event)
            "Pipeline/ChangeStream/ChangeBus/Bus": r.change_bus or "",
            "Pipeline/Backfill/BatchOperations/Role.Arn": self._role(
                BATCH_OPERATIONS_ROLE, "batchoperations.s3.amazonaws.com"
            ),
        }

    def register_functions(self, document: Mapping[str, Any]) -> None:
        """Register every function ``document`` invokes (once per runtime): the stack's handler,
        timeout and memory; its environment filled, without the variant's
        :data:`SETTINGS_ENVIRONMENT`, plus the runtime's."""
        for path, fn in document["functions"].items():
            key = f"{path}.Arn"
            if key in self._values:
                continue
            env = {k: v for k, v in fn["environment"].items() if k not in SETTINGS_ENVIRONMENT}
            env = {**machines.fill(env, self._values), **self.settings_environment}
            self._values[key] = self.lambdas.register(
                path.split("/")[-2],
                fn["handler"],
                env,
                timeout_seconds=float(fn["timeoutSeconds"]),
                memory_mb=int(fn["memoryMb"]),
            )

    def reconfigure(self, function_environment: Mapping[str, str]) -> None:
        """Give every function registered so far, and every one registered later, the
        runtime's new settings environment (a processor configuration deployed again): the
        keys of the old one are removed first."""
        old = self.settings_environment
        self.settings_environment = dict(function_environment)
        for fn in self.lambdas.functions.values():
            for name in old:
                fn.environment.pop(name, None)
            fn.environment.update(self.settings_environment)

    def machine(self, name: str) -> str:
        """The ARN of machine ``name`` (:data:`s3ingest.local.machines.NAMES`), created on first
        use with its functions."""
        if name in self._arns:
            return self._arns[name]
        document = machines.load(name)
        self.register_functions(document)
        definition = machines.fill(document["definition"], self._values)
        arn = self.sfn.create_state_machine(
            name=f"{name}-{uuid.uuid4().hex[:8]}",
            definition=json.dumps(definition),
            roleArn=self._role(STATES_ROLE, "states.amazonaws.com"),
            type="STANDARD",
        )["stateMachineArn"]
        self._arns[name] = str(arn)
        return str(arn)

    def start(self, name: str, execution_input: Mapping[str, Any]) -> str:
        """Start an execution of machine ``name``; return its ARN."""
        return str(
            self.sfn.start_execution(
                stateMachineArn=self.machine(name),
                name=uuid.uuid4().hex,
                input=json.dumps(execution_input),
            )["executionArn"]
        )

    def running(self, arn: str) -> bool:
        """Whether execution ``arn`` has not ended yet."""
        return self.sfn.describe_execution(executionArn=arn)["status"] not in TERMINAL

    def wait(
        self, arn: str, timeout_seconds: float = 600.0, poll_seconds: float = 0.1
    ) -> Execution:
        """Poll ``describe_execution`` until the execution ends; return it with its history's
        states and its Map Runs.

        Raises
        ------
        ExecutionTimeout
            When it has not ended after ``timeout_seconds`` (it is stopped first).
        """
        deadline = time.monotonic() + timeout_seconds
        while True:
            described = self.sfn.describe_execution(executionArn=arn)
            if described["status"] in TERMINAL:
                break
            if time.monotonic() > deadline:
                self.sfn.stop_execution(executionArn=arn, error="LocalTimeout")
                raise ExecutionTimeout(f"{arn} still running after {timeout_seconds} s")
            time.sleep(poll_seconds)
        # a FAILED Map can leave iterations finishing their current task: let them end first
        self.lambdas.quiesce()
        output = described.get("output")
        return Execution(
            arn=arn,
            status=str(described["status"]),
            output=json.loads(output) if output else None,
            error=described.get("error"),
            cause=described.get("cause"),
            states_entered=self.states_entered(arn),
            map_runs=self.map_runs(arn),
        )

    def run(
        self, name: str, execution_input: Mapping[str, Any], timeout_seconds: float = 600.0
    ) -> Execution:
        """Start an execution of machine ``name`` and wait for its end (:meth:`wait`)."""
        return self.wait(self.start(name, execution_input), timeout_seconds)

    def states_entered(self, arn: str) -> dict[str, int]:
        """State name -> times entered, from the execution's history (first-entry order)."""
        counts: dict[str, int] = {}
        kwargs: dict[str, Any] = {"executionArn": arn, "maxResults": 1000}
        while True:
            page = self.sfn.get_execution_history(**kwargs)
            for event in page["events"]:
                if event["type"].endswith("StateEntered"):
                    state = event["stateEnteredEventDetails"]["name"]
                    counts[state] = counts.get(state, 0) + 1
            if not page.get("nextToken"):
                return counts
            kwargs["nextToken"] = page["nextToken"]

    def map_runs(self, arn: str) -> list[dict[str, Any]]:
        """``{"arn", "status", "items", "executions"}`` per Map Run of the execution
        (``list_map_runs`` then ``describe_map_run``; the counts are its ``itemCounts`` and
        ``executionCounts``)."""
        runs = []
        for listed in self.sfn.list_map_runs(executionArn=arn).get("mapRuns", []):
            run = self.sfn.describe_map_run(mapRunArn=listed["mapRunArn"])
            runs.append(
                {
                    "arn": run["mapRunArn"],
                    "status": run["status"],
                    "items": {k: int(v) for k, v in run.get("itemCounts", {}).items()},
                    "executions": {k: int(v) for k, v in run.get("executionCounts", {}).items()},
                }
            )
        return runs
