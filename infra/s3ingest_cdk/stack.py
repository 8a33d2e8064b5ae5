"""The s3ingest stack: composes the constructs and wires the least-privilege grants."""

from __future__ import annotations

from typing import Any

from aws_cdk import Arn, ArnFormat, Aws, CfnOutput, Duration, Stack, Tags
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from s3ingest.settings import Settings, ingest_event_pattern, inventory_report_prefix
from s3ingest.version import version
from s3ingest_cdk.bundling import function_code, processor_sources
from s3ingest_cdk.constructs import (
    AlarmTopic,
    BackfillControlFunction,
    BackfillFunction,
    BackfillStateMachine,
    BatchOperationsRole,
    ChangeBus,
    ChangeRelayFunction,
    DeliveryCheckFunction,
    DriftAlarm,
    IngestFunction,
    IngestQueue,
    IngestRouting,
    LandingBucket,
    LedgerTable,
    OperationalAlarms,
    OperationsDashboard,
    ProcessorOutputBucket,
    ReconcileFunction,
    ReconcileSchedule,
    ReconcileStateMachine,
)
from s3ingest_cdk.constructs.backfill_control_function import REPORT_PREFIX
from s3ingest_cdk.constructs.backfill_state_machine import BATCH_OPERATIONS, FILES_MAP_LABEL
from s3ingest_cdk.constructs.reconcile_function import FANOUT_HANDLER, RECONCILE_HANDLER
from s3ingest_cdk.constructs.reconcile_state_machine import (
    INVENTORY_MAP_LABEL,
    WORK_EXPIRATION,
    WORK_PREFIX,
)
from s3ingest_cdk.nag import acknowledge, wildcard_resource_finding
from s3ingest_fn.changes import STREAM_FILTER

#: The change stream's batch: records of one shard per invocation (the relay publishes them in
#: order, ten per PutEvents request).
CHANGE_BATCH_SIZE = 100

_XRAY_EVIDENCE = (
    "X-Ray active tracing: xray:PutTraceSegments and xray:PutTelemetryRecords support no "
    "resource-level permissions, so Resource must be '*' (Service Authorization Reference, "
    "AWS X-Ray: https://docs.aws.amazon.com/service-authorization/latest/reference/"
    "list_awsx-ray.html)."
)
_SFN_LOGGING_EVIDENCE = (
    "Logging to CloudWatch Logs and X-Ray tracing: the logs:*LogDelivery, "
    "logs:PutResourcePolicy, logs:DescribeResourcePolicies, logs:DescribeLogGroups and "
    "xray:* actions Step Functions needs support no resource-level permissions "
    "(https://docs.aws.amazon.com/step-functions/latest/dg/cw-logs.html"
    "#cloudwatch-iam-policy, "
    "https://docs.aws.amazon.com/step-functions/latest/dg/concepts-xray-tracing.html)."
)
_STREAM_EVIDENCE = (
    "dynamodb:ListStreams (CDK's DynamoEventSource grant), which has no resource type: its "
    "only resource is '*' (Service Authorization Reference, Amazon DynamoDB: "
    "https://docs.aws.amazon.com/service-authorization/latest/reference/"
    "list_amazondynamodb.html); the stream's records are read only from the ledger's stream "
    "(DescribeStream, GetRecords, GetShardIterator on its ARN)."
)
#: The stack tag that records the s3ingest version deployed (:func:`s3ingest.version.version`).
VERSION_TAG = "s3ingest:version"
_RUNTIME_EVIDENCE = (
    "Python 3.13 is pinned on purpose: the function's dependency wheels are resolved for "
    "CPython 3.13 (s3ingest_cdk.bundling) and Powertools for AWS Lambda 3.37 is tested on it; "
    "moving to a newer runtime is a deliberate upgrade, not a synth-time drift."
)


