"""Done-when checks of the processors issue on the local runtime, end to end (SQS, the ingest
handler, processor functions run in-process by their handler path, presigned reads from the
emulator): three processors with different filters for one upload, one failing and
recovering; ``processors`` in the scenario's set-up line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from s3ingest.local.rehearsal.scenario import ScenarioError, parse_lines, run_scenario


def _runs(result: dict[str, Any], processor: str) -> list[tuple[str, str]]:
    return [(e["key"], e["kind"]) for e in result["effects"] if e["processor"] == processor]


@pytest.mark.contract("C11")
def test_example_processors_scenario_runs_three_processors_one_failing_and_recovering() -> None:
    # GIVEN examples/scenarios/processors.jsonl: sidecar (latest), audit (every-change) and
    # flaky (images/*.jpg creates only, failing its first attempt at each change)
    result = run_scenario(Path("examples/scenarios/processors.jsonl"))
    # THEN it converges with no effect problem ...
    assert result["error"] is None
    assert result["converged"] is True, result["differences"]
    assert result["effects_problems"] == []
    # ... each processor ran exactly the changes its filters select, once each ...
    every = [
        ("images/cat.jpg", "created"),
        ("docs/readme.txt", "created"),
        ("images/cat.jpg", "created"),
        ("docs/readme.txt", "removed"),
    ]
    assert sorted(_runs(result, "sidecar")) == sorted(every)
    assert sorted(_runs(result, "audit")) == sorted(every)
    assert _runs(result, "flaky") == [("images/cat.jpg", "created")] * 2
    # ... flaky failed once per change and its retry (a duplicate) re-ran only flaky
    failed = [m for m in result["messages"] if m["outcome"] == "retried"]
    assert len(failed) == 2
    assert all("processor 'flaky'" in m["reason"] for m in failed)
    assert all(set(m["effect_errors"]) == {"flaky"} for m in failed)
    assert all(
        m["effect"] == {"sidecar": "done", "audit": "done", "flaky": "failed"} for m in failed
    )
    resumed = [m for m in result["messages"] if m["effect"] == {"flaky": "resumed-done"}]
    assert len(resumed) == 2 and {m["outcome"] for m in resumed} == {"duplicate"}
    # ... and the ledger rows record each processor's own state
    rows = {r["key"]: r for r in result["ledger"]}
    assert set(rows) == {"images/cat.jpg", "docs/readme.txt"}


def test_processors_and_processor_are_exclusive_in_the_set_up_line() -> None:
    setup = {"processor": None, "processors": [{"name": "a", "module": "m:f"}]}
    with pytest.raises(ScenarioError, match="processor or processors, not both"):
        parse_lines([json.dumps(setup)])


def test_an_invalid_processor_entry_is_refused_before_anything_runs() -> None:
    setup = {"processors": [{"name": "Bad Name", "handler": "pkg.mod:handler"}]}
    with pytest.raises(ScenarioError, match=r"line 1: .*processors"):
        parse_lines([json.dumps(setup)])


def _run_with_outputs(
    emulator: Any, tmp_path: Path, lines: list[dict[str, Any]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run a scenario on the session emulator; return its result and what the processors wrote
    to the output bucket it provisioned (``{key: JSON document}``)."""
    s3 = emulator.client("s3")

    def outputs() -> set[str]:
        return {b["Name"] for b in s3.list_buckets()["Buckets"]}

    before = outputs()
    path = tmp_path / "scenario.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    result = run_scenario(path, emulator=emulator)
    (output,) = {b for b in outputs() - before if b.startswith("s3ingest-output-")}
    written: dict[str, Any] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=output):
        for obj in page.get("Contents", []):
            body = s3.get_object(Bucket=output, Key=obj["Key"])["Body"].read()
            written[obj["Key"]] = json.loads(body)
    return result, written


def _shared_key_steps(first: str, second: str) -> list[dict[str, Any]]:
    """Key ``a`` put in both buckets (different bytes), then deleted in the second."""
    return [
        {"op": "put", "bucket": first, "key": "a", "body": "first's a"},
        {"op": "put", "bucket": second, "key": "a", "body": "second's a, longer"},
        {"op": "flush", "chaos": {"seed": 2, "duplicate": 0.5, "reorder": True}},
        {"op": "delete", "bucket": second, "key": "a"},
        {"op": "flush"},
    ]


