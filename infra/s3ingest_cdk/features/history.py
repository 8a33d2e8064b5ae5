"""The history table (``historyTable``, docs/history.md): a rule on the change bus -> the history
queue (with its dead-letter queue) -> the history writer -> an Apache Iceberg table in the Glue
catalog, its files in the stack's bucket under ``history/``; an Athena workgroup with the named
queries of :mod:`s3ingest.history_queries`.

An hourly schedule invokes the writer with ``{"maintenance": {"retentionHours": H}}``
(``historySnapshotRetentionHours``): the same function compacts closed days, expires snapshots
and deletes the files only they reached (:mod:`s3ingest_fn.services.history_maintenance`), with
the Glue UpdateTable and the S3 DeleteObject under ``history/`` it already has.

The stack creates the Glue database; the writer creates the table on its first batch
(:func:`s3ingest_fn.services.history.ensure_table`, the one schema and partitioning), so the
schema is written once.
"""

from __future__ import annotations

import json
import re

from aws_cdk import Aws, Duration, RemovalPolicy, Stack
from aws_cdk import aws_athena as athena
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_glue as glue
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from s3ingest import function_roles, stack_resources
from s3ingest.history_queries import QUERIES
from s3ingest.settings import Settings
from s3ingest_cdk.constructs.function import RoleFunction
from s3ingest_cdk.constructs.ingest_queue import secure_queue
from s3ingest_cdk.features.evidence import (
    DEAD_LETTER_DOC,
    SCHEDULE_TARGET_EVIDENCE,
    acknowledge_dead_letter_queue,
)
from s3ingest_cdk.features.role_function import add_queue_source
from s3ingest_cdk.nag import acknowledge, grant, wildcard_resource_finding
from s3ingest_fn import config_roles as fn_roles
from s3ingest_fn import contract

#: Where the table's files and Athena's results go in the stack's bucket.
HISTORY_PREFIX = "history/"
RESULTS_PREFIX = "athena-results/"
#: The table's name in its database.
TABLE_NAME = "history"
#: Records per invocation (one Iceberg commit each) and the wait to fill a batch: fewer,
#: larger commits (docs/history.md, files per commit).
BATCH_SIZE = 100
BATCH_WINDOW = Duration.seconds(30)
#: Invocations at once at most: concurrent commits conflict and are redone (SQS's minimum).
MAX_CONCURRENCY = 2
#: How often the table is maintained (docs/history.md#maintenance).
MAINTENANCE_INTERVAL = Duration.hours(1)
#: Athena's query results: read once by the caller, then kept this long (and their old
#: versions a day: the bucket is versioned).
RESULTS_EXPIRATION = Duration.days(7)
#: The table's deleted files (noncurrent versions: the bucket is versioned) are kept this long.
#: Never an expiration of current objects under history/: the table's live files have no age
#: limit, and an expired one would break every snapshot that reads it.
DELETED_FILES_EXPIRATION = Duration.days(7)


def database_name(stage: str) -> str:
    """The Glue database of a stage: ``s3ingest_history_<stage>`` (lower case, ``_`` for any
    other character: Glue's and Athena's names)."""
    return "s3ingest_history_" + re.sub(r"[^a-z0-9_]", "_", stage.lower())