class S3IngestStack(Stack):
    """S3 -> EventBridge (default bus, archived) -> SQS (+DLQ) -> Lambda -> DynamoDB ledger, a
    scheduled reconciliation of the ledger with the bucket (CONTRACT C12) with a drift alarm, and
    the backfill of pre-existing objects over the bucket's inventory (CONTRACT C13).

    Downstream effects (CONTRACT C11), each optional: with ``processor`` every function that
    applies the ledger rules runs the team's processor and may write its output bucket; with
    ``changeStream`` the ledger's DynamoDB stream feeds a relay that publishes every applied
    change, in order per key, to the stack's own bus.

    Parameters
    ----------
    scope : constructs.Construct
        The app.
    construct_id : str
        Stack id; also the CloudFormation stack name (``settings.stack_name``).
    settings : s3ingest.settings.Settings
        Validated deployment settings.
    code : aws_cdk.aws_lambda.Code, optional
        The function's code; the locally bundled ``functions/`` package by default (with the
        processor's package when ``processor`` is set).
    **kwargs
        Passed to :class:`aws_cdk.Stack` (``env``, ...).

    Attributes
    ----------
    landing, ingest_queue, routing, ledger, ingest : Construct
        The composed constructs, exposing the resources they create.
    reconcile : s3ingest_cdk.constructs.ReconcileFunction
        The single-run reconcile function.
    reconcile_fan_out : s3ingest_cdk.constructs.ReconcileFunction or None
        The fan-out step function (``reconcileFanOut`` only).
    reconcile_state_machine : s3ingest_cdk.constructs.ReconcileStateMachine or None
        The fan-out state machine (``reconcileFanOut`` only).
    reconcile_schedule : s3ingest_cdk.constructs.ReconcileSchedule
        The scheduled rule that starts reconciliation.
    drift : s3ingest_cdk.constructs.DriftAlarm
        The drift metrics and ``drift.alarm``.
    backfill_control : s3ingest_cdk.constructs.BackfillControlFunction or None
        The backfill state machine's step function (CONTRACT C13); ``None`` unless the stack owns
        the inventory (``bucketName`` unset, ``inventoryEnabled``), as the three below.
    delivery_check : s3ingest_cdk.constructs.DeliveryCheckFunction
        The scheduled check of the landing bucket's EventBridge delivery (its alarm is
        ``alarms.delivery_off``).
    alarm_topic : s3ingest_cdk.constructs.AlarmTopic
        The topic every alarm notifies (``alarmEmail`` subscribes an address).
    alarms : s3ingest_cdk.constructs.OperationalAlarms
        The operational alarms (the drift alarm included).
    dashboard : s3ingest_cdk.constructs.OperationsDashboard
        The stage's dashboard, ``s3ingest-<stage>``.
    backfill_state_machine : s3ingest_cdk.constructs.BackfillStateMachine or None
        The backfill state machine (``backfillEngine`` picks its engine).
    backfill : s3ingest_cdk.constructs.BackfillFunction or None
        The function S3 Batch Operations invokes (``batch-operations`` engine only).
    batch_operations : s3ingest_cdk.constructs.BatchOperationsRole or None
        The role the Batch Operations job runs as (``batch-operations`` engine only).
    processor_output : s3ingest_cdk.constructs.ProcessorOutputBucket or None
        The processor's output bucket (``processor`` only).
    ingest_service_functions : list[aws_cdk.aws_lambda.Function]
        The functions that build the ingest service and so run the processor, when there is one:
        the ingest function, and the backfill function or (``distributed-map``) the backfill
        control function.
    change_bus : s3ingest_cdk.constructs.ChangeBus or None
        The change bus, its archive and the change-stream rule (``changeStream`` only).
    change_relay : s3ingest_cdk.constructs.ChangeRelayFunction or None
        The relay from the ledger's stream to the change bus (``changeStream`` only).
    change_source : aws_cdk.aws_lambda_event_sources.DynamoEventSource or None
        The relay's event source (``changeStream`` only).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        code: lambda_.Code | None = None,
        **kwargs: Any,
    ) -> None:
        # The version deployed, as a stack tag (not a resource tag: a release changes no resource).
        kwargs["tags"] = {**(kwargs.get("tags") or {}), VERSION_TAG: version()}
        super().__init__(
            scope,
            construct_id,
            description="s3ingest: per-key DynamoDB ledger of an S3 bucket, fed by EventBridge",
            **kwargs,
        )
        self.settings = settings
        Tags.of(self).add("project", "s3ingest")
        Tags.of(self).add("stage", settings.stage)

        self.landing = LandingBucket(
            self,
            "Landing",
            existing_bucket_name=settings.bucket_name,
            versioned=settings.versioned,
            inventory_enabled=settings.inventory_enabled,
        )
        bucket = self.landing.bucket
        self.ingest_queue = IngestQueue(
            self,
            "Ingest",
            visibility_timeout=Duration.seconds(settings.queue_visibility_timeout_seconds),
            retention_period=Duration.days(settings.queue_retention_days),
            dead_letter_retention_period=Duration.days(settings.dlq_retention_days),
            max_receive_count=settings.max_receive_count,
        )
        queue = self.ingest_queue.queue
        dead_letter_queue = self.ingest_queue.dead_letter_queue
        self.routing = IngestRouting(
            self,
            "Routing",
            pattern=ingest_event_pattern(bucket.bucket_name),
            queue=queue,
            archive_retention=Duration.days(settings.archive_retention_days),
            dead_letter_retention_period=Duration.days(settings.dlq_retention_days),
        )
        self.ledger = LedgerTable(
            self,
            "Ledger",
            stream=dynamodb.StreamViewType.NEW_IMAGE if settings.change_stream else None,
        )
        self.processor_output: ProcessorOutputBucket | None = None
        if settings.processor is not None:
            self.processor_output = ProcessorOutputBucket(
                self, "ProcessorOutput", access_logs_bucket=self.landing.access_logs_bucket
            )
        if code is None:
            code = function_code(
                extra_sources=processor_sources(settings.processor, settings.processor_package_dir)
            )
        # The functions that build the ingest service (and so run the processor).
        self.ingest_service_functions: list[lambda_.Function] = []
        self.ingest = IngestFunction(
            self,
            "IngestFunction",
            code=code,
            ledger_table=self.ledger.table,
            bucket=bucket,
            dead_letter_queue=dead_letter_queue,
            tombstone_ttl_seconds=settings.tombstone_ttl_seconds,
            record_concurrency=settings.record_concurrency,
            timeout=Duration.seconds(settings.function_timeout_seconds),
            memory_size_mib=settings.function_memory_mb,
            log_retention_days=settings.log_retention_days,
            tracing=settings.tracing,
        )
        function = self.ingest.function

        # Least privilege, granted here at the composition root.
        objects_arn = self._ingest_service(function)
        # Invalid messages go to the DLQ with their reason (C9).
        dead_letter_queue.grant(function, "sqs:SendMessage")
        function.add_event_source(
            event_sources.SqsEventSource(
                queue,
                batch_size=settings.batch_size,
                max_batching_window=Duration.seconds(settings.max_batching_window_seconds),
                max_concurrency=settings.max_concurrency,
                report_batch_item_failures=True,
            )
        )

        self._reconciliation(code)
        self._backfill(code)
        self._change_stream(code)
        # Is the bucket still sending its events? (Nothing else notices when it stops.)
        self.delivery_check = DeliveryCheckFunction(
            self,
            "DeliveryCheck",
            code=code,
            bucket=bucket,
            log_retention_days=settings.log_retention_days,
            tracing=settings.tracing,
        )
        self._monitoring()
        self._acknowledge(objects_arn)
        self._outputs()

    def _ingest_service(self, function: lambda_.Function) -> str:
        """What a function that builds the ingest service takes (``wiring.ingest_service`` in the
        ingest, backfill and distributed-map backfill control functions): the ledger rules and,
        with a processor, the processor; returns the landing objects' ARN pattern.

        The processor reads the bytes of the change pinned by version or ETag (CONTRACT C8:
        GetObject with ``VersionId`` or ``If-Match``), which the ledger rules' s3:GetObject and
        s3:GetObjectVersion on the landing objects already cover. Its output: ``PROCESSOR`` and
        ``OUTPUT_BUCKET``, and read, write and delete of the output bucket's objects (ListBucket
        on the bucket, so a missing output reads as 404 rather than 403).
        """
        objects_arn = self._grant_ledger_rules(function)
        self.ingest_service_functions.append(function)
        output = self.processor_output
        processor = self.settings.processor
        if output is None or processor is None:
            return objects_arn
        function.add_environment("PROCESSOR", processor)
        function.add_environment("OUTPUT_BUCKET", output.bucket.bucket_name)
        iam.Grant.add_to_principal(
            grantee=function,
            actions=["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
            resource_arns=[output.bucket.arn_for_objects("*")],
        )
        iam.Grant.add_to_principal(
            grantee=function, actions=["s3:ListBucket"], resource_arns=[output.bucket.bucket_arn]
        )
        return objects_arn

    def _grant_ledger_rules(self, function: lambda_.IFunction) -> str:
        """What applying the ledger rules to the landing bucket's objects takes; returns the
        objects' ARN pattern.

        Ledger: one conditional UpdateItem per event (C5); GetItem/PutItem for observations (C7).
        Bucket: HEAD/GET pinned to a version or ETag (C7, C8). ListBucket makes a HEAD of a
        missing key answer 404 rather than 403
        (https://docs.aws.amazon.com/AmazonS3/latest/API/API_HeadObject.html#API_HeadObject_RequestSyntax).
        """
        bucket = self.landing.bucket
        self.ledger.table.grant(
            function, "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"
        )
        objects_arn = bucket.arn_for_objects("*")
        iam.Grant.add_to_principal(
            grantee=function,
            actions=["s3:GetObject", "s3:GetObjectVersion"],
            resource_arns=[objects_arn],
        )
        iam.Grant.add_to_principal(
            grantee=function, actions=["s3:ListBucket"], resource_arns=[bucket.bucket_arn]
        )
        return objects_arn

    def _reconciliation(self, code: lambda_.Code) -> None:
        """Reconciliation (CONTRACT C12): the function(s), the schedule and the drift alarm."""
        settings = self.settings
        inventory_bucket = self.landing.inventory_bucket

        def reconcile_function(construct_id: str, handler: str, what: str) -> ReconcileFunction:
            return ReconcileFunction(
                self,
                construct_id,
                code=code,
                handler=handler,
                description=f"s3ingest: {what}",
                ledger_table=self.ledger.table,
                queue=self.ingest_queue.queue,
                bucket=self.landing.bucket,
                inventory_bucket=inventory_bucket,
                timeout=Duration.seconds(settings.reconcile_timeout_seconds),
                memory_size_mib=settings.reconcile_memory_mb,
                log_retention_days=settings.log_retention_days,
                tracing=settings.tracing,
            )

        self.reconcile = reconcile_function(
            "ReconcileFunction",
            RECONCILE_HANDLER,
            "compares the bucket with the ledger and queues repairs (reconciliation)",
        )
        self._grant_reconcile(self.reconcile.function)
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
            fan_out = self.reconcile_fan_out.function
            self._grant_reconcile(fan_out)
            # The fan-out's shards: written by one step, read by a later one of the same run.
            iam.Grant.add_to_principal(
                grantee=fan_out,
                actions=["s3:GetObject", "s3:PutObject"],
                resource_arns=[inventory_bucket.arn_for_objects(f"{WORK_PREFIX}*")],
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
            target = targets.SfnStateMachine(
                self.reconcile_state_machine.state_machine,
                input=events.RuleTargetInput.from_object({}),
            )
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
            self,
            "Drift",
            stage=settings.stage,
            runbook_base_url=settings.runbook_base_url,
        )

    def _backfill(self, code: lambda_.Code) -> None:
        """Backfill of pre-existing objects (CONTRACT C13): only when the stack owns the inventory
        (the manifest the job reads); nothing otherwise."""
        settings = self.settings
        inventory_bucket = self.landing.inventory_bucket
        self.backfill: BackfillFunction | None = None
        self.backfill_control: BackfillControlFunction | None = None
        self.batch_operations: BatchOperationsRole | None = None
        self.backfill_state_machine: BackfillStateMachine | None = None
        if not settings.owns_inventory or inventory_bucket is None:
            return
        bucket = self.landing.bucket
        self.backfill_control = BackfillControlFunction(
            self,
            "BackfillControlFunction",
            code=code,
            ledger_table=self.ledger.table,
            queue=self.ingest_queue.queue,
            dead_letter_queue=self.ingest_queue.dead_letter_queue,
            bucket=bucket,
            inventory_bucket=inventory_bucket,
            tombstone_ttl_seconds=settings.tombstone_ttl_seconds,
            timeout=Duration.seconds(settings.reconcile_timeout_seconds),
            memory_size_mib=settings.reconcile_memory_mb,
            log_retention_days=settings.log_retention_days,
            tracing=settings.tracing,
        )
        control = self.backfill_control.function
        reports = inventory_bucket.arn_for_objects(
            f"{inventory_report_prefix(bucket.bucket_name)}*"
        )
        # prepare: the newest report is listed by prefix; its manifest HEAD and read (checksum
        # included); backfill_file reads the data files.
        iam.Grant.add_to_principal(
            grantee=control, actions=["s3:ListBucket"], resource_arns=[inventory_bucket.bucket_arn]
        )
        iam.Grant.add_to_principal(
            grantee=control, actions=["s3:GetObject"], resource_arns=[reports]
        )
        batch_role: iam.IRole | None = None
        if settings.backfill_engine == BATCH_OPERATIONS:
            self.backfill = BackfillFunction(
                self,
                "BackfillFunction",
                code=code,
                ledger_table=self.ledger.table,
                bucket=bucket,
                dead_letter_queue=self.ingest_queue.dead_letter_queue,
                tombstone_ttl_seconds=settings.tombstone_ttl_seconds,
                record_concurrency=settings.record_concurrency,
                timeout=Duration.seconds(settings.backfill_function_timeout_seconds),
                memory_size_mib=settings.function_memory_mb,
                log_retention_days=settings.log_retention_days,
                tracing=settings.tracing,
            )
            batch_role = self._batch_operations(self.backfill.function, reports)
        else:
            # distributed-map: the control function observes each data file's keys itself (C7).
            self._ingest_service(control)
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

    def _change_stream(self, code: lambda_.Code) -> None:
        """The ordered change stream (CONTRACT C11): the ledger's stream -> the relay -> the
        change bus; nothing unless ``changeStream``."""
        settings = self.settings
        self.change_bus: ChangeBus | None = None
        self.change_relay: ChangeRelayFunction | None = None
        self.change_source: event_sources.DynamoEventSource | None = None
        if not settings.change_stream:
            return
        self.change_bus = ChangeBus(
            self,
            "ChangeBus",
            bus_name=f"s3ingest-changes-{settings.stage}",
            archive_retention=Duration.days(settings.archive_retention_days),
            log_retention_days=settings.log_retention_days,
        )
        self.change_relay = ChangeRelayFunction(
            self,
            "ChangeRelay",
            code=code,
            bus=self.change_bus.bus,
            timeout=Duration.seconds(settings.function_timeout_seconds),
            memory_size_mib=settings.function_memory_mb,
            log_retention_days=settings.log_retention_days,
            tracing=settings.tracing,
        )
        relay = self.change_relay.function
        # PutEvents on the change bus only.
        self.change_bus.bus.grant_put_events_to(relay)
        # The mapping reads the stream (CDK grants the stream read) and sends dropped batches'
        # positions to the dead-letter queue (CDK grants sqs:SendMessage on it).
        self.change_source = event_sources.DynamoEventSource(
            self.ledger.table,
            starting_position=lambda_.StartingPosition.TRIM_HORIZON,
            batch_size=CHANGE_BATCH_SIZE,
            # Order: one concurrent batch per shard, so a key's changes (one item's stream records
            # stay in one shard, in write order) are published one after another.
            parallelization_factor=1,
            # A function error halves the batch until the failing record is alone; a failed
            # PutEvents entry is reported by sequence number and Lambda retries from it.
            bisect_batch_on_error=True,
            report_batch_item_failures=True,
            # Retry without limit (-1; MaximumRecordAgeInSeconds -1 below): skipping a record
            # would break the order and lose a change, so the shard waits until the record is
            # published or leaves the stream (24 hours). Only then does Lambda drop it and send
            # its position to the dead-letter queue, whose alarm sends the operator to re-publish
            # it from the ledger row, which still holds it (docs/runbook.md#change-stream-dlq).
            # https://docs.aws.amazon.com/lambda/latest/dg/services-ddb-params.html
            retry_attempts=-1,
            # Applied changes only (never effect claims or commits, nor TTL deletions): the
            # relay's own filter, so the two cannot drift.
            filters=[lambda_.FilterCriteria.filter(STREAM_FILTER)],
            on_failure=event_sources.SqsDlq(self.change_relay.dead_letter_queue),
        )
        relay.add_event_source(self.change_source)
        # CDK's max_record_age takes 60 s..7 days; unlimited (-1, the service default) is set on
        # the mapping itself so the template states it.
        (mapping,) = [
            child for child in relay.node.children if isinstance(child, lambda_.EventSourceMapping)
        ]
        cfn_mapping = mapping.node.default_child
        if not isinstance(cfn_mapping, lambda_.CfnEventSourceMapping):  # pragma: no cover
            raise TypeError("EventSourceMapping's default child is not a CfnEventSourceMapping")
        cfn_mapping.maximum_record_age_in_seconds = -1

    def _monitoring(self) -> None:
        """The alarm topic, the operational alarms and the dashboard."""
        settings = self.settings
        self.alarm_topic = AlarmTopic(self, "AlarmTopic", email=settings.alarm_email)
        reconcile_machine = self.reconcile_state_machine
        backfill_machine = self.backfill_state_machine
        relay = self.change_relay
        # Every function with a timeout setting, and that timeout (the duration alarms).
        function_timeout = Duration.seconds(settings.function_timeout_seconds)
        reconcile_timeout = Duration.seconds(settings.reconcile_timeout_seconds)
        timeouts: dict[str, tuple[lambda_.IFunction, Duration]] = {
            "ingest": (self.ingest.function, function_timeout),
            "reconcile": (self.reconcile.function, reconcile_timeout),
        }
        if self.reconcile_fan_out is not None:
            timeouts["reconcile-fan-out"] = (self.reconcile_fan_out.function, reconcile_timeout)
        if self.backfill_control is not None:
            timeouts["backfill-control"] = (self.backfill_control.function, reconcile_timeout)
        if self.backfill is not None:
            timeouts["backfill"] = (
                self.backfill.function,
                Duration.seconds(settings.backfill_function_timeout_seconds),
            )
        if relay is not None:
            timeouts["change-relay"] = (relay.function, function_timeout)
        self.alarms = OperationalAlarms(
            self,
            "Alarms",
            stage=settings.stage,
            runbook_base_url=settings.runbook_base_url,
            topic=self.alarm_topic.topic,
            queue=self.ingest_queue.queue,
            dead_letter_queue=self.ingest_queue.dead_letter_queue,
            target_dead_letter_queue=self.routing.target_dead_letter_queue,
            ingest_function=self.ingest.function,
            reconcile_function=self.reconcile.function,
            drift_alarm=self.drift.alarm,
            ledger_table=self.ledger.table,
            ingest_rule=self.routing.rule,
            lag_threshold=Duration.seconds(settings.lag_alarm_seconds),
            heartbeat_period=Duration.seconds(settings.reconcile_heartbeat_seconds),
            timeouts=timeouts,
            reconcile_state_machine=(
                reconcile_machine.state_machine if reconcile_machine is not None else None
            ),
            backfill_state_machine=(
                backfill_machine.state_machine if backfill_machine is not None else None
            ),
            change_relay_function=relay.function if relay is not None else None,
            change_dead_letter_queue=relay.dead_letter_queue if relay is not None else None,
        )
        functions: dict[str, lambda_.IFunction] = {
            "ingest": self.ingest.function,
            "reconcile": self.reconcile.function,
        }
        for name, owner in (
            ("reconcile fan-out", self.reconcile_fan_out),
            ("backfill control", self.backfill_control),
            ("backfill", self.backfill),
            ("change relay", self.change_relay),
            ("delivery check", self.delivery_check),
        ):
            if owner is not None:
                functions[name] = owner.function
        self.dashboard = OperationsDashboard(
            self,
            "Dashboard",
            dashboard_name=f"s3ingest-{settings.stage}",
            queue=self.ingest_queue.queue,
            dead_letter_queue=self.ingest_queue.dead_letter_queue,
            target_dead_letter_queue=self.routing.target_dead_letter_queue,
            functions=functions,
            alarms=self.alarms.alarms,
            change_dead_letter_queue=relay.dead_letter_queue if relay is not None else None,
        )

    def _batch_operations(self, backfill: lambda_.Function, reports: str) -> iam.IRole:
        """The S3 Batch Operations side of the ``batch-operations`` engine: the backfill function's
        grants, the role the job runs as, and who may invoke the function."""
        inventory_bucket = self.landing.inventory_bucket
        control = self.backfill_control
        if inventory_bucket is None or control is None:  # pragma: no cover - see _backfill
            raise ValueError("the batch-operations backfill needs the stack's own inventory")
        # Each task is observed by the ledger rules (C7).
        self._ingest_service(backfill)
        # report: the completion reports (ListBucket above makes a missing one a 404, which it
        # reads as "no failure").
        completion_reports = inventory_bucket.arn_for_objects(f"{REPORT_PREFIX}/*")
        iam.Grant.add_to_principal(
            grantee=control.function, actions=["s3:GetObject"], resource_arns=[completion_reports]
        )
        # S3 Batch Operations runs the job as this role: it reads the manifest and the data files
        # it lists, invokes the backfill function, writes the completion report; nothing else
        # (https://docs.aws.amazon.com/AmazonS3/latest/userguide/batch-ops-iam-role-policies.html).
        self.batch_operations = BatchOperationsRole(self, "BatchOperations")
        batch_role = self.batch_operations.role
        iam.Grant.add_to_principal(
            grantee=batch_role,
            actions=["s3:GetObject", "s3:GetObjectVersion"],
            resource_arns=[reports],
        )
        iam.Grant.add_to_principal(
            grantee=batch_role,
            actions=["lambda:InvokeFunction"],
            resource_arns=[backfill.function_arn],
        )
        iam.Grant.add_to_principal(
            grantee=batch_role, actions=["s3:PutObject"], resource_arns=[completion_reports]
        )
        # The function's resource policy names that role only: no service principal, no other
        # account (Batch Operations invokes the function as the role it assumed).
        backfill.add_permission(
            "BatchOperationsInvoke",
            principal=iam.ArnPrincipal(batch_role.role_arn),
            action="lambda:InvokeFunction",
        )
        return batch_role

    def _grant_reconcile(self, function: lambda_.IFunction) -> None:
        """What a reconcile function reads and writes, and nothing else."""
        bucket = self.landing.bucket
        # Listing: GetBucketVersioning picks ListObjectVersions or ListObjectsV2
        # (https://docs.aws.amazon.com/AmazonS3/latest/API/API_ListObjectVersions.html: the
        # s3:ListBucketVersions permission).
        iam.Grant.add_to_principal(
            grantee=function,
            actions=["s3:ListBucket", "s3:ListBucketVersions", "s3:GetBucketVersioning"],
            resource_arns=[bucket.bucket_arn],
        )
        # Confirmation: a HEAD of each key that differs (HeadObject needs s3:GetObject).
        iam.Grant.add_to_principal(
            grantee=function,
            actions=["s3:GetObject", "s3:GetObjectVersion"],
            resource_arns=[bucket.arn_for_objects("*")],
        )
        # The ledger: a parallel Scan. Repairs: through the same ingest queue and rules.
        self.ledger.table.grant(function, "dynamodb:Scan")
        self.ingest_queue.queue.grant(function, "sqs:SendMessage")
        inventory_bucket = self.landing.inventory_bucket
        if inventory_bucket is not None:
            # The newest report: listed by prefix; manifests and data files read, this bucket's
            # reports only.
            iam.Grant.add_to_principal(
                grantee=function,
                actions=["s3:ListBucket"],
                resource_arns=[inventory_bucket.bucket_arn],
            )
            iam.Grant.add_to_principal(
                grantee=function,
                actions=["s3:GetObject"],
                resource_arns=[
                    inventory_bucket.arn_for_objects(
                        f"{inventory_report_prefix(bucket.bucket_name)}*"
                    )
                ],
            )

    def _acknowledge(self, objects_arn: str) -> None:
        """cdk-nag findings accepted, each on its resource, with the evidence."""
        functions: list[IngestFunction | ReconcileFunction] = [self.ingest, self.reconcile]
        if self.reconcile_fan_out is not None:
            functions.append(self.reconcile_fan_out)
        for owner in functions:
            self._acknowledge_xray(owner.role)
            acknowledge(owner.function, "AwsSolutions-L1", _RUNTIME_EVIDENCE)
        acknowledge(
            self.ingest.role,
            wildcard_resource_finding(self, objects_arn),
            "The function reads whichever object an event names: s3:GetObject and "
            "s3:GetObjectVersion on the landing bucket's objects only (key unknown in advance).",
        )
        self._acknowledge_xray(self.delivery_check.role)
        acknowledge(self.delivery_check.function, "AwsSolutions-L1", _RUNTIME_EVIDENCE)
        self._acknowledge_reconciliation(objects_arn)
        self._acknowledge_backfill(objects_arn)
        self._acknowledge_effects()
        acknowledge(
            self.routing.target_dead_letter_queue,
            "AwsSolutions-SQS3",
            "This queue is a dead-letter queue: the ingest rule target's DeadLetterConfig "
            "(https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-rule-dlq.html); "
            "cdk-nag only recognises SQS redrive and Lambda DLQs.",
        )

    def _acknowledge_xray(self, role: iam.IRole) -> None:
        """X-Ray's wildcard on a function's role, with ``tracing`` only (off, the role has no
        xray:* statement and nothing is acknowledged)."""
        if self.settings.tracing:
            acknowledge(role, "AwsSolutions-IAM5[Resource::*]", _XRAY_EVIDENCE)

    def _acknowledge_effects(self) -> None:
        """The processor's output wildcard on each role that runs it; the change relay's."""
        output = self.processor_output
        if output is not None:
            for function in self.ingest_service_functions:
                if function.role is None:  # pragma: no cover - python_function gives a role
                    continue
                acknowledge(
                    function.role,
                    wildcard_resource_finding(self, output.bucket.arn_for_objects("*")),
                    "The processor writes (and deletes) one output per object whose change it "
                    "ran for: s3:GetObject, s3:PutObject and s3:DeleteObject on the processor "
                    "output bucket's objects only (keys made from the landing keys at run time).",
                )
        relay = self.change_relay
        if relay is None:
            return
        acknowledge(
            relay.role,
            "AwsSolutions-IAM5[Resource::*]",
            f"{_XRAY_EVIDENCE} And {_STREAM_EVIDENCE}"
            if self.settings.tracing
            else _STREAM_EVIDENCE,
        )
        acknowledge(relay.function, "AwsSolutions-L1", _RUNTIME_EVIDENCE)
        acknowledge(
            relay.dead_letter_queue,
            "AwsSolutions-SQS3",
            "This queue is a dead-letter queue: the change relay's event source mapping's "
            "on-failure destination (DestinationConfig.OnFailure, "
            "https://docs.aws.amazon.com/lambda/latest/dg/services-dynamodb-errors.html); "
            "cdk-nag only recognises SQS redrive and Lambda DLQs.",
        )

    def _acknowledge_reconciliation(self, objects_arn: str) -> None:
        """The reconcile functions' and the state machine's wildcard resources."""
        inventory_bucket = self.landing.inventory_bucket
        for owner in (self.reconcile, self.reconcile_fan_out):
            if owner is None:
                continue
            acknowledge(
                owner.role,
                wildcard_resource_finding(self, objects_arn),
                "Reconciliation HEADs each key whose ledger row differs from the bucket "
                "(s3:GetObject, s3:GetObjectVersion), keys found only at run time: on the landing "
                "bucket's objects only.",
            )
            if inventory_bucket is not None:
                reports = inventory_bucket.arn_for_objects(
                    f"{inventory_report_prefix(self.landing.bucket.bucket_name)}*"
                )
                acknowledge(
                    owner.role,
                    wildcard_resource_finding(self, reports),
                    "s3:GetObject on this bucket's inventory reports only "
                    "(inventory/<bucket>/s3ingest-daily/): each report's folder, manifest and data "
                    "file names are chosen by S3 at delivery "
                    "(https://docs.aws.amazon.com/AmazonS3/latest/userguide/storage-inventory-location.html).",
                )
        machine = self.reconcile_state_machine
        if self.reconcile_fan_out is None or machine is None or inventory_bucket is None:
            return
        acknowledge(
            self.reconcile_fan_out.role,
            wildcard_resource_finding(self, inventory_bucket.arn_for_objects(f"{WORK_PREFIX}*")),
            "The fan-out writes and reads its shards under reconcile-work/<run id>/ of the "
            "inventory bucket only (s3:PutObject, s3:GetObject); the run id is made per "
            "execution, and the prefix expires after 7 days.",
        )
        state_machine = machine.state_machine
        acknowledge(state_machine.role, "AwsSolutions-IAM5[Resource::*]", _SFN_LOGGING_EVIDENCE)
        acknowledge(
            state_machine.role,
            wildcard_resource_finding(self, f"{self.reconcile_fan_out.function.function_arn}:*"),
            "lambda:InvokeFunction on the fan-out step function and its own versions and aliases "
            "only (CDK's LambdaInvoke grant: the function's resourceArnsForGrantInvoke).",
        )
        self._acknowledge_distributed_map(state_machine, INVENTORY_MAP_LABEL, "inventory data file")

    def _acknowledge_distributed_map(
        self, state_machine: sfn.StateMachine, label: str, item: str
    ) -> None:
        """The child executions a Distributed Map's policy names (CDK's DistributedMapPolicy)."""
        distributed_map_policy = state_machine.node.find_child("DistributedMapPolicy")
        machine_name = Arn.split(
            state_machine.state_machine_arn, ArnFormat.COLON_RESOURCE_NAME
        ).resource_name
        for resource_name, why in (
            (
                f"{machine_name}:*",
                "states:DescribeExecution and states:StopExecution",
            ),
            (
                f"{machine_name}/{label}:*",
                "states:RedriveExecution (this Map Run label only)",
            ),
        ):
            executions = self.format_arn(
                service="states",
                resource="execution",
                resource_name=resource_name,
                arn_format=ArnFormat.COLON_RESOURCE_NAME,
            )
            acknowledge(
                distributed_map_policy,
                wildcard_resource_finding(self, executions),
                "The Distributed Map runs one child execution of this state machine per "
                f"{item}, named by Step Functions at run time; {why} on this state "
                "machine's executions only "
                "(https://docs.aws.amazon.com/step-functions/latest/dg/iam-policies-eg-dist-map.html).",
            )

    def _acknowledge_backfill(self, objects_arn: str) -> None:
        """The backfill functions', the Batch Operations role's and the state machine's
        wildcard resources."""
        control = self.backfill_control
        machine = self.backfill_state_machine
        inventory_bucket = self.landing.inventory_bucket
        if control is None or machine is None or inventory_bucket is None:
            return
        reports = wildcard_resource_finding(
            self,
            inventory_bucket.arn_for_objects(
                f"{inventory_report_prefix(self.landing.bucket.bucket_name)}*"
            ),
        )
        completion_reports = wildcard_resource_finding(
            self, inventory_bucket.arn_for_objects(f"{REPORT_PREFIX}/*")
        )
        reports_evidence = (
            "on this bucket's inventory reports only (inventory/<bucket>/s3ingest-daily/): each "
            "report's folder, manifest and data file names are chosen by S3 at delivery "
            "(https://docs.aws.amazon.com/AmazonS3/latest/userguide/storage-inventory-location.html)."
        )
        completion_evidence = (
            "under backfill-reports/ of the inventory bucket only: S3 Batch Operations names each "
            "completion report backfill-reports/job-<job id>/... at run time "
            "(https://docs.aws.amazon.com/AmazonS3/latest/userguide/batch-ops-examples-reports.html)."
        )
        observe_evidence = (
            "The backfill observes whichever objects the inventory lists (C7): s3:GetObject and "
            "s3:GetObjectVersion (HEAD) on the landing bucket's objects only, keys known at run "
            "time."
        )
        self._acknowledge_xray(control.role)
        acknowledge(control.function, "AwsSolutions-L1", _RUNTIME_EVIDENCE)
        acknowledge(control.role, reports, f"s3:GetObject (and HEAD) {reports_evidence}")
        backfill = self.backfill
        batch = self.batch_operations
        if backfill is not None and batch is not None:
            self._acknowledge_xray(backfill.role)
            acknowledge(backfill.function, "AwsSolutions-L1", _RUNTIME_EVIDENCE)
            acknowledge(
                backfill.role, wildcard_resource_finding(self, objects_arn), observe_evidence
            )
            acknowledge(
                control.role,
                completion_reports,
                "s3:GetObject (the report step reads the job's failed tasks) "
                f"{completion_evidence}",
            )
            acknowledge(
                batch.role,
                reports,
                "S3 Batch Operations reads the job's manifest and the data files it lists "
                f"(s3:GetObject, s3:GetObjectVersion) {reports_evidence}",
            )
            acknowledge(
                batch.role,
                completion_reports,
                f"S3 Batch Operations writes the job's completion report (s3:PutObject) "
                f"{completion_evidence}",
            )
        else:
            acknowledge(
                control.role, wildcard_resource_finding(self, objects_arn), observe_evidence
            )
        state_machine = machine.state_machine
        acknowledge(
            state_machine.role,
            "AwsSolutions-IAM5[Resource::*]",
            _SFN_LOGGING_EVIDENCE
            if machine.create_job is None
            else f"{_SFN_LOGGING_EVIDENCE} And s3:CreateJob, which has no resource type: its "
            "only resource is '*' (Service Authorization Reference, Amazon S3: "
            "https://docs.aws.amazon.com/service-authorization/latest/reference/"
            "list_amazons3.html); what a job can do is bounded by the one role this state "
            "machine may pass (iam:PassRole on the Batch Operations role, to "
            "batchoperations.s3.amazonaws.com only).",
        )
        acknowledge(
            state_machine.role,
            wildcard_resource_finding(self, f"{control.function.function_arn}:*"),
            "lambda:InvokeFunction on the backfill control function and its own versions and "
            "aliases only (CDK's LambdaInvoke grant: the function's resourceArnsForGrantInvoke).",
        )
        if machine.create_job is not None:
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
        else:
            self._acknowledge_distributed_map(state_machine, FILES_MAP_LABEL, "inventory data file")

    def _outputs(self) -> None:
        """Stack outputs the operator CLI and the README read."""
        outputs = {
            "BucketName": self.landing.bucket.bucket_name,
            "QueueUrl": self.ingest_queue.queue.queue_url,
            "DeadLetterQueueUrl": self.ingest_queue.dead_letter_queue.queue_url,
            "EventTargetDeadLetterQueueUrl": self.routing.target_dead_letter_queue.queue_url,
            "LedgerTableName": self.ledger.table.table_name,
            "FunctionName": self.ingest.function.function_name,
            "ArchiveName": self.routing.archive.archive_name,
            "ArchiveArn": self.routing.archive.archive_arn,
            "RuleName": self.routing.rule.rule_name,
            "RuleArn": self.routing.rule.rule_arn,
            "AlarmTopicArn": self.alarm_topic.topic.topic_arn,
            "DashboardName": self.dashboard.dashboard.dashboard_name,
            "Version": version(),
        }
        if self.landing.inventory_bucket is not None:
            outputs["InventoryBucketName"] = self.landing.inventory_bucket.bucket_name
        outputs["ReconcileFunctionName"] = self.reconcile.function.function_name
        outputs["DriftAlarmName"] = self.drift.alarm.alarm_name
        outputs["DeliveryCheckFunctionName"] = self.delivery_check.function.function_name
        if self.reconcile_state_machine is not None:
            outputs["ReconcileStateMachineArn"] = (
                self.reconcile_state_machine.state_machine.state_machine_arn
            )
        if self.backfill_state_machine is not None:
            outputs["BackfillStateMachineArn"] = (
                self.backfill_state_machine.state_machine.state_machine_arn
            )
        if self.backfill is not None and self.batch_operations is not None:
            outputs["BackfillFunctionName"] = self.backfill.function.function_name
            outputs["BackfillRoleArn"] = self.batch_operations.role.role_arn
            if self.landing.inventory_bucket is not None:
                outputs["ReportBucketName"] = self.landing.inventory_bucket.bucket_name
        if self.processor_output is not None:
            outputs["ProcessorOutputBucket"] = self.processor_output.bucket.bucket_name
        if self.change_bus is not None and self.change_relay is not None:
            outputs["ChangeBusName"] = self.change_bus.bus.event_bus_name
            outputs["ChangeBusArn"] = self.change_bus.bus.event_bus_arn
            outputs["ChangeArchiveName"] = self.change_bus.archive.archive_name
            outputs["ChangeAuditLogGroupName"] = self.change_bus.audit_log_group.log_group_name
            outputs["ChangeDeadLetterQueueUrl"] = self.change_relay.dead_letter_queue.queue_url
            outputs["ChangeRelayFunctionName"] = self.change_relay.function.function_name
        for output_id, value in outputs.items():
            CfnOutput(self, output_id, value=value)
