"""The bucket a team's processor writes its outputs to (the example's sidecars)."""

from __future__ import annotations

from aws_cdk import aws_s3 as s3
from constructs import Construct

from s3ingest_cdk.constructs.landing_bucket import secure_bucket

#: Prefix of the output bucket's server access logs in the access-logs bucket.
ACCESS_LOGS_PREFIX = "processor-output/"


class ProcessorOutputBucket(Construct):
    """Where the processor (CONTRACT C11) writes: ``OUTPUT_BUCKET`` of the functions that run it.

    The defaults every bucket of the stack shares
    (:func:`s3ingest_cdk.constructs.landing_bucket.secure_bucket`: SSE-S3, all public access
    blocked, ACLs disabled, TLS 1.2 or later only, retained on stack deletion: its objects are the
    processor's results), not versioned (the processor rewrites an output idempotently, keyed by
    the change; its history is the ledger's), with server access logs under
    ``processor-output/`` in the stack's access-logs bucket. An adopted landing bucket has no
    access-logs bucket in the stack: this construct then makes its own.

    Attributes
    ----------
    access_logs_bucket : aws_cdk.aws_s3.IBucket
        Where its server access logs go (given, or made here).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        access_logs_bucket: s3.IBucket | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        if access_logs_bucket is None:
            access_logs_bucket = secure_bucket(
                self,
                "AccessLogs",
                versioned=False,
                access_logs_bucket=None,
                access_logs_prefix=None,
            )
        self.access_logs_bucket = access_logs_bucket
        self.bucket = secure_bucket(
            self,
            "Bucket",
            versioned=False,
            access_logs_bucket=access_logs_bucket,
            access_logs_prefix=ACCESS_LOGS_PREFIX,
        )
