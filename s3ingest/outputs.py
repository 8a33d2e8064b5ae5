"""The names of a pipeline's outputs: what :meth:`s3ingest_cdk.S3IngestPipeline.outputs` writes
(and :class:`s3ingest_cdk.stack.S3IngestStack` declares as ``CfnOutput`` of the same name), what
the local runtime's stack reports, and what the operator CLI reads (``s3ingest --stack``).

The stack, the CLI and the local runtime import these, so a name is written once. Pure constants:
importing this module loads nothing else (no CDK, no boto3).

A pipeline in a team's own stack publishes the same outputs with a prefix of its stage
(:func:`published_prefix`) and one :data:`PIPELINE_STAGE` output, so that several fit in one
stack and ``s3ingest --stack NAME --pipeline STAGE`` finds each.
"""

from __future__ import annotations

#: The first landing bucket's name.
BUCKET_NAME = "BucketName"
#: Every landing bucket's name, comma-separated.
BUCKET_NAMES = "BucketNames"
#: The landing buckets and their key filters (JSON, ``SCOPE``'s: ``[{"name", "prefixes",
#: "suffixes"}, ...]``): what the pipeline tracks.
BUCKET_SCOPE = "BucketScope"
#: The ingest queue's URL.
QUEUE_URL = "QueueUrl"
#: The ingest dead-letter queue's URL.
DEAD_LETTER_QUEUE_URL = "DeadLetterQueueUrl"
#: The EventBridge target's dead-letter queue's URL (events the rule could not deliver).
EVENT_TARGET_DEAD_LETTER_QUEUE_URL = "EventTargetDeadLetterQueueUrl"
#: The ledger table's name.
LEDGER_TABLE_NAME = "LedgerTableName"
#: The ingest function's name.
FUNCTION_NAME = "FunctionName"
#: The S3 events archive's name and ARN (``s3ingest replay``).
ARCHIVE_NAME = "ArchiveName"
ARCHIVE_ARN = "ArchiveArn"
#: The ingest rule's name and ARN.
RULE_NAME = "RuleName"
RULE_ARN = "RuleArn"
#: The alarm topic's ARN.
ALARM_TOPIC_ARN = "AlarmTopicArn"
#: The dashboard's name.
DASHBOARD_NAME = "DashboardName"
#: The stack's inventory bucket (inventories and checkpoints).
INVENTORY_BUCKET_NAME = "InventoryBucketName"
#: The attestations' own bucket, under S3 Object Lock (``attestationRetentionDays`` only;
#: otherwise they are kept in :data:`INVENTORY_BUCKET_NAME`).
ATTESTATION_BUCKET_NAME = "AttestationBucketName"
#: The reconciliation function's name.
RECONCILE_FUNCTION_NAME = "ReconcileFunctionName"
#: The drift alarm's name.
DRIFT_ALARM_NAME = "DriftAlarmName"
#: The delivery check function's name.
DELIVERY_CHECK_FUNCTION_NAME = "DeliveryCheckFunctionName"
#: The fan-out reconciliation's state machine (``reconcileFanOut`` only).
RECONCILE_STATE_MACHINE_ARN = "ReconcileStateMachineArn"
#: The inventory backfill's state machine (every bucket inventoried only).
BACKFILL_STATE_MACHINE_ARN = "BackfillStateMachineArn"
#: The listing backfill's state machine.
LISTING_BACKFILL_STATE_MACHINE_ARN = "ListingBackfillStateMachineArn"
#: The reprocess run's state machine (``s3ingest reprocess``).
REPROCESS_STATE_MACHINE_ARN = "ReprocessStateMachineArn"
#: The Batch Operations backfill: its function, the job's role and its report bucket.
BACKFILL_FUNCTION_NAME = "BackfillFunctionName"
BACKFILL_ROLE_ARN = "BackfillRoleArn"
REPORT_BUCKET_NAME = "ReportBucketName"
#: The example processor's output bucket.
PROCESSOR_OUTPUT_BUCKET = "ProcessorOutputBucket"
#: The processors' names (comma-separated), and their targets (JSON: version and filters).
PROCESSOR_NAMES = "ProcessorNames"
PROCESSOR_TARGETS = "ProcessorTargets"
#: The processors a hold policy applies to (JSON list of names; ``[]``: no hold policy).
HOLD_PROCESSORS = "HoldProcessors"
#: The roles that invoke processor functions (JSON list of ARNs).
PROCESSOR_INVOKER_ROLE_ARNS = "ProcessorInvokerRoleArns"
#: The processor functions the stack created (JSON: ARN by processor name).
PROCESSOR_FUNCTIONS = "ProcessorFunctions"
#: The account that owns each landing bucket (JSON: account by bucket name).
BUCKET_OWNERS = "BucketOwners"
#: The read role of each remote bucket's account (JSON: role ARN by bucket name).
REMOTE_READ_ROLE_ARNS = "RemoteReadRoleArns"
#: The log keys' secret (``logKeys``), and the mode (``plain``, ``hashed`` or ``none``).
LOG_KEY_SECRET_ARN = "LogKeySecretArn"
LOG_KEYS = "LogKeys"
#: The change stream (``changeBus``): bus, archive, audit log group, relay and its DLQ.
CHANGE_BUS_NAME = "ChangeBusName"
CHANGE_BUS_ARN = "ChangeBusArn"
CHANGE_ARCHIVE_NAME = "ChangeArchiveName"
CHANGE_AUDIT_LOG_GROUP_NAME = "ChangeAuditLogGroupName"
CHANGE_DEAD_LETTER_QUEUE_URL = "ChangeDeadLetterQueueUrl"
CHANGE_RELAY_FUNCTION_NAME = "ChangeRelayFunctionName"
#: The history table (``historyTable``): the Athena workgroup of its named queries, the table
#: as ``database.table`` in the Glue catalog, the writer's dead-letter queue, and the writer
#: (``s3ingest history maintain`` invokes it).
HISTORY_WORK_GROUP = "HistoryWorkGroup"
HISTORY_TABLE = "HistoryTable"
HISTORY_DEAD_LETTER_QUEUE_URL = "HistoryDeadLetterQueueUrl"
HISTORY_WRITER_FUNCTION_NAME = "HistoryWriterFunctionName"
#: The package version the stack was synthesized with (the stack's own output).
VERSION = "Version"

