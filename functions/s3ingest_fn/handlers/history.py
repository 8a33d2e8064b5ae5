"""The history writer Lambda: change-bus events in (through SQS), Iceberg rows out.

Event shape in: the Lambda SQS event (``{"Records": [{"messageId", "body", ...}]}``), each body
an EventBridge event of the change bus (``{"source", "detail-type", "time", "detail"}``), which
a rule on the bus sends to the history queue. Shape out: the partial batch response
``{"batchItemFailures": [{"itemIdentifier": messageId}]}``
(https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-errorhandling.html).

Every record ends with one outcome (CONTRACT C9, logged and counted):

* ``applied``: a new row; ``duplicate``: its change key was in the table or earlier in the batch
  (a replay, a redrive, a relay retry);
* ``ignored``: an event of the bus that is not a change (an attestation);
* ``invalid``: never a row (not JSON, not the change stream's, a field missing): sent to the
  dead-letter queue with its reason when one is configured, else reported failed so that the
  queue's redrive policy moves it there after ``maxReceiveCount`` receives;
* ``retried``: the table could not be written (a commit refused too often, the catalog or
  storage failing): every valid record of the batch is reported failed and comes back.

The same function maintains the table when the stack's hourly schedule invokes it with
``{"maintenance": {"retentionHours": H}}`` (:func:`maintain`,
:mod:`s3ingest_fn.services.history_maintenance`); it returns the figures.

Environment: ``HISTORY_CATALOG``, ``HISTORY_TABLE``, ``HISTORY_LOCATION``
(:func:`s3ingest_fn.services.history.catalog_from_env`), ``DEAD_LETTER_QUEUE_URL`` (optional).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from s3ingest_fn.contract import HISTORY_SERVICE
from s3ingest_fn.core.model import TransientError
from s3ingest_fn.core.ports import DeadLetters
from s3ingest_fn.handlers import resume
from s3ingest_fn.handlers.telemetry import function_logger
from s3ingest_fn.services import history, history_maintenance

if TYPE_CHECKING:
    from pyiceberg.table import Table

logger = function_logger(HISTORY_SERVICE)

#: Outcomes of :func:`write_batch`, in the order they are reported.
OUTCOMES = ("applied", "duplicate", "ignored", "invalid", "retried")


def write_batch(
    table: Table,
    event: dict[str, Any],
    dead_letters: DeadLetters | None = None,
    *,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Write one SQS batch of change events to the history table.

    Parameters
    ----------
    table : pyiceberg Table
        The history table (:func:`s3ingest_fn.services.history.ensure_table`).
    event : dict
        The Lambda SQS event.
    dead_letters : DeadLetters, optional
        Where invalid records go with their reason (None: reported failed instead).
    now : datetime, optional
        The rows' ``written_time`` (default: the clock).

    Returns
    -------
    dict
        ``{"batchItemFailures": [...], "outcomes": {outcome: count}}``: the partial batch
        response, and each record's outcome counted.
    """
    written = now or datetime.now(UTC)
    failures: list[str] = []
    outcomes: Counter[str] = Counter()
    rows: list[tuple[str, dict[str, Any]]] = []
    for record in event.get("Records", []):
        message_id = str(record.get("messageId"))
        body = record.get("body")
        try:
            parsed = json.loads(body) if isinstance(body, str) else None
            row = history.row_from_event(parsed, written)  # type: ignore[arg-type]
        except Exception as exc:  # a record no row can be made of: classified, kept (C9)
            if isinstance(exc, history.InvalidChange):
                reason = str(exc)
            elif isinstance(exc, json.JSONDecodeError):
                reason = f"not JSON: {exc}"
            else:
                reason = f"{type(exc).__name__}: {exc}"
            outcomes["invalid"] += 1
            logger.error(
                "history: invalid record", extra={"message_id": message_id, "reason": reason}
            )
            if dead_letters is None:
                failures.append(message_id)
                continue
            try:
                dead_letters.send(str(body), "invalid-change", reason, message_id)
            except TransientError:
                failures.append(message_id)
            continue
        if row is None:
            outcomes["ignored"] += 1
            continue
        rows.append((message_id, row))
    if rows:
        try:
            result = history.write(table, [row for _, row in rows])
        except Exception as exc:  # the catalog, the storage or the commit: all come back
            logger.warning("history: write failed; the batch is retried", extra={"error": str(exc)})
            outcomes["retried"] += len(rows)
            failures.extend(message_id for message_id, _ in rows)
        else:
            outcomes["applied"] += len(result.added)
            outcomes["duplicate"] += len(result.duplicates)
            logger.info(
                "history: batch written",
                extra={
                    "added": len(result.added),
                    "duplicates": len(result.duplicates),
                    "commits": result.commits,
                    "retries": result.retries,
                },
            )
    return {
        "batchItemFailures": [{"itemIdentifier": m} for m in failures],
        "outcomes": {k: outcomes[k] for k in OUTCOMES if outcomes[k]},
    }


#: The key of a maintenance event (the schedule's input).
MAINTENANCE = "maintenance"


def maintain(
    table: Table, event: Mapping[str, Any], *, now: datetime | None = None
) -> dict[str, Any]:
    """Maintain the history table as ``event`` asks
    (:func:`s3ingest_fn.services.history_maintenance.run`); returns the figures, also logged.

    Raises
    ------
    ValueError
        ``retentionHours`` not a positive integer, or a table that retries refused commits.
    """
    figures = history_maintenance.run(table, event, now=now)
    logger.info("history: table maintained", extra=figures)
    return figures


#: The history table of each environment (catalog, table, location), loaded (or created) once
#: per container.
_TABLES: dict[tuple[str, str, str], Table] = {}


def table_of(env: Mapping[str, str]) -> Table:
    """The history table ``env`` names (:func:`s3ingest_fn.services.history.catalog_from_env`),
    refreshed to its newest snapshot."""
    names = (history.HISTORY_CATALOG, history.HISTORY_TABLE, history.HISTORY_LOCATION)
    key = (env.get(names[0], ""), env.get(names[1], ""), env.get(names[2], ""))
    if key not in _TABLES:
        catalog, identifier, location = history.catalog_from_env(env)
        _TABLES[key] = history.ensure_table(catalog, identifier, location)
    return _TABLES[key].refresh()


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Lambda entry point (``s3ingest_fn.handlers.history.handler``)."""
    from s3ingest_fn import wiring
    from s3ingest_fn.config import invocation_env
    from s3ingest_fn.config_roles import HistoryConfig

    config = wiring.function_config(HistoryConfig)
    if MAINTENANCE in event:  # the hourly schedule
        return maintain(table_of(invocation_env()), event)
    dead_letters = wiring.function_change_dead_letters(config.dead_letter_queue_url)
    response = write_batch(table_of(invocation_env()), event, dead_letters)
    return {"batchItemFailures": response["batchItemFailures"]}


#: the cold start ends with this module (see :mod:`s3ingest_fn.handlers`)
resume()
