"""One processor call, local and deployed: the same processor module, run by the deployed ingest
Lambda handler (built from its environment by ``wiring``) and by the local runtime, is called the
same way, sees the same environment and has the same effect (CONTRACT C11)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from s3ingest.local.emulator.server import REGION
from s3ingest.local.stack.runtime import LocalRuntime, local_settings
from tests.processors import recorder

RECORDER = "tests.processors.recorder:process"


class Context:
    function_name = "ingest"
    memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:ingest"
    aws_request_id = "req-1"

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 60_000


def invoke_deployed(
    rt: LocalRuntime,
    emulator: Any,
    monkeypatch: pytest.MonkeyPatch,
    processor: str,
    event: dict[str, Any],
) -> dict[str, Any]:
    """Run ``event`` through the deployed ingest handler, built by ``wiring`` from the
    environment the stack gives the function, pointed at the emulator."""
    env = {
        **emulator.function_environment(),
        "LEDGER_TABLE_NAME": rt.resources.table,
        "DEAD_LETTER_QUEUE_URL": rt.resources.dlq_url,
        "BUCKET_NAME": rt.resources.bucket,
        "PROCESSOR": processor,
        "OUTPUT_BUCKET": str(rt.resources.output_bucket),
        "POWERTOOLS_TRACE_DISABLED": "true",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    from s3ingest_fn import wiring
    from s3ingest_fn.handlers import ingest

    body = json.dumps(event)
    wiring.function_settings.cache_clear()
    wiring.function_ingest_service.cache_clear()
    monkeypatch.setattr(ingest, "_handler", None)
    try:
        return ingest.handler(
            {
                "Records": [
                    {
                        "messageId": "m-1",
                        "receiptHandle": "r-1",
                        "body": body,
                        "attributes": {},
                        "messageAttributes": {},
                        "md5OfBody": hashlib.md5(body.encode()).hexdigest(),
                        "eventSource": "aws:sqs",
                        "eventSourceARN": rt.resources.queue_arn,
                        "awsRegion": REGION,
                    }
                ]
            },
            Context(),
        )
    finally:  # the next test builds its own
        wiring.function_settings.cache_clear()
        wiring.function_ingest_service.cache_clear()


@pytest.mark.contract("C8", "C11")
def test_the_same_processor_is_called_the_same_way_locally_and_deployed(
    emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a local deployment whose processor records how it is called
    rt = LocalRuntime(
        emulator, local_settings(processor=RECORDER, change_stream=False), versioning="Enabled"
    )
    recorder.calls.clear()
    # WHEN one object's event goes through the local runtime ...
    rt.faithful.put("local one", "1")
    rt.flush()
    rt.drain()
    # ... and another's through the deployed ingest handler
    rt.faithful.put("deployed two", "2")
    (event,) = rt.faithful.take_pending()
    response = invoke_deployed(rt, emulator, monkeypatch, RECORDER, event)
    # THEN both paths called process(change, content) with no other argument, in the same
    # environment, and the effect (a write through boto3's default chain) landed both times
    assert response == {"batchItemFailures": []}
    assert recorder.calls == [
        {
            "args": ["AppliedChange", "PinnedContent"],
            "kwargs": [],
            "output_bucket": rt.resources.output_bucket,
            "key": "local one",
            "body": b"1",
        },
        {
            "args": ["AppliedChange", "PinnedContent"],
            "kwargs": [],
            "output_bucket": rt.resources.output_bucket,
            "key": "deployed two",
            "body": b"2",
        },
    ]
    seen = rt.s3.list_objects_v2(Bucket=rt.resources.output_bucket, Prefix="seen/")
    assert sorted(o["Key"] for o in seen["Contents"]) == ["seen/deployed two", "seen/local one"]
    assert {r.key: r.effect_status for r in rt.ledger_rows()} == {
        "deployed two": "done",
        "local one": "done",
    }


@pytest.mark.contract("C11")
def test_the_example_processor_runs_the_same_through_the_deployed_handler(
    emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the example sidecar processor, configured as the stack configures it
    rt = LocalRuntime(emulator, local_settings(change_stream=False), versioning=None)
    rt.faithful.put("a+b c.txt", "hello\n")
    (event,) = rt.faithful.take_pending()
    # WHEN its event goes through the deployed handler
    response = invoke_deployed(rt, emulator, monkeypatch, str(rt.settings.processor), event)
    # THEN the sidecar the local runtime checks is there and matches the object
    assert response == {"batchItemFailures": []}
    assert rt.check_sidecars() == []
    assert rt.compare().converged
