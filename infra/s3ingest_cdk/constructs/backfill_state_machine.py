"""The backfill (CONTRACT C13): a Step Functions state machine over the stack's S3 Inventory.

Two engines share the start and the end. ``batch-operations`` runs an S3 Batch Operations job
that invokes the backfill function once per inventory row; ``distributed-map`` runs one child
execution per inventory data file, each observing that file's keys through the control function.
The payloads carry exactly the fields ``s3ingest_fn.services.backfill_control`` reads.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Aws, Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from s3ingest_cdk.constructs.batch_operations_role import BATCH_OPERATIONS_PRINCIPAL
from s3ingest_cdk.constructs.state_machine_parts import (
    execution_logs,
    lambda_step,
    logged_state_machine,
)

#: ``backfillEngine`` values (``s3ingest.settings.BACKFILL_ENGINES``).
BATCH_OPERATIONS = "batch-operations"
DISTRIBUTED_MAP = "distributed-map"
#: Where S3 Batch Operations writes the jobs' completion reports in the inventory bucket
#: (``s3ingest_fn.services.backfill_control.REPORT_PREFIX``; the job's ``Report.Prefix``).
REPORT_PREFIX = "backfill-reports"
#: Between two ``DescribeJob`` calls while the job runs.
JOB_POLL_INTERVAL = Duration.seconds(30)
#: S3 Batch Operations job statuses that end the wait
#: (https://docs.aws.amazon.com/AmazonS3/latest/userguide/batch-ops-job-status.html).
JOB_COMPLETE = "Complete"
JOB_FAILED = ("Failed", "Cancelled")
#: The job's fixed settings (https://docs.aws.amazon.com/AmazonS3/latest/API/API_control_CreateJob.html).
MANIFEST_FORMAT = "S3InventoryReport_CSV_20161130"
REPORT_FORMAT = "Report_CSV_20180820"
INVOCATION_SCHEMA_VERSION = "2.0"
JOB_PRIORITY = 10
#: The job's operation, as ``s3:RequestJobOperation`` names it: the ``Operation`` member's name.
JOB_OPERATION = "LambdaInvoke"
JOB_DESCRIPTION = "s3ingest backfill"
#: S3 Control errors worth retrying: throttling, S3 Control's 5xx, the generic service exception
#: unmodeled error codes (503 SlowDown) surface as, and client-side failures. Step Functions names
#: an SDK integration's error ``<Service>.<Exception>``
#: (https://docs.aws.amazon.com/step-functions/latest/dg/supported-services-awssdk.html).
S3CONTROL_RETRY_ERRORS = (
    "S3Control.TooManyRequestsException",
    "S3Control.InternalServiceException",
    "S3Control.S3ControlException",
    "S3Control.SdkClientException",
)
#: Label of the Distributed Map's Map Run (names its child executions).
FILES_MAP_LABEL = "BackfillFiles"
#: Children of the Distributed Map running at once (one per inventory data file).
FILES_MAX_CONCURRENCY = 50
#: Runs of one data file while some of its keys keep failing temporarily (throttling).
FILE_MAX_ATTEMPTS = 3
#: Between two runs of one data file.
FILE_RETRY_INTERVAL = Duration.seconds(30)

_PREPARED = "$.prepared"
#: The fields of ``prepare``'s result each engine reads, kept at ``$.prepared``: the job needs the
#: manifest's object ARN and ETag; the Distributed Map needs the data files (the state carries
#: nothing else through the job's polling loop).
PREPARED_FIELDS = {
    BATCH_OPERATIONS: ("manifestKey", "manifestEtag", "manifestObjectArn", "createdMs"),
    DISTRIBUTED_MAP: ("manifestKey", "files", "createdMs"),
}


def _payload(*names: str) -> dict[str, str]:
    """``{"name.$": "$.Payload.name"}``: the Lambda result's fields, nothing of the envelope."""
    return {f"{name}.$": f"$.Payload.{name}" for name in names}


