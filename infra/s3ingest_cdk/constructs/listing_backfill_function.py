"""The listing backfill's step functions (plan, list_shard, summarize): their handlers, service
name and checkpoint prefix; each is a
:class:`~s3ingest_cdk.constructs.step_function.StepFunction`."""

from __future__ import annotations

from s3ingest_fn.contract import LISTING_SERVICE

#: The listing backfill's handlers (``s3ingest_fn.handlers.listing_backfill``).
PLAN_HANDLER = "s3ingest_fn.handlers.listing_backfill.plan"
LIST_SHARD_HANDLER = "s3ingest_fn.handlers.listing_backfill.list_shard"
SUMMARIZE_HANDLER = "s3ingest_fn.handlers.listing_backfill.summarize"
#: ``POWERTOOLS_SERVICE_NAME`` of the three.
LISTING_SERVICE_NAME = LISTING_SERVICE
#: Where the shards' checkpoints are kept in the checkpoint bucket
#: (``backfill-listing/<bucket>/<run>/<shard id>.json``).
CHECKPOINT_PREFIX = "backfill-listing/"
