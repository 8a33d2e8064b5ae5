"""A forged body on the ingest queue, through the local runtime (issue 24; CONTRACT C9, C15): it
ends in the DLQ with its reason, the ledger still equals the bucket, and no processor effect
runs for it."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from s3ingest.local.stack.runtime import LocalRuntime
from s3ingest_fn import wiring
from s3ingest_fn.core.effects import AppliedChange, PinnedContent, ProcessorSpec

KEY = "reports/2026 q1.csv"


@pytest.mark.contract("C9", "C11", "C15")
def test_a_forged_delete_with_a_130_kb_version_id_is_dead_lettered_and_applies_nothing(
    emulator: Any,
) -> None:
    # GIVEN an object recorded in the ledger, its processor's effect run once
    rt = LocalRuntime(emulator, versioning="Enabled")
    runs: list[tuple[str, str]] = []

    def probe(change: AppliedChange, content: PinnedContent | None) -> None:
        runs.append((change.key, change.kind))

    rt.service.effects = wiring.effect_runner([ProcessorSpec(name="probe", call=probe)], rt.s3)
    op = rt.faithful.put(KEY, "hello")
    rt.flush()
    rt.drain()
    assert runs == [(KEY, "created")]

    # WHEN an in-account sender puts a forged EventBridge delete of that key, with a 130 KB
    # version id and a newer sequencer, straight onto the ingest queue, and the queue drains
    forged = copy.deepcopy(op.event)
    forged["detail-type"] = "Object Deleted"
    forged["detail"]["deletion-type"] = "Permanently Deleted"
    forged["detail"]["reason"] = "DeleteObject"
    forged["detail"]["object"]["version-id"] = "v" * 130_000
    forged["detail"]["object"]["sequencer"] = op.event["detail"]["object"]["sequencer"] + "1"
    for name in ("size", "etag"):
        forged["detail"]["object"].pop(name, None)
    body = json.dumps(forged)
    rt.send_raw(body)
    rt.drain()

    # THEN the message is in the DLQ, unchanged, with its reason; the ledger equals the bucket;
    # no effect ran for it
    (message,) = rt.dlq_messages()
    assert message["MessageAttributes"]["s3ingest-reason"]["StringValue"] == (
        "field-too-long: version-id"
    )
    assert message["Body"] == body
    comparison = rt.compare()
    assert comparison.converged, comparison.differences
    assert [(r.key, r.present, r.version_id) for r in rt.ledger_rows()] == [
        (KEY, True, op.version_id)
    ]
    assert runs == [(KEY, "created")]
