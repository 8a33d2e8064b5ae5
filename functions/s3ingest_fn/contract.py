"""Names shared by the functions, the stack and the CLI: telemetry and function environment.

The stack (``infra``) builds its alarms, dashboard and grants from these, the handlers emit
under them and the CLI queries them, so the three cannot drift apart. Pure constants: importing
this module loads nothing else.
"""

from __future__ import annotations

#: CloudWatch namespace of every metric the functions emit (Powertools Metrics, EMF).
METRICS_NAMESPACE = "S3Ingest"
#: The ``service`` dimension Powertools Metrics adds to every metric.
METRICS_SERVICE = "s3ingest"
#: The dimension naming the stack that emitted a metric: stages in one account (dev, prod)
#: never share a series, so one stage's alarm cannot fire on another's data.
STACK_DIMENSION = "stack"
#: Environment variable holding the stack name, set by the stack on every function.
STACK_ENV = "S3INGEST_STACK"
#: The dimension naming the landing bucket of a per-bucket count (beside ``stack``): the
#: ingest outcomes are also counted per bucket under ``{service, stack, bucket}``.
BUCKET_DIMENSION = "bucket"
#: The dimension of the per-processor effect counts (``effect_done``, ``effect_failed``, ...).
PROCESSOR_DIMENSION = "processor"
#: Rows behind a processor a reconciliation counted (dimension ``PROCESSOR_DIMENSION``).
EFFECTS_BEHIND_PROCESSOR_METRIC = "effects_behind_processor"
#: The ``bucket`` dimension's value for a record of a bucket that is not one of the stack's
#: (a replayed or redriven event of another bucket, ``ignored: out-of-scope``): one series for
#: all of them, however many such buckets there are.
OTHER_BUCKET = "(other)"

#: End-to-end lag of a live event, S3 event time to the record's ledger decision, milliseconds.
LAG_METRIC = "ingest_lag_ms"
#: 1 each time a reconciliation run completes (the heartbeat alarm watches for its absence).
RECONCILE_HEARTBEAT_METRIC = "reconcile_completed"
#: Processor effects held for review found by a reconciliation run (``docs/hold.md``).
HELD_EFFECTS_METRIC = "held_effects"
#: The scheduled reconciliation's buckets whose attestation, made after the run's repairs, has
#: differing roots (issue 38); the attestation alarm watches it.
ATTESTATION_DIFFERS_METRIC = "attestation_differs"
#: The oldest held change's age when a reconciliation run read it, seconds (0: none held); the
#: held-changes alarm watches it.
HELD_OLDEST_METRIC = "held_oldest_seconds"
#: 1 when the bucket's EventBridge delivery is on, 0 when off (the scheduled delivery check).
DELIVERY_METRIC = "eventbridge_delivery_enabled"
#: Reserved key prefix of ``s3ingest verify``'s canary objects: ingested like any key, never
#: handed to a processor; their change events are published (verify awaits them), so change-bus
#: subscribers may filter this prefix out.
CANARY_PREFIX = "_s3ingest-canary/"
#: Where attestations go in the stack's bucket: ``<ATTESTATION_ROOT>/<bucket>/<snapshot>.json``
#: and its leaves (docs/attestation.md); the reconcile function's role may write under it only.
ATTESTATION_ROOT = "attestations"
#: The reconcile function's variable naming the bucket its scheduled attestations go to.
ATTESTATION_BUCKET_ENV = "ATTESTATION_BUCKET_NAME"
#: The change bus's ``detail-type`` of an attestation (the scheduled reconciliation's event).
ATTESTATION_DETAIL_TYPE = "Attestation Made"
#: The ``service`` of each function's logs: its ``POWERTOOLS_SERVICE_NAME`` (set by the stack)
#: and its handler's Powertools Logger (:func:`s3ingest_fn.handlers.telemetry.function_logger`).
INGEST_SERVICE = "s3ingest"
CHANGE_RELAY_SERVICE = "s3ingest"
RECONCILE_SERVICE = "s3ingest-reconcile"
BACKFILL_SERVICE = "s3ingest-backfill"
LISTING_SERVICE = "s3ingest-backfill-listing"
REPROCESS_SERVICE = "s3ingest-reprocess"
DELIVERY_CHECK_SERVICE = "s3ingest-delivery-check"
BUCKET_SETUP_SERVICE = "s3ingest-bucket-setup"
PROCESSOR_SERVICE = "s3ingest-processor"
HISTORY_SERVICE = "s3ingest-history"
#: The deployed catalog's properties: Glue, no botocore retry of a call. A commit whose
#: ``UpdateTable`` answer was lost and retried would be refused as a concurrent change, and
#: pyiceberg would then delete the files of a commit that landed; without the retry the error
#: is not a refused commit, the files stay, and SQS's retry finds the rows written.
HISTORY_GLUE_CATALOG: dict[str, object] = {"type": "glue", "glue.max-retries": 0}
#: The reprocess run's counts, per processor (``PROCESSOR_DIMENSION``): ``reprocess_<count>``
#: for each count a segment call added (``run``, ``failed``, ``superseded``, ...;
#: :data:`s3ingest_fn.services.reprocess.COUNTS`), :data:`REPROCESS_RUN_METRIC` and
#: :data:`REPROCESS_FAILED_METRIC` among them.
REPROCESS_METRIC_PREFIX = "reprocess_"
#: Effects a reprocess run ran and committed (``done``), per processor.
REPROCESS_RUN_METRIC = "reprocess_run"
#: Effects a reprocess run's processor raised on (left pending), per processor.
REPROCESS_FAILED_METRIC = "reprocess_failed"
#: Keys a finished reprocess run left behind (its ``failed`` keys: their effects stay
#: pending), emitted by the run's summary with the stack's dimensions only (0 when none); the
#: reprocess alarm fires on a run that ends with keys behind.
REPROCESS_KEYS_BEHIND_METRIC = "reprocess_keys_behind"
#: Backfill tasks whose row is in the ledger while a processor's effect failed after it.
BACKFILL_EFFECTS_PENDING_METRIC = "backfill_effects_pending"
#: Environment variable naming the buckets the delivery check reads (comma-separated).
DELIVERY_BUCKETS_ENV = "DELIVERY_CHECK_BUCKETS"


def metric_dimensions(stack_name: str) -> dict[str, str]:
    """The dimensions of every metric the stack ``stack_name``'s functions emit."""
    return {"service": METRICS_SERVICE, STACK_DIMENSION: stack_name}