@pytest.mark.contract("C1", "C11")
def test_the_in_process_sidecar_keeps_each_buckets_sidecar_of_a_shared_key(
    emulator: Any, tmp_path: Path
) -> None:
    # GIVEN two buckets holding key "a", the example in-process processor (the default)
    first, second = "shared-sc-first", "shared-sc-second"
    setup = {"buckets": [{"name": first}, {"name": second, "versioning": None}]}
    # WHEN "a" is deleted in the second bucket
    result, written = _run_with_outputs(
        emulator, tmp_path, [setup, *_shared_key_steps(first, second)]
    )
    # THEN the first bucket's sidecar of "a" remains and describes its object; the oracle,
    # which checks every visible object's sidecar, finds nothing wrong
    assert result["error"] is None
    assert result["converged"] is True, result["differences"]
    assert result["effects_problems"] == []
    (row,) = [r for r in result["ledger"] if r["state"] == "present"]
    assert (row["bucket"], row["key"]) == (first, "a")
    assert set(written) == {f"sidecars/{first}/a.json"}
    doc = written[f"sidecars/{first}/a.json"]
    assert (doc["bucket"], doc["key"], doc["bytes"]) == (first, "a", len("first's a"))
    assert (doc["versionId"], doc["etag"]) == (row["version_id"], row["etag"])


@pytest.mark.contract("C1", "C11")
def test_every_example_processor_function_keeps_each_buckets_outputs_of_a_shared_key(
    emulator: Any, tmp_path: Path
) -> None:
    # GIVEN two buckets holding key "a" and every example processor function: the sidecar
    # (latest), the audit log (every change) and flaky (failing each change's first attempt)
    first, second = "shared-fn-first", "shared-fn-second"
    setup = {
        "buckets": [{"name": first}, {"name": second, "versioning": None}],
        "processors": [
            {"name": "sidecar", "handler": "s3ingest_examples.sidecar:handler"},
            {"name": "audit", "handler": "s3ingest_examples.audit:handler", "mode": "every-change"},
            {"name": "flaky", "handler": "s3ingest_examples.flaky:handler"},
        ],
    }
    # WHEN "a" is deleted in the second bucket
    result, written = _run_with_outputs(
        emulator, tmp_path, [setup, *_shared_key_steps(first, second)]
    )
    assert result["error"] is None
    assert result["converged"] is True, result["differences"]
    assert result["effects_problems"] == []
    rows = {r["bucket"]: r for r in result["ledger"]}
    assert (rows[first]["state"], rows[second]["state"]) == ("present", "deleted")
    # THEN each processor ran each bucket's own changes of "a" ...
    for name in ("sidecar", "audit", "flaky"):
        runs = sorted((e["bucket"], e["kind"]) for e in result["effects"] if e["processor"] == name)
        assert runs == [(first, "created"), (second, "created"), (second, "removed")], name
    # ... the first bucket's sidecar remains and describes its object, the second's is gone
    sidecars = {k: v for k, v in written.items() if k.startswith("sidecars/")}
    assert set(sidecars) == {f"sidecars/{first}/a.json"}
    doc = sidecars[f"sidecars/{first}/a.json"]
    assert (doc["bucket"], doc["key"]) == (first, "a")
    assert (doc["versionId"], doc["etag"]) == (rows[first]["version_id"], rows[first]["etag"])
    # ... and the audit log keeps each bucket's records apart: one create of the first's "a",
    # a create then the delete of the second's
    audit = sorted(
        (v["bucket"], v["token"], v["kind"], k.startswith(f"audit/{v['bucket']}/a/"))
        for k, v in written.items()
        if k.startswith("audit/")
    )
    assert [(b, kind, under) for b, _, kind, under in audit] == [
        (first, "created", True),
        (second, "created", True),
        (second, "removed", True),
    ]
    for bucket in (first, second):
        assert {
            v["changeId"]
            for k, v in written.items()
            if k.startswith("audit/") and v["bucket"] == bucket
        } == {
            e["id"]
            for e in result["effects"]
            if e["processor"] == "audit" and e["bucket"] == bucket
        }
