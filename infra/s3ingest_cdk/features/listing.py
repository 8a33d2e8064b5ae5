"""The listing backfill (issue: backfill without waiting for an inventory): its three step
functions and its state machine, on every stack (created and existing buckets)."""

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
from s3ingest_cdk.constructs.listing_backfill_state_machine import (
    SHARDS_MAP_LABEL,
    ListingBackfillStateMachine,
)
from s3ingest_cdk.constructs.python_function import reserve_concurrency
from s3ingest_cdk.features.evidence import (
    SFN_LOGGING_EVIDENCE,
    acknowledge_distributed_map,
    acknowledge_function,
    acknowledge_state_machine_invoke,
)
from s3ingest_cdk.features.service import IngestProcessors, grant_ingest_service
from s3ingest_cdk.nag import acknowledge, wildcard_resource_finding
from s3ingest_fn import config as fn_config

#: Plan and summarize: a few probes or a listing of the run's checkpoints.
#: Where the shards' checkpoints are kept in the checkpoint bucket
#: (``backfill-listing/<bucket>/<run>/<shard id>.json``).
CHECKPOINT_PREFIX = "backfill-listing/"

_CHECKPOINT_EVIDENCE = (
    "under backfill-listing/ of the stack's inventory bucket only: one checkpoint per shard, "
    "backfill-listing/<bucket>/<run>/<shard id>.json, the run and shard ids made at run time."
)
_OBSERVE_EVIDENCE = (
    "The listing backfill records whichever keys a listing returns and HEADs those whose ledger "
    "row differs (C7): s3:GetObject and s3:GetObjectVersion on the landing buckets' objects "
    "only, keys known at run time."
)


class ListingBackfill(Construct):
    """The listing backfill: ``ListingPlan``, ``ListingShard`` and ``ListingSummarize``
    (:class:`~s3ingest_cdk.constructs.function.RoleFunction`) and ``ListingStateMachine``
    (:class:`ListingBackfillStateMachine`), with their grants and cdk-nag acknowledgements.

    Every step gets ``SCOPE``, ``BUCKET_NAME`` (the first bucket) and ``CHECKPOINT_BUCKET_NAME``
    (the stack's inventory bucket); the shard step also the ledger's variables (it builds the
    ingest service, with the processor when there is one). Grants: listing
    (``s3:ListBucket``, ``s3:ListBucketVersions``, ``s3:GetBucketVersioning``) of every landing
    bucket to the plan (its probes) and the shard step; the ledger rules to the shard step;
    the checkpoints (read by all, written by the shard step) under ``backfill-listing/`` only.

    Parameters
    ----------
    scope : constructs.Construct
        The pipeline.
    construct_id : str
        Construct id (no ``Backfill`` in it: the inventory backfill's ids are its own).
    settings : s3ingest.settings.Settings
        Validated settings (``listing_concurrency``, timeouts, memory, processor, tracing).
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
    plan, shard, summarize : s3ingest_cdk.constructs.function.RoleFunction
        The step functions (:mod:`s3ingest.function_roles`).
    state_machine : ListingBackfillStateMachine
        The state machine (:mod:`s3ingest_cdk.constructs.listing_backfill_state_machine`;
        its ``state_machine``: output ``ListingBackfillStateMachineArn``).
    ingest_service_functions : list[aws_cdk.aws_lambda.Function]
        The function here that runs the ledger rules (and the processor).
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
        # Every step's handler builds the listing backfill service over the ingest service's
        # environment (s3ingest_fn.wiring.function_listing_backfill); only the shard function
        # is granted the ledger.
        common = {
            **landings.scope_environment(self),
            fn_config.BUCKET_NAME: landings.first.bucket.bucket_name,
            CHECKPOINT_BUCKET_ENV: checkpoints.bucket_name,
            fn_config.LEDGER_TABLE_NAME: ledger_table.table_name,
            fn_config.DEAD_LETTER_QUEUE_URL: dead_letter_queue.queue_url,
            fn_config.TOMBSTONE_TTL_SECONDS: str(settings.tombstone_ttl_seconds),
            fn_config.RECORD_CONCURRENCY: str(settings.record_concurrency),
        }

        def step(row: FunctionRole) -> RoleFunction:
            owner = RoleFunction(self, row=row, settings=settings, code=code, environment=common)
            acknowledge_function(owner.function, owner.role, tracing=settings.tracing)
            return owner

        self.plan = step(function_roles.LISTING_PLAN)
        self.shard = step(function_roles.LISTING_SHARD)
        self.summarize = step(function_roles.LISTING_SUMMARIZE)
        # The shard workers never take more of the account's concurrency than this.
        reserve_concurrency(self.shard.function, settings.backfill_reserved_concurrency)
        for owner in (self.plan, self.shard):
            iam.Grant.add_to_principal(
                grantee=owner.function,
                actions=["s3:ListBucket", "s3:ListBucketVersions", "s3:GetBucketVersioning"],
                resource_arns=[b.bucket_arn for b in landings.buckets],
            )
        grant_ingest_service(
            self.shard.function,
            ledger_table=ledger_table,
            buckets=landings.buckets,
            processor=settings.processor,
            output_bucket=output_bucket,
            processors=processors,
            objects_reason=_OBSERVE_EVIDENCE,
        )
        self.ingest_service_functions: list[lambda_.Function] = [self.shard.function]
        objects = checkpoints.arn_for_objects(f"{CHECKPOINT_PREFIX}*")
        for owner, actions in (
            (self.plan, ["s3:GetObject", "s3:PutObject"]),  # reads and stores plan.json
            (self.shard, ["s3:GetObject", "s3:PutObject"]),
            (self.summarize, ["s3:GetObject"]),
        ):
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
        self.state_machine = ListingBackfillStateMachine(
            self,
            "ListingStateMachine",
            plan_function=self.plan.function,
            shard_function=self.shard.function,
            summarize_function=self.summarize.function,
            max_concurrency=settings.listing_concurrency,
            log_retention_days=settings.log_retention_days,
        )
        machine = self.state_machine.state_machine
        acknowledge(machine.role, "AwsSolutions-IAM5[Resource::*]", SFN_LOGGING_EVIDENCE)
        for owner, what in (
            (self.plan, "the listing plan function"),
            (self.shard, "the listing shard function"),
            (self.summarize, "the listing summary function"),
        ):
            acknowledge_state_machine_invoke(machine, owner.function, what)
        acknowledge_distributed_map(machine, SHARDS_MAP_LABEL, "key-range shard of the listing")
