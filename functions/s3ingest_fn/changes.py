"""Where the CDK stack (``infra/s3ingest_cdk/stack.py``) imports the change stream's event source
filter from; defined by the ledger adapter (it names a row attribute)."""

from s3ingest_fn.adapters.dynamo_ledger import STREAM_FILTER

__all__ = ["STREAM_FILTER"]
