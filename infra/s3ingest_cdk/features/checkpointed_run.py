"""The checkpointed runs, on every stack: the listing backfill (backfill without waiting for an
inventory, created and existing buckets) and the reprocess run (issue 27). Each is three step
functions and a :class:`~s3ingest_cdk.constructs.checkpointed_run_state_machine.
CheckpointedRunStateMachine`; a :class:`RunSpec` says what one has of its own.

The reprocess run is on every stack, not only those with processors: ``s3ingest reprocess
--remove`` cleans the effect state a removed processor left on the ledger's rows, which a stack
whose last processor was removed needs most; and the CLI, the outputs and the local runtime
then find one machine on every stack, as they find the listing backfill's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from s3ingest import function_roles
from s3ingest.function_roles import FunctionRole
from s3ingest.settings import Settings
from s3ingest_cdk.constructs.checkpointed_run_state_machine import (
    CheckpointedRunStateMachine,
    RunStates,
    listing_states,
    reprocess_states,
)
from s3ingest_cdk.constructs.function import RoleFunction
from s3ingest_cdk.constructs.python_function import reserve_concurrency
from s3ingest_cdk.features.evidence import (
    SFN_LOGGING_EVIDENCE,
    STATE_MACHINE_INVOKER,
    acknowledge_distributed_map,
    acknowledge_state_machine_invoke,
    synchronous_evidence,
)
from s3ingest_cdk.features.role_function import acknowledged_function
from s3ingest_cdk.features.service import Given, grant_ingest_service
from s3ingest_cdk.nag import acknowledge, grant, wildcard_resource_finding
from s3ingest_fn import config as fn_config


@dataclass(frozen=True)
class RunSpec:
    """What one checkpointed run has of its own.

    Attributes
    ----------
    name, part : str
        The run and its part, as the cdk-nag reasons name them (``"listing"``, ``"shard"``).
    rows : tuple of three s3ingest.function_roles.FunctionRole
        The plan, part and summary functions' rows.
    states : callable
        The machine's :class:`RunStates` from the settings.
    checkpoint_prefix : str
        Where the run keeps its checkpoints in the stack's inventory bucket.
    checkpoint_evidence, objects_evidence : str
        The cdk-nag reasons of the checkpoint grants and of the landing buckets' objects.
    map_item : str
        What one child of the Distributed Map works on (its cdk-nag reason).
    plan_names_processors : bool
        The plan gets the processors' variables (no grant).
    lists_buckets : bool
        Plan and part may list every landing bucket (before the ingest service's grants).
    scans_ledger : bool
        The part may ``dynamodb:Scan`` the ledger (after them).
    """

    name: str
    part: str
    rows: tuple[FunctionRole, FunctionRole, FunctionRole]
    machine_id: str
    states: Callable[[Settings], RunStates]
    checkpoint_prefix: str
    checkpoint_evidence: str
    objects_evidence: str
    map_item: str
    plan_names_processors: bool = False
    lists_buckets: bool = False
    scans_ledger: bool = False


#: The listing backfill: a few probes and a listing of the run's checkpoints
#: (``backfill-listing/<bucket>/<run>/<shard id>.json``).
LISTING = RunSpec(
    name="listing",
    part="shard",
    rows=(
        function_roles.LISTING_PLAN,
        function_roles.LISTING_SHARD,
        function_roles.LISTING_SUMMARIZE,
    ),
    machine_id="ListingStateMachine",
    states=lambda settings: listing_states(settings.listing_concurrency),
    checkpoint_prefix="backfill-listing/",
    checkpoint_evidence=(
        "under backfill-listing/ of the stack's inventory bucket only: one checkpoint per shard, "
        "backfill-listing/<bucket>/<run>/<shard id>.json, the run and shard ids made at run time."
    ),
    objects_evidence=(
        "The listing backfill records whichever keys a listing returns and HEADs those whose "
        "ledger row differs (C7): s3:GetObject and s3:GetObjectVersion on the landing buckets' "
        "objects only, keys known at run time."
    ),
    map_item="key-range shard of the listing",
    lists_buckets=True,
)
#: The reprocess run: the stored plan and one read per segment's checkpoint
#: (``reprocess/<run>/plan.json``, ``reprocess/<run>/<segment>.json``;
#: :data:`s3ingest_fn.services.reprocess.CHECKPOINT_PREFIX`).
REPROCESS = RunSpec(
    name="reprocess",
    part="segment",
    rows=(
        function_roles.REPROCESS_PLAN,
        function_roles.REPROCESS_SEGMENT,
        function_roles.REPROCESS_SUMMARIZE,
    ),
    machine_id="ReprocessStateMachine",
    # the plan caps a run's concurrency at the segment function's reserved concurrency
    states=lambda settings: reprocess_states(settings.backfill_reserved_concurrency),
    checkpoint_prefix="reprocess/",
    checkpoint_evidence=(
        "under reprocess/ of the stack's inventory bucket only: the run's plan and one "
        "checkpoint per Scan segment, reprocess/<run>/plan.json and reprocess/<run>/<segment>"
        ".json, the run named at run time."
    ),
    objects_evidence=(
        "The reprocess run hands each row behind for the processor to it, pinned to the row's "
        "change (C8): s3:GetObject and s3:GetObjectVersion on the landing buckets' objects "
        "only, keys known at run time."
    ),
    map_item="Scan segment of the ledger",
    plan_names_processors=True,
    scans_ledger=True,
)


class CheckpointedRun(Construct):
    """A checkpointed run of :attr:`SPEC`: its plan, part and summary functions
    (:class:`~s3ingest_cdk.constructs.function.RoleFunction`, ids from their rows) and its
    state machine, with their grants and cdk-nag acknowledgements.

    Every step gets the ingest service's environment (``SCOPE``, ``BUCKET_NAME``: the first
    bucket, the ledger's variables) and ``CHECKPOINT_BUCKET_NAME`` (the stack's inventory
    bucket), and the handler builds its service over it (``s3ingest_fn.wiring``); the plan
    also the processors' variables when the spec says so. Grants: the part applies the ledger
    rules and runs the processors
    (:func:`~s3ingest_cdk.features.service.grant_ingest_service`), and its reserved
    concurrency is ``backfillReservedConcurrency``; the checkpoints (read by all, written by
    plan and part) under the spec's prefix only; listing or Scan as the spec says.

    Attributes
    ----------
    state_machine : CheckpointedRunStateMachine
        The state machine (:mod:`s3ingest_cdk.constructs.checkpointed_run_state_machine`; its
        ``state_machine``: an output of the stack).
    """

    SPEC: ClassVar[RunSpec]

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        given: Given,
        dead_letter_queue: sqs.IQueue,
    ) -> None:
        super().__init__(scope, construct_id)
        settings, code, landings, ledger_table, output_bucket, processors = given
        spec = self.SPEC
        checkpoints = landings.shared.inventory
        common = {
            **landings.scope_environment(self),
            fn_config.BUCKET_NAME: landings.first.bucket.bucket_name,
            fn_config.CHECKPOINT_BUCKET_NAME: checkpoints.bucket_name,
            fn_config.LEDGER_TABLE_NAME: ledger_table.table_name,
            fn_config.DEAD_LETTER_QUEUE_URL: dead_letter_queue.queue_url,
            fn_config.TOMBSTONE_TTL_SECONDS: str(settings.tombstone_ttl_seconds),
            fn_config.RECORD_CONCURRENCY: str(settings.record_concurrency),
        }
        # The plan names the processors and their versions (no grant needed to read them).
        named: dict[str, str] = {}
        if spec.plan_names_processors:
            if settings.processor is not None and not settings.processors_variable:
                named[fn_config.PROCESSOR] = settings.processor
            if processors is not None:
                if processors.environment is not None:
                    named[fn_config.PROCESSORS] = processors.environment
                named.update(dict(processors.variables))
        steps = []
        for row, env in zip(spec.rows, (named, {}, {}), strict=True):
            owner = acknowledged_function(
                self,
                row=row,
                settings=settings,
                code=code,
                environment={**common, **env},
                dead_letters=synchronous_evidence(STATE_MACHINE_INVOKER),
            )
            steps.append(owner)
        self.plan, self.part, self.summarize = steps
        # The part workers never take more of the account's concurrency than this.
        reserve_concurrency(self.part.function, settings.backfill_reserved_concurrency)
        if spec.lists_buckets:
            for owner in (self.plan, self.part):
                grant(
                    owner.function,
                    ["s3:ListBucket", "s3:ListBucketVersions", "s3:GetBucketVersioning"],
                    *[b.bucket_arn for b in landings.buckets],
                )
        grant_ingest_service(
            self.part.function,
            ledger_table=ledger_table,
            buckets=landings.buckets,
            processor=settings.processor,
            output_bucket=output_bucket,
            processors=processors,
            objects_reason=spec.objects_evidence,
        )
        if spec.scans_ledger:
            # The parallel Scan of the ledger's segments (one page per request, resumable).
            ledger_table.grant(self.part.function, "dynamodb:Scan")
        self.ingest_service_functions: list[lambda_.Function] = [self.part.function]
        objects = checkpoints.arn_for_objects(f"{spec.checkpoint_prefix}*")
        for owner, actions in (
            (self.plan, ["s3:GetObject", "s3:PutObject"]),  # reads and stores plan.json
            (self.part, ["s3:GetObject", "s3:PutObject"]),
            (self.summarize, ["s3:GetObject"]),
        ):
            # ListBucket: a checkpoint not yet written reads as 404 rather than 403
            grant(owner.function, ["s3:ListBucket"], checkpoints.bucket_arn)
            grant(owner.function, actions, objects)
            acknowledge(
                owner.role,
                wildcard_resource_finding(self, objects),
                f"{', '.join(actions)} {spec.checkpoint_evidence}",
            )
        states = spec.states(settings)
        self.state_machine = CheckpointedRunStateMachine(
            self,
            spec.machine_id,
            states=states,
            plan_function=self.plan.function,
            part_function=self.part.function,
            summarize_function=self.summarize.function,
            log_retention_days=settings.log_retention_days,
        )
        machine = self.state_machine.state_machine
        acknowledge(machine.role, "AwsSolutions-IAM5[Resource::*]", SFN_LOGGING_EVIDENCE)
        for owner, what in zip(steps, ("plan", spec.part, "summary"), strict=True):
            what = f"the {spec.name} {what} function"
            acknowledge_state_machine_invoke(machine, owner.function, what)
        acknowledge_distributed_map(machine, states.label, spec.map_item)


class ListingBackfill(CheckpointedRun):
    """The listing backfill (:data:`LISTING`): ``ListingPlan``, ``ListingShard`` (:attr:`shard`),
    ``ListingSummarize`` and ``ListingStateMachine``."""

    SPEC = LISTING

    @property
    def shard(self) -> RoleFunction:
        """The shard function (:attr:`part`)."""
        return self.part


class Reprocess(CheckpointedRun):
    """The reprocess run (:data:`REPROCESS`): ``ReprocessPlan``, ``ReprocessSegment``
    (:attr:`segment`), ``ReprocessSummarize`` and ``ReprocessStateMachine``."""

    SPEC = REPROCESS

    @property
    def segment(self) -> RoleFunction:
        """The segment function (:attr:`part`)."""
        return self.part
