"""The ingest Lambda handler: SQS batch in, partial batch response out.

Thin by design: Powertools decorators, Powertools' batch processor, one call per record. Records
of a batch run concurrently on a bounded thread pool (CONTRACT C10); a record whose outcome is
``retried`` is reported in ``batchItemFailures`` and comes back after the visibility timeout
(https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-errorhandling.html).

Event shape in: the Lambda SQS event (``{"Records": [{"messageId", "body", ...}]}``).
Shape out: ``{"batchItemFailures": [{"itemIdentifier": messageId}, ...]}``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)

from s3ingest_fn.model import Outcome, Result

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

    from s3ingest_fn.processing import MessageProcessor

logger = Logger(service="s3ingest")
metrics = Metrics(namespace="S3Ingest", service="s3ingest")


class RetryRecordError(Exception):
    """Raised inside the batch processor to mark a record as a batch item failure."""


class ConcurrentBatchProcessor(BatchProcessor):
    """Powertools' SQS :class:`BatchProcessor`, with the records of a batch processed on a bounded
    thread pool instead of one after another (CONTRACT C10).

    Success and failure bookkeeping, and the partial batch response, stay Powertools'. Only for
    standard queues: a FIFO queue needs in-order processing that stops at the first failure.
    """

    def __init__(self, pool: ThreadPoolExecutor) -> None:
        super().__init__(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
        self._pool = pool

    def process(self) -> list[tuple[Any, ...]]:
        """Run the record handler for every record, at most ``pool`` size at once."""
        return list(self._pool.map(self._process_record, self.records))


def make_handler(processor: MessageProcessor, record_concurrency: int,
                 emit: Callable[[Result, str], None] | None = None
                 ) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """Build an SQS batch handler around a :class:`MessageProcessor`.

    Parameters
    ----------
    processor : MessageProcessor
    record_concurrency : int
        Records processed at once (thread pool size).
    emit : callable, optional
        Receives every (Result, messageId); defaults to a structured log line and a metric.

    Returns
    -------
    callable
        ``handler(event, context) -> {"batchItemFailures": [...]}``.
    """
    pool = ThreadPoolExecutor(max_workers=record_concurrency, thread_name_prefix="record")
    emit = emit or _log_and_count

    def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
        done: list[tuple[Result, str]] = []
        bind = getattr(processor, "bind_context", None)
        if bind is not None:
            bind(context)  # effect leases end with this invocation

        def record_handler(record: SQSRecord) -> str:
            results = processor.process(record.body, record.message_id)
            done.extend((r, record.message_id) for r in results)  # list.append is atomic
            retry = [r.reason for r in results if r.outcome is Outcome.RETRIED]
            if retry:
                raise RetryRecordError(retry[0])
            return ",".join(r.outcome.value for r in results)

        response = process_partial_response(event=event, record_handler=record_handler,
                                            processor=ConcurrentBatchProcessor(pool),
                                            context=context)
        for result, message_id in done:
            emit(result, message_id)
        return dict(response)

    return handle


def _log_and_count(result: Result, message_id: str) -> None:
    logger.info("record processed", extra={
        "outcome": result.outcome.value, "reason": result.reason, "bucket": result.bucket,
        "key": result.key, "sequencer": result.sequencer, "message_id": message_id,
        **result.extra})
    metrics.add_metric(name=result.outcome.value, unit=MetricUnit.Count, value=1)
    if result.extra.get("source") == "replay":
        # counted apart (CONTRACT C14): all replayed records, and per outcome
        metrics.add_metric(name="replayed", unit=MetricUnit.Count, value=1)
        metrics.add_metric(name=f"replayed_{result.outcome.value}", unit=MetricUnit.Count,
                           value=1)


_handler: Callable[[dict[str, Any], Any], dict[str, Any]] | None = None


def _build_from_env() -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """Cold start: settings from the environment, clients, and (unless disabled) the X-Ray
    tracer, imported here so that importing this module stays cheap (see ``bench/``)."""
    import boto3

    from s3ingest_fn.handlers import wiring
    from s3ingest_fn.processing import DeadLetter, MessageProcessor

    settings = wiring.function_settings()
    if os.environ.get("POWERTOOLS_TRACE_DISABLED", "false").lower() != "true":
        from aws_lambda_powertools import Tracer

        Tracer(service="s3ingest", patch_modules=["boto3", "botocore"])
    processor = MessageProcessor(service=wiring.ingest_service(), dead_letter=DeadLetter(
        boto3.client("sqs"), settings.dead_letter_queue_url))
    return make_handler(processor, settings.record_concurrency)


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Lambda entry point (``s3ingest_fn.handlers.ingest.handler``).

    Clients and settings are built on the first invocation (cold start) from the environment:
    ``LEDGER_TABLE_NAME``, ``DEAD_LETTER_QUEUE_URL``, ``TOMBSTONE_TTL_SECONDS``,
    ``RECORD_CONCURRENCY``, ``BUCKET_NAME``; ``PROCESSOR`` (``package.module:function``) runs
    the team's effect for every applied change (CONTRACT C11), with leases that end with this
    invocation; ``POWERTOOLS_TRACE_DISABLED=true`` skips the X-Ray SDK (Lambda's active tracing
    still records the invocation).
    """
    global _handler
    if _handler is None:
        _handler = _build_from_env()
    return _handler(event, context)
