"""The reprocess run (issue 27): its three step functions and its state machine, on every stack.

Every stack, not only those with processors: ``s3ingest reprocess --remove`` cleans the effect
state a removed processor left on the ledger's rows, which a stack whose last processor was
removed needs most; and the CLI, the outputs and the local runtime then find one machine on
every stack, as they find the listing backfill's.
"""

from __future__ import annotations

from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from s3ingest import function_roles
from s3ingest.function_roles import FunctionRole
from s3ingest.settings import Settings
from s3ingest_cdk.constructs.function import RoleFunction
from s3ingest_cdk.constructs.landing_bucket import CHECKPOINT_BUCKET_ENV, Landings
from s3ingest_cdk.constructs.python_function import reserve_concurrency
from s3ingest_cdk.constructs.reprocess_state_machine import (
    SEGMENTS_MAP_LABEL,
    ReprocessStateMachine,
)
from s3ingest_cdk.features.evidence import (
    SFN_LOGGING_EVIDENCE,
    acknowledge_distributed_map,
    acknowledge_function,
    acknowledge_state_machine_invoke,
)
from s3ingest_cdk.features.service import IngestProcessors, grant_ingest_service
from s3ingest_cdk.nag import acknowledge, wildcard_resource_finding
from s3ingest_fn import config as fn_config

#: Plan and summarize: the stored plan and one read per segment's checkpoint.
#: Where a run's plan and its segments' checkpoints are kept in the checkpoint bucket
#: (``reprocess/<run>/plan.json``, ``reprocess/<run>/<segment>.json``;
#: :data:`s3ingest_fn.services.reprocess.CHECKPOINT_PREFIX`).
CHECKPOINT_PREFIX = "reprocess/"

_CHECKPOINT_EVIDENCE = (
    "under reprocess/ of the stack's inventory bucket only: the run's plan and one checkpoint "
    "per Scan segment, reprocess/<run>/plan.json and reprocess/<run>/<segment>.json, the run "
    "named at run time."
)
_RUN_EVIDENCE = (
    "The reprocess run hands each row behind for the processor to it, pinned to the row's "
    "change (C8): s3:GetObject and s3:GetObjectVersion on the landing buckets' objects only, "
    "keys known at run time."
)


