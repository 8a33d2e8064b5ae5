"""Backfill of pre-existing objects (CONTRACT C13) over the landing buckets' S3 Inventory."""

from __future__ import annotations

from aws_cdk import Aws
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from s3ingest import function_roles
from s3ingest.settings import inventory_report_prefix
from s3ingest_cdk.constructs import BackfillStateMachine, BatchOperationsRole
from s3ingest_cdk.constructs.backfill_state_machine import (
    BATCH_OPERATIONS,
    FILES_MAP_LABEL,
    REPORT_PREFIX,
)
from s3ingest_cdk.constructs.function import RoleFunction
from s3ingest_cdk.constructs.python_function import reserve_concurrency
from s3ingest_cdk.features.evidence import (
    REPORTS_EVIDENCE,
    SFN_LOGGING_EVIDENCE,
    STATE_MACHINE_INVOKER,
    acknowledge_distributed_map,
    acknowledge_state_machine_invoke,
    synchronous_evidence,
)
from s3ingest_cdk.features.reconciliation import grant_reports
from s3ingest_cdk.features.role_function import acknowledged_function
from s3ingest_cdk.features.service import Given, grant_ingest_service
from s3ingest_cdk.nag import acknowledge, grant, wildcard_resource_finding
from s3ingest_fn import config as fn_config
from s3ingest_fn import config_roles as fn_roles

_OBSERVE_EVIDENCE = (
    "The backfill observes whichever objects the inventory lists (C7): s3:GetObject and "
    "s3:GetObjectVersion (HEAD) on the landing bucket's objects only, keys known at run time."
)
_COMPLETION_EVIDENCE = (
    "under backfill-reports/ of the inventory bucket only: S3 Batch Operations names each "
    "completion report backfill-reports/job-<job id>/... at run time "
    "(https://docs.aws.amazon.com/AmazonS3/latest/userguide/batch-ops-examples-reports.html)."
)
_CREATE_JOB_EVIDENCE = (
    " And s3:CreateJob, which has no resource type: its only resource is '*' (Service "
    "Authorization Reference, Amazon S3: https://docs.aws.amazon.com/service-authorization/"
    "latest/reference/list_amazons3.html), conditioned on the keys it supports (a LambdaInvoke "
    "job, s3:RequestJobOperation, at the backfill's priority, s3:RequestJobPriority); what a job "
    "can do is bounded by the one role this state machine may pass (iam:PassRole on the Batch "
    "Operations role, to batchoperations.s3.amazonaws.com only)."
)


