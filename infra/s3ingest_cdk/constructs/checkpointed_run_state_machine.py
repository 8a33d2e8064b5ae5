"""A checkpointed run: a Step Functions Distributed Map over the parts of a plan, each part a loop
of one Lambda step that works page by page and checkpoints after each page.

Two runs have this shape (:mod:`s3ingest_cdk.features.checkpointed_run`):

* the listing backfill (:func:`listing_states`): the plan splits a bucket's scope into key
  ranges, each shard lists its range (ListObjectVersions, versioned or not) and records what it
  lists through the ledger rules (``s3ingest_fn.handlers.listing_backfill``). No inventory
  needed (a created bucket's first report takes up to 48 hours), no per-object Lambda
  invocation or Batch Operations fee.
* the reprocess run (:func:`reprocess_states`): a processor added to a running stack (or whose
  ``version`` was raised) is *behind* on every row written before (CONTRACT C11); the plan
  stores the run's request and splits the ledger into parallel Scan segments
  (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Scan.html#Scan.ParallelScan),
  each segment runs the processor on each row behind for it, claimed under a fencing token
  (``s3ingest_fn.handlers.reprocess``).

Starting a run again with the same ``run`` skips the finished parts and resumes the others at
their checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from s3ingest_cdk.constructs.state_machine_parts import (
    execution_logs,
    lambda_step,
    logged_state_machine,
)

#: Labels of the Distributed Maps' Map Runs (they name the child executions).
SHARDS_MAP_LABEL = "ListingShards"
SEGMENTS_MAP_LABEL = "ReprocessSegments"
#: Longest a run may take before Step Functions stops it (a re-run with the same ``run``
#: resumes from the checkpoints).
RUN_TIMEOUT = Duration.hours(24)
#: The error type a handler's ``TransientError`` has in Lambda's error payload
#: (``s3ingest_fn.core.model.TransientError``).
HANDLER_TRANSIENT = "TransientError"
#: Where the plan is kept in the state.
_PLAN = "$.plan"


@dataclass(frozen=True)
class RunStates:
    """What one checkpointed run's machine has of its own.

    Attributes
    ----------
    comment, log_key_description : str
        The state machine's comment, its log key's description.
    plan_payload, part_payload, summarize_payload : dict
        The events of ``Plan``, of the part's step and of ``Summarize``.
    part_result : dict
        :func:`~s3ingest_cdk.constructs.state_machine_parts.lambda_step`'s result keywords for
        the part's step.
    done_path : str
        Where the part step's ``done`` is in the child's state.
    parts : str
        The plan's list of parts (``$.plan.<parts>``).
    item_selector : dict
        The Distributed Map's input of each child.
    concurrency : int or str
        Parts run at once: ``MaxConcurrency``, or a path (``MaxConcurrencyPath``).
    map_id, label, part_id, choice_id, done_id : str
        The ids (and state names) of the Distributed Map, its label, and of the part's step,
        Choice and Succeed.
    """

    comment: str
    log_key_description: str
    plan_payload: dict[str, Any]
    part_payload: dict[str, Any]
    part_result: dict[str, Any]
    done_path: str
    summarize_payload: dict[str, Any]
    parts: str
    item_selector: dict[str, str]
    concurrency: int | str
    map_id: str
    label: str
    part_id: str
    choice_id: str
    done_id: str


def listing_states(max_concurrency: int) -> RunStates:
    """The listing backfill's states; execution input ``{"bucket": <one of the stack's
    buckets>, "run": <run id>}``.

    1. ``Plan``: result at ``$.plan``: ``{"bucket", "run", "shards": [{"id", "bucket",
       "prefix", "start_after", "end_before"}], "done": n}``.
    2. ``ListShards`` over ``$.plan.shards`` (``MaxConcurrency`` ``max_concurrency``, the
       ``listingConcurrency``): ``ListShard`` (``{"run", "shard"}``) until ``ShardDone`` sees
       ``$.done``.
    3. ``Summarize`` (``{"bucket", "run"}``): totals from the checkpoints.
    """
    return RunStates(
        comment="s3ingest: listing backfill of one bucket (no inventory needed)",
        log_key_description="s3ingest: encrypts the listing backfill's execution logs",
        plan_payload={
            "bucket": sfn.JsonPath.string_at("$.bucket"),
            "run": sfn.JsonPath.string_at("$.run"),
        },
        part_payload={
            "run": sfn.JsonPath.string_at("$.run"),
            "shard": sfn.JsonPath.object_at("$.shard"),
        },
        part_result={"output_path": "$.Payload"},
        done_path="$.done",
        summarize_payload={
            "bucket": sfn.JsonPath.string_at(f"{_PLAN}.bucket"),
            "run": sfn.JsonPath.string_at(f"{_PLAN}.run"),
        },
        parts=f"{_PLAN}.shards",
        item_selector={"run.$": f"{_PLAN}.run", "shard.$": "$$.Map.Item.Value"},
        concurrency=max_concurrency,
        map_id="ListShards",
        label=SHARDS_MAP_LABEL,
        part_id="ListShard",
        choice_id="ShardDone",
        done_id="ShardListed",
    )


def reprocess_states(concurrency_limit: int | None) -> RunStates:
    """The reprocess run's states; execution input ``{"run", "processor", "bucket"?,
    "prefix"?, "rate"?, "dry_run"?, "remove"?, "segments"?, "concurrency"?}``
    (:class:`s3ingest_fn.services.reprocess.ReprocessRequest`).

    1. ``Plan`` (``{"request": <the input>, "owner": <the execution's id>, "limit"?}``: the
       execution owns the run, an earlier execution of it stops; ``limit`` the segment
       function's reserved concurrency, ``concurrency_limit``): result at ``$.plan``:
       ``{...request, "version", "owner", "segments": [{"run", "segment", "total"}], "total",
       "done", "concurrency"}`` (the segments already done left out).
    2. ``Segments`` over ``$.plan.segments`` (``MaxConcurrencyPath`` ``$.plan.concurrency``):
       ``Segment`` (``{"run", "segment", "processor", "owner"}``, its ``done`` at
       ``$.progress``) until ``SegmentDone`` sees ``$.progress.done``.
    3. ``Summarize`` (``{"run"}``): totals from the checkpoints.
    """
    return RunStates(
        comment="s3ingest: reprocess run of one processor over the ledger's visible keys",
        log_key_description="s3ingest: encrypts the reprocess run's execution logs",
        plan_payload={
            "request": sfn.JsonPath.entire_payload,
            "owner": sfn.JsonPath.execution_id,
            **({} if concurrency_limit is None else {"limit": concurrency_limit}),
        },
        part_payload={
            "run": sfn.JsonPath.string_at("$.run"),
            "segment": sfn.JsonPath.number_at("$.segment"),
            "processor": sfn.JsonPath.string_at("$.processor"),
            "owner": sfn.JsonPath.string_at("$.owner"),
        },
        part_result={"result_selector": {"done.$": "$.Payload.done"}, "result_path": "$.progress"},
        done_path="$.progress.done",
        summarize_payload={"run": sfn.JsonPath.string_at(f"{_PLAN}.run")},
        parts=f"{_PLAN}.segments",
        item_selector={
            "run.$": "$$.Map.Item.Value.run",
            "segment.$": "$$.Map.Item.Value.segment",
            "processor.$": f"{_PLAN}.processor",
            "owner.$": f"{_PLAN}.owner",
        },
        concurrency=f"{_PLAN}.concurrency",
        map_id="Segments",
        label=SEGMENTS_MAP_LABEL,
        part_id="Segment",
        choice_id="SegmentDone",
        done_id="SegmentReprocessed",
    )


class CheckpointedRunStateMachine(Construct):
    """Plan; run every part (Distributed Map, a loop per part); summarize.

    ``Plan`` (Task, the plan function) puts the plan at ``$.plan``; the Distributed Map runs a
    Standard child per part: the part's step (the part function works until its time is nearly
    up and checkpoints after each page) and a Choice that ends the child on ``done`` and runs
    the step again from the checkpoint otherwise. The children's results are discarded (the
    checkpoints hold the counts; a Map's result is bounded by 256 KiB). ``Summarize`` totals
    the checkpoints: the execution's output.

    Every task retries Lambda's transient errors and throttling (:func:`lambda_step`), plan and
    part also the handlers' ``TransientError`` and ``Sandbox.Timedout``; a failed part fails the
    run (run it again to resume). Standard workflow, X-Ray tracing, logging level ALL with
    execution data to its own log group encrypted with its own KMS key.

    Parameters
    ----------
    states : RunStates
        The run's own (:func:`listing_states`, :func:`reprocess_states`).
    timeout : aws_cdk.Duration
        Longest a run may take (:data:`RUN_TIMEOUT` by default).

    Attributes: ``state_machine``, its ``log_group`` and ``log_key`` (:func:`execution_logs`).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        states: RunStates,
        plan_function: lambda_.IFunction,
        part_function: lambda_.IFunction,
        summarize_function: lambda_.IFunction,
        log_retention_days: int,
        timeout: Duration = RUN_TIMEOUT,
    ) -> None:
        super().__init__(scope, construct_id)
        parts = execution_logs(
            self, description=states.log_key_description, log_retention_days=log_retention_days
        )
        self.log_group = parts.log_group
        self.log_key = parts.log_key
        plan = lambda_step(
            self,
            "Plan",
            function=plan_function,
            payload=sfn.TaskInput.from_object(states.plan_payload),
            result_selector={"plan.$": "$.Payload"},
        )
        part = lambda_step(
            self,
            states.part_id,
            function=part_function,
            payload=sfn.TaskInput.from_object(states.part_payload),
            **states.part_result,
        )
        for step in (plan, part):
            # The handlers' own transient failures (throttling, a timed-out invocation): the
            # step runs again from the part's checkpoint, or re-reads the stored plan.
            step.add_retry(
                errors=[HANDLER_TRANSIENT, "Sandbox.Timedout"],
                interval=Duration.seconds(5),
                max_attempts=6,
                backoff_rate=2,
                jitter_strategy=sfn.JitterType.FULL,
            )
        part_done = sfn.Choice(self, states.choice_id)
        part_done.when(
            sfn.Condition.boolean_equals(states.done_path, True),
            sfn.Succeed(self, states.done_id),
        ).otherwise(part)
        concurrency = states.concurrency
        all_parts = sfn.DistributedMap(
            self,
            states.map_id,
            items_path=states.parts,
            item_selector=states.item_selector,
            max_concurrency=concurrency if isinstance(concurrency, int) else None,
            max_concurrency_path=concurrency if isinstance(concurrency, str) else None,
            label=states.label,
            result_path=sfn.JsonPath.DISCARD,
        )
        all_parts.item_processor(part.next(part_done))
        summarize = lambda_step(
            self,
            "Summarize",
            function=summarize_function,
            payload=sfn.TaskInput.from_object(states.summarize_payload),
            output_path="$.Payload",
        )
        self.state_machine = logged_state_machine(
            self,
            comment=states.comment,
            definition=plan.next(all_parts).next(summarize),
            log_group=self.log_group,
            timeout=timeout,
        )
