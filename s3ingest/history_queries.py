"""The history table's named queries (docs/history.md): one SQL text each, run locally by duckdb
over the table's scan (``s3ingest history QUERY --local``) and deployed by Athena (the stack's
named queries, ``s3ingest history QUERY``).

Each query reads the table as ``{table}`` and its percentile function as ``{percentile}`` (the
one place the dialects differ: duckdb's ``quantile_cont``, Athena's ``approx_percentile``, both
``(value, fraction)``); its parameters are positional ``?`` in :attr:`Query.params` order
(Athena's execution parameters, duckdb's prepared parameters). Text filters are ``LIKE``
patterns (:func:`like_prefix`): ``%`` matches every bucket or key. Times are ISO-8601 strings
cast to ``TIMESTAMP WITH TIME ZONE``. CDK-free, like :mod:`s3ingest.stack_resources`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["DIALECTS", "QUERIES", "Query", "like_prefix"]

#: Each dialect's percentile function.
DIALECTS = {"duckdb": "quantile_cont", "athena": "approx_percentile"}

_SINCE = "event_time >= CAST(? AS TIMESTAMP WITH TIME ZONE)"
# applied changes first, then a change's hold, then its decision (one write may carry two)
_ORDER_OF_KIND = (
    "CASE kind WHEN 'created' THEN 0 WHEN 'removed' THEN 0 WHEN 'held' THEN 1 ELSE 2 END"
)


# Keys behind a processor version: each key's newest applied change (by time, then revision),
# the highest version of the processor that did it (a ``done`` row), and the processor's last
# review of it. A created key is behind unless done at the version or later; a removal only
# when the processor held it and never did it (a removal it was never asked about, such as a
# key deleted before it existed, is not behind, as for ``s3ingest reprocess``).
_BEHIND = (
    "WITH applied AS (SELECT bucket, key, kind, change_id, event_time, rev, "
    "row_number() OVER (PARTITION BY bucket, key ORDER BY event_time DESC, rev DESC) AS n "
    "FROM {table} WHERE kind IN ('created', 'removed') AND bucket LIKE ? ESCAPE '\\' "
    "AND key LIKE ? ESCAPE '\\'), "
    "done AS (SELECT change_id, max(processor_version) AS done_version FROM {table} "
    "WHERE kind = 'done' AND processor = ? GROUP BY change_id), "
    "reviewed AS (SELECT change_id, max_by(kind, event_time) AS review FROM {table} "
    "WHERE kind IN ('held', 'approved', 'rejected') AND processor = ? GROUP BY change_id) "
    "SELECT a.event_time, a.bucket, a.key, a.kind, a.change_id, d.done_version, r.review "
    "FROM applied a LEFT JOIN done d ON d.change_id = a.change_id "
    "LEFT JOIN reviewed r ON r.change_id = a.change_id "
    "WHERE a.n = 1 AND (d.done_version IS NULL OR d.done_version < CAST(? AS BIGINT)) "
    "AND (a.kind = 'created' OR (r.review IS NOT NULL AND d.done_version IS NULL)) "
    "ORDER BY a.bucket, a.key"
)


@dataclass(frozen=True)
class Query:
    """One named query: its ``description``, SQL (``{table}``, ``{percentile}``, ``?``) and
    the names of its parameters in order (``key``, ``bucket``, ``prefix``, ``since``,
    ``processor``, ``processor_version``; a name may come more than once)."""

    description: str
    sql: str
    params: tuple[str, ...]

    def render(self, table: str, dialect: str) -> str:
        """The SQL with ``table`` (a quoted name) and the ``dialect``'s functions."""
        return self.sql.format(table=table, percentile=DIALECTS[dialect])

    def arguments(self, values: Mapping[str, Any]) -> list[Any]:
        """The parameters' values in order (``bucket`` and ``prefix`` as LIKE patterns,
        ``processor_version`` a whole number, default 1).

        Raises
        ------
        ValueError
            A required value missing (``key`` for ``trail``, ``processor`` for ``processor``
            and ``reviews``), or ``processor_version`` not a whole number of at least 1.
        """
        out: list[Any] = []
        for name in self.params:
            value = values.get(name)
            if name in ("bucket", "prefix"):
                out.append(like_prefix(value or "", whole=name == "bucket" and bool(value)))
            elif name == "since":
                out.append(value or "1970-01-01 00:00:00+00:00")
            elif name == "processor_version":
                out.append(_version(value))
            elif value is None or value == "":
                raise ValueError(f"this query needs --{name}")
            else:
                out.append(value)
        return out