#: The output that names a pipeline published in a team's own stack (value: its stage); each
#: of its outputs is named ``<prefix><name>`` (:func:`published_prefix`).
PIPELINE_STAGE = "PipelineStage"


def published_prefix(stage: str) -> str:
    """The prefix of the outputs ``S3IngestPipeline`` adds to its stack for ``stage``:
    ``S3Ingest`` and the stage in CamelCase (``uploads`` -> ``S3IngestUploads``,
    ``eu-west`` -> ``S3IngestEuWest``); output names are alphanumeric
    (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/outputs-section-structure.html)."""
    return "S3Ingest" + "".join(part[:1].upper() + part[1:] for part in stage.split("-"))


def attestation_store(outputs: dict[str, str]) -> str | None:
    """The bucket the attestations are kept in: :data:`ATTESTATION_BUCKET_NAME`, else the
    stack's bucket (:data:`INVENTORY_BUCKET_NAME`); None when the outputs name neither."""
    return outputs.get(ATTESTATION_BUCKET_NAME) or outputs.get(INVENTORY_BUCKET_NAME)


#: Every output name above (not :data:`PIPELINE_STAGE`, which names a published pipeline).
NAMES = frozenset(
    {
        BUCKET_NAME,
        BUCKET_NAMES,
        BUCKET_SCOPE,
        QUEUE_URL,
        DEAD_LETTER_QUEUE_URL,
        EVENT_TARGET_DEAD_LETTER_QUEUE_URL,
        LEDGER_TABLE_NAME,
        FUNCTION_NAME,
        ARCHIVE_NAME,
        ARCHIVE_ARN,
        RULE_NAME,
        RULE_ARN,
        ALARM_TOPIC_ARN,
        DASHBOARD_NAME,
        INVENTORY_BUCKET_NAME,
        ATTESTATION_BUCKET_NAME,
        RECONCILE_FUNCTION_NAME,
        DRIFT_ALARM_NAME,
        DELIVERY_CHECK_FUNCTION_NAME,
        RECONCILE_STATE_MACHINE_ARN,
        BACKFILL_STATE_MACHINE_ARN,
        LISTING_BACKFILL_STATE_MACHINE_ARN,
        REPROCESS_STATE_MACHINE_ARN,
        BACKFILL_FUNCTION_NAME,
        BACKFILL_ROLE_ARN,
        REPORT_BUCKET_NAME,
        PROCESSOR_OUTPUT_BUCKET,
        PROCESSOR_NAMES,
        PROCESSOR_TARGETS,
        HOLD_PROCESSORS,
        PROCESSOR_INVOKER_ROLE_ARNS,
        PROCESSOR_FUNCTIONS,
        BUCKET_OWNERS,
        REMOTE_READ_ROLE_ARNS,
        LOG_KEY_SECRET_ARN,
        LOG_KEYS,
        CHANGE_BUS_NAME,
        CHANGE_BUS_ARN,
        CHANGE_ARCHIVE_NAME,
        CHANGE_AUDIT_LOG_GROUP_NAME,
        CHANGE_DEAD_LETTER_QUEUE_URL,
        CHANGE_RELAY_FUNCTION_NAME,
        HISTORY_WORK_GROUP,
        HISTORY_TABLE,
        HISTORY_DEAD_LETTER_QUEUE_URL,
        HISTORY_WRITER_FUNCTION_NAME,
        VERSION,
    }
)


def names() -> frozenset[str]:
    """Every output name this module declares (:data:`NAMES`)."""
    return NAMES
