"""Reconciliation (CONTRACT C12): the reconcile function(s), the fan-out state machine, the
schedule and the drift alarm."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from s3ingest.settings import Settings, inventory_report_prefix
from s3ingest_cdk.constructs import (
    DriftAlarm,
    ReconcileFunction,
    ReconcileSchedule,
    ReconcileStateMachine,
)
from s3ingest_cdk.constructs.reconcile_function import FANOUT_HANDLER, RECONCILE_HANDLER
from s3ingest_cdk.constructs.reconcile_state_machine import (
    INVENTORY_MAP_LABEL,
    WORK_EXPIRATION,
    WORK_PREFIX,
)
from s3ingest_cdk.features.evidence import (
    REPORTS_EVIDENCE,
    SFN_LOGGING_EVIDENCE,
    acknowledge_distributed_map,
    acknowledge_function,
    acknowledge_state_machine_invoke,
)
from s3ingest_cdk.features.service import grant_read_objects
from s3ingest_cdk.nag import acknowledge, wildcard_resource_finding


class Reconciliation(Construct):
    """Compare the bucket with the ledger on a schedule and queue repairs through the ingest
    queue; the drift metrics and alarm.

    One Lambda run by default (from the inventory when the pipeline owns one, else a listing);
    with ``settings.reconcile_fan_out`` a Step Functions Distributed Map over the inventory's
    data files, through the fan-out step function.

    Parameters
    ----------
    scope : constructs.Construct
        The pipeline.
    construct_id : str
        Construct id.
    settings : s3ingest.settings.Settings
        Validated settings.
    code : aws_cdk.aws_lambda.Code
        The bundled function package.
    bucket : aws_cdk.aws_s3.IBucket
        The landing bucket.
    inventory_bucket : aws_cdk.aws_s3.Bucket or None
        The pipeline's inventory bucket (``None``: reconciliation lists the bucket).
    ledger_table : aws_cdk.aws_dynamodb.ITable
        The ledger (scanned).
    queue : aws_cdk.aws_sqs.IQueue
        The ingest queue (repairs are sent to it).

    Attributes
    ----------
    reconcile : s3ingest_cdk.constructs.ReconcileFunction
        The single-run reconcile function.
    reconcile_fan_out : s3ingest_cdk.constructs.ReconcileFunction or None
        The fan-out step function (``reconcile_fan_out`` only).
    reconcile_state_machine : s3ingest_cdk.constructs.ReconcileStateMachine or None
        The fan-out state machine (``reconcile_fan_out`` only).
    reconcile_schedule : s3ingest_cdk.constructs.ReconcileSchedule
        The scheduled rule that starts reconciliation.
    drift : s3ingest_cdk.constructs.DriftAlarm
        The drift metrics and ``drift.alarm``.

    Raises
    ------
    ValueError
        With ``reconcile_fan_out`` and no inventory bucket (the settings rule it out).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        code: lambda_.Code,
        bucket: s3.IBucket,
        inventory_bucket: s3.Bucket | None,
        ledger_table: dynamodb.ITable,
        queue: sqs.IQueue,
    ) -> None:
        super().__init__(scope, construct_id)
        self._bucket = bucket
        self._inventory_bucket = inventory_bucket
        self._tracing = settings.tracing

        def reconcile_function(construct_id: str, handler: str, what: str) -> ReconcileFunction:
            owner = ReconcileFunction(
                self,
                construct_id,
                code=code,
                handler=handler,
                description=f"s3ingest: {what}",
                ledger_table=ledger_table,
                queue=queue,
                bucket=bucket,
                inventory_bucket=inventory_bucket,
                timeout=Duration.seconds(settings.reconcile_timeout_seconds),
                memory_size_mib=settings.reconcile_memory_mb,
                log_retention_days=settings.log_retention_days,
                tracing=settings.tracing,
            )
            self._grant(owner, ledger_table, queue)
            return owner

        self.reconcile = reconcile_function(
            "ReconcileFunction",
            RECONCILE_HANDLER,
            "compares the bucket with the ledger and queues repairs (reconciliation)",
        )
        self.reconcile_fan_out: ReconcileFunction | None = None
        self.reconcile_state_machine: ReconcileStateMachine | None = None
        target: events.IRuleTarget
        if settings.reconcile_fan_out:
            if inventory_bucket is None:  # pragma: no cover - Settings.problems() rules it out
                raise ValueError("reconcileFanOut needs the stack's own S3 Inventory")
            self.reconcile_fan_out = reconcile_function(
                "ReconcileFanOutFunction",
                FANOUT_HANDLER,
                "one step of the fan-out reconciliation (plan, shard, diff, summarize)",
            )
            target = self._fan_out(self.reconcile_fan_out, inventory_bucket, settings)
        else:
            source = "inventory" if inventory_bucket is not None else "listing"
            target = targets.LambdaFunction(
                self.reconcile.function,
                event=events.RuleTargetInput.from_object({"source": source}),
            )
        self.reconcile_schedule = ReconcileSchedule(
            self,
            "ReconcileSchedule",
            schedule_expression=settings.reconcile_schedule,
            target=target,
        )
        self.drift = DriftAlarm(
            self, "Drift", stage=settings.stage, runbook_base_url=settings.runbook_base_url
        )

    def _grant(self, owner: ReconcileFunction, table: dynamodb.ITable, queue: sqs.IQueue) -> None:
        """What a reconcile function reads and writes, and nothing else; its acknowledgements."""
        function, bucket, inventory_bucket = owner.function, self._bucket, self._inventory_bucket
        acknowledge_function(function, owner.role, tracing=self._tracing)
        # Listing: GetBucketVersioning picks ListObjectVersions or ListObjectsV2
        # (https://docs.aws.amazon.com/AmazonS3/latest/API/API_ListObjectVersions.html: the
        # s3:ListBucketVersions permission).
        iam.Grant.add_to_principal(
            grantee=function,
            actions=["s3:ListBucket", "s3:ListBucketVersions", "s3:GetBucketVersioning"],
            resource_arns=[bucket.bucket_arn],
        )
        # Confirmation: a HEAD of each key that differs (HeadObject needs s3:GetObject).
        objects_arn = grant_read_objects(function, bucket)
        acknowledge(
            owner.role,
            wildcard_resource_finding(self, objects_arn),
            "Reconciliation HEADs each key whose ledger row differs from the bucket "
            "(s3:GetObject, s3:GetObjectVersion), keys found only at run time: on the landing "
            "bucket's objects only.",
        )
        # The ledger: a parallel Scan. Repairs: through the same ingest queue and rules.
        table.grant(function, "dynamodb:Scan")
        queue.grant(function, "sqs:SendMessage")
        if inventory_bucket is None:
            return
        # The newest report: listed by prefix; manifests and data files read, this bucket's
        # reports only.
        reports = inventory_bucket.arn_for_objects(
            f"{inventory_report_prefix(bucket.bucket_name)}*"
        )
        iam.Grant.add_to_principal(
            grantee=function, actions=["s3:ListBucket"], resource_arns=[inventory_bucket.bucket_arn]
        )
        iam.Grant.add_to_principal(
            grantee=function, actions=["s3:GetObject"], resource_arns=[reports]
        )
        acknowledge(
            owner.role,
            wildcard_resource_finding(self, reports),
            f"s3:GetObject {REPORTS_EVIDENCE}",
        )

    def _fan_out(
        self, owner: ReconcileFunction, inventory_bucket: s3.Bucket, settings: Settings
    ) -> events.IRuleTarget:
        """The fan-out's work prefix, its state machine and the schedule's target."""
        fan_out = owner.function
        # The fan-out's shards: written by one step, read by a later one of the same run.
        work = inventory_bucket.arn_for_objects(f"{WORK_PREFIX}*")
        iam.Grant.add_to_principal(
            grantee=fan_out, actions=["s3:GetObject", "s3:PutObject"], resource_arns=[work]
        )
        acknowledge(
            owner.role,
            wildcard_resource_finding(self, work),
            "The fan-out writes and reads its shards under reconcile-work/<run id>/ of the "
            "inventory bucket only (s3:PutObject, s3:GetObject); the run id is made per "
            "execution, and the prefix expires after 7 days.",
        )
        inventory_bucket.add_lifecycle_rule(
            id="ExpireReconcileWork", prefix=WORK_PREFIX, expiration=WORK_EXPIRATION
        )
        self.reconcile_state_machine = ReconcileStateMachine(
            self,
            "ReconcileStateMachine",
            function=fan_out,
            log_retention_days=settings.log_retention_days,
        )
        state_machine = self.reconcile_state_machine.state_machine
        acknowledge(state_machine.role, "AwsSolutions-IAM5[Resource::*]", SFN_LOGGING_EVIDENCE)
        acknowledge_state_machine_invoke(state_machine, fan_out, "the fan-out step function")
        acknowledge_distributed_map(state_machine, INVENTORY_MAP_LABEL, "inventory data file")
        return targets.SfnStateMachine(state_machine, input=events.RuleTargetInput.from_object({}))