class History(Construct):
    """The history table's writer, database and queries.

    Attributes
    ----------
    queue, dead_letter_queue : aws_cdk.aws_sqs.Queue
    writer : s3ingest_cdk.constructs.function.RoleFunction
        Also the table's maintenance, invoked by ``maintenance`` (an hourly rule).
    maintenance : aws_cdk.aws_events.Rule
    database : aws_cdk.aws_glue.CfnDatabase
    work_group : aws_cdk.aws_athena.CfnWorkGroup
    table : str
        ``database.table``, for the CLI (output ``HistoryTable``).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        code: lambda_.Code,
        bus: events.IEventBus,
        bucket: s3.Bucket,
    ) -> None:
        super().__init__(scope, construct_id)
        queue_spec, dead_spec = stack_resources.history_queues()
        self.dead_letter_queue = secure_queue(
            self, "DeadLetterQueue", retention_period=Duration.seconds(dead_spec.retention_seconds)
        )
        self.dead_letter_queue.apply_removal_policy(RemovalPolicy.RETAIN)
        assert queue_spec.visibility_timeout_seconds and queue_spec.max_receive_count
        self.queue = secure_queue(
            self,
            "Queue",
            retention_period=Duration.seconds(queue_spec.retention_seconds),
            visibility_timeout=Duration.seconds(queue_spec.visibility_timeout_seconds),
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.dead_letter_queue, max_receive_count=queue_spec.max_receive_count
            ),
        )
        acknowledge_dead_letter_queue(self.dead_letter_queue, "the history queue's redrive target")
        self.rule = events.Rule(
            self,
            "Rule",
            event_bus=bus,
            event_pattern=events.EventPattern(
                source=list(stack_resources.HISTORY_PATTERN["source"])
            ),
            targets=[targets.SqsQueue(self.queue, dead_letter_queue=self.dead_letter_queue)],
        )
        stack = Stack.of(self)
        db = database_name(settings.stage)
        self.table = f"{db}.{TABLE_NAME}"
        self.database = glue.CfnDatabase(
            self,
            "Database",
            catalog_id=Aws.ACCOUNT_ID,
            database_input=glue.CfnDatabase.DatabaseInputProperty(
                name=db,
                description="s3ingest: the change stream's history (Apache Iceberg)",
                location_uri=bucket.s3_url_for_object(HISTORY_PREFIX),
            ),
        )
        self.writer = RoleFunction(
            self,
            row=function_roles.HISTORY,
            settings=settings,
            code=code,
            environment=fn_roles.HistoryConfig(
                catalog=json.dumps(contract.HISTORY_GLUE_CATALOG),
                table=self.table,
                location=bucket.s3_url_for_object(HISTORY_PREFIX + TABLE_NAME),
                dead_letter_queue_url=self.dead_letter_queue.queue_url,
            ).to_env(),
        )
        function = self.writer.function
        add_queue_source(
            self.writer,
            self.queue,
            name="history",
            tracing=settings.tracing,
            dead_letters=(
                "Invoked synchronously by its SQS event source mapping (the history queue, whose "
                "redrive policy moves a record failing 5 receives to the history dead-letter "
                "queue), and asynchronously only by its hourly maintenance schedule, with a fixed "
                "input: a failed maintenance is retried twice by Lambda, and the next tick does "
                "the same work again; a dead-letter queue (DeadLetterConfig, "
                f"{DEAD_LETTER_DOC}) would hold schedule ticks, with nothing to replay."
            ),
            batch_size=BATCH_SIZE,
            max_batching_window=BATCH_WINDOW,
            max_concurrency=MAX_CONCURRENCY,
        )
        self.maintenance = events.Rule(
            self,
            "Maintenance",
            description="s3ingest: compacts the history table and expires its snapshots",
            schedule=events.Schedule.rate(MAINTENANCE_INTERVAL),
            targets=[
                targets.LambdaFunction(
                    function,
                    event=events.RuleTargetInput.from_object(
                        {
                            "maintenance": {
                                "retentionHours": settings.history_snapshot_retention_hours
                            }
                        }
                    ),
                )
            ],
        )
        acknowledge(self.maintenance, "Serverless-EventBusDLQ", SCHEDULE_TARGET_EVIDENCE)
        self.dead_letter_queue.grant_send_messages(function)
        # The table's files: read, write and remove (Iceberg's own cleanup, the maintenance's
        # deletion of files only expired snapshots reached) under history/ only;
        # ListBucket so that a missing file reads as absent (404), not forbidden (403).
        files = bucket.arn_for_objects(HISTORY_PREFIX + "*")
        grant(function, ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"], files)
        grant(function, ["s3:ListBucket"], bucket.bucket_arn)
        acknowledge(
            self.writer.role,
            wildcard_resource_finding(self, files),
            "The history writer reads and writes the table's data and metadata files under "
            "history/ of the stack's bucket only; Iceberg names each file when it writes it "
            "(https://iceberg.apache.org/spec/#file-system-operations).",
        )
        # The Glue catalog: read the database, read and create/commit the one table (a write, a
        # compaction, a snapshot expiry: each an UpdateTable).
        glue_arn = f"arn:{Aws.PARTITION}:glue:{stack.region}:{stack.account}"
        grant(
            function,
            ["glue:GetDatabase", "glue:GetTable", "glue:CreateTable", "glue:UpdateTable"],
            f"{glue_arn}:catalog",
            f"{glue_arn}:database/{db}",
            f"{glue_arn}:table/{db}/{TABLE_NAME}",
        )
        # The bucket is versioned (it keeps the attestations): a deleted file stays as a
        # noncurrent version until this expires it. history/ gets no expiration of current
        # objects: that would delete files the table's snapshots read and corrupt it.
        bucket.add_lifecycle_rule(
            id="ExpireDeletedHistoryFiles",
            prefix=HISTORY_PREFIX,
            noncurrent_version_expiration=DELETED_FILES_EXPIRATION,
            expired_object_delete_marker=True,
        )
        bucket.add_lifecycle_rule(
            id="ExpireAthenaResults",
            prefix=RESULTS_PREFIX,
            expiration=RESULTS_EXPIRATION,
            noncurrent_version_expiration=Duration.days(1),
        )
        self.work_group = athena.CfnWorkGroup(
            self,
            "WorkGroup",
            name=f"s3ingest-history-{settings.stage}",
            description="s3ingest: queries of the history table",
            recursive_delete_option=True,
            work_group_configuration=athena.CfnWorkGroup.WorkGroupConfigurationProperty(
                enforce_work_group_configuration=True,
                publish_cloud_watch_metrics_enabled=True,
                result_configuration=athena.CfnWorkGroup.ResultConfigurationProperty(
                    output_location=bucket.s3_url_for_object(RESULTS_PREFIX),
                    encryption_configuration=athena.CfnWorkGroup.EncryptionConfigurationProperty(
                        encryption_option="SSE_S3"
                    ),
                ),
            ),
        )
        quoted = f'"{db}"."{TABLE_NAME}"'
        for name, query in QUERIES.items():
            named = athena.CfnNamedQuery(
                self,
                f"Query{name.title()}",
                name=f"s3ingest-history-{name}",
                description=query.description[:1024],
                database=db,
                query_string=query.render(quoted, "athena"),
                work_group=self.work_group.name,
            )
            named.add_dependency(self.work_group)
            named.add_dependency(self.database)
