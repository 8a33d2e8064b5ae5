"""``s3ingest explain``: why the ledger says what it says of one key."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from s3ingest import operations
from s3ingest_fn.core.effects import EffectTarget


def explain_key(
    ledger: Any, objects: Any, bucket: str, key: str, targets: Sequence[EffectTarget] = ()
) -> dict[str, Any]:
    """The ledger row of ``bucket``/``key`` beside the bucket's current state, with a verdict,
    the last applied decisions and the processor effect's state, as
    :func:`s3ingest.operations.explain` returns it.

    Parameters
    ----------
    ledger : s3ingest_fn.adapters.dynamo_ledger.DynamoLedger
        Anything with ``get(bucket, key) -> row dict | None``.
    objects : s3ingest_fn.adapters.s3_objects.S3Objects
        Anything with ``current(bucket, key) -> ObjectState``.
    key : str
        The object key, decoded (as in the bucket).
    targets : sequence of EffectTarget
        The stack's processors (:meth:`s3ingest.deployed.DeployedStack.processor_targets`).
    """
    row = ledger.get(bucket, key)
    now = objects.current(bucket, key)
    return operations.explain(row, now, targets)