class BackfillStateMachine(Construct):
    """Prepare the inventory manifest; backfill every object with the chosen engine; fail the run
    when more objects failed than the input's ``maxFailures``.

    Execution input (all optional): ``{"manifest": "<key of an inventory manifest.json>",
    "maxFailures": <int, 0 by default>}``.

    States (JSONPath):

    1. ``Defaults`` (Choice): no ``maxFailures`` -> ``DefaultMaxFailures`` (Pass, sets 0); a
       number -> on; anything else -> ``InvalidInput`` (Fail).
    2. ``ManifestGiven`` (Choice) -> ``PrepareManifest`` (that manifest) or ``PrepareNewest``
       (the newest report): the control function's ``prepare``, result at ``$.prepared``.
    3. ``batch-operations``: ``CreateJob`` (S3 Control, direct SDK integration; the client request
       token is the MD5 of the execution id, so a retried state or a redriven execution creates
       no second job) -> ``WaitForJob`` (30 s) -> ``DescribeJob`` -> ``JobStatus`` (Choice:
       ``Complete`` -> ``Report``; ``Failed`` or ``Cancelled`` -> ``JobFailed``; otherwise back to
       ``WaitForJob``) -> ``Report`` (the completion report's failed tasks, at ``$.report``) ->
       ``FailureThreshold``.
       ``distributed-map``: ``BackfillFiles`` (Distributed Map over ``$.prepared.files``, one
       child per data file, at most 50 at once, result at ``$.files``; a child runs its file again
       while keys failed temporarily, 3 runs at most) -> ``Summarize`` (at ``$.summary``) ->
       ``FailureThreshold``. A key whose row was written while a processor failed after it
       is the outcome ``effects_pending``, not a failure (``docs/backfill.md``).
    4. ``FailureThreshold`` (Choice): more failures than ``$.maxFailures`` -> ``TooManyFailures``
       (Fail); otherwise ``Output`` (Pass: the counts) -> ``Done`` (Succeed).

    Every Lambda task retries Lambda's transient errors and throttling; every S3 Control task
    retries throttling and S3 Control's transient errors. Standard workflow, X-Ray tracing,
    logging level ALL with execution data to its own log group, encrypted with its own KMS key.

    The ``batch-operations`` wait loop adds about 9 history events per poll, so an execution can
    follow a job for roughly 23 hours before the 25,000-event history quota of a Standard
    workflow (https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html); the job
    itself runs on, and ``s3ingest backfill status`` still follows it.

    Parameters
    ----------
    batch_role : aws_cdk.aws_iam.IRole or None
        The role the job runs as (``batch-operations``; ``None`` otherwise): the only role this
        state machine may pass, and only to S3 Batch Operations.
    report_bucket : aws_cdk.aws_s3.IBucket
        Where the job writes its completion report (under ``backfill-reports/``;
        ``batch-operations`` only).

    Attributes: ``state_machine``, its ``log_group`` and ``log_key`` (:func:`execution_logs`).
    create_job : aws_cdk.aws_stepfunctions_tasks.CallAwsService or None
        The ``CreateJob`` task (``batch-operations`` only).

    Raises
    ------
    ValueError
        For an unknown engine, or ``batch-operations`` without its function or role.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        engine: str,
        control_function: lambda_.IFunction,
        backfill_function: lambda_.IFunction | None,
        batch_role: iam.IRole | None,
        report_bucket: s3.IBucket,
        log_retention_days: int,
    ) -> None:
        if engine not in (BATCH_OPERATIONS, DISTRIBUTED_MAP):
            raise ValueError(
                f"backfill engine {engine!r} is not {BATCH_OPERATIONS} or {DISTRIBUTED_MAP}"
            )
        if engine == BATCH_OPERATIONS and (backfill_function is None or batch_role is None):
            raise ValueError("the batch-operations engine needs backfill_function and batch_role")
        super().__init__(scope, construct_id)
        self._control = control_function
        self._backfill = backfill_function
        self._batch_role = batch_role
        self._report_bucket = report_bucket
        self._prepared_fields = PREPARED_FIELDS[engine]
        self.create_job: tasks.CallAwsService | None = None
        parts = execution_logs(
            self,
            description="s3ingest: encrypts the backfill state machine's execution logs",
            log_retention_days=log_retention_days,
        )
        self.log_group = parts.log_group
        self.log_key = parts.log_key
        definition = self._start(
            self._batch_operations() if engine == BATCH_OPERATIONS else self._distributed_map()
        )
        self.state_machine = logged_state_machine(
            self,
            comment=f"s3ingest: backfill of pre-existing objects ({engine})",
            definition=definition,
            log_group=self.log_group,
        )

    # -- shared: input defaults, prepare, threshold --------------------------------------------

    def _start(self, engine_start: sfn.IChainable) -> sfn.IChainable:
        """``Defaults`` -> ``ManifestGiven`` -> ``PrepareManifest`` | ``PrepareNewest`` ->
        ``engine_start``."""
        manifest_given = sfn.Choice(self, "ManifestGiven")
        default_max_failures = sfn.Pass(
            self,
            "DefaultMaxFailures",
            result=sfn.Result.from_number(0),
            result_path="$.maxFailures",
        ).next(manifest_given)
        invalid_input = sfn.Fail(
            self, "InvalidInput", error="InvalidInput", cause="maxFailures must be a number"
        )
        defaults = (
            sfn.Choice(self, "Defaults")
            .when(sfn.Condition.is_not_present("$.maxFailures"), default_max_failures)
            .when(sfn.Condition.is_numeric("$.maxFailures"), manifest_given)
            .otherwise(invalid_input)
        )
        # "manifest.$" on an absent field fails the state, so the two cases get their own payload
        # (the function takes the newest report when "manifest" is absent or null).
        request: dict[str, Any] = {"action": "prepare", "partition": Aws.PARTITION}
        prepare_manifest = self._prepare(
            "PrepareManifest",
            {**request, "manifest": sfn.JsonPath.string_at("$.manifest")},
        )
        prepare_newest = self._prepare("PrepareNewest", request)
        manifest_given.when(sfn.Condition.is_present("$.manifest"), prepare_manifest).otherwise(
            prepare_newest
        )
        prepare_manifest.next(engine_start)
        prepare_newest.next(engine_start)
        return defaults

    def _prepare(self, state_id: str, request: dict[str, Any]) -> tasks.LambdaInvoke:
        """The manifest to backfill from, at ``$.prepared`` (the engine's :data:`PREPARED_FIELDS`
        of the function's result)."""
        return lambda_step(
            self,
            state_id,
            function=self._control,
            payload=sfn.TaskInput.from_object(request),
            result_selector=_payload(*self._prepared_fields),
            result_path=_PREPARED,
        )

    def _threshold(self, failed_path: str, output: dict[str, Any]) -> sfn.Choice:
        """``FailureThreshold``: ``TooManyFailures`` when ``failed_path`` > ``$.maxFailures``,
        else ``Output`` (``output``) -> ``Done``."""
        too_many = sfn.Fail(
            self,
            "TooManyFailures",
            error="TooManyFailures",
            cause="more objects failed to backfill than the execution input's maxFailures",
        )
        done = sfn.Pass(self, "Output", parameters=output).next(sfn.Succeed(self, "Done"))
        return (
            sfn.Choice(self, "FailureThreshold")
            .when(
                sfn.Condition.number_greater_than_json_path(failed_path, "$.maxFailures"),
                too_many,
            )
            .otherwise(done)
        )

    # -- engine: S3 Batch Operations -------------------------------------------------------------

    def _s3control(self, state_id: str, **kwargs: Any) -> tasks.CallAwsService:
        """A direct S3 Control SDK call, retrying throttling and transient errors.

        ``iam_action`` is always given: CDK would derive ``s3control:<Action>`` from the service
        name, but S3 Control's actions are in the ``s3`` IAM namespace
        (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3.html).
        """
        task = tasks.CallAwsService(self, state_id, service="s3control", **kwargs)
        task.add_retry(
            errors=list(S3CONTROL_RETRY_ERRORS),
            interval=Duration.seconds(2),
            max_attempts=6,
            backoff_rate=2,
            jitter_strategy=sfn.JitterType.FULL,
        )
        return task

    def _batch_operations(self) -> sfn.IChainable:
        backfill, batch_role = self._backfill, self._batch_role
        if backfill is None or batch_role is None:  # pragma: no cover - checked in __init__
            raise ValueError("the batch-operations engine needs backfill_function and batch_role")
        jobs_arn = f"arn:{Aws.PARTITION}:s3:{Aws.REGION}:{Aws.ACCOUNT_ID}:job/*"
        create_job = self._s3control(
            "CreateJob",
            action="createJob",
            # CreateJob has no resource type (its resource is "*"), so the task's own statement,
            # which CDK writes without a condition, is the DescribeJob the next step needs; the
            # CreateJob grant below carries the condition keys CreateJob supports: only a
            # LambdaInvoke job, at this priority (Service Authorization Reference, Amazon S3:
            # https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3.html).
            # What the job can do is bounded by the one role it may pass.
            iam_action="s3:DescribeJob",
            iam_resources=[jobs_arn],
            additional_iam_statements=[
                iam.PolicyStatement(
                    actions=["s3:CreateJob"],
                    resources=["*"],
                    conditions={
                        "StringEquals": {"s3:RequestJobOperation": JOB_OPERATION},
                        "NumericEquals": {"s3:RequestJobPriority": JOB_PRIORITY},
                    },
                ),
                iam.PolicyStatement(
                    actions=["iam:PassRole"],
                    resources=[batch_role.role_arn],
                    conditions={
                        "StringEquals": {"iam:PassedToService": BATCH_OPERATIONS_PRINCIPAL}
                    },
                ),
            ],
            parameters={
                "AccountId": Aws.ACCOUNT_ID,
                "ClientRequestToken": sfn.JsonPath.hash(
                    sfn.JsonPath.string_at("$$.Execution.Id"), "MD5"
                ),
                "ConfirmationRequired": False,
                "Operation": {
                    JOB_OPERATION: {
                        "FunctionArn": backfill.function_arn,
                        "InvocationSchemaVersion": INVOCATION_SCHEMA_VERSION,
                    }
                },
                "Manifest": {
                    "Spec": {"Format": MANIFEST_FORMAT},
                    "Location": {
                        "ObjectArn": sfn.JsonPath.string_at(f"{_PREPARED}.manifestObjectArn"),
                        "ETag": sfn.JsonPath.string_at(f"{_PREPARED}.manifestEtag"),
                    },
                },
                "Report": {
                    "Bucket": self._report_bucket.bucket_arn,
                    "Format": REPORT_FORMAT,
                    "Enabled": True,
                    "Prefix": REPORT_PREFIX,
                    "ReportScope": "FailedTasksOnly",
                },
                "Priority": JOB_PRIORITY,
                "RoleArn": batch_role.role_arn,
                "Description": JOB_DESCRIPTION,
            },
            result_path="$.job",
        )
        self.create_job = create_job
        wait = sfn.Wait(self, "WaitForJob", time=sfn.WaitTime.duration(JOB_POLL_INTERVAL))
        describe_job = self._s3control(
            "DescribeJob",
            action="describeJob",
            iam_action="s3:DescribeJob",
            iam_resources=[jobs_arn],
            parameters={
                "AccountId": Aws.ACCOUNT_ID,
                "JobId": sfn.JsonPath.string_at("$.job.JobId"),
            },
            result_path="$.describe",
        )
        report = lambda_step(
            self,
            "Report",
            function=self._control,
            payload=sfn.TaskInput.from_object(
                {"action": "report", "jobId": sfn.JsonPath.string_at("$.job.JobId")}
            ),
            result_selector=_payload("reportManifest", "failed", "errors", "samples"),
            result_path="$.report",
        )
        progress = "$.describe.Job.ProgressSummary"
        report.next(
            self._threshold(
                "$.report.failed",
                {
                    "jobId": sfn.JsonPath.string_at("$.job.JobId"),
                    "total": sfn.JsonPath.number_at(f"{progress}.TotalNumberOfTasks"),
                    "succeeded": sfn.JsonPath.number_at(f"{progress}.NumberOfTasksSucceeded"),
                    "failed": sfn.JsonPath.number_at(f"{progress}.NumberOfTasksFailed"),
                    "reportManifest": sfn.JsonPath.string_at("$.report.reportManifest"),
                },
            )
        )
        job_failed = sfn.Fail(
            self,
            "JobFailed",
            error="BackfillJobFailed",
            cause="the S3 Batch Operations job failed or was cancelled (see its FailureReasons)",
        )
        status = "$.describe.Job.Status"
        job_status = (
            sfn.Choice(self, "JobStatus")
            .when(sfn.Condition.string_equals(status, JOB_COMPLETE), report)
            .when(
                sfn.Condition.or_(*(sfn.Condition.string_equals(status, s) for s in JOB_FAILED)),
                job_failed,
            )
            .otherwise(wait)
        )
        return create_job.next(wait).next(describe_job).next(job_status)

    # -- engine: Distributed Map -----------------------------------------------------------------

    def _distributed_map(self) -> sfn.IChainable:
        backfill_files = sfn.DistributedMap(
            self,
            "BackfillFiles",
            items_path=f"{_PREPARED}.files",
            # Inside ItemSelector, "$" is the Map state's input and "$$.Map.Item.Value" the item
            # (https://docs.aws.amazon.com/step-functions/latest/dg/input-output-itemselector.html).
            item_selector={
                "action": "backfill_file",
                "manifest": sfn.JsonPath.string_at(f"{_PREPARED}.manifestKey"),
                "file": sfn.JsonPath.string_at("$$.Map.Item.Value"),
                "attempt": 1,
            },
            max_concurrency=FILES_MAX_CONCURRENCY,
            # With a label, the redrive grant CDK adds covers this Map Run's children only.
            label=FILES_MAP_LABEL,
            result_path="$.files",
        )
        backfill_files.item_processor(self._file_child())
        summarize = lambda_step(
            self,
            "Summarize",
            function=self._control,
            payload=sfn.TaskInput.from_object(
                {"action": "summarize", "files": sfn.JsonPath.list_at("$.files")}
            ),
            result_selector=_payload("total", "succeeded", "failed", "outcomes"),
            result_path="$.summary",
        )
        summary = "$.summary"
        summarize.next(
            self._threshold(
                f"{summary}.failed",
                {
                    "total": sfn.JsonPath.number_at(f"{summary}.total"),
                    "succeeded": sfn.JsonPath.number_at(f"{summary}.succeeded"),
                    "failed": sfn.JsonPath.number_at(f"{summary}.failed"),
                    # by outcome; effects_pending: rows written whose processor failed after
                    "outcomes": sfn.JsonPath.object_at(f"{summary}.outcomes"),
                },
            )
        )
        return backfill_files.next(summarize)

    def _file_child(self) -> sfn.IChainable:
        """One data file: ``BackfillFile``; again (``NextFileAttempt``, ``FileRetryWait``) while
        keys failed temporarily and attempts remain; the file's counts as the child's output.

        The function counts a key whose observation kept failing in ``temporaryFailures`` and
        leaves the retry to the state machine
        (``s3ingest_fn.services.backfill_control.backfill_file``); keys already observed make no
        write the second time.
        """
        backfill_file = lambda_step(
            self,
            "BackfillFile",
            function=self._control,
            payload=sfn.TaskInput.from_json_path_at("$"),
            result_selector=_payload("file", "keys", "outcomes", "temporaryFailures"),
            result_path="$.result",
        )
        next_attempt = sfn.Pass(
            self,
            "NextFileAttempt",
            parameters={
                "action": sfn.JsonPath.string_at("$.action"),
                "manifest": sfn.JsonPath.string_at("$.manifest"),
                "file": sfn.JsonPath.string_at("$.file"),
                "attempt": sfn.JsonPath.math_add(sfn.JsonPath.number_at("$.attempt"), 1),
            },
        )
        retry_wait = sfn.Wait(
            self, "FileRetryWait", time=sfn.WaitTime.duration(FILE_RETRY_INTERVAL)
        )
        file_result = sfn.Pass(self, "FileResult", output_path="$.result")
        file_retry = (
            sfn.Choice(self, "FileRetry")
            .when(
                sfn.Condition.and_(
                    sfn.Condition.number_greater_than("$.result.temporaryFailures", 0),
                    sfn.Condition.number_less_than("$.attempt", FILE_MAX_ATTEMPTS),
                ),
                next_attempt.next(retry_wait).next(backfill_file),
            )
            .otherwise(file_result)
        )
        return backfill_file.next(file_retry)
