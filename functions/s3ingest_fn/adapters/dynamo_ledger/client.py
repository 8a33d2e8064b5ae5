"""The DynamoDB client as the ledger adapter holds it: its type, and what its failures become."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from s3ingest_fn.core.model import TransientError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient  # pragma: no cover
else:
    DynamoDBClient = Any

__all__ = ["DynamoDBClient", "_transient"]


def _transient(exc: Exception) -> TransientError:
    """Every DynamoDB failure but a failed condition is retried; SQS redrive bounds the retries."""
    if isinstance(exc, ClientError):
        return TransientError(f"dynamodb: {exc.response.get('Error', {}).get('Code', 'unknown')}")
    return TransientError(f"dynamodb: {exc.__class__.__name__}")
