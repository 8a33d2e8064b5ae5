"""The history table's writer (functions/s3ingest_fn/services/history.py) and its handler, on a
SQLite catalog in tmp_path: one row per change, a replayed or redelivered batch adds none, a
poison record is classified (C9)."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import CommitFailedException

from s3ingest_fn.handlers.history import write_batch
from s3ingest_fn.services import history

DAY_MS = 86_400_000
T0 = 1_780_000_000_000  # epoch ms


def catalog(tmp_path: Path) -> SqlCatalog:
    (tmp_path / "warehouse").mkdir(exist_ok=True)
    return SqlCatalog(
        "s3ingest",
        uri=f"sqlite:///{tmp_path / 'catalog.db'}",
        warehouse=f"file://{tmp_path / 'warehouse'}",
    )


def change(cid: str, key: str, kind: str = "created", at: int = T0, rev: int = 1) -> dict[str, Any]:
    return {
        "source": "s3ingest",
        "detail-type": {"created": "Object Ingested", "removed": "Object Tombstoned"}[kind],
        "time": "2026-06-01T00:00:00Z",
        "detail": {
            "id": cid, "bucket": "land", "key": key, "kind": kind, "sequencer": f"00{rev:04d}",
            "versionId": None, "etag": "e", "size": 3, "rev": rev, "source": "event",
            "eventName": "ObjectCreated:Put", "reason": None, "observed": False, "appliedAt": at,
        },
    }  # fmt: skip


def review(
    cid: str, key: str, action: str, actor: str, at: int = T0, rev: int = 2
) -> dict[str, Any]:
    return {
        "source": "s3ingest",
        "detail-type": {"held": "Object Held", "approved": "Change Approved"}[action],
        "detail": {
            "id": cid, "bucket": "land", "key": key, "processor": "thumbs", "action": action,
            "reason": "delete", "actor": actor, "sequencer": "0001", "rev": rev, "at": at,
        },
    }  # fmt: skip


def effect(
    cid: str, key: str, version: int = 1, at: int = T0 + 500, processor: str = "thumbs"
) -> dict[str, Any]:
    """An ``Effect Done`` event (s3ingest_fn.services.changes.effect_event)."""
    return {
        "source": "s3ingest.effects",
        "detail-type": "Effect Done",
        "detail": {
            "id": cid, "bucket": "land", "key": key, "processor": processor,
            "version": version, "rev": 1, "at": at,
        },
    }  # fmt: skip


def sqs(*bodies: Any) -> dict[str, Any]:
    return {
        "Records": [
            {"messageId": f"m{n}", "body": b if isinstance(b, str) else json.dumps(b)}
            for n, b in enumerate(bodies)
        ]
    }


def rows(table: Any) -> list[dict[str, Any]]:
    return list(table.refresh().scan().to_arrow().to_pylist())


def test_a_row_per_change_and_a_replay_adds_none(tmp_path: Path) -> None:
    table = history.ensure_table(catalog(tmp_path), "s3ingest.history")
    events = [
        change("c1", "a", at=T0),
        change("c2", "a", "removed", at=T0 + 1000, rev=2),
        change("c3", "b", at=T0 + DAY_MS),  # another day, another partition
        review("c2", "a", "held", "policy"),
        review("c2", "a", "approved", "alice"),
    ]
    first = write_batch(table, sqs(*events))
    assert first == {"batchItemFailures": [], "outcomes": {"applied": 5}}
    got = rows(table)
    assert sorted(r["change_key"] for r in got) == [
        "c1", "c2", "c2/approved/thumbs", "c2/held/thumbs", "c3",
    ]  # fmt: skip
    by_key = {r["change_key"]: r for r in got}
    assert by_key["c2/approved/thumbs"]["actor"] == "alice"
    assert by_key["c2"]["kind"] == "removed" and by_key["c2"]["rev"] == 2
    snapshots = len(table.snapshots())
    # the whole batch again (a replay), then a redelivery of two in one batch with a new change
    again = write_batch(table, sqs(*events))
    assert again == {"batchItemFailures": [], "outcomes": {"duplicate": 5}}
    assert len(table.refresh().snapshots()) == snapshots  # no commit at all
    mixed = write_batch(table, sqs(events[0], events[0], change("c4", "b", at=T0 + 5)))
    assert mixed["outcomes"] == {"applied": 1, "duplicate": 2}
    keys = [r["change_key"] for r in rows(table)]
    assert len(keys) == 6 and len(set(keys)) == 6


def test_table_is_partitioned_by_day_and_created_once(tmp_path: Path) -> None:
    cat = catalog(tmp_path)
    table = history.ensure_table(cat, "s3ingest.history")
    assert (
        history.ensure_table(cat, "s3ingest.history").metadata_location == table.metadata_location
    )
    write_batch(table, sqs(change("c1", "a"), change("c2", "a", at=T0 + 2 * DAY_MS)))
    files = table.refresh().inspect.files().to_pylist()
    assert len(files) == 2  # one per day
    assert [f.name for f in table.spec().fields] == ["event_date"]


@pytest.mark.contract("C9")
def test_a_poison_record_is_classified_and_nothing_is_lost(tmp_path: Path) -> None:
    table = history.ensure_table(catalog(tmp_path), "s3ingest.history")
    sent: list[tuple[str, str, str, str]] = []

    class Dead:
        def send(self, body: str, reason: str, detail: str, message_id: str) -> None:
            sent.append((body, reason, detail, message_id))

    no_id = change("x", "a")
    del no_id["detail"]["id"]
    attestation = {"source": "s3ingest", "detail-type": "Attestation Made", "detail": {}}
    batch = sqs("{not json", no_id, {"source": "aws.s3", "detail-type": "Object Created"},
                attestation, change("c1", "a"))  # fmt: skip
    with_dlq = write_batch(table, batch, Dead())
    assert with_dlq == {
        "batchItemFailures": [],
        "outcomes": {"applied": 1, "ignored": 1, "invalid": 3},
    }
    assert [s[3] for s in sent] == ["m0", "m1", "m2"]
    assert "detail.id missing" in sent[1][2]
    # without a dead-letter queue an invalid record is reported failed: the queue's redrive
    # policy moves it to its dead-letter queue after maxReceiveCount receives
    without = write_batch(table, batch)
    assert without["batchItemFailures"] == [{"itemIdentifier": f"m{n}"} for n in range(3)]
    assert without["outcomes"] == {"duplicate": 1, "ignored": 1, "invalid": 3}


@pytest.mark.contract("C9")
def test_values_no_column_takes_are_invalid_records_not_a_failed_batch(tmp_path: Path) -> None:
    """A time beyond datetime's range, an integer beyond a long, a lone surrogate: each record
    goes to the dead-letter queue with its reason, and the batch's good change is written."""
    table = history.ensure_table(catalog(tmp_path), "s3ingest.history")
    sent: list[tuple[str, str]] = []

    class Dead:
        def send(self, body: str, reason: str, detail: str, message_id: str) -> None:
            sent.append((message_id, detail))

    infinite = '{"source": "s3ingest", "detail-type": "Object Ingested", "detail": {"id": "i",'
    infinite += ' "bucket": "land", "key": "k", "appliedAt": 1e400}}'  # json reads inf
    huge = change("h", "k")
    huge["detail"]["size"] = 10**20
    early = change("e", "k")
    early["detail"]["appliedAt"] = -(10**17)
    surrogate = change("s", "a\ud800")
    batch = sqs(infinite, huge, early, surrogate, change("c1", "a"))
    assert write_batch(table, batch, Dead()) == {
        "batchItemFailures": [],
        "outcomes": {"applied": 1, "invalid": 4},
    }
    assert [m for m, _ in sent] == ["m0", "m1", "m2", "m3"]
    assert "appliedAt" in sent[0][1] and "size" in sent[1][1] and "appliedAt" in sent[2][1]
    assert "key" in sent[3][1]
    assert [r["change_key"] for r in rows(table)] == ["c1"]


