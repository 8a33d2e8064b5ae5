"""The stack's constructs, one concern per module."""

from __future__ import annotations

from infra.constructs.event_routing import IngestRouting
from infra.constructs.ingest_function import IngestFunction
from infra.constructs.ingest_queue import IngestQueue
from infra.constructs.landing_bucket import LandingBucket
from infra.constructs.ledger_table import LedgerTable

__all__ = ["IngestFunction", "IngestQueue", "IngestRouting", "LandingBucket", "LedgerTable"]
