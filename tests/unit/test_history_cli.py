"""``s3ingest history QUERY``: the named queries (s3ingest/history_queries.py) by duckdb over the
local history table of the test's run directory, and by Athena over a stack's outputs."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from s3ingest.cli import app
from s3ingest.commands.history import (
    HistoryQueryFailed,
    HistoryUnavailable,
    query_athena,
    query_local,
)
from s3ingest.history_queries import QUERIES, like_prefix
from s3ingest.local.stack.history import local_table
from s3ingest_fn.handlers.history import write_batch
from tests.cli_env import BARE
from tests.unit.test_history import T0, change, effect, review, sqs

runner = CliRunner()


@pytest.fixture
def table() -> Any:
    """The run directory's local history table: key a created, overwritten, removed (held,
    approved by alice), key b created a day later, key a_ (LIKE's wildcard) created."""
    t = local_table(fresh=True)
    events = [
        change("c1", "a", at=T0, rev=1),
        change("c2", "a", at=T0 + 1_000, rev=2),
        change("c3", "a", "removed", at=T0 + 2_000, rev=3),
        review("c3", "a", "held", "policy", at=T0 + 2_000, rev=4),
        review("c3", "a", "approved", "alice", at=T0 + 3_000, rev=5),
        change("c4", "b/x", at=T0 + 86_400_000),
        change("c5", "a_", at=T0 + 5_000),
    ]
    write_batch(t, sqs(*events))
    write_batch(t, sqs(*events))  # a replay: no row
    return t


def history(*args: str) -> Any:
    return runner.invoke(app, ["history", *args], env=BARE)


def test_trail_lists_each_change_of_the_key_once_in_order(table: Any) -> None:
    got = history("trail", "--key", "a", "--local", "--json")
    assert got.exit_code == 0, got.output
    doc = json.loads(got.stdout)
    assert doc["query"] == "trail"
    assert [r["change_key"] for r in doc["rows"]] == [
        "c1", "c2", "c3", "c3/held/thumbs", "c3/approved/thumbs",
    ]  # fmt: skip
    assert doc["rows"][-1]["actor"] == "alice"


def test_changes_since_and_under_a_prefix(table: Any) -> None:
    since = "2026-05-28T20:26:41Z"  # T0 + 1 s
    got = json.loads(history("changes", "--since", since, "--local", "--json").stdout)
    assert [r["change_key"] for r in got["rows"]] == ["c2", "c3", "c5", "c4"]
    under = json.loads(history("changes", "--prefix", "b/", "--local", "--json").stdout)
    assert [r["key"] for r in under["rows"]] == ["b/x"]
    # "_" is LIKE's one-character wildcard: the prefix "a_" is taken literally
    literal = json.loads(history("changes", "--prefix", "a_", "--local", "--json").stdout)
    assert [r["key"] for r in literal["rows"]] == ["a_"]


def test_held_reviews_and_lag(table: Any) -> None:
    held = json.loads(history("held", "--local", "--json").stdout)["rows"]
    assert [(r["key"], r["decision"], r["actor"]) for r in held] == [("a", "approved", "alice")]
    reviews = json.loads(history("reviews", "--processor", "thumbs", "--local", "--json").stdout)
    assert [r["kind"] for r in reviews["rows"]] == ["held", "approved"]
    lag = json.loads(history("lag", "--local", "--json").stdout)["rows"]
    assert lag[0]["changes"] == 5
    text = history("trail", "--key", "a", "--local")
    assert text.exit_code == 0 and "5 row(s)" in text.stdout


def test_errors_are_clear(table: Any) -> None:
    missing = history("trail", "--local", "--json")
    assert missing.exit_code == 2 and "this query needs --key" in missing.output
    unknown = history("everything", "--local")
    assert unknown.exit_code == 2 and "unknown query 'everything'" in unknown.output
    bad_time = history("changes", "--since", "yesterday", "--local")
    assert bad_time.exit_code == 2 and "ISO-8601" in bad_time.output


def test_no_local_table_is_exit_3(tmp_path: Any) -> None:
    got = history("trail", "--key", "a", "--local", "--json")
    assert got.exit_code == 3
    assert json.loads(got.stdout)["error"]["type"] == "NoHistoryTable"
    with pytest.raises(HistoryUnavailable, match="no local history table"):
        query_local("trail", {"key": "a"}, tmp_path / "none")


class FakeAthena:
    def __init__(self) -> None:
        self.started: list[dict[str, Any]] = []

    def start_query_execution(self, **kwargs: Any) -> dict[str, Any]:
        self.started.append(kwargs)
        return {"QueryExecutionId": "q1"}

    def get_query_execution(self, QueryExecutionId: str) -> dict[str, Any]:
        return {"QueryExecution": {"Status": {"State": "SUCCEEDED"}}}

    def get_paginator(self, name: str) -> Any:
        page = {
            "ResultSet": {
                "ResultSetMetadata": {"ColumnInfo": [{"Name": "key"}, {"Name": "kind"}]},
                "Rows": [
                    {"Data": [{"VarCharValue": "key"}, {"VarCharValue": "kind"}]},
                    {"Data": [{"VarCharValue": "a"}, {"VarCharValue": "created"}]},
                ],
            }
        }

        class Pages:
            def paginate(self, **_: Any) -> list[dict[str, Any]]:
                return [page]

        return Pages()


def test_deployed_queries_run_in_the_stacks_workgroup() -> None:
    athena = FakeAthena()
    outputs = {"HistoryWorkGroup": "s3ingest-history", "HistoryTable": "s3ingest_db.history"}
    got = query_athena(athena, outputs, "trail", {"key": "it's"}, poll_seconds=0)
    assert got["columns"] == ["key", "kind"]
    assert got["rows"] == [{"key": "a", "kind": "created"}]
    (call,) = athena.started
    assert call["WorkGroup"] == "s3ingest-history"
    assert 'FROM "s3ingest_db"."history"' in call["QueryString"]
    assert call["ExecutionParameters"] == ["'it''s'", "'%'"]
    with pytest.raises(HistoryUnavailable, match="HistoryWorkGroup and HistoryTable missing"):
        query_athena(athena, {}, "trail", {"key": "a"})


def test_deployed_times_are_sent_as_athena_casts_them_and_a_failed_query_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Athena (Trino) refuses ISO 8601's "T" in ``CAST(... AS TIMESTAMP WITH TIME ZONE)``: the
    default and the CLI's ``--since`` are sent with a space."""
    athena = FakeAthena()
    outputs = {"HistoryWorkGroup": "w", "HistoryTable": "db.history"}
    query_athena(athena, outputs, "changes", {}, poll_seconds=0)
    assert "'1970-01-01 00:00:00+00:00'" in athena.started[0]["ExecutionParameters"]
    seen: list[dict[str, Any]] = []

    def capture(query: str, values: dict[str, Any]) -> dict[str, Any]:
        seen.append(values)
        return {"query": query, "columns": [], "rows": []}

    monkeypatch.setattr("s3ingest.commands.history.query_local", capture)
    assert history("changes", "--since", "2026-03-01T10:00:00Z", "--local").exit_code == 0
    assert seen[0]["since"] == "2026-03-01 10:00:00+00:00"

    class Failing(FakeAthena):
        def get_query_execution(self, QueryExecutionId: str) -> dict[str, Any]:
            status = {"State": "FAILED", "StateChangeReason": "INVALID_CAST_ARGUMENT"}
            return {"QueryExecution": {"Status": status}}

    with pytest.raises(HistoryQueryFailed, match="FAILED: INVALID_CAST_ARGUMENT"):
        query_athena(Failing(), outputs, "trail", {"key": "a"}, poll_seconds=0)


def test_every_query_renders_for_both_dialects() -> None:
    for query in QUERIES.values():
        athena = query.render('"db"."t"', "athena")
        assert "{" not in athena and "quantile_cont" not in athena
        assert athena.count("?") == len(query.params)
    assert like_prefix("a_%\\") == "a\\_\\%\\\\%"


def _behind(*args: str) -> list[tuple[str, str, Any, Any]]:
    got = history("processor", "--processor", "thumbs", *args, "--local", "--json")
    assert got.exit_code == 0, got.output
    return [
        (r["key"], r["kind"], r["done_version"], r["review"])
        for r in json.loads(got.stdout)["rows"]
    ]


def test_processor_lists_the_keys_a_version_has_not_reached() -> None:
    t = local_table(fresh=True)
    write_batch(
        t,
        sqs(
            # a: overwritten, its newest change done by version 2 (its first by 1 only)
            change("a1", "a", at=T0), effect("a1", "a", 1),
            change("a2", "a", at=T0 + 1_000, rev=2), effect("a2", "a", 2, at=T0 + 1_500),
            # b: done by version 1; c: never done (created before the processor existed)
            change("b1", "b", at=T0), effect("b1", "b", 1),
            change("c1", "c", at=T0),
            # d: removed, the removal held (not done); e: removed and done; f: removed unasked
            change("d1", "d", at=T0), effect("d1", "d", 2),
            change("d2", "d", "removed", at=T0 + 2_000, rev=2),
            review("d2", "d", "held", "policy", at=T0 + 2_000, rev=3),
            change("e1", "e", at=T0), effect("e1", "e", 1),
            change("e2", "e", "removed", at=T0 + 2_000, rev=2), effect("e2", "e", 1),
            change("f1", "f", "removed", at=T0),
            # another processor's effects count for nothing here
            change("g1", "g", at=T0), effect("g1", "g", 9, processor="audit"),
        ),
    )  # fmt: skip
    held = ("d", "removed", None, "held")
    assert _behind("--processor-version", "2") == [
        ("b", "created", 1, None), ("c", "created", None, None), held, ("g", "created", None, None),
    ]  # fmt: skip
    # default 1: keys no version has done
    assert _behind() == [("c", "created", None, None), held, ("g", "created", None, None)]
    assert [k for k, *_ in _behind("--processor-version", "3")] == ["a", "b", "c", "d", "g"]
    assert [k for k, *_ in _behind("--processor-version", "3", "--prefix", "a")] == ["a"]
    for bad in ("0", "two"):
        got = history("processor", "--processor", "thumbs", "--processor-version", bad, "--local")
        assert got.exit_code == 2, got.output
    # --version stays the global option (s3ingest's own version)
    assert "s3ingest" in history("processor", "--version").stdout


def test_the_processor_query_casts_its_version_for_athena() -> None:
    query = QUERIES["processor"]
    assert query.arguments({"processor": "p", "processor_version": "3"}) == ["%", "%", "p", "p", 3]
    assert "CAST(? AS BIGINT)" in query.render('"db"."t"', "athena")
