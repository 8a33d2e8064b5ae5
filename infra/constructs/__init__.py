"""The stack's constructs, one concern per module."""

from __future__ import annotations

from infra.constructs.drift_alarm import DriftAlarm
from infra.constructs.event_routing import IngestRouting
from infra.constructs.ingest_function import IngestFunction
from infra.constructs.ingest_queue import IngestQueue
from infra.constructs.landing_bucket import LandingBucket
from infra.constructs.ledger_table import LedgerTable
from infra.constructs.reconcile_function import ReconcileFunction
from infra.constructs.reconcile_schedule import ReconcileSchedule
from infra.constructs.reconcile_state_machine import ReconcileStateMachine

__all__ = [
    "DriftAlarm",
    "IngestFunction",
    "IngestQueue",
    "IngestRouting",
    "LandingBucket",
    "LedgerTable",
    "ReconcileFunction",
    "ReconcileSchedule",
    "ReconcileStateMachine",
]
