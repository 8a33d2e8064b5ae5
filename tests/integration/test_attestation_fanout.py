"""The fan-out reconciliation's attestation executed on the emulator (issue 38 item 4): the
stack's machine as synthesized, its summarize step attesting from the partitions' runs; a
dropped event names its key; each inventory data file and Scan segment read once."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from s3ingest.local.emulator.chaos import Chaos
from s3ingest.local.stack.runtime import LocalRuntime, local_settings


@pytest.fixture
def runtime(emulator: Any) -> Iterator[LocalRuntime]:
    rt = LocalRuntime(emulator, local_settings(), versioning="Enabled")
    yield rt
    rt.close()


@pytest.mark.slow
@pytest.mark.parametrize("repairs_applied", [False, True])
def test_the_fan_out_attests_from_its_runs_reading_each_input_once(
    runtime: LocalRuntime, monkeypatch: pytest.MonkeyPatch, repairs_applied: bool
) -> None:
    # GIVEN a deployment whose one event was dropped, and every AWS request counted
    rt = runtime
    for key in ("kept", "also kept", "日本/kept"):
        rt.faithful.put(key, "1")
    rt.flush(Chaos(seed=0))
    rt.drain()
    rt.faithful.put("lost", "2")
    rt.faithful.take_pending()
    from botocore.client import BaseClient

    from s3ingest_fn.services import attestation_store

    calls: list[tuple[str, dict[str, Any]]] = []
    make = BaseClient._make_api_call  # type: ignore[attr-defined]

    def counting(self: Any, operation: str, params: dict[str, Any]) -> Any:
        calls.append((operation, dict(params)))
        return make(self, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", counting)

    def settle(depth: Any) -> bool:
        assert depth() >= 1  # the repair is in the ingest queue
        if repairs_applied:
            rt.drain()  # the ingest function takes the repair
        return repairs_applied

    monkeypatch.setattr(attestation_store, "settle", settle)
    # WHEN the fan-out machine reconciles it, attesting as the schedule asks
    summary = rt.reconcile_fan_out(partitions=3, segments=2, attest=True)
    assert summary["execution"]["status"] == "SUCCEEDED" and summary["repairs_queued"] == 1
    # THEN the stored document is the summary's
    said = summary["attestation"]
    where = said["location"]
    body = rt.emu.client("s3").get_object(Bucket=where["bucket"], Key=where["key"])["Body"].read()
    document = json.loads(body)
    assert document["roots"] == said["roots"]
    assert document["snapshot"]["source"] == "inventory"
    if repairs_applied:
        # the repaired key's row, read again, was written after the report: skipped
        assert document["equal"] is True
        assert (document["counts"]["keys"], document["counts"]["skipped_recent"]) == (3, 1)
    else:
        # the dropped event: the roots differ, and the tree's path names that key alone
        assert document["equal"] is False and document["counts"]["keys"] == 4
        assert [d["key"] for d in document["differences"]] == ["lost"]
    # and each of the report's data files was read once, each Scan segment scanned once
    data = [p["Key"] for op, p in calls if op == "GetObject" and "/data/" in p["Key"]]
    assert data and len(data) == len(set(data)), data
    scans = [p for op, p in calls if op == "Scan" and p.get("TableName") == rt.resources.table]
    first_pages = sorted(p["Segment"] for p in scans if "ExclusiveStartKey" not in p)
    assert first_pages == [0, 1]
    # and no row but the repaired key's was read alone (by its repair and the attestation)
    gets = [p for op, p in calls if op == "GetItem" and p.get("TableName") == rt.resources.table]
    assert gets and {g["Key"]["pk"]["S"].rsplit("/", 1)[1] for g in gets} == {"lost"}
