"""``s3ingest history QUERY``: a named query of the history table (:mod:`s3ingest.history_queries`),
locally by duckdb over the table's scan, deployed by Athena in the stack's workgroup; and
``s3ingest history maintain``: the table's maintenance
(:mod:`s3ingest_fn.services.history_maintenance`), locally on the local table, deployed by the
history writer the stack's schedule also invokes.

Result shape (both): ``{"query", "columns": [...], "rows": [{column: value}, ...]}``; times are
datetimes (UTC), counts and milliseconds numbers.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from s3ingest import outputs as output
from s3ingest.history_queries import QUERIES, Query

__all__ = [
    "HistoryQueryFailed",
    "HistoryUnavailable",
    "maintain_deployed",
    "maintain_local",
    "query_athena",
    "query_local",
]

#: The stack outputs the deployed queries need (``historyTable``): the Athena workgroup, and
#: the table as ``database.table`` in the Glue catalog.
HISTORY_WORKGROUP_OUTPUT = output.HISTORY_WORK_GROUP
HISTORY_TABLE_OUTPUT = output.HISTORY_TABLE
#: The history writer, which maintains the table when invoked with a maintenance event.
HISTORY_WRITER_OUTPUT = output.HISTORY_WRITER_FUNCTION_NAME
#: Seconds to wait for the deployed maintenance (the writer's timeout is 300 s).
MAINTAIN_READ_TIMEOUT = 330


class HistoryQueryFailed(RuntimeError):
    """Raised when a deployed query fails, is cancelled or does not end in time."""


class HistoryUnavailable(RuntimeError):
    """No history table to query (none locally, or a stack without ``historyTable``)."""


def _query(name: str) -> Query:
    if name not in QUERIES:
        raise ValueError(f"unknown query {name!r} (one of {', '.join(QUERIES)})")
    return QUERIES[name]


def query_local(
    name: str, values: Mapping[str, Any], directory: Path | None = None
) -> dict[str, Any]:
    """Run query ``name`` with ``values`` (``key``, ``bucket``, ``prefix``, ``since``,
    ``processor``) by duckdb over the local history table (the run directory's ``history/``,
    or ``directory``).

    Raises
    ------
    HistoryUnavailable
        No local history table (or pyiceberg and duckdb not installed: the ``history`` extra).
    ValueError
        An unknown query, or a value it needs missing.
    """
    query = _query(name)
    arguments = query.arguments(values)
    table = _local_table("s3ingest history --local", directory)
    import duckdb

    arrow = table.scan().to_arrow()
    with duckdb.connect() as con:
        con.execute("SET TimeZone = 'UTC'")
        con.register("history", arrow)
        cursor = con.execute(query.render("history", "duckdb"), arguments)
        columns = [d[0] for d in cursor.description or []]
        rows = [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]
    return {"query": name, "columns": columns, "rows": [_utc(r) for r in rows]}


def _local_table(command: str, directory: Path | None) -> Any:
    """The local history table (pyiceberg ``Table``) for ``command``.

    Raises
    ------
    HistoryUnavailable
        The ``history`` extra missing, or no local table.
    """
    from s3ingest import extras

    try:
        extras.require("history", command)
    except extras.MissingExtraError as exc:
        raise HistoryUnavailable(str(exc)) from None
    from s3ingest.local.stack.history import local_table

    try:
        return local_table(directory)
    except LookupError as exc:
        raise HistoryUnavailable(str(exc)) from None


def _maintenance_event(retention_hours: int) -> dict[str, Any]:
    if isinstance(retention_hours, bool) or retention_hours < 1:
        raise ValueError(f"--retention-hours must be at least 1, not {retention_hours}")
    return {"maintenance": {"retentionHours": retention_hours}}


def maintain_local(retention_hours: int, directory: Path | None = None) -> dict[str, Any]:
    """Maintain the local history table (the run directory's ``history/``, or ``directory``)
    with what the history writer runs on a maintenance event
    (:func:`s3ingest_fn.services.history_maintenance.run`). Returns its figures
    (:class:`~s3ingest_fn.services.history_maintenance.Maintained`).

    Raises
    ------
    HistoryUnavailable
        No local history table (or the ``history`` extra missing).
    ValueError
        ``retention_hours`` below 1, or a table that retries refused commits.
    """
    event = _maintenance_event(retention_hours)
    table = _local_table("s3ingest history maintain --local", directory)
    from s3ingest_fn.services.history_maintenance import run

    return run(table, event)


def maintain_deployed(
    lambda_client: Any, outputs: Mapping[str, str], retention_hours: int
) -> dict[str, Any]:
    """Invoke the stack's history writer (output ``HistoryWriterFunctionName``) with a
    maintenance event, synchronously (``lambda_client`` should wait
    :data:`MAINTAIN_READ_TIMEOUT` seconds and not retry;
    https://docs.aws.amazon.com/lambda/latest/api/API_Invoke.html). Returns its figures.

    Raises
    ------
    HistoryUnavailable
        The stack has no history writer output.
    HistoryQueryFailed
        The function failed (its error message).
    """
    event = _maintenance_event(retention_hours)
    name = outputs.get(HISTORY_WRITER_OUTPUT)
    if not name:
        raise HistoryUnavailable(
            f"the stack has no history writer (output {HISTORY_WRITER_OUTPUT} missing): deploy "
            "it with historyTable: true"
        )
    response = lambda_client.invoke(
        FunctionName=name, InvocationType="RequestResponse", Payload=json.dumps(event).encode()
    )
    payload = json.loads(response["Payload"].read() or b"null")
    if response.get("FunctionError") or not isinstance(payload, dict):
        message = payload.get("errorMessage") if isinstance(payload, dict) else payload
        raise HistoryQueryFailed(f"history maintenance by {name} failed: {message}")
    return payload


def _utc(row: dict[str, Any]) -> dict[str, Any]:
    return {
        k: v.astimezone(UTC) if isinstance(v, datetime) and v.tzinfo else v for k, v in row.items()
    }


def _literal(value: Any) -> str:
    """An Athena execution parameter: a quoted string literal."""
    return "'" + str(value).replace("'", "''") + "'"


def query_athena(
    athena: Any,
    outputs: Mapping[str, str],
    name: str,
    values: Mapping[str, Any],
    *,
    poll_seconds: float = 1.0,
    timeout_seconds: float = 300.0,
) -> dict[str, Any]:
    """Run query ``name`` in the stack's Athena workgroup (StartQueryExecution with execution
    parameters, GetQueryExecution until it ends, GetQueryResults;
    https://docs.aws.amazon.com/athena/latest/APIReference/API_StartQueryExecution.html).

    Raises
    ------
    HistoryUnavailable
        The stack has no history table (outputs ``HistoryWorkGroup``, ``HistoryTable``).
    HistoryQueryFailed
        The query failed or was cancelled (Athena's reason), or did not end in time.
    """
    query = _query(name)
    arguments = query.arguments(values)
    workgroup, table = outputs.get(HISTORY_WORKGROUP_OUTPUT), outputs.get(HISTORY_TABLE_OUTPUT)
    if not workgroup or not table:
        raise HistoryUnavailable(
            f"the stack has no history table (outputs {HISTORY_WORKGROUP_OUTPUT} and "
            f"{HISTORY_TABLE_OUTPUT} missing): deploy it with historyTable: true"
        )
    quoted = ".".join(f'"{part}"' for part in table.split(".", 1))
    started = athena.start_query_execution(
        QueryString=query.render(quoted, "athena"),
        WorkGroup=workgroup,
        ExecutionParameters=[_literal(a) for a in arguments],
    )
    execution_id = started["QueryExecutionId"]
    deadline = time.monotonic() + timeout_seconds
    while True:
        status = athena.get_query_execution(QueryExecutionId=execution_id)["QueryExecution"][
            "Status"
        ]
        if status["State"] == "SUCCEEDED":
            break
        if status["State"] in ("FAILED", "CANCELLED"):
            reason = status.get("StateChangeReason", "")
            raise HistoryQueryFailed(f"Athena query {execution_id} {status['State']}: {reason}")
        if time.monotonic() > deadline:
            raise HistoryQueryFailed(
                f"Athena query {execution_id} did not end in {timeout_seconds} s"
            )
        time.sleep(poll_seconds)
    columns: list[str] = []
    rows: list[dict[str, Any]] = []
    for page in athena.get_paginator("get_query_results").paginate(QueryExecutionId=execution_id):
        result = page["ResultSet"]
        if not columns:
            columns = [c["Name"] for c in result["ResultSetMetadata"]["ColumnInfo"]]
        for row in result["Rows"]:
            cells = [d.get("VarCharValue") for d in row["Data"]]
            if cells == columns:  # the header row Athena returns first
                continue
            rows.append(dict(zip(columns, cells, strict=False)))
    return {"query": name, "columns": columns, "rows": rows}
