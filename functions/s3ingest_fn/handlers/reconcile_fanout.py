"""The fan-out reconciliation's step handler: one Lambda, dispatched on ``event["action"]``
(``plan``, ``shard_inventory``, ``shard_ledger``, ``diff_partition``, ``summarize``), invoked by
the reconcile state machine (see :mod:`s3ingest_fn.services.fanout`).

Environment: see :func:`s3ingest_fn.wiring.function_reconciler`. The bucket comes from the
event (:func:`~s3ingest_fn.services.fanout.bucket_of`: the machine's input ``{"bucket": B}``,
carried by the plan and its run id; default the pipeline's first bucket).

Attestation (issue 38): with ``"attest": true`` in the machine's input (the schedule sends it),
``ATTESTATION_BUCKET_NAME`` set and not a dry run, ``summarize`` attests the bucket from the
partitions' sorted runs (:func:`attest_fan_out`; :mod:`s3ingest_fn.services.attestation_fanout`)
as the single run's handler does (:mod:`s3ingest_fn.handlers.reconcile`), and returns its
summary under ``attestation``.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from s3ingest_fn import wiring
from s3ingest_fn.config import CHANGE_BUS_NAME, STACK_ENV, invocation_env
from s3ingest_fn.contract import RECONCILE_SERVICE
from s3ingest_fn.core.model import TransientError
from s3ingest_fn.handlers import resume
from s3ingest_fn.handlers.reconcile import (
    emit_behind_metrics,
    emit_differs,
    emit_summary_metrics,
    said_of,
)
from s3ingest_fn.handlers.telemetry import function_logger, invocation_metrics
from s3ingest_fn.services import attestation_store
from s3ingest_fn.services.fanout import FanOut, bucket_of
from s3ingest_fn.services.reconcile_run import ReconcileError

logger = function_logger(RECONCILE_SERVICE)

ACTIONS = ("plan", "shard_inventory", "shard_ledger", "diff_partition", "summarize")


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Lambda entry point (``s3ingest_fn.handlers.reconcile_fanout.handler``).

    Raises
    ------
    ValueError
        For an unknown action.
    """
    action = event.get("action")
    if action not in ACTIONS:
        raise ValueError(f"action must be one of {ACTIONS}, not {action!r}")
    fan_out = FanOut(wiring.function_reconciler(bucket_of(event)))
    if action == "plan" and not invocation_env().get(attestation_store.ATTESTATION_BUCKET_ENV):
        event = {**event, "attest": False}  # nowhere to keep it: the children write no runs
    result: dict[str, Any] = getattr(fan_out, action)(event)
    if action == "summarize":
        with invocation_metrics() as metrics:
            emit_summary_metrics(metrics, result)
        emit_behind_metrics(result.get("effects_behind_by_processor") or {})
        logger.info("reconciliation finished", extra=result)
        attested = attest_fan_out(fan_out, event, result)
        if attested is not None:
            result["attestation"] = attested
    return result


def attest_fan_out(
    fan_out: FanOut, event: dict[str, Any], summary: dict[str, Any]
) -> dict[str, Any] | None:
    """The run's attestation, when its plan attests (the schedule's ``{"attest": true}``, not
    a dry run, ``ATTESTATION_BUCKET_NAME`` set): once the repairs left the ingest queue (at
    most :data:`~s3ingest_fn.services.attestation_store.SETTLE_SECONDS`), merged from the
    partitions' runs (the repaired keys' rows read again by GetItem, nothing else), stored,
    logged, announced, ``attestation_differs`` emitted; its summary
    (:func:`~s3ingest_fn.services.attestation_store.summary`), or None.

    Raises
    ------
    AttestError
        When it cannot be made (the step fails, after the run's metrics).
    """
    env = invocation_env()
    store_bucket = env.get(attestation_store.ATTESTATION_BUCKET_ENV)
    if not (event.get("plan") or {}).get("attest") or not store_bucket:
        return None
    r = fan_out.r
    clients = wiring.function_clients()
    if summary["repairs_queued"] or summary["pending_effects"] or summary["effects_behind"]:
        depth = attestation_store.queue_depth(wiring.client(clients, "sqs"), r.queue_url)
        if not attestation_store.settle(depth):
            logger.warning("repairs still queued when attesting")
    ledger = wiring.ledger(wiring.client(clients, "dynamodb"), r.table, 0)
    try:
        made = fan_out.attestation(
            event, stack=env.get(STACK_ENV, ""), read_row=partial(ledger.get, r.bucket)
        )
        stored = attestation_store.store(made, wiring.client(clients, "s3"), store_bucket)
    except (TransientError, ReconcileError) as exc:
        logger.exception("attestation failed", extra={"bucket": r.bucket})
        raise attestation_store.AttestError(f"{r.bucket}: attestation: {exc}") from exc
    said = said_of(stored, env.get(CHANGE_BUS_NAME))
    emit_differs(int(not stored["document"]["equal"]))
    return said


#: the cold start ends with this module (see :mod:`s3ingest_fn.handlers`)
resume()
