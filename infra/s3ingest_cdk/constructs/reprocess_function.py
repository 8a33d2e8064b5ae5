"""The reprocess run's step functions (plan, segment, summarize): their handlers, service name
and checkpoint prefix; each is a :class:`~s3ingest_cdk.constructs.step_function.StepFunction`."""

from __future__ import annotations

from s3ingest_fn.contract import REPROCESS_SERVICE

#: The reprocess run's handlers (``s3ingest_fn.handlers.reprocess``).
PLAN_HANDLER = "s3ingest_fn.handlers.reprocess.plan"
SEGMENT_HANDLER = "s3ingest_fn.handlers.reprocess.segment"
SUMMARIZE_HANDLER = "s3ingest_fn.handlers.reprocess.summarize"
#: ``POWERTOOLS_SERVICE_NAME`` of the three.
REPROCESS_SERVICE_NAME = REPROCESS_SERVICE
#: Where a run's plan and its segments' checkpoints are kept in the checkpoint bucket
#: (``reprocess/<run>/plan.json``, ``reprocess/<run>/<segment>.json``;
#: :data:`s3ingest_fn.services.reprocess.CHECKPOINT_PREFIX`).
CHECKPOINT_PREFIX = "reprocess/"