def _version(value: Any) -> int:
    """A processor version: a whole number of at least 1 (None: 1, any version)."""
    if value is None or value == "":
        return 1
    try:
        version = int(str(value))
    except ValueError:
        version = 0
    if version < 1:
        raise ValueError(f"--processor-version must be a whole number of at least 1, not {value!r}")
    return version


def like_prefix(text: str, *, whole: bool = False) -> str:
    """A ``LIKE ... ESCAPE '\\'`` pattern matching ``text`` as a prefix (``whole``: exactly)."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped if whole else escaped + "%"


QUERIES: dict[str, Query] = {
    "trail": Query(
        "every change of one key, once each, in order: applied changes, holds, decisions and "
        "effects done",
        "SELECT event_time, bucket, key, kind, change_key, sequencer, rev, version_id, etag, "
        "size, processor, actor, reason FROM {table} "
        "WHERE key = ? AND bucket LIKE ? ESCAPE '\\' "
        f"ORDER BY event_time, rev, {_ORDER_OF_KIND}, change_key",
        ("key", "bucket"),
    ),
    "changes": Query(
        "applied changes (created, removed) since a time, by bucket and key prefix, in order",
        "SELECT event_time, bucket, key, kind, change_key, sequencer, rev, version_id, etag, "
        "size, source FROM {table} "
        "WHERE kind IN ('created', 'removed') AND bucket LIKE ? ESCAPE '\\' "
        f"AND key LIKE ? ESCAPE '\\' AND {_SINCE} "
        "ORDER BY event_time, bucket, key, rev",
        ("bucket", "prefix", "since"),
    ),
    "processor": Query(
        "keys a processor version has not reached: each key whose newest applied change that "
        "version (or a later one) has not done, by bucket and key prefix; a removal only when "
        "the processor reviewed it (held) and did not do it",
        _BEHIND,
        ("bucket", "prefix", "processor", "processor", "processor_version"),
    ),
    "reviews": Query(
        "one processor's held and reviewed changes since a time: per decision, the key and actor",
        "SELECT event_time, bucket, key, kind, change_id, actor, reason FROM {table} "
        f"WHERE processor = ? AND kind IN ('held', 'approved', 'rejected') AND {_SINCE} "
        f"ORDER BY event_time, bucket, key, {_ORDER_OF_KIND}",
        ("processor", "since"),
    ),
    "held": Query(
        "held changes since a time with their decision, who decided and when (none: still held)",
        "SELECT h.event_time AS held_at, h.bucket, h.key, h.change_id, h.processor, "
        "h.reason, d.kind AS decision, d.actor, d.event_time AS decided_at "
        "FROM {table} h LEFT JOIN {table} d ON d.change_id = h.change_id "
        "AND d.processor = h.processor AND d.kind IN ('approved', 'rejected') "
        "WHERE h.kind = 'held' AND h.bucket LIKE ? ESCAPE '\\' "
        "AND h.event_time >= CAST(? AS TIMESTAMP WITH TIME ZONE) "
        "ORDER BY h.event_time, h.bucket, h.key",
        ("bucket", "since"),
    ),
    "lag": Query(
        "delivery lag percentiles since a time, milliseconds: applied to published on the "
        "change bus, and to written in the table",
        "SELECT count(*) AS changes, "
        "{percentile}(date_diff('millisecond', event_time, published_time), 0.5) "
        "AS published_p50_ms, "
        "{percentile}(date_diff('millisecond', event_time, published_time), 0.99) "
        "AS published_p99_ms, "
        "{percentile}(date_diff('millisecond', event_time, written_time), 0.5) "
        "AS written_p50_ms, "
        "{percentile}(date_diff('millisecond', event_time, written_time), 0.99) "
        "AS written_p99_ms, "
        "max(date_diff('millisecond', event_time, written_time)) AS written_max_ms "
        f"FROM {{table}} WHERE kind IN ('created', 'removed') AND {_SINCE}",
        ("since",),
    ),
}