class Reprocess(Construct):
    """The reprocess run: ``ReprocessPlan``, ``ReprocessSegment`` and ``ReprocessSummarize``
    (:class:`~s3ingest_cdk.constructs.function.RoleFunction`) and
    ``ReprocessStateMachine`` (:class:`ReprocessStateMachine`), with their grants and cdk-nag
    acknowledgements.

    Every step gets the ingest service's environment (``SCOPE``, ``BUCKET_NAME``, the ledger's
    variables) and ``CHECKPOINT_BUCKET_NAME`` (the stack's inventory bucket); the plan also the
    processors' (``PROCESSORS`` or ``PROCESSOR``, ``HOLD``, ``TRAIL_LENGTH``: it checks the
    processor is configured and records its version), without their grants. Grants: the
    segment step applies the ledger rules and runs the processors
    (:func:`~s3ingest_cdk.features.service.grant_ingest_service`) and reads the ledger by
    ``dynamodb:Scan``; the checkpoints (read by all, written by plan and segment) under
    ``reprocess/`` only.

    Parameters
    ----------
    scope : constructs.Construct
        The pipeline.
    construct_id : str
        Construct id.
    settings : s3ingest.settings.Settings
        Validated settings (timeouts, memory, processor, tracing).
    code : aws_cdk.aws_lambda.Code
        The bundled function package.
    landings : s3ingest_cdk.constructs.landing_bucket.Landings
        The landing buckets and the checkpoint bucket (``landings.shared.inventory``).
    ledger_table : aws_cdk.aws_dynamodb.ITable
        The ledger.
    dead_letter_queue : aws_cdk.aws_sqs.IQueue
        The ingest dead-letter queue (the ingest service's setting).
    output_bucket : aws_cdk.aws_s3.IBucket or None
        The processor output bucket (with an in-process processor).
    processors : s3ingest_cdk.features.service.IngestProcessors, optional
        What the ``processors`` setting gives the functions that run them.

    Attributes
    ----------
    plan, segment, summarize : s3ingest_cdk.constructs.function.RoleFunction
        The step functions (:mod:`s3ingest.function_roles`).
    state_machine : ReprocessStateMachine
        The state machine (:mod:`s3ingest_cdk.constructs.reprocess_state_machine`; its
        ``state_machine``: output ``ReprocessStateMachineArn``).
    ingest_service_functions : list[aws_cdk.aws_lambda.Function]
        The function here that runs the ledger rules and the processors.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        code: lambda_.Code,
        landings: Landings,
        ledger_table: dynamodb.ITable,
        dead_letter_queue: sqs.IQueue,
        output_bucket: s3.IBucket | None,
        processors: IngestProcessors | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        checkpoints = landings.shared.inventory
        # Every step's handler builds the reprocess service over the ingest service's
        # environment (s3ingest_fn.wiring.function_reprocessor); only the segment function is
        # granted the ledger and the processors.
        common = {
            **landings.scope_environment(self),
            fn_config.BUCKET_NAME: landings.first.bucket.bucket_name,
            CHECKPOINT_BUCKET_ENV: checkpoints.bucket_name,
            fn_config.LEDGER_TABLE_NAME: ledger_table.table_name,
            fn_config.DEAD_LETTER_QUEUE_URL: dead_letter_queue.queue_url,
            fn_config.TOMBSTONE_TTL_SECONDS: str(settings.tombstone_ttl_seconds),
            fn_config.RECORD_CONCURRENCY: str(settings.record_concurrency),
        }
        # The plan names the processors and their versions (no grant needed to read them).
        named: dict[str, str] = {}
        if settings.processor is not None and not settings.processors_variable:
            named[fn_config.PROCESSOR] = settings.processor
        if processors is not None:
            if processors.environment is not None:
                named[fn_config.PROCESSORS] = processors.environment
            named.update(dict(processors.variables))

        def step(row: FunctionRole, env: dict[str, str] | None = None) -> RoleFunction:
            owner = RoleFunction(
                self, row=row, settings=settings, code=code, environment={**common, **(env or {})}
            )
            acknowledge_function(owner.function, owner.role, tracing=settings.tracing)
            return owner

        self.plan = step(function_roles.REPROCESS_PLAN, named)
        self.segment = step(function_roles.REPROCESS_SEGMENT)
        self.summarize = step(function_roles.REPROCESS_SUMMARIZE)
        # The segment workers never take more of the account's concurrency than this.
        reserve_concurrency(self.segment.function, settings.backfill_reserved_concurrency)
        grant_ingest_service(
            self.segment.function,
            ledger_table=ledger_table,
            buckets=landings.buckets,
            processor=settings.processor,
            output_bucket=output_bucket,
            processors=processors,
            objects_reason=_RUN_EVIDENCE,
        )
        # The parallel Scan of the ledger's segments (one page per request, resumable).
        ledger_table.grant(self.segment.function, "dynamodb:Scan")
        self.ingest_service_functions: list[lambda_.Function] = [self.segment.function]
        objects = checkpoints.arn_for_objects(f"{CHECKPOINT_PREFIX}*")
        for owner, actions in (
            (self.plan, ["s3:GetObject", "s3:PutObject"]),  # reads and stores plan.json
            (self.segment, ["s3:GetObject", "s3:PutObject"]),
            (self.summarize, ["s3:GetObject"]),
        ):
            # ListBucket: a checkpoint not yet written reads as 404 rather than 403
            iam.Grant.add_to_principal(
                grantee=owner.function,
                actions=["s3:ListBucket"],
                resource_arns=[checkpoints.bucket_arn],
            )
            iam.Grant.add_to_principal(
                grantee=owner.function, actions=actions, resource_arns=[objects]
            )
            acknowledge(
                owner.role,
                wildcard_resource_finding(self, objects),
                f"{', '.join(actions)} {_CHECKPOINT_EVIDENCE}",
            )
        self.state_machine = ReprocessStateMachine(
            self,
            "ReprocessStateMachine",
            plan_function=self.plan.function,
            segment_function=self.segment.function,
            summarize_function=self.summarize.function,
            log_retention_days=settings.log_retention_days,
            concurrency_limit=settings.backfill_reserved_concurrency,
        )
        machine = self.state_machine.state_machine
        acknowledge(machine.role, "AwsSolutions-IAM5[Resource::*]", SFN_LOGGING_EVIDENCE)
        for owner, what in (
            (self.plan, "the reprocess plan function"),
            (self.segment, "the reprocess segment function"),
            (self.summarize, "the reprocess summary function"),
        ):
            acknowledge_state_machine_invoke(machine, owner.function, what)
        acknowledge_distributed_map(machine, SEGMENTS_MAP_LABEL, "Scan segment of the ledger")
