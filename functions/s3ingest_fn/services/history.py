"""The history table: every change on the change stream as a row of an Apache Iceberg table.

Rows come from the change bus's events (:mod:`s3ingest_fn.services.changes`): an applied
change (``Object Ingested`` / ``Object Tombstoned``), a hold policy's decision (``Object
Held``, ``Change Approved``, ``Change Rejected``) and a processor's effect done (``Effect Done``,
``source`` ``s3ingest.effects``). Each row has a **change key** that is the same for every
delivery of one change and different for any two changes:

* an applied change: its change id (``detail.id``, deterministic per ledger write);
* a review: ``<held change id>/<action>/<processor>`` (the held change's id is shared by its
  hold and its decisions; one hold per processor of a change);
* an effect done: ``<change id>/done/<processor>/<version>`` (one row per processor version
  that completed the change).

**Exactly once.** :func:`write` drops keys the batch repeats, reads which of the batch's keys
the table already holds (a scan filtered by the keys and the rows' days, so only the days'
files are read) and appends the rest, in one Iceberg commit. The commit is optimistic: a
concurrent writer's commit in between makes it fail (``CommitFailedException``), and
:func:`write` reloads the table and does it again, so two writers of one change add one row.
pyiceberg's own retry of a refused commit (table property ``commit.retry.num-retries``, 4 by
default) would append the same rows again without that check: the table is kept at 0
(:data:`TABLE_PROPERTIES`, set by :func:`ensure_table` and checked by :func:`write`).
A replayed window, a redriven message or a relay retry adds nothing.

The table (:func:`table_schema`) is partitioned by ``event_date``, the UTC day of ``event_time``
(the change's applied time, or the review's): an identity partition on a column of its own,
which needs no transform at write time (pyiceberg writes a ``day()`` transform only with its
native ``pyiceberg-core`` extension) and prunes the same in Athena and duckdb. The catalog is
pyiceberg's: a SQLite ``sql`` catalog locally, ``glue`` deployed (:func:`catalog_from_env`);
the code is the same.
https://py.iceberg.apache.org/api/
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from s3ingest_fn.config import HISTORY_CATALOG, HISTORY_LOCATION, HISTORY_TABLE

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog
    from pyiceberg.schema import Schema
    from pyiceberg.table import DataScan, Table

__all__ = [
    "APPLIED_KINDS",
    "COLUMNS",
    "HISTORY_CATALOG",
    "HISTORY_TABLE",
    "InvalidChange",
    "Written",
    "catalog_from_env",
    "change_key",
    "ensure_table",
    "row_from_event",
    "table_schema",
    "write",
]

#: The event source of the change stream (``s3ingest_fn.services.changes.SOURCE``), and of its
#: effects done (``EFFECT_SOURCE``).
SOURCE = "s3ingest"
EFFECT_SOURCE = "s3ingest.effects"
#: ``detail-type`` -> the row's ``kind``.
KINDS = {
    "Object Ingested": "created",
    "Object Tombstoned": "removed",
    "Object Held": "held",
    "Change Approved": "approved",
    "Change Rejected": "rejected",
}
#: ``source`` -> its ``detail-type`` -> the row's ``kind``.
KINDS_BY_SOURCE = {SOURCE: KINDS, EFFECT_SOURCE: {"Effect Done": "done"}}
#: Kinds of an applied change (the others are reviews).
APPLIED_KINDS = ("created", "removed")
#: Detail-types of the change bus that are not changes (no row; outcome ``ignored``).
IGNORED_DETAIL_TYPES = ("Attestation Made",)

# The environment (names of s3ingest_fn.config; the role's model is
# s3ingest_fn.config_roles.HistoryConfig): HISTORY_CATALOG, pyiceberg catalog properties as JSON
# ({"type": "glue"}, or {"type": "sql", "uri": "sqlite:///...", "warehouse": "file:///..."});
# HISTORY_TABLE, <namespace>.<name>; HISTORY_LOCATION, the table's location when ensure_table
# creates it (optional; default: the catalog's warehouse).
#: The catalog's name in pyiceberg (appears in nothing the table stores).
CATALOG_NAME = "s3ingest"
#: The table's properties: no library retry of a refused commit (module docstring); manifests
#: merged as commits add them (pyiceberg appends one manifest a commit otherwise, and the check
#: for written keys would open every one of the day's: ``commit.manifest-merge.enabled``,
#: https://iceberg.apache.org/docs/latest/configuration/#write-properties).
TABLE_PROPERTIES = {"commit.retry.num-retries": "0", "commit.manifest-merge.enabled": "true"}

#: Columns: (name, type, doc). Types: ``string``, ``long``, ``date``, ``timestamptz`` (microseconds,
#: UTC).
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("change_key", "string", "unique per change, the same for every delivery"),
    ("change_id", "string", "the applied change's id (a review: the held change's)"),
    ("kind", "string", "created, removed, held, approved, rejected or done"),
    ("bucket", "string", "the landing bucket"),
    ("key", "string", "the object key"),
    ("sequencer", "string", "the change's S3 sequencer (null for an observation)"),
    ("version_id", "string", "the object version"),
    ("etag", "string", "the object's ETag"),
    ("size", "long", "bytes"),
    ("rev", "long", "the ledger row's revision (strictly increasing per key)"),
    ("source", "string", "what reported the change (event, reconcile, backfill, ...)"),
    ("event_name", "string", "the S3 event name or reason"),
    ("reason", "string", "why (a tombstone's, a hold's, a review's)"),
    ("processor", "string", "a review's or an effect done's processor"),
    ("actor", "string", "a review's actor (policy for a hold)"),
    (
        "event_time",
        "timestamptz",
        "applied (a change), decided (a review) or committed (an effect), the ledger's clock",
    ),
    ("event_date", "date", "the UTC day of event_time (the partition)"),
    ("published_time", "timestamptz", "the event's time on the change bus (seconds)"),
    ("written_time", "timestamptz", "when the history writer wrote the row"),
    # added after the others (field ids follow this order): a table created before it gets it
    # from ensure_table
    ("processor_version", "long", "an effect done's processor version"),
)
_FIELD_IDS = {name: n for n, (name, _, _) in enumerate(COLUMNS, start=1)}


class InvalidChange(ValueError):
    """An event that can never be a row (not the change stream's, or a field missing)."""


def _iceberg_types() -> dict[str, Any]:
    from pyiceberg.types import DateType, LongType, StringType, TimestamptzType

    return {
        "string": StringType,
        "long": LongType,
        "date": DateType,
        "timestamptz": TimestamptzType,
    }


def table_schema() -> Schema:
    """The table's Iceberg schema (:data:`COLUMNS`; ``change_key`` required, the identifier)."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import NestedField

    types = _iceberg_types()
    return Schema(
        *(
            NestedField(
                field_id=_FIELD_IDS[name],
                name=name,
                field_type=types[kind](),
                required=name == "change_key",
                doc=doc,
            )
            for name, kind, doc in COLUMNS
        ),
        identifier_field_ids=[_FIELD_IDS["change_key"]],
    )


def _arrow_schema() -> pa.Schema:
    import pyarrow as pa

    types = {
        "string": pa.string(),
        "long": pa.int64(),
        "date": pa.date32(),
        "timestamptz": pa.timestamp("us", "UTC"),
    }
    return pa.schema([pa.field(n, types[t], nullable=n != "change_key") for n, t, _ in COLUMNS])


def ensure_table(catalog: Catalog, identifier: str, location: str | None = None) -> Table:
    """The history table ``identifier`` (``namespace.name``), created with its namespace when
    absent (partitioned by ``event_date``). A concurrent creation is taken as done."""
    from pyiceberg.exceptions import (
        NamespaceAlreadyExistsError,
        NoSuchNamespaceError,
        TableAlreadyExistsError,
    )
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import IdentityTransform

    namespace = identifier.rsplit(".", 1)[0]
    try:
        return _properties_kept(catalog.load_table(identifier))
    except Exception as exc:  # NoSuchTableError, or NoSuchNamespaceError from some catalogs
        if type(exc).__name__ not in ("NoSuchTableError", "NoSuchNamespaceError"):
            raise
    try:  # the stack's Glue database exists: its role may read it, not create databases
        catalog.load_namespace_properties(namespace)
    except NoSuchNamespaceError:
        try:
            catalog.create_namespace(namespace)
        except NamespaceAlreadyExistsError:
            pass
    spec = PartitionSpec(
        PartitionField(
            source_id=_FIELD_IDS["event_date"],
            field_id=1000,
            transform=IdentityTransform(),
            name="event_date",
        )
    )
    try:
        kwargs: dict[str, Any] = {"location": location} if location else {}
        return catalog.create_table(
            identifier,
            schema=table_schema(),
            partition_spec=spec,
            properties=TABLE_PROPERTIES,
            **kwargs,
        )
    except TableAlreadyExistsError:
        return _properties_kept(catalog.load_table(identifier))


def _properties_kept(table: Table) -> Table:
    """``table`` with :data:`TABLE_PROPERTIES` set and every column of :data:`COLUMNS` (one
    commit each when something was missing: a table created by an earlier writer, before
    ``processor_version``, gains the column, optional, its old rows null)."""
    props = table.properties
    if any(props.get(k) != v for k, v in TABLE_PROPERTIES.items()):
        with table.transaction() as tx:
            tx.set_properties(TABLE_PROPERTIES)
    have = {f.name for f in table.schema().fields}
    missing = [(n, t, d) for n, t, d in COLUMNS if n not in have]
    if missing:
        from pyiceberg.exceptions import CommitFailedException

        types = _iceberg_types()
        try:
            with table.update_schema() as update:
                for name, kind, doc in missing:
                    update.add_column(name, types[kind](), doc=doc)
        except CommitFailedException:  # another writer evolved it (or committed) first
            table = table.refresh()
            if {n for n, _, _ in missing} - {f.name for f in table.schema().fields}:
                raise
    return table


def catalog_from_env(env: Mapping[str, str] | None = None) -> tuple[Catalog, str, str | None]:
    """The catalog, table identifier and location the environment names (:data:`HISTORY_CATALOG`,
    :data:`HISTORY_TABLE`, :data:`HISTORY_LOCATION`). Raises ``ValueError`` naming what is
    missing or malformed."""
    from pyiceberg.catalog import load_catalog

    env = os.environ if env is None else env
    problems = [name for name in (HISTORY_CATALOG, HISTORY_TABLE) if not env.get(name)]
    if problems:
        raise ValueError(f"history table: {', '.join(problems)} not set")
    try:
        props = json.loads(env[HISTORY_CATALOG])
    except ValueError as exc:
        raise ValueError(f"history table: {HISTORY_CATALOG} is not JSON ({exc})") from None
    if not isinstance(props, dict) or "type" not in props:
        raise ValueError(f'history table: {HISTORY_CATALOG} must be an object with a "type"')
    if "." not in env[HISTORY_TABLE]:
        raise ValueError(f"history table: {HISTORY_TABLE} must be <namespace>.<name>")
    # numbers stay numbers: botocore compares glue.max-retries with an int
    catalog = load_catalog(
        CATALOG_NAME,
        **{k: v if type(v) is int else str(v) for k, v in props.items()},  # type: ignore[arg-type]
    )
    return catalog, env[HISTORY_TABLE], env.get(HISTORY_LOCATION) or None


def change_key(kind: str, detail: Mapping[str, Any]) -> str:
    """The row's change key (module docstring)."""
    if kind in APPLIED_KINDS:
        return str(detail["id"])
    if kind == "done":
        return f"{detail['id']}/done/{detail['processor']}/{detail['version']}"
    return f"{detail['id']}/{kind}/{detail.get('processor') or '-'}"


def _ms(value: Any, name: str) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidChange(f"detail.{name} is not epoch milliseconds")
    try:
        return datetime.fromtimestamp(value / 1000, UTC)
    except (OverflowError, OSError, ValueError) as exc:  # inf, nan, out of datetime's range
        raise InvalidChange(f"detail.{name} is not epoch milliseconds: {exc}") from exc


def _published(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)
    except (ValueError, OverflowError):
        return None


def _text(detail: Mapping[str, Any], name: str) -> str | None:
    value = detail.get(name)
    if value is None:
        return None
    text = str(value)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate: no UTF-8 string column takes it
        raise InvalidChange(f"detail.{name} is not UTF-8 text") from exc
    return text


def _int(detail: Mapping[str, Any], name: str) -> int | None:
    value = detail.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidChange(f"detail.{name} is not an integer")
    if not -(2**63) <= value < 2**63:  # the column is a long
        raise InvalidChange(f"detail.{name} is out of a 64-bit integer's range")
    return value


def row_from_event(
    event: Mapping[str, Any], written: datetime | None = None
) -> dict[str, Any] | None:
    """The row of one change-bus event (``{"source", "detail-type", "time", "detail"}``), or
    None for an event of the bus that is not a change (an attestation).

    Raises
    ------
    InvalidChange
        Not the change stream's event, an unknown detail-type, or ``detail.id``, ``bucket``,
        ``key`` or the time missing or malformed.
    """
    if not isinstance(event, Mapping):
        raise InvalidChange("the event is not a JSON object")
    detail_type = event.get("detail-type")
    kinds = KINDS_BY_SOURCE.get(str(event.get("source")))
    if kinds is None:
        raise InvalidChange(f"source {event.get('source')!r} is not the change stream's")
    if detail_type in IGNORED_DETAIL_TYPES:
        return None
    kind = kinds.get(str(detail_type))
    if kind is None:
        raise InvalidChange(f"unknown detail-type {detail_type!r}")
    detail = event.get("detail")
    if not isinstance(detail, Mapping):
        raise InvalidChange("detail is not an object")
    for name in ("id", "bucket", "key", *(("processor",) if kind == "done" else ())):
        if not isinstance(detail.get(name), str) or not detail[name]:
            raise InvalidChange(f"detail.{name} missing")
        _text(detail, name)  # UTF-8 text
    version = _int(detail, "version") if kind == "done" else None
    if kind == "done" and version is None:
        raise InvalidChange("detail.version missing")
    applied = kind in APPLIED_KINDS
    event_time = _ms(detail.get("appliedAt" if applied else "at"), "appliedAt" if applied else "at")
    if event_time is None:
        raise InvalidChange("the change's time missing (detail.appliedAt or detail.at)")
    return {
        "change_key": change_key(kind, detail),
        "change_id": detail["id"],
        "kind": kind,
        "bucket": detail["bucket"],
        "key": detail["key"],
        "sequencer": _text(detail, "sequencer"),
        "version_id": _text(detail, "versionId"),
        "etag": _text(detail, "etag"),
        "size": _int(detail, "size"),
        "rev": _int(detail, "rev"),
        "source": _text(detail, "source"),
        "event_name": _text(detail, "eventName"),
        "reason": _text(detail, "reason"),
        "processor": _text(detail, "processor"),
        "actor": _text(detail, "actor"),
        "processor_version": version,
        "event_time": event_time,
        "event_date": event_time.date(),
        "published_time": _published(event.get("time")),
        "written_time": written or datetime.now(UTC),
    }


@dataclass
class Written:
    """What :func:`write` did: ``added`` change keys (new rows), ``duplicates`` (already in the
    table or repeated in the batch), ``commits`` (0 when nothing was new) and ``retries``
    (commits refused by a concurrent writer's and done again)."""

    added: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    commits: int = 0
    retries: int = 0


def existing_scan(table: Table, rows: Sequence[Mapping[str, Any]]) -> DataScan:
    """The scan :func:`write` reads the rows' change keys with: the rows' days (partitions)
    and the span of their times (each data file's ``event_time`` bounds prune it: a batch's
    changes are close in time, a replayed change keeps its time), then the keys."""
    from pyiceberg.expressions import And, GreaterThanOrEqual, In, LessThanOrEqual, Reference

    times = [r["event_time"] for r in rows]
    return table.scan(
        row_filter=And(
            And(
                In(term=Reference("event_date"), values={t.date().isoformat() for t in times}),
                And(
                    GreaterThanOrEqual(term=Reference("event_time"), value=min(times).isoformat()),
                    LessThanOrEqual(term=Reference("event_time"), value=max(times).isoformat()),
                ),
            ),
            In(term=Reference("change_key"), values={r["change_key"] for r in rows}),
        ),
        selected_fields=("change_key",),
    )


def _existing(table: Table, rows: Sequence[Mapping[str, Any]]) -> set[str]:
    """Which of the rows' change keys ``table`` holds (:func:`existing_scan`)."""
    if table.current_snapshot() is None:
        return set()
    found = existing_scan(table, rows).to_arrow()
    return set(found.column("change_key").to_pylist())


def write(
    table: Table,
    rows: Iterable[Mapping[str, Any]],
    *,
    attempts: int = 5,
    backoff_seconds: float = 0.05,
) -> Written:
    """Append the rows whose change keys the table does not hold yet, in one commit.

    A commit refused because another writer committed first is done again on the reloaded
    table (``attempts`` in all, ``backoff_seconds`` doubling between them).

    Raises
    ------
    pyiceberg.exceptions.CommitFailedException
        Still refused after ``attempts``; nothing of the batch is in the table.
    """
    import pyarrow as pa
    from pyiceberg.exceptions import CommitFailedException

    result = Written()
    unique: dict[str, Mapping[str, Any]] = {}
    for row in rows:
        if row["change_key"] in unique:
            result.duplicates.append(row["change_key"])
        else:
            unique[row["change_key"]] = row
    if not unique:
        return result
    table = _properties_kept(table)
    for attempt in range(attempts):
        held = _existing(table, list(unique.values()))
        new = [r for k, r in unique.items() if k not in held]
        if not new:
            result.duplicates.extend(unique)
            return result
        batch = pa.Table.from_pylist([dict(r) for r in new], schema=_arrow_schema())
        try:
            table.append(batch)
        except CommitFailedException:
            if attempt == attempts - 1:
                raise
            result.retries += 1
            time.sleep(backoff_seconds * 2**attempt)
            table = table.refresh()
            continue
        result.commits += 1
        result.added.extend(r["change_key"] for r in new)
        result.duplicates.extend(k for k in unique if k in held)
        return result
    raise AssertionError("unreachable")  # pragma: no cover
