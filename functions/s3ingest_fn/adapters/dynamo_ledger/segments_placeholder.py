"""PLACEHOLDER (drop at merge): a minimal :class:`DynamoLedgerSegments` so the reprocess run's
wiring, handlers, machine and CLI can be built and tested on the ``w-reprocess-infra`` branch
before the real adapter (``scan.py``, written on main) lands. Not the design of record: no
projection, no legacy-layout fast path, no retry beyond the SDK's.

The ledger by parallel Scan segments
(https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Scan.html#Scan.ParallelScan):
one Scan request per page, ``Segment`` of ``TotalSegments``, the cursor the JSON of
``LastEvaluatedKey``; counter items left out.
"""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from s3ingest_fn.adapters.dynamo_ledger.client import _transient
from s3ingest_fn.adapters.dynamo_ledger.codec import row_from_item
from s3ingest_fn.adapters.dynamo_ledger.layout import COUNTER_PREFIX, PARTITION_KEY
from s3ingest_fn.core.ports import SegmentPage


class DynamoLedgerSegments:
    """PLACEHOLDER (drop at merge) of the :class:`~s3ingest_fn.core.ports.LedgerSegments` port
    over one table."""

    def __init__(self, client: Any, table_name: str) -> None:
        self.client = client
        self.table_name = table_name

    def page(
        self, segment: int, total: int, cursor: str | None, *, prefix: str = "", limit: int = 500
    ) -> SegmentPage:
        """One Scan page of ``segment`` of ``total`` from ``cursor``, rows whose partition key
        starts with ``prefix``.

        Raises
        ------
        TransientError
            On throttling or a service error.
        """
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "Segment": segment,
            "TotalSegments": total,
            "Limit": limit,
        }
        if prefix:
            kwargs["FilterExpression"] = "begins_with(#pk, :prefix)"
            kwargs["ExpressionAttributeNames"] = {"#pk": PARTITION_KEY}
            kwargs["ExpressionAttributeValues"] = {":prefix": {"S": prefix}}
        if cursor is not None:
            kwargs["ExclusiveStartKey"] = json.loads(cursor)
        try:
            page = self.client.scan(**kwargs)
        except (ClientError, BotoCoreError) as exc:
            raise _transient(exc) from exc
        rows = [
            row_from_item(item)
            for item in page.get("Items", [])
            if not item[PARTITION_KEY]["S"].startswith(COUNTER_PREFIX)
        ]
        last = page.get("LastEvaluatedKey")
        return SegmentPage(rows, json.dumps(last, sort_keys=True) if last else None)
