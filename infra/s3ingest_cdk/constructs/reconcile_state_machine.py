"""The fan-out reconciliation: a Step Functions state machine over the fan-out step function.

Each step's payload carries exactly the fields ``s3ingest_fn.services.fanout.FanOut`` reads; the
local runtime executes this machine as synthesized (``s3ingest/local/stack/executions.py``).
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from s3ingest_cdk.constructs.state_machine_parts import (
    execution_logs,
    lambda_step,
    logged_state_machine,
)

#: Where the fan-out writes its shards in the inventory bucket (``fanout.WORK_PREFIX``).
WORK_PREFIX = "reconcile-work/"
#: How long the shards are kept: a run needs them for its own duration only.
WORK_EXPIRATION = Duration.days(7)
#: Label of the inventory Distributed Map's Map Run (names its child executions).
INVENTORY_MAP_LABEL = "ShardInventory"
#: Children of the inventory Distributed Map running at once (one per inventory data file).
INVENTORY_MAX_CONCURRENCY = 100
#: Longest a run may take before Step Functions stops it (a Standard workflow's default is a year).
RUN_TIMEOUT = Duration.hours(24)
#: Children of the partition Map running at once (an inline Map runs at most 40).
PARTITION_MAX_CONCURRENCY = 40

# The plan's fields each later step reads (``FanOut.plan``'s result, kept at ``$.plan``).
_PLAN = "$.plan"


def _from_plan(*names: str) -> dict[str, str]:
    return {f"{name}.$": f"{_PLAN}.{name}" for name in names}


def _item(field: str) -> dict[str, str]:
    # Inside ItemSelector, "$" is the Map state's input and "$$.Map.Item.Value" the current item
    # (https://docs.aws.amazon.com/step-functions/latest/dg/input-output-itemselector.html).
    return {f"{field}.$": "$$.Map.Item.Value"}


class ReconcileStateMachine(Construct):
    """Plan; shard inventory files and ledger segments in parallel; diff each partition; summarize.

    States (JSONPath):

    1. ``PlanRequest`` (Pass) sets ``action`` to ``plan`` on the execution input, so the plan gets
       whichever of ``manifest``, ``partitions``, ``segments``, ``prefix``, ``dryRun`` and
       ``marginSeconds`` were given, and nothing is required.
    2. ``Plan`` (Task) keeps the function's result as ``$.plan``.
    3. ``Shard`` (Parallel, result at ``$.shards``): ``ShardInventory``, a Distributed Map over
       ``$.plan.files`` (one child execution per inventory data file, at most 100 at once), and
       ``ShardLedger``, a Map over ``$.plan.segmentList`` (one parallel-Scan segment each).
    4. ``DiffPartitions`` (Map over ``$.plan.partitionList``, at most 40 at once, result at
       ``$.partitions``); with the plan's ``attest``, each child also writes its partition's
       sorted run of attestation leaves.
    5. ``Summarize`` (Task): its result is the execution's output (with ``attest``, after the
       attestation merged from the runs).

    Every task retries Lambda's transient errors and throttling; any failed child fails the run
    (a partial diff would report partial drift). Standard workflow, X-Ray tracing, logging level
    ALL with execution data to its own log group, encrypted with its own KMS key (rotated),
    retained with the stack's other logs.

    Parameters
    ----------
    timeout : aws_cdk.Duration
        Longest a run may take (:data:`RUN_TIMEOUT` by default).

    Attributes: ``state_machine``, its ``log_group`` and ``log_key`` (:func:`execution_logs`).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        function: lambda_.IFunction,
        log_retention_days: int,
        timeout: Duration = RUN_TIMEOUT,
    ) -> None:
        super().__init__(scope, construct_id)
        self._function = function
        parts = execution_logs(
            self,
            description="s3ingest: encrypts the reconcile state machine's execution logs",
            log_retention_days=log_retention_days,
        )
        self.log_group = parts.log_group
        self.log_key = parts.log_key
        self.state_machine = logged_state_machine(
            self,
            comment="s3ingest: fan-out reconciliation of the ledger with the bucket's inventory",
            definition=self._definition(),
            log_group=self.log_group,
            timeout=timeout,
        )

    def _step(
        self,
        state_id: str,
        *,
        payload: sfn.TaskInput,
        result_selector: dict[str, Any] | None = None,
        output_path: str | None = None,
    ) -> tasks.LambdaInvoke:
        """One invocation of the step function (:func:`lambda_step`: retries included)."""
        return lambda_step(
            self,
            state_id,
            function=self._function,
            payload=payload,
            result_selector=result_selector,
            output_path=output_path,
        )

    def _definition(self) -> sfn.IChainable:
        # The state's input as is: the execution input plus "action" for Plan; in a Map, the
        # object its ItemSelector built.
        item = sfn.TaskInput.from_json_path_at("$")
        plan_request = sfn.Pass(
            self, "PlanRequest", result=sfn.Result.from_string("plan"), result_path="$.action"
        )
        # The plan replaces the state: {"plan": <FanOut.plan result>}.
        plan = self._step("Plan", payload=item, result_selector={"plan.$": "$.Payload"})

        shard_inventory = sfn.DistributedMap(
            self,
            "ShardInventory",
            items_path=f"{_PLAN}.files",
            item_selector={
                "action": "shard_inventory",
                **_from_plan("runId", "manifest", "partitions", "prefix"),
                **_item("file"),
            },
            max_concurrency=INVENTORY_MAX_CONCURRENCY,
            # Child execution ARNs end in "<state machine>/<label>:<id>": with a label, the redrive
            # grant CDK adds covers this Map Run's children, not any Map Run's.
            label=INVENTORY_MAP_LABEL,
        )
        # Only the counts come back: a Distributed Map's result is bounded by the 256 KiB state
        # payload, and there is one result per inventory data file.
        shard_inventory.item_processor(
            self._step(
                "ShardInventoryFile",
                payload=item,
                result_selector={"keys.$": "$.Payload.keys", "shards.$": "$.Payload.shards"},
            )
        )
        shard_ledger = sfn.Map(
            self,
            "ShardLedger",
            items_path=f"{_PLAN}.segmentList",
            item_selector={
                "action": "shard_ledger",
                **_from_plan("runId", "segments", "partitions", "prefix"),
                **_item("segment"),
            },
        )
        shard_ledger.item_processor(
            self._step("ShardLedgerSegment", payload=item, output_path="$.Payload")
        )
        shard = sfn.Parallel(self, "Shard", result_path="$.shards")
        shard.branch(shard_inventory).branch(shard_ledger)

        diff_partitions = sfn.Map(
            self,
            "DiffPartitions",
            items_path=f"{_PLAN}.partitionList",
            item_selector={
                "action": "diff_partition",
                **_from_plan(
                    "runId",
                    "createdMs",
                    "marginMs",
                    "dryRun",
                    "compareVersions",
                    "compareEtags",
                    "prefix",
                    "attest",
                ),
                **_item("partition"),
            },
            max_concurrency=PARTITION_MAX_CONCURRENCY,
            result_path="$.partitions",
        )
        diff_partitions.item_processor(
            self._step("DiffPartition", payload=item, output_path="$.Payload")
        )
        summarize = self._step(
            "Summarize",
            payload=sfn.TaskInput.from_object(
                {
                    "action": "summarize",
                    "plan": sfn.JsonPath.object_at(_PLAN),
                    "inventory": sfn.JsonPath.list_at("$.shards[0]"),
                    "ledger": sfn.JsonPath.list_at("$.shards[1]"),
                    "partitions": sfn.JsonPath.list_at("$.partitions"),
                }
            ),
            output_path="$.Payload",
        )
        return plan_request.next(plan).next(shard).next(diff_partitions).next(summarize)
