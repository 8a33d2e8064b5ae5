"""The ingest queue's and its dead-letter queue's ``MaximumMessageSize`` (CONTRACT C9): any body
the queue accepts can be forwarded to the DLQ with its reason attributes (issue 24)."""

from __future__ import annotations

import pytest

from s3ingest_cdk.synth import Synth
from s3ingest_fn.adapters.sqs import (
    DEAD_LETTER_MAX_MESSAGE_BYTES,
    FORWARD_ATTRIBUTES_MAX_BYTES,
    INGEST_QUEUE_MAX_MESSAGE_BYTES,
)
from s3ingest_fn.core.events import MAX_BODY_BYTES


@pytest.mark.contract("C9")
def test_the_dlq_can_carry_any_body_the_ingest_queue_accepts_with_its_reason(synth: Synth) -> None:
    # GIVEN the synthesized ingest queue and its DLQ
    resources = synth.template["Resources"]
    queue = resources[synth.logical_id(synth.pipeline.ingest_queue.queue)]["Properties"]
    dlq = resources[synth.logical_id(synth.pipeline.ingest_queue.dead_letter_queue)]["Properties"]
    # THEN the queue takes what the parser reads (256 KiB), the DLQ SQS's largest (1 MiB), and a
    # body at the queue's maximum plus the forward's attributes fits the DLQ
    assert (
        queue["MaximumMessageSize"] == INGEST_QUEUE_MAX_MESSAGE_BYTES == MAX_BODY_BYTES == 262_144
    )
    assert dlq["MaximumMessageSize"] == DEAD_LETTER_MAX_MESSAGE_BYTES == 1_048_576
    assert queue["MaximumMessageSize"] + FORWARD_ATTRIBUTES_MAX_BYTES <= dlq["MaximumMessageSize"]
