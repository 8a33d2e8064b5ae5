"""s3ingest's CDK constructs (the ``cdk`` extra: ``pip install "s3ingest[cdk]"``).

``S3IngestPipeline`` is the whole pipeline as one construct for a team's own stack (its
``buckets`` prop takes ``BucketSpec`` and ``LandingBucketSource`` entries);
``enable_event_bridge`` turns on a created bucket's EventBridge delivery natively;
``server_access_logs`` logs a bucket to another under that one's bucket policy (no ACL, whatever
the app's feature flags);
``ProcessorConfig`` is one of its ``processors`` (a team's Lambda function, a deployed handler
or an in-process module); ``S3IngestStack`` is the stack ``app.py`` deploys around the pipeline.
``S3IngestSource`` (and its stack, ``S3IngestSourceStack``) is what the account of a bucket of
another account deploys for a central pipeline (``docs/organisation.md``).
``ChangeStreamForwarder`` sends a regional pipeline's change stream to one ``ChangeStreamHub``
bus in another Region (``ForwardedRegion`` names each forwarder for the hub's policy).
"""

from __future__ import annotations

from s3ingest.settings import BucketSpec, InventoryRef
from s3ingest_cdk.constructs.landing_bucket import (
    adopted_bucket,
    enable_event_bridge,
    server_access_logs,
)
from s3ingest_cdk.features.processors import ProcessorConfig
from s3ingest_cdk.forwarding import ChangeStreamForwarder, ChangeStreamHub, ForwardedRegion
from s3ingest_cdk.pipeline import LandingBucketSource, S3IngestPipeline
from s3ingest_cdk.source import S3IngestSource, S3IngestSourceStack

__all__ = [
    "BucketSpec",
    "ChangeStreamForwarder",
    "ChangeStreamHub",
    "ForwardedRegion",
    "InventoryRef",
    "LandingBucketSource",
    "ProcessorConfig",
    "S3IngestPipeline",
    "S3IngestSource",
    "S3IngestSourceStack",
    "adopted_bucket",
    "enable_event_bridge",
    "server_access_logs",
]
