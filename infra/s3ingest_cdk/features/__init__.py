"""One construct per feature of the pipeline, each owning its functions, its grants and its
cdk-nag acknowledgements (next to the grant each one is about)."""

from __future__ import annotations

from s3ingest_cdk.features.backfill import Backfill
from s3ingest_cdk.features.change_stream import ChangeStream
from s3ingest_cdk.features.ingestion import Ingestion
from s3ingest_cdk.features.monitoring import Monitoring
from s3ingest_cdk.features.reconciliation import Reconciliation

__all__ = ["Backfill", "ChangeStream", "Ingestion", "Monitoring", "Reconciliation"]
