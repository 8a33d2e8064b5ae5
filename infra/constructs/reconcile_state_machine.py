"""The fan-out reconciliation: a Step Functions state machine over the fan-out step function.

The order of the steps is the one ``s3ingest/local/fanout_driver.py`` runs locally, and each
step's payload carries exactly the fields ``s3ingest_fn.reconcile.fanout.FanOut`` reads.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Aws, Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from infra.constructs.dependencies import depend_on_policies_not_role
from infra.constructs.python_function import retention

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
       ``$.partitions``).
    5. ``Summarize`` (Task): its result is the execution's output.

    Every task retries Lambda's transient errors and throttling; any failed child fails the run
    (a partial diff would report partial drift). Standard workflow, X-Ray tracing, logging level
    ALL with execution data to its own log group, encrypted with its own KMS key (rotated),
    retained with the stack's other logs.

    Parameters
    ----------
    scope : constructs.Construct
        Parent construct.
    construct_id : str
        Construct id.
    function : aws_cdk.aws_lambda.IFunction
        The fan-out step function (``s3ingest_fn.handlers.reconcile_fanout.handler``).
    log_retention_days : int
        Log retention, days; one of CloudWatch Logs' allowed values.
    timeout : aws_cdk.Duration
        Longest a run may take (:data:`RUN_TIMEOUT` by default).

    Attributes
    ----------
    state_machine : aws_cdk.aws_stepfunctions.StateMachine
        The state machine.
    log_group : aws_cdk.aws_logs.LogGroup
        Its execution log group.
    log_key : aws_cdk.aws_kms.Key
        The key that encrypts the log group.
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
        self.log_key = kms.Key(
            self,
            "LogKey",
            description="s3ingest: encrypts the reconcile state machine's execution logs",
            enable_key_rotation=True,
            removal_policy=RemovalPolicy.RETAIN,
        )
        # CloudWatch Logs encrypts with the key on the log group's behalf; the condition keeps the
        # grant to log groups of this account and region. The log group's own ARN cannot be named:
        # the log group refers to the key, so the key's policy referring back would be a cycle.
        # https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html
        self.log_key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowCloudWatchLogsOfThisAccountAndRegion",
                principals=[iam.ServicePrincipal(f"logs.{Aws.REGION}.amazonaws.com")],
                actions=[
                    "kms:Encrypt*",
                    "kms:Decrypt*",
                    "kms:ReEncrypt*",
                    "kms:GenerateDataKey*",
                    "kms:Describe*",
                ],
                resources=["*"],
                conditions={
                    "ArnLike": {
                        "kms:EncryptionContext:aws:logs:arn": (
                            f"arn:{Aws.PARTITION}:logs:{Aws.REGION}:{Aws.ACCOUNT_ID}:log-group:*"
                        )
                    }
                },
            )
        )
        self.log_group = logs.LogGroup(
            self,
            "LogGroup",
            retention=retention(log_retention_days),
            encryption_key=self.log_key,
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            comment="s3ingest: fan-out reconciliation of the ledger with the bucket's inventory",
            definition_body=sfn.DefinitionBody.from_chainable(self._definition()),
            state_machine_type=sfn.StateMachineType.STANDARD,
            logs=sfn.LogOptions(
                destination=self.log_group, level=sfn.LogLevel.ALL, include_execution_data=True
            ),
            tracing_enabled=True,
            timeout=timeout,
        )
        depend_on_policies_not_role(self.state_machine, self.state_machine.role)

    def _step(
        self,
        state_id: str,
        *,
        payload: sfn.TaskInput,
        result_selector: dict[str, Any] | None = None,
        output_path: str | None = None,
    ) -> tasks.LambdaInvoke:
        """One invocation of the step function, retrying Lambda's transient errors and throttling.

        ``retry_on_service_exceptions`` (CDK's default) adds the retry on
        ``Lambda.ServiceException``, ``Lambda.AWSLambdaException``, ``Lambda.SdkClientException``
        and ``Lambda.ClientExecutionTimeoutException``
        (https://docs.aws.amazon.com/step-functions/latest/dg/bp-lambda-serviceexception.html).
        """
        step = tasks.LambdaInvoke(
            self,
            state_id,
            lambda_function=self._function,
            payload=payload,
            retry_on_service_exceptions=True,
            result_selector=result_selector,
            output_path=output_path,
        )
        step.add_retry(
            errors=["Lambda.TooManyRequestsException"],
            interval=Duration.seconds(2),
            max_attempts=8,
            backoff_rate=2,
            jitter_strategy=sfn.JitterType.FULL,
        )
        return step

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