@pytest.mark.contract("C9")
def test_a_failed_write_is_retried_not_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = history.ensure_table(catalog(tmp_path), "s3ingest.history")

    def refused(*_: Any, **__: Any) -> None:
        raise CommitFailedException("refused")

    monkeypatch.setattr(type(table), "append", refused)
    monkeypatch.setattr(history.time, "sleep", lambda _: None)
    out = write_batch(table, sqs(change("c1", "a"), "{bad"))
    assert out["batchItemFailures"] == [{"itemIdentifier": "m1"}, {"itemIdentifier": "m0"}]
    assert out["outcomes"] == {"invalid": 1, "retried": 1}


def test_concurrent_writers_of_one_change_add_one_row(tmp_path: Path) -> None:
    cat = catalog(tmp_path)
    history.ensure_table(cat, "s3ingest.history")
    first, second = cat.load_table("s3ingest.history"), cat.load_table("s3ingest.history")
    # second loaded before first commits: its first commit is refused, then it finds c1 there
    assert history.write(first, [history.row_from_event(change("c1", "a"))]).added == ["c1"]  # type: ignore[list-item]
    out = history.write(
        second,
        [history.row_from_event(change("c1", "a")), history.row_from_event(change("c2", "b"))],  # type: ignore[list-item]
    )
    assert out.added == ["c2"] and out.duplicates == ["c1"]
    keys = Counter(r["change_key"] for r in rows(cat.load_table("s3ingest.history")))
    assert keys == {"c1": 1, "c2": 1}


