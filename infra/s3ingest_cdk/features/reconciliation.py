"""Reconciliation (CONTRACT C12): the reconcile function(s), the fan-out state machine, the
schedule and the drift alarm."""

from __future__ import annotations

from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from s3ingest import function_roles
from s3ingest.function_roles import FunctionRole
from s3ingest.settings import Settings
from s3ingest.settings.events import CHANGE_SOURCE
from s3ingest_cdk.constructs import DriftAlarm, ReconcileSchedule, ReconcileStateMachine
from s3ingest_cdk.constructs.event_routing import rule_role
from s3ingest_cdk.constructs.function import RoleFunction
from s3ingest_cdk.constructs.landing_bucket import Landings, secure_bucket
from s3ingest_cdk.constructs.reconcile_state_machine import (
    INVENTORY_MAP_LABEL,
    WORK_EXPIRATION,
    WORK_PREFIX,
)
from s3ingest_cdk.features.evidence import (
    REPORTS_EVIDENCE,
    SCHEDULE_TARGET_EVIDENCE,
    SFN_LOGGING_EVIDENCE,
    STATE_MACHINE_INVOKER,
    acknowledge_distributed_map,
    acknowledge_state_machine_invoke,
    synchronous_evidence,
)
from s3ingest_cdk.features.role_function import acknowledged_function
from s3ingest_cdk.features.service import Given, grant_read_objects
from s3ingest_cdk.nag import acknowledge, grant, wildcard_resource_finding
from s3ingest_fn import config as fn_config
from s3ingest_fn import config_roles as fn_roles
from s3ingest_fn.contract import (
    ATTESTATION_BUCKET_ENV,
    ATTESTATION_DETAIL_TYPE,
    ATTESTATION_ROOT,
)

#: Why the single-run reconcile function has no dead-letter queue (Serverless-LambdaDLQ).
RECONCILE_EVIDENCE = (
    "Invoked asynchronously by the reconcile schedule (without the fan-out), with a fixed "
    "request, or by an operator, who sees the answer: a failed scheduled run is retried twice "
    "by Lambda, its errors are alarmed "
    "(ReconcileErrors) and so is a run that never completes (the reconcile heartbeat), and the "
    "next run compares the whole bucket again; a dead-letter queue (DeadLetterConfig, "
    "https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-retain-records.html) would "
    "hold fixed requests, with nothing to replay."
)


