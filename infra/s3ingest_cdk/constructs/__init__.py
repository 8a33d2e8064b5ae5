"""The stack's constructs, one concern per module."""

from __future__ import annotations

from s3ingest_cdk.constructs.alarm_topic import AlarmTopic
from s3ingest_cdk.constructs.backfill_state_machine import BackfillStateMachine
from s3ingest_cdk.constructs.batch_operations_role import BatchOperationsRole
from s3ingest_cdk.constructs.change_bus import ChangeBus
from s3ingest_cdk.constructs.drift_alarm import DriftAlarm
from s3ingest_cdk.constructs.event_routing import IngestRouting
from s3ingest_cdk.constructs.function import RoleFunction
from s3ingest_cdk.constructs.ingest_queue import IngestQueue
from s3ingest_cdk.constructs.landing_bucket import LandingBucket
from s3ingest_cdk.constructs.ledger_table import LedgerTable
from s3ingest_cdk.constructs.operational_alarms import OperationalAlarms
from s3ingest_cdk.constructs.operations_dashboard import OperationsDashboard
from s3ingest_cdk.constructs.processor_output_bucket import ProcessorOutputBucket
from s3ingest_cdk.constructs.reconcile_schedule import ReconcileSchedule
from s3ingest_cdk.constructs.reconcile_state_machine import ReconcileStateMachine

__all__ = [
    "AlarmTopic",
    "BackfillStateMachine",
    "BatchOperationsRole",
    "ChangeBus",
    "DriftAlarm",
    "IngestQueue",
    "IngestRouting",
    "LandingBucket",
    "LedgerTable",
    "OperationalAlarms",
    "OperationsDashboard",
    "ProcessorOutputBucket",
    "ReconcileSchedule",
    "ReconcileStateMachine",
    "RoleFunction",
]