def test_a_stale_table_sees_rows_of_another_writer(tmp_path: Path) -> None:
    cat = catalog(tmp_path)
    history.ensure_table(cat, "s3ingest.history")
    first, second = cat.load_table("s3ingest.history"), cat.load_table("s3ingest.history")
    history.write(first, [history.row_from_event(change("c1", "a"))])  # type: ignore[list-item]
    history.write(first, [history.row_from_event(change("c2", "a"))])  # type: ignore[list-item]
    out = history.write(second, [history.row_from_event(change("c1", "a"))])  # type: ignore[list-item]
    assert out.added == [] and out.duplicates == ["c1"]


def test_catalog_from_env_names_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="HISTORY_CATALOG, HISTORY_TABLE not set"):
        history.catalog_from_env({})
    with pytest.raises(ValueError, match="not JSON"):
        history.catalog_from_env({"HISTORY_CATALOG": "{", "HISTORY_TABLE": "a.b"})
    props = {
        "type": "sql",
        "uri": f"sqlite:///{tmp_path / 'c.db'}",
        "warehouse": f"file://{tmp_path}",
    }
    cat, ident, location = history.catalog_from_env(
        {"HISTORY_CATALOG": json.dumps(props), "HISTORY_TABLE": "s3ingest.history"}
    )
    assert ident == "s3ingest.history" and location is None
    assert history.ensure_table(cat, ident).name() == ("s3ingest", "history")


def test_a_table_without_the_retry_property_gets_it(tmp_path: Path) -> None:
    """pyiceberg retries a refused append by itself (4 times by default), past the check for
    keys already written: the writer turns that off on a table created elsewhere."""
    cat = catalog(tmp_path)
    cat.create_namespace("s3ingest")
    cat.create_table("s3ingest.history", schema=history.table_schema())
    first, second = cat.load_table("s3ingest.history"), cat.load_table("s3ingest.history")
    history.write(first, [history.row_from_event(change("c1", "a"))])  # type: ignore[list-item]
    out = history.write(second, [history.row_from_event(change("c1", "a"))])  # type: ignore[list-item]
    assert out.added == [] and out.duplicates == ["c1"]
    assert (
        history.ensure_table(cat, "s3ingest.history").properties["commit.retry.num-retries"] == "0"
    )


def test_the_check_for_written_keys_reads_only_files_of_the_batchs_time_span(
    tmp_path: Path,
) -> None:
    """Each commit adds a data file; the keys of a batch are looked up in the files whose
    event_time bounds meet the batch's span only (change ids are hashes: their bounds prune
    nothing), so a commit does not read every file of its day."""
    table = history.ensure_table(catalog(tmp_path), "s3ingest.history")
    ids = [hashlib.md5(f"{n}".encode()).hexdigest() for n in range(30)]
    windows = [
        [change(ids[w * 5 + i], f"k{i}", at=T0 + w * 60_000 + i) for i in range(5)]
        for w in range(6)
    ]
    for events in windows:
        write_batch(table, sqs(*events))
    assert len(table.refresh().inspect.files()) == 6
    replayed = [history.row_from_event(e) for e in windows[3]]
    scan = history.existing_scan(table, replayed)  # type: ignore[arg-type]
    assert len(list(scan.plan_files())) == 1
    assert write_batch(table, sqs(*windows[3]))["outcomes"] == {"duplicate": 5}


def test_the_docs_list_every_column() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "history.md").read_text()
    for name, _, _ in history.COLUMNS:
        assert f"`{name}`" in docs, name


