"""``s3ingest reconcile``: compare the bucket with the ledger and queue repairs (rule C12)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from s3ingest_fn.services.reconcile import ReconcileRequest


def reconcile(
    reconciler: Any,
    *,
    source: str,
    prefix: str,
    dry_run: bool,
    manifest: str | None,
    margin_seconds: int | None,
    on_rows: Callable[[str, int], None] | None = None,
) -> dict[str, Any]:
    """One reconciliation of a deployed stack.

    Parameters
    ----------
    reconciler : s3ingest_fn.services.reconcile.Reconciler
        Bound to the stack's bucket, ledger and ingest queue.
    source : str
        ``inventory`` (the newest S3 Inventory report, or ``manifest``) or ``listing``.
    margin_seconds : int, optional
        Skip ledger rows changed this long before the snapshot (the reconciler's default
        when None).
    on_rows : callable, optional
        ``on_rows(phase, n)``: ``n`` more rows in ``phase`` (ledger, bucket, confirm, repair).

    Returns
    -------
    dict
        The reconciliation's report (``ReconcileReport.as_dict()``: figures, drift by kind,
        samples).
    """
    request = ReconcileRequest(
        source=source,
        prefix=prefix,
        dry_run=dry_run,
        manifest_key=manifest,
        margin_ms=margin_seconds * 1000 if margin_seconds is not None else None,
    )
    report: dict[str, Any] = reconciler.run(request, on_rows).as_dict()
    return report
