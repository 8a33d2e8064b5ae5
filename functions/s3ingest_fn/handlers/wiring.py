"""What the handlers build from their environment at cold start, once per process.

One builder per dependency, shared by every handler that needs it (the backfill steps use the
ingest decision logic and the reconciliation reader alike). Imports happen inside the builders,
so importing a handler module stays cheap (``bench/`` measures it).
"""

from __future__ import annotations

import os
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from s3ingest_fn.ingest import IngestService
    from s3ingest_fn.processing import FunctionSettings
    from s3ingest_fn.reconcile.service import Reconciler


@cache
def function_settings() -> FunctionSettings:
    """The ingest-side environment, validated (see :class:`FunctionSettings`).

    Raises
    ------
    ValueError
        Naming every missing or malformed variable.
    """
    from s3ingest_fn.processing import FunctionSettings

    return FunctionSettings.from_env()


@cache
def ingest_service() -> IngestService:
    """The ingest decision logic over the ledger (``LEDGER_TABLE_NAME``,
    ``TOMBSTONE_TTL_SECONDS``) and the landing bucket (``BUCKET_NAME``), with the team's
    processor when ``PROCESSOR`` names one (``package.module:function``, CONTRACT C11).

    Raises
    ------
    ValueError
        When the environment is incomplete or the processor cannot be imported.
    """
    import boto3

    from s3ingest_fn.bucket import S3Objects
    from s3ingest_fn.ingest import IngestService
    from s3ingest_fn.ledger import DynamoLedger

    settings = function_settings()
    s3 = boto3.client("s3")
    effects = None
    if os.environ.get("PROCESSOR"):
        from s3ingest_fn.effects import EffectRunner, load_processor

        effects = EffectRunner(load_processor(os.environ["PROCESSOR"]), s3)
    return IngestService(
        ledger=DynamoLedger(
            boto3.client("dynamodb"), settings.ledger_table_name, settings.tombstone_ttl_seconds
        ),
        bucket=S3Objects(s3),
        scope_bucket=settings.bucket_name,
        effects=effects,
    )


@cache
def reconciler() -> Reconciler:
    """Reconciliation over ``LEDGER_TABLE_NAME``, ``INGEST_QUEUE_URL``, ``BUCKET_NAME``,
    ``INVENTORY_BUCKET_NAME`` and ``INVENTORY_PREFIX``.

    Raises
    ------
    ValueError
        Naming every missing variable.
    """
    import boto3

    from s3ingest_fn.reconcile.service import Reconciler

    required = ("LEDGER_TABLE_NAME", "INGEST_QUEUE_URL", "BUCKET_NAME")
    missing = [name for name in required if not os.environ.get(name)]
    if missing:
        raise ValueError("reconcile function misconfigured: missing " + ", ".join(missing))
    return Reconciler(
        s3=boto3.client("s3"),
        dynamodb=boto3.client("dynamodb"),
        sqs=boto3.client("sqs"),
        bucket=os.environ["BUCKET_NAME"],
        table=os.environ["LEDGER_TABLE_NAME"],
        queue_url=os.environ["INGEST_QUEUE_URL"],
        inventory_bucket=os.environ.get("INVENTORY_BUCKET_NAME") or None,
        inventory_prefix=os.environ.get("INVENTORY_PREFIX", ""),
    )
