"""The listing backfill: a Step Functions Distributed Map over key-range shards of a live listing.

No inventory needed (a created bucket's first report takes up to 48 hours): the plan splits the
bucket's scope into key ranges, one child execution per range lists it page by page
(ListObjectVersions, versioned or not) and records what it lists through the ledger rules
(``s3ingest_fn.handlers.listing_backfill``). Checkpoints after each page make a run resumable:
starting it again with the same ``run`` skips finished shards and resumes the others at their
marker. Chosen over S3 Batch Operations with a generated manifest: no per-object Lambda
invocation, no per-object Batch Operations fee, and no wait for an inventory.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from s3ingest_cdk.constructs.dependencies import depend_on_policies_not_role
from s3ingest_cdk.constructs.state_machine_parts import execution_logs, lambda_step

#: Label of the Distributed Map's Map Run (names its child executions).
SHARDS_MAP_LABEL = "ListingShards"
#: Longest a run may take before Step Functions stops it (a re-run with the same ``run``
#: resumes from the checkpoints).
RUN_TIMEOUT = Duration.hours(24)
#: The error type a handler's ``TransientError`` has in Lambda's error payload
#: (``s3ingest_fn.core.model.TransientError``).
HANDLER_TRANSIENT = "TransientError"
#: Where the plan is kept in the state.
_PLAN = "$.plan"


class ListingBackfillStateMachine(Construct):
    """Plan; list every shard (Distributed Map, a loop per shard); summarize.

    Execution input: ``{"bucket": <one of the stack's buckets>, "run": <run id>}`` (the same
    ``run`` resumes a stopped or failed run).

    States (JSONPath):

    1. ``Plan`` (Task, the plan function): result at ``$.plan``:
       ``{"bucket", "run", "shards": [{"id", "bucket", "prefix", "start_after",
       "end_before"}], "done": n}``.
    2. ``ListShards`` (Distributed Map over ``$.plan.shards``, ``MaxConcurrency`` =
       ``listingConcurrency``, label ``ListingShards``): each child, Standard, runs
       ``ListShard`` (Task: ``{"run", "shard"}``, the shard function lists pages until its time
       is nearly up and checkpoints after each) and ``ShardDone`` (Choice: ``$.done`` true ends
       the child; otherwise ``ListShard`` again from the checkpoint). The children's results are
       discarded (the checkpoints hold the counts; a Map's result is bounded by 256 KiB).
    3. ``Summarize`` (Task: ``{"bucket", "run"}``): totals from the checkpoints, the
       execution's output.

    Every task retries Lambda's transient errors and throttling (:func:`lambda_step`); a failed
    shard fails the run (run it again to resume). Standard workflow, X-Ray tracing, logging
    level ALL with execution data to its own log group encrypted with its own KMS key.

    Parameters
    ----------
    scope : constructs.Construct
        Parent construct.
    construct_id : str
        Construct id.
    plan_function, shard_function, summarize_function : aws_cdk.aws_lambda.IFunction
        The handlers ``plan``, ``list_shard`` and ``summarize``.
    max_concurrency : int
        Shards listed at once (``listingConcurrency``).
    log_retention_days : int
        Log retention, days.
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
        plan_function: lambda_.IFunction,
        shard_function: lambda_.IFunction,
        summarize_function: lambda_.IFunction,
        max_concurrency: int,
        log_retention_days: int,
        timeout: Duration = RUN_TIMEOUT,
    ) -> None:
        super().__init__(scope, construct_id)
        parts = execution_logs(
            self,
            description="s3ingest: encrypts the listing backfill's execution logs",
            log_retention_days=log_retention_days,
        )
        self.log_group = parts.log_group
        self.log_key = parts.log_key
        plan = lambda_step(
            self,
            "Plan",
            function=plan_function,
            payload=sfn.TaskInput.from_object(
                {
                    "bucket": sfn.JsonPath.string_at("$.bucket"),
                    "run": sfn.JsonPath.string_at("$.run"),
                }
            ),
            result_selector={"plan.$": "$.Payload"},
        )
        list_shard = lambda_step(
            self,
            "ListShard",
            function=shard_function,
            payload=sfn.TaskInput.from_object(
                {
                    "run": sfn.JsonPath.string_at("$.run"),
                    "shard": sfn.JsonPath.object_at("$.shard"),
                }
            ),
            output_path="$.Payload",
        )
        for step in (plan, list_shard):
            # The handlers' own transient failures (throttling, a timed-out invocation): the
            # step runs again from the shard's checkpoint, or re-reads the stored plan.
            step.add_retry(
                errors=[HANDLER_TRANSIENT, "Sandbox.Timedout"],
                interval=Duration.seconds(5),
                max_attempts=6,
                backoff_rate=2,
                jitter_strategy=sfn.JitterType.FULL,
            )
        shard_done = sfn.Choice(self, "ShardDone")
        shard_done.when(
            sfn.Condition.boolean_equals("$.done", True), sfn.Succeed(self, "ShardListed")
        ).otherwise(list_shard)
        list_shards = sfn.DistributedMap(
            self,
            "ListShards",
            items_path=f"{_PLAN}.shards",
            item_selector={
                "run.$": f"{_PLAN}.run",
                "shard.$": "$$.Map.Item.Value",
            },
            max_concurrency=max_concurrency,
            label=SHARDS_MAP_LABEL,
            result_path=sfn.JsonPath.DISCARD,
        )
        list_shards.item_processor(list_shard.next(shard_done))
        summarize = lambda_step(
            self,
            "Summarize",
            function=summarize_function,
            payload=sfn.TaskInput.from_object(
                {
                    "bucket": sfn.JsonPath.string_at(f"{_PLAN}.bucket"),
                    "run": sfn.JsonPath.string_at(f"{_PLAN}.run"),
                }
            ),
            output_path="$.Payload",
        )
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            comment="s3ingest: listing backfill of one bucket (no inventory needed)",
            definition_body=sfn.DefinitionBody.from_chainable(
                plan.next(list_shards).next(summarize)
            ),
            state_machine_type=sfn.StateMachineType.STANDARD,
            logs=sfn.LogOptions(
                destination=self.log_group, level=sfn.LogLevel.ALL, include_execution_data=True
            ),
            tracing_enabled=True,
            timeout=timeout,
        )
        depend_on_policies_not_role(self.state_machine, self.state_machine.role)
