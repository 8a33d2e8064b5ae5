"""The estimate ``s3ingest onboard`` and ``s3ingest reprocess`` print before they start when the
ledger table's on-demand ramp binds (:mod:`s3ingest.floor`), on stderr. Best effort: a size the
operator's credentials cannot read (CloudWatch, DescribeTable) prints nothing."""

from __future__ import annotations

from typing import Any

from s3ingest import floor
from s3ingest.outputs import LEDGER_TABLE_NAME


def ledger(deployed: Any) -> tuple[int, int | None] | None:
    """The ledger's item count and warm write throughput, or None when unreadable."""
    from botocore.exceptions import BotoCoreError, ClientError

    table = deployed.outputs.get(LEDGER_TABLE_NAME)
    if not table:
        return None
    try:
        return floor.ledger_size(deployed.client("dynamodb"), table)
    except (BotoCoreError, ClientError):
        return None


def bucket_objects(deployed: Any, bucket: str) -> int | None:
    """The bucket's object count (S3's daily storage metric), or None when unreadable."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return floor.bucket_objects(deployed.client("cloudwatch"), bucket)
    except (BotoCoreError, ClientError):
        return None


def notice(console: Any, estimate: floor.Estimate | None) -> None:
    """Print ``estimate``'s lines when the ramp binds."""
    if estimate is not None and estimate.ramp_binds:
        for line in estimate.lines():
            console.print(line, markup=False, highlight=False)
