"""The reprocess run: a Step Functions Distributed Map over parallel Scan segments of the ledger.

A processor added to a running stack (or whose ``version`` was raised) is *behind* on every row
written before (CONTRACT C11). The plan stores the run's request and splits the ledger into
``segments`` parallel Scan segments
(https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Scan.html#Scan.ParallelScan);
one child execution per segment scans it page by page and runs the processor on each row behind
for it, claimed under a fencing token (``s3ingest_fn.handlers.reprocess``). A checkpoint after
each page makes a run resumable: starting it again with the same ``run`` skips finished
segments and resumes the others at their cursor. The same shape as the listing backfill
(:mod:`s3ingest_cdk.constructs.listing_backfill_state_machine`).
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from s3ingest_cdk.constructs.dependencies import depend_on_policies_not_role
from s3ingest_cdk.constructs.state_machine_parts import execution_logs, lambda_step

#: Label of the Distributed Map's Map Run (names its child executions).
SEGMENTS_MAP_LABEL = "ReprocessSegments"
#: Longest a run may take before Step Functions stops it (a re-run with the same ``run``
#: resumes from the checkpoints).
RUN_TIMEOUT = Duration.hours(24)
#: The error type a handler's ``TransientError`` has in Lambda's error payload
#: (``s3ingest_fn.core.model.TransientError``).
HANDLER_TRANSIENT = "TransientError"
#: Where the plan is kept in the state.
_PLAN = "$.plan"


class ReprocessStateMachine(Construct):
    """Plan; reprocess every segment (Distributed Map, a loop per segment); summarize.

    Execution input: ``{"run", "processor", "bucket"?, "prefix"?, "rate"?, "dry_run"?,
    "remove"?, "segments"?, "concurrency"?}``
    (:class:`s3ingest_fn.services.reprocess.ReprocessRequest`; the same ``run`` and request
    resume a stopped or failed run).

    States (JSONPath):

    1. ``Plan`` (Task, the plan function, given ``{"request": <the input>, "owner":
       <the execution's id>, "limit"?}``): result at ``$.plan``: ``{...request, "version", "owner",
       "segments": [{"run", "segment", "total"}], "total", "done", "concurrency"}`` (the
       segments already done left out; an earlier execution of the run stops).
    2. ``Segments`` (Distributed Map over ``$.plan.segments``, ``MaxConcurrencyPath``
       ``$.plan.concurrency``: the input's ``concurrency``, else 16 or the number of
       segments, label ``ReprocessSegments``): each child, Standard, runs ``Segment`` (Task:
       ``{"run", "segment", "processor", "owner"}``, result's ``done`` at ``$.progress``; the
       segment function runs pages until its time is nearly up and checkpoints after each) and
       ``SegmentDone`` (Choice: ``$.progress.done`` true ends the child; otherwise ``Segment``
       again from the checkpoint). The children's results are discarded (the checkpoints hold
       the counts; a Map's result is bounded by 256 KiB).
    3. ``Summarize`` (Task: ``{"run"}``): totals from the checkpoints, the execution's output.

    Every task retries Lambda's transient errors and throttling (:func:`lambda_step`); a failed
    segment fails the run (run it again to resume). Standard workflow, X-Ray tracing, logging
    level ALL with execution data to its own log group encrypted with its own KMS key.

    Parameters
    ----------
    scope : constructs.Construct
        Parent construct.
    construct_id : str
        Construct id.
    plan_function, segment_function, summarize_function : aws_cdk.aws_lambda.IFunction
        The handlers ``plan``, ``segment`` and ``summarize``.
    log_retention_days : int
        Log retention, days.
    timeout : aws_cdk.Duration
        Longest a run may take (:data:`RUN_TIMEOUT` by default).
    concurrency_limit : int, optional
        The segment function's reserved concurrency: the plan caps a run's ``concurrency``
        at it (``"limit"`` in the plan's payload), so no segment worker is throttled.

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
        segment_function: lambda_.IFunction,
        summarize_function: lambda_.IFunction,
        log_retention_days: int,
        timeout: Duration = RUN_TIMEOUT,
        concurrency_limit: int | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        parts = execution_logs(
            self,
            description="s3ingest: encrypts the reprocess run's execution logs",
            log_retention_days=log_retention_days,
        )
        self.log_group = parts.log_group
        self.log_key = parts.log_key
        plan = lambda_step(
            self,
            "Plan",
            function=plan_function,
            # the execution owns the run: an earlier execution of the same run stops
            payload=sfn.TaskInput.from_object(
                {
                    "request": sfn.JsonPath.entire_payload,
                    "owner": sfn.JsonPath.execution_id,
                    **({} if concurrency_limit is None else {"limit": concurrency_limit}),
                }
            ),
            result_selector={"plan.$": "$.Payload"},
        )
        segment = lambda_step(
            self,
            "Segment",
            function=segment_function,
            payload=sfn.TaskInput.from_object(
                {
                    "run": sfn.JsonPath.string_at("$.run"),
                    "segment": sfn.JsonPath.number_at("$.segment"),
                    "processor": sfn.JsonPath.string_at("$.processor"),
                    "owner": sfn.JsonPath.string_at("$.owner"),
                }
            ),
            result_selector={"done.$": "$.Payload.done"},
            result_path="$.progress",
        )
        for step in (plan, segment):
            # The handlers' own transient failures (throttling, a timed-out invocation): the
            # step runs again from the segment's checkpoint, or re-reads the stored plan.
            step.add_retry(
                errors=[HANDLER_TRANSIENT, "Sandbox.Timedout"],
                interval=Duration.seconds(5),
                max_attempts=6,
                backoff_rate=2,
                jitter_strategy=sfn.JitterType.FULL,
            )
        segment_done = sfn.Choice(self, "SegmentDone")
        segment_done.when(
            sfn.Condition.boolean_equals("$.progress.done", True),
            sfn.Succeed(self, "SegmentReprocessed"),
        ).otherwise(segment)
        segments = sfn.DistributedMap(
            self,
            "Segments",
            items_path=f"{_PLAN}.segments",
            item_selector={
                "run.$": "$$.Map.Item.Value.run",
                "segment.$": "$$.Map.Item.Value.segment",
                "processor.$": f"{_PLAN}.processor",
                "owner.$": f"{_PLAN}.owner",
            },
            max_concurrency_path=f"{_PLAN}.concurrency",
            label=SEGMENTS_MAP_LABEL,
            result_path=sfn.JsonPath.DISCARD,
        )
        segments.item_processor(segment.next(segment_done))
        summarize = lambda_step(
            self,
            "Summarize",
            function=summarize_function,
            payload=sfn.TaskInput.from_object({"run": sfn.JsonPath.string_at(f"{_PLAN}.run")}),
            output_path="$.Payload",
        )
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            comment="s3ingest: reprocess run of one processor over the ledger's visible keys",
            definition_body=sfn.DefinitionBody.from_chainable(plan.next(segments).next(summarize)),
            state_machine_type=sfn.StateMachineType.STANDARD,
            logs=sfn.LogOptions(
                destination=self.log_group, level=sfn.LogLevel.ALL, include_execution_data=True
            ),
            tracing_enabled=True,
            timeout=timeout,
        )
        depend_on_policies_not_role(self.state_machine, self.state_machine.role)
