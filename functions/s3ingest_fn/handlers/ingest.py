"""The ingest Lambda handler: SQS batch in, partial batch response out.

Thin by design: Powertools decorators, the batch processor, one call per record. Records of a
batch run concurrently on a bounded thread pool (CONTRACT C10); a record whose outcome is
``retried`` is reported in ``batchItemFailures`` and comes back after the visibility timeout
(https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-errorhandling.html).

Event shape in: the Lambda SQS event (``{"Records": [{"messageId", "body", ...}]}``).
Shape out: ``{"batchItemFailures": [{"itemIdentifier": messageId}, ...]}``.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import (
    AsyncBatchProcessor,
    EventType,
    async_process_partial_response,
)

from s3ingest_fn.model import Outcome, Result

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from s3ingest_fn.processing import MessageProcessor

logger = Logger(service="s3ingest")
metrics = Metrics(namespace="S3Ingest", service="s3ingest")
tracer = Tracer(service="s3ingest")


class RetryRecordError(Exception):
    """Raised inside the batch processor to mark a record as a batch item failure."""


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
        batch = AsyncBatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
        loop_results: list[tuple[Result, str]] = []

        async def record_handler(record: SQSRecord) -> str:
            loop = asyncio.get_running_loop()
            results = await loop.run_in_executor(pool, processor.process, record.body,
                                                 record.message_id)
            loop_results.extend((r, record.message_id) for r in results)
            if any(r.outcome is Outcome.RETRIED for r in results):
                raise RetryRecordError(next(r.reason for r in results
                                            if r.outcome is Outcome.RETRIED))
            return ",".join(r.outcome.value for r in results)

        response = async_process_partial_response(event=event, record_handler=record_handler,
                                                  processor=batch, context=context)
        for result, message_id in loop_results:
            emit(result, message_id)
        return dict(response)

    return handle


def _log_and_count(result: Result, message_id: str) -> None:
    logger.info("record processed", outcome=result.outcome.value, reason=result.reason,
                bucket=result.bucket, key=result.key, sequencer=result.sequencer,
                message_id=message_id, **result.extra)
    metrics.add_metric(name=result.outcome.value, unit=MetricUnit.Count, value=1)
    if result.extra.get("source") == "replay":
        metrics.add_metric(name="replayed", unit=MetricUnit.Count, value=1)


_handler: Callable[[dict[str, Any], Any], dict[str, Any]] | None = None


def _build_from_env() -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    import boto3

    from s3ingest_fn.bucket import S3Objects
    from s3ingest_fn.ingest import IngestService
    from s3ingest_fn.ledger import DynamoLedger
    from s3ingest_fn.processing import DeadLetter, FunctionSettings, MessageProcessor

    settings = FunctionSettings.from_env()
    service = IngestService(
        ledger=DynamoLedger(boto3.client("dynamodb"), settings.ledger_table_name,
                            settings.tombstone_ttl_seconds),
        bucket=S3Objects(boto3.client("s3")),
        scope_bucket=settings.bucket_name,
    )
    processor = MessageProcessor(service=service, dead_letter=DeadLetter(
        boto3.client("sqs"), settings.dead_letter_queue_url))
    return make_handler(processor, settings.record_concurrency)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Lambda entry point (``s3ingest_fn.handlers.ingest.handler``).

    Clients and settings are built on the first invocation (cold start) from the environment:
    ``LEDGER_TABLE_NAME``, ``DEAD_LETTER_QUEUE_URL``, ``TOMBSTONE_TTL_SECONDS``,
    ``RECORD_CONCURRENCY``, ``BUCKET_NAME``.
    """
    global _handler
    if _handler is None:
        _handler = _build_from_env()
    return _handler(event, context)
