"""The stack's constructs, one concern per module."""

from __future__ import annotations

from infra.constructs.alarm_topic import AlarmTopic
from infra.constructs.backfill_control_function import BackfillControlFunction
from infra.constructs.backfill_function import BackfillFunction
from infra.constructs.backfill_state_machine import BackfillStateMachine
from infra.constructs.batch_operations_role import BatchOperationsRole
from infra.constructs.change_bus import ChangeBus
from infra.constructs.change_relay_function import ChangeRelayFunction
from infra.constructs.drift_alarm import DriftAlarm
from infra.constructs.event_routing import IngestRouting
from infra.constructs.ingest_function import IngestFunction
from infra.constructs.ingest_queue import IngestQueue
from infra.constructs.landing_bucket import LandingBucket
from infra.constructs.ledger_table import LedgerTable
from infra.constructs.operational_alarms import OperationalAlarms
from infra.constructs.operations_dashboard import OperationsDashboard
from infra.constructs.processor_output_bucket import ProcessorOutputBucket
from infra.constructs.reconcile_function import ReconcileFunction
from infra.constructs.reconcile_schedule import ReconcileSchedule
from infra.constructs.reconcile_state_machine import ReconcileStateMachine

__all__ = [
    "AlarmTopic",
    "BackfillControlFunction",
    "BackfillFunction",
    "BackfillStateMachine",
    "BatchOperationsRole",
    "ChangeBus",
    "ChangeRelayFunction",
    "DriftAlarm",
    "IngestFunction",
    "IngestQueue",
    "IngestRouting",
    "LandingBucket",
    "LedgerTable",
    "OperationalAlarms",
    "OperationsDashboard",
    "ProcessorOutputBucket",
    "ReconcileFunction",
    "ReconcileSchedule",
    "ReconcileStateMachine",
]