class Backfill(Construct):
    """The backfill state machine, its control function and (``batch-operations`` engine) the
    function S3 Batch Operations invokes and the role the job runs as; grants and cdk-nag
    acknowledgements with them.

    Attributes
    ----------
    backfill : s3ingest_cdk.constructs.function.RoleFunction or None
        The function S3 Batch Operations invokes (``batch-operations`` only).
    batch_operations : s3ingest_cdk.constructs.BatchOperationsRole or None
        The role the job runs as (``batch-operations`` only).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        given: Given,
        queue: sqs.IQueue,
        dead_letter_queue: sqs.IQueue,
    ) -> None:
        super().__init__(scope, construct_id)
        settings, code, landings, ledger_table, output_bucket, processors = given
        bucket = landings.first.bucket
        inventory_bucket = landings.shared.inventory
        self.backfill_control = acknowledged_function(
            self,
            dead_letters=synchronous_evidence(STATE_MACHINE_INVOKER),
            row=function_roles.BACKFILL_CONTROL,
            settings=settings,
            code=code,
            environment={
                fn_config.LEDGER_TABLE_NAME: ledger_table.table_name,
                fn_config.INGEST_QUEUE_URL: queue.queue_url,
                fn_config.DEAD_LETTER_QUEUE_URL: dead_letter_queue.queue_url,
                fn_config.TOMBSTONE_TTL_SECONDS: str(settings.tombstone_ttl_seconds),
                fn_config.BUCKET_NAME: bucket.bucket_name,
                fn_config.INVENTORY_BUCKET_NAME: inventory_bucket.bucket_name,
                fn_config.INVENTORY_PREFIX: inventory_report_prefix(bucket.bucket_name),
                fn_config.REPORT_BUCKET_NAME: inventory_bucket.bucket_name,
            },
        )
        control = self.backfill_control.function
        control_role = self.backfill_control.role
        for name, value in landings.inventory_environment(self).items():
            control.add_environment(name, value)
        if settings.backfill_engine != BATCH_OPERATIONS:
            # distributed-map: it is the worker (one invocation per data file, in parallel)
            reserve_concurrency(control, settings.backfill_reserved_concurrency)
        # prepare: the newest report is listed by prefix; its manifest HEAD and read (checksum
        # included); backfill_file reads the data files. Every bucket's reports.
        report_arns = grant_reports(
            self, control, control_role, landings, "s3:GetObject (and HEAD)"
        )
        self.backfill: RoleFunction | None = None
        self.batch_operations: BatchOperationsRole | None = None
        if settings.backfill_engine == BATCH_OPERATIONS:
            self.backfill = acknowledged_function(
                self,
                dead_letters=synchronous_evidence(
                    "S3 Batch Operations (one invocation per object, whose failure the job "
                    "retries or records in its completion report: "
                    "https://docs.aws.amazon.com/AmazonS3/latest/userguide/batch-ops-invoke-lambda.html)"
                ),
                row=function_roles.BACKFILL,
                settings=settings,
                code=code,
                environment=fn_roles.BackfillConfig(
                    ledger_table_name=ledger_table.table_name,
                    dead_letter_queue_url=dead_letter_queue.queue_url,
                    tombstone_ttl_seconds=settings.tombstone_ttl_seconds,
                    bucket_name=bucket.bucket_name,
                    record_concurrency=settings.record_concurrency,
                ).to_env(),
            )
            # A backfill never takes more of the account's concurrency than this.
            reserve_concurrency(self.backfill.function, settings.backfill_reserved_concurrency)
            for name, value in landings.scope_environment(self).items():
                self.backfill.function.add_environment(name, value)
            worker = self.backfill.function  # each task is observed by the ledger rules (C7)
        else:
            worker = control  # distributed-map: it observes each data file's keys itself (C7)
        grant_ingest_service(
            worker,
            ledger_table=ledger_table,
            buckets=landings.buckets,
            processor=settings.processor,
            output_bucket=output_bucket,
            processors=processors,
            objects_reason=_OBSERVE_EVIDENCE,
        )
        self.ingest_service_functions: list[lambda_.Function] = [worker]
        batch_role: iam.IRole | None = None
        if self.backfill is not None:
            batch_role = self._batch_operations(
                self.backfill.function, inventory_bucket, report_arns
            )
        self.backfill_state_machine = BackfillStateMachine(
            self,
            "BackfillStateMachine",
            engine=settings.backfill_engine,
            control_function=control,
            backfill_function=self.backfill.function if self.backfill is not None else None,
            batch_role=batch_role,
            report_bucket=inventory_bucket,
            log_retention_days=settings.log_retention_days,
        )
        self._acknowledge_state_machine()

    def _batch_operations(
        self, backfill: lambda_.Function, inventory_bucket: s3.IBucket, report_arns: list[str]
    ) -> iam.IRole:
        """The S3 Batch Operations side of the ``batch-operations`` engine: the control
        function's read of completion reports, the role the job runs as, and who may invoke
        the backfill function."""
        control = self.backfill_control
        # report: the completion reports (ListBucket above makes a missing one a 404, which it
        # reads as "no failure").
        completion_reports = inventory_bucket.arn_for_objects(f"{REPORT_PREFIX}/*")
        grant(control.function, ["s3:GetObject"], completion_reports)
        completion_finding = wildcard_resource_finding(self, completion_reports)
        acknowledge(
            control.role,
            completion_finding,
            f"s3:GetObject (the report step reads the job's failed tasks) {_COMPLETION_EVIDENCE}",
        )
        # S3 Batch Operations runs the job as this role: it reads the manifest and the data files
        # it lists, invokes the backfill function, writes the completion report; nothing else
        # (https://docs.aws.amazon.com/AmazonS3/latest/userguide/batch-ops-iam-role-policies.html).
        self.batch_operations = BatchOperationsRole(self, "BatchOperations")
        batch_role = self.batch_operations.role
        for reports in report_arns:
            grant(batch_role, ["s3:GetObject", "s3:GetObjectVersion"], reports)
            acknowledge(
                batch_role,
                wildcard_resource_finding(self, reports),
                "S3 Batch Operations reads the job's manifest and the data files it lists "
                f"(s3:GetObject, s3:GetObjectVersion) {REPORTS_EVIDENCE}",
            )
        grant(batch_role, ["lambda:InvokeFunction"], backfill.function_arn)
        grant(batch_role, ["s3:PutObject"], completion_reports)
        acknowledge(
            batch_role,
            completion_finding,
            "S3 Batch Operations writes the job's completion report (s3:PutObject) "
            f"{_COMPLETION_EVIDENCE}",
        )
        # The function's resource policy names that role only: no service principal, no other
        # account (Batch Operations invokes the function as the role it assumed).
        backfill.add_permission(
            "BatchOperationsInvoke",
            principal=iam.ArnPrincipal(batch_role.role_arn),
            action="lambda:InvokeFunction",
        )
        return batch_role

    def _acknowledge_state_machine(self) -> None:
        """The state machine role's wildcards: logging and X-Ray, CreateJob and DescribeJob
        (``batch-operations``), or the Distributed Map's child executions."""
        machine = self.backfill_state_machine
        state_machine = machine.state_machine
        acknowledge(
            state_machine.role,
            "AwsSolutions-IAM5[Resource::*]",
            SFN_LOGGING_EVIDENCE
            if machine.create_job is None
            else SFN_LOGGING_EVIDENCE + _CREATE_JOB_EVIDENCE,
        )
        acknowledge_state_machine_invoke(
            state_machine, self.backfill_control.function, "the backfill control function"
        )
        if machine.create_job is None:
            acknowledge_distributed_map(state_machine, FILES_MAP_LABEL, "inventory data file")
            return
        acknowledge(
            state_machine.role,
            wildcard_resource_finding(
                self, f"arn:{Aws.PARTITION}:s3:{Aws.REGION}:{Aws.ACCOUNT_ID}:job/*"
            ),
            "s3:DescribeJob on this account's and region's Batch Operations jobs: the job id "
            "is made by CreateJob at run time (resource type job, "
            "https://docs.aws.amazon.com/service-authorization/latest/reference/"
            "list_amazons3.html).",
        )
