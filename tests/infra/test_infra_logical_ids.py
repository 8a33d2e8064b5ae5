"""Stateful resources keep their logical ids: a changed id on the retained ledger table (or a
bucket, queue, archive, log group, key) deploys a new, empty resource beside the old one. A
redesign that moves constructs must keep these, or document the migration and update this pin.
"""

from __future__ import annotations

import pytest

from s3ingest_cdk.synth import Synth

#: Resource types whose replacement loses data or history.
STATEFUL = (
    "AWS::DynamoDB::Table",
    "AWS::S3::Bucket",
    "AWS::SQS::Queue",
    "AWS::Events::Archive",
    "AWS::Logs::LogGroup",
    "AWS::KMS::Key",
)

#: The listing backfill's (every stack has it since the listing engine, issue 15).
LISTING_LOG_GROUPS = {
    "ListingPlanLogGroupF893FD67",
    "ListingShardLogGroupDE165AC2",
    "ListingSummarizeLogGroup13CF2A7B",
    "ListingStateMachineLogGroup39CC2797",
}
LISTING_KEY = "ListingStateMachineLogKeyCFAAEECD"
#: The reprocess run's (every stack has it since issue 27; new resources, no id moved).
REPROCESS_LOG_GROUPS = {
    "ReprocessPlanLogGroup7B1851DB",
    "ReprocessSegmentLogGroup3418A351",
    "ReprocessSummarizeLogGroupFB4DD710",
    "ReprocessStateMachineLogGroup560A003C",
}
REPROCESS_KEY = "ReprocessStateMachineLogKeyA6584AD7"

DEFAULT = {
    "AWS::DynamoDB::Table": {"LedgerTable9343E4AA"},
    "AWS::S3::Bucket": {
        "LandingAccessLogs6572851C",
        "LandingBucket6D60388F",
        "LandingInventory7B5D04BF",
    },
    "AWS::SQS::Queue": {
        "IngestDeadLetterQueueE8016E9B",
        "IngestQueue95F6DB49",
        "RoutingTargetDeadLetterQueueFEC4F13F",
    },
    "AWS::Events::Archive": {"RoutingArchive0E233778"},
    "AWS::Logs::LogGroup": {
        "BackfillControlFunctionLogGroup01E9C3F1",
        "BackfillFunctionLogGroup562AB7B0",
        "BackfillStateMachineLogGroupE77A5D56",
        "DeliveryCheckLogGroup72395482",
        "IngestFunctionLogGroup8E264078",
        "ReconcileFunctionLogGroupAF84F3A2",
    }
    | LISTING_LOG_GROUPS
    | REPROCESS_LOG_GROUPS,
    "AWS::KMS::Key": {
        "AlarmTopicKeyBA1A4AA7",
        "BackfillStateMachineLogKeyA72112A3",
        LISTING_KEY,
        REPROCESS_KEY,
    },
}

#: The variant with every option (fan-out, distributed-map backfill, processor, change stream,
#: history table).
EVERY_OPTION = {
    "AWS::DynamoDB::Table": {"LedgerTable9343E4AA"},
    "AWS::S3::Bucket": DEFAULT["AWS::S3::Bucket"] | {"ProcessorOutputBucket4330C209"},
    "AWS::SQS::Queue": DEFAULT["AWS::SQS::Queue"]
    | {
        "ChangeRelayDeadLetterQueue81CC1262",
        "HistoryDeadLetterQueue764C6AA2",
        "HistoryQueueF72F1452",
    },
    "AWS::Events::Archive": {"RoutingArchive0E233778", "ChangeBusArchive9E9DC90D"},
    "AWS::Logs::LogGroup": {
        "BackfillControlFunctionLogGroup01E9C3F1",
        "BackfillStateMachineLogGroupE77A5D56",
        "ChangeBusAuditLog76F612C0",
        "ChangeRelayLogGroup5528582F",
        "DeliveryCheckLogGroup72395482",
        "HistoryHistoryWriterLogGroup64069B10",
        "IngestFunctionLogGroup8E264078",
        "ReconcileFanOutFunctionLogGroup311CB7EC",
        "ReconcileFunctionLogGroupAF84F3A2",
        "ReconcileStateMachineLogGroup4DA15176",
    }
    | LISTING_LOG_GROUPS
    | REPROCESS_LOG_GROUPS,
    "AWS::KMS::Key": DEFAULT["AWS::KMS::Key"] | {"ReconcileStateMachineLogKeyEABF921F"},
}


@pytest.mark.parametrize("resource_type", STATEFUL)
def test_stateful_logical_ids_are_pinned(
    synth: Synth, fanout_synth: Synth, resource_type: str
) -> None:
    assert set(synth.resources(resource_type)) == DEFAULT[resource_type]
    assert set(fanout_synth.resources(resource_type)) == EVERY_OPTION[resource_type]