class Reconciliation(Construct):
    """Compare the bucket with the ledger on a schedule and queue repairs through the ingest
    queue; the drift metrics and alarm.

    One Lambda run by default (from the inventory when the pipeline owns one, else a listing);
    with ``settings.reconcile_fan_out`` a Step Functions Distributed Map over the inventory's
    data files, through the fan-out step function.

    Attributes
    ----------
    reconcile_schedule : s3ingest_cdk.constructs.ReconcileSchedule
        The scheduled rule(s) that start reconciliation: the reconcile function (every bucket
        in turn), or with the fan-out one target per bucket (input ``{"bucket": <name>}``).
    queue_senders : list of aws_cdk.aws_iam.IRole
        The roles granted ``sqs:SendMessage`` on the ingest queue (its policy admits them).

    Raises
    ------
    ValueError
        With ``reconcile_fan_out`` and a bucket without an inventory (the settings rule it out).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        given: Given,
        queue: sqs.IQueue,
    ) -> None:
        super().__init__(scope, construct_id)
        settings, code, landings, ledger_table, _, _ = given
        self._landings = landings
        #: The roles granted sqs:SendMessage on the ingest queue (its policy admits them).
        self.queue_senders: list[iam.IRole] = []

        environment = fn_roles.ReconcileConfig(
            ledger_table_name=ledger_table.table_name,
            ingest_queue_url=queue.queue_url,
            bucket_name=landings.first.bucket.bucket_name,
        ).to_env()

        def reconcile_function(row: FunctionRole) -> RoleFunction:
            owner = acknowledged_function(
                self,
                row=row,
                settings=settings,
                code=code,
                environment=environment,
                dead_letters=RECONCILE_EVIDENCE
                if row is function_roles.RECONCILE
                else synchronous_evidence(STATE_MACHINE_INVOKER),
            )
            for name, value in landings.inventory_environment(self).items():
                owner.function.add_environment(name, value)
            self._grant(owner, ledger_table, queue)
            return owner

        self.reconcile = reconcile_function(function_roles.RECONCILE)
        self._attestations(landings, settings.attestation_retention_days)
        self._attesting(self.reconcile, ledger_table, queue)
        self.reconcile_fan_out: RoleFunction | None = None
        self.reconcile_state_machine: ReconcileStateMachine | None = None
        schedule_targets: list[events.IRuleTarget]
        if settings.reconcile_fan_out:
            if not landings.all_inventoried:  # pragma: no cover - Settings.problems() rules it out
                raise ValueError("reconcileFanOut needs an S3 Inventory of every bucket")
            self.reconcile_fan_out = reconcile_function(function_roles.RECONCILE_FANOUT)
            # its summarize step attests each bucket from the partitions' runs (issue 38)
            self._attesting(self.reconcile_fan_out, ledger_table, queue)
            schedule_targets = self._fan_out(self.reconcile_fan_out, settings)
        else:
            # Every bucket in turn: from its inventory, or a listing of a bucket without one
            # (a mix: the function picks per bucket from INVENTORIES).
            # the daily run attests each bucket after its repairs (issue 38)
            request: dict[str, str | bool] = {"attest": True}
            if landings.all_inventoried:
                request["source"] = "inventory"
            elif not landings.with_reports:
                request["source"] = "listing"
            schedule_targets = [
                targets.LambdaFunction(
                    self.reconcile.function, event=events.RuleTargetInput.from_object(request)
                )
            ]
        self.reconcile_schedule = ReconcileSchedule(
            self,
            "ReconcileSchedule",
            schedule_expression=settings.reconcile_schedule,
            targets=schedule_targets,
        )
        for rule in self.reconcile_schedule.rules:
            acknowledge(rule, "Serverless-EventBusDLQ", SCHEDULE_TARGET_EVIDENCE)
        self.drift = DriftAlarm(
            self, "Drift", stage=settings.stage, runbook_base_url=settings.runbook_base_url
        )

    def _grant(self, owner: RoleFunction, table: dynamodb.ITable, queue: sqs.IQueue) -> None:
        """What a reconcile function reads and writes, and nothing else."""
        function = owner.function
        for bucket in self._landings.buckets:
            # Listing: GetBucketVersioning picks ListObjectVersions or ListObjectsV2
            # (https://docs.aws.amazon.com/AmazonS3/latest/API/API_ListObjectVersions.html: the
            # s3:ListBucketVersions permission).
            grant(
                function,
                ["s3:ListBucket", "s3:ListBucketVersions", "s3:GetBucketVersioning"],
                bucket.bucket_arn,
            )
            # Confirmation: a HEAD of each key that differs (HeadObject needs s3:GetObject).
            objects_arn = grant_read_objects(function, bucket)
            acknowledge(
                owner.role,
                wildcard_resource_finding(self, objects_arn),
                "Reconciliation HEADs each key whose ledger row differs from the bucket "
                "(s3:GetObject, s3:GetObjectVersion), keys found only at run time: on the "
                "landing bucket's objects only.",
            )
        # The ledger: a parallel Scan. Repairs: through the same ingest queue and rules.
        table.grant(function, "dynamodb:Scan")
        queue.grant(function, "sqs:SendMessage")
        self.queue_senders.append(owner.role)
        grant_reports(self, function, owner.role, self._landings)

    def _attestations(self, landings: Landings, retention_days: int | None) -> None:
        """Where the scheduled run's attestations go (issue 38): ``attestations/`` of the
        stack's bucket, or with ``retention_days`` :attr:`attestation_bucket` (S3 Object Lock,
        compliance mode)."""
        store = landings.shared.inventory
        #: The attestations' own bucket (``attestationRetentionDays`` only).
        self.attestation_bucket: s3.Bucket | None = None
        if retention_days is not None:
            store = self.attestation_bucket = secure_bucket(
                self,
                "Attestations",
                versioned=True,
                access_logs_bucket=landings.shared.access_logs,
                access_logs_prefix="attestations/",
                locked_days=retention_days,
            )
        self._attestation_store = store

    def _attesting(self, owner: RoleFunction, table: dynamodb.ITable, queue: sqs.IQueue) -> None:
        """What a function that attests may do (the scheduled reconcile function, the
        fan-out's step function): s3:PutObject under ``attestations/`` of the store only,
        after the repairs left the ingest queue (sqs:GetQueueAttributes), the repaired keys'
        ledger rows read again (dynamodb:GetItem: the trees are the run's pass's otherwise)."""
        store = self._attestation_store
        owner.function.add_environment(ATTESTATION_BUCKET_ENV, store.bucket_name)
        documents = store.arn_for_objects(f"{ATTESTATION_ROOT}/*")
        grant(owner.function, ["s3:PutObject"], documents)
        acknowledge(
            owner.role,
            wildcard_resource_finding(self, documents),
            "The scheduled reconciliation writes one attestation document and its leaves per "
            "bucket and snapshot under attestations/<bucket>/ of the stack's bucket only "
            "(s3:PutObject); the keys are snapshot times, known at run time.",
        )
        queue.grant(owner.function, "sqs:GetQueueAttributes")
        table.grant(owner.function, "dynamodb:GetItem")

    def announce_on(self, bus: events.IEventBus) -> None:
        """Publish the scheduled run's attestations on the change bus (``CHANGE_BUS_NAME``):
        events:PutEvents on that bus, of ``source`` ``s3ingest`` and ``detail-type``
        ``Attestation Made`` only, so the role cannot publish a change that subscribers would
        trust (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-conditions.html)."""
        for owner in (self.reconcile, self.reconcile_fan_out):
            if owner is None:
                continue
            owner.function.add_environment(fn_config.CHANGE_BUS_NAME, bus.event_bus_name)
            owner.role.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=["events:PutEvents"],
                    resources=[bus.event_bus_arn],
                    conditions={
                        "StringEquals": {
                            "events:source": CHANGE_SOURCE,
                            "events:detail-type": ATTESTATION_DETAIL_TYPE,
                        }
                    },
                )
            )

    def _fan_out(self, owner: RoleFunction, settings: Settings) -> list[events.IRuleTarget]:
        """The fan-out's work prefix, its state machine and the schedule's targets (one per
        bucket)."""
        fan_out = owner.function
        inventory_bucket = self._landings.shared.inventory
        # Its work files go to the stack's own inventory bucket, whoever owns the inventories.
        fan_out.add_environment(fn_config.CHECKPOINT_BUCKET_NAME, inventory_bucket.bucket_name)
        # The fan-out's shards: written by one step, read by a later one of the same run.
        work = inventory_bucket.arn_for_objects(f"{WORK_PREFIX}*")
        grant(fan_out, ["s3:GetObject", "s3:PutObject"], work)
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
        # the schedule's role, trusted by this account's rules only (CDK's own trusts any)
        role = rule_role(state_machine)
        return [
            targets.SfnStateMachine(
                state_machine,
                # the daily run attests the bucket after its repairs (issue 38)
                input=events.RuleTargetInput.from_object(
                    {"bucket": bucket.bucket_name, "attest": True}
                ),
                role=role,
            )
            for bucket in self._landings.buckets
        ]


def grant_reports(
    scope: Construct,
    function: lambda_.IFunction,
    role: iam.IRole,
    landings: Landings,
    reads: str = "s3:GetObject",
) -> list[str]:
    """Read of every landing bucket's inventory reports: ListBucket on each report bucket
    (the newest report is found by prefix) and GetObject on each bucket's report folder only
    (``reads``: those reads, as the acknowledgement names them); returns the folders' ARNs."""
    arns = []
    for entry in landings.with_reports:
        if entry.report_bucket is None or entry.report_prefix is None:  # pragma: no cover
            continue
        reports = entry.report_bucket.arn_for_objects(f"{entry.report_prefix}*")
        arns.append(reports)
        grant(function, ["s3:ListBucket"], entry.report_bucket.bucket_arn)
        grant(function, ["s3:GetObject"], reports)
        acknowledge(role, wildcard_resource_finding(scope, reports), f"{reads} {REPORTS_EVIDENCE}")
    return arns