def test_the_deployed_glue_catalog_makes_no_retry_of_a_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A retried UpdateTable whose first answer was lost is refused as a concurrent change and
    pyiceberg deletes the commit's files: the Glue client makes one attempt a call."""
    from s3ingest_fn.contract import HISTORY_GLUE_CATALOG

    for name, value in (("AWS_DEFAULT_REGION", "us-east-1"), ("AWS_ACCESS_KEY_ID", "a")):
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "b")
    env = {"HISTORY_CATALOG": json.dumps(HISTORY_GLUE_CATALOG), "HISTORY_TABLE": "db.history"}
    catalog, name, _ = history.catalog_from_env(env)
    assert name == "db.history"
    assert catalog.glue.meta.config.retries == {"mode": "standard", "total_max_attempts": 1}  # type: ignore[attr-defined]


def test_the_table_merges_manifests_as_commits_add_them(tmp_path: Path) -> None:
    """Otherwise every commit adds a manifest and the check for written keys opens them all."""
    table = history.ensure_table(catalog(tmp_path), "s3ingest.history")
    assert table.properties["commit.manifest-merge.enabled"] == "true"
    for n in range(110):
        history.write(table, [history.row_from_event(change(f"c{n}", "a"))])  # type: ignore[list-item]
    manifests = table.refresh().current_snapshot().manifests(table.io)  # type: ignore[union-attr]
    assert len(manifests) <= 100
    assert len(rows(table)) == 110


def test_an_effect_done_is_a_row_per_processor_version_and_a_replay_adds_none(
    tmp_path: Path,
) -> None:
    table = history.ensure_table(catalog(tmp_path), "s3ingest.history")
    events = [
        change("c1", "a"),
        effect("c1", "a", 1),
        effect("c1", "a", 2, at=T0 + 9_000),  # a reprocess under version 2
        effect("c1", "a", 1, processor="audit"),
    ]
    assert write_batch(table, sqs(*events))["outcomes"] == {"applied": 4}
    # a relay retry, a redrive: the same events again, alone and with the batch
    assert write_batch(table, sqs(events[1]))["outcomes"] == {"duplicate": 1}
    assert write_batch(table, sqs(*events))["outcomes"] == {"duplicate": 4}
    got = {r["change_key"]: r for r in rows(table)}
    assert sorted(got) == ["c1", "c1/done/audit/1", "c1/done/thumbs/1", "c1/done/thumbs/2"]
    done = got["c1/done/thumbs/2"]
    assert (done["kind"], done["change_id"], done["processor"], done["processor_version"]) == (
        "done", "c1", "thumbs", 2,
    )  # fmt: skip
    assert done["event_time"].timestamp() * 1000 == T0 + 9_000
    assert got["c1"]["processor_version"] is None


def test_an_effect_event_without_its_processor_or_version_is_invalid(tmp_path: Path) -> None:
    table = history.ensure_table(catalog(tmp_path), "s3ingest.history")
    no_version = effect("c1", "a")
    del no_version["detail"]["version"]
    no_processor = effect("c1", "a")
    no_processor["detail"]["processor"] = None
    not_ours = {**effect("c1", "a"), "detail-type": "Object Ingested"}
    out = write_batch(table, sqs(no_version, no_processor, not_ours))
    assert out["outcomes"] == {"invalid": 3}
    assert rows(table) == []


def test_a_table_created_before_processor_version_gains_the_column(tmp_path: Path) -> None:
    """The table is unreleased, but a local or test deployment may hold one written by the
    previous writer: ensure_table adds the missing column (optional; old rows null)."""
    import pyarrow as pa
    from pyiceberg.schema import Schema

    cat = catalog(tmp_path)
    cat.create_namespace("s3ingest")
    new = history.table_schema()
    old = Schema(
        *(f for f in new.fields if f.name != "processor_version"),
        identifier_field_ids=list(new.identifier_field_ids),
    )
    before = cat.create_table("s3ingest.history", schema=old)
    written = dict(history.row_from_event(change("c0", "z")) or {})
    del written["processor_version"]
    arrow = history._arrow_schema()
    before.append(
        pa.Table.from_pylist(
            [written], schema=pa.schema([f for f in arrow if f.name != "processor_version"])
        )
    )
    table = history.ensure_table(cat, "s3ingest.history")
    names = [f.name for f in table.schema().fields]
    assert names[-1] == "processor_version"
    assert (
        table.schema().find_field("processor_version").field_id
        == new.find_field("processor_version").field_id
    )
    assert write_batch(table, sqs(change("c1", "a"), effect("c1", "a", 3)))["outcomes"] == {
        "applied": 2
    }
    got = {r["change_key"]: r["processor_version"] for r in rows(table)}
    assert got == {"c0": None, "c1": None, "c1/done/thumbs/3": 3}
