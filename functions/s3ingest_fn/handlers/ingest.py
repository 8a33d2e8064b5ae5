"""The ingest Lambda handler: SQS batch in, partial batch response out.

Thin by design: Powertools decorators, a partial batch response as Powertools' SQS batch
processor makes it, one call per record. Records of a batch run concurrently on a bounded thread
pool (CONTRACT C10); a record whose outcome is ``retried`` is reported in ``batchItemFailures``
and comes back after the visibility timeout
(https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-errorhandling.html).

Event shape in: the Lambda SQS event (``{"Records": [{"messageId", "body", ...}]}``).
Shape out: ``{"batchItemFailures": [{"itemIdentifier": messageId}, ...]}``.
"""

from __future__ import annotations

import logging
import sys
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

from s3ingest_fn.config import carry_context
from s3ingest_fn.contract import INGEST_SERVICE, LAG_METRIC, OTHER_BUCKET, PROCESSOR_DIMENSION
from s3ingest_fn.core.model import Outcome, Result
from s3ingest_fn.core.row import DEFAULT_PROCESSOR
from s3ingest_fn.handlers import cold_start, resume
from s3ingest_fn.handlers.telemetry import (
    bucket_metrics,
    dimension_metrics,
    function_logger,
    invocation_metrics,
)

if TYPE_CHECKING:
    from s3ingest_fn.services.ingest import MessageProcessor

logger = function_logger(INGEST_SERVICE)


class RetryRecordError(Exception):
    """Raised inside the batch processor to mark a record as a batch item failure."""


#: The logger Powertools' batch processor logs its debug lines to (kept: the same lines).
_BATCH_LOGGER = logging.getLogger("aws_lambda_powertools.utilities.batch.base")
#: Powertools' error for an event that is not a batch, word for word.
_NOT_A_BATCH = (
    "Invalid event format. Please ensure batch event is a valid SQS event. \n"
    "See sample events in our documentation for either SQS, KinesisDataStreams, "
    "DynamoDBStreams, Kafka: \n "
    "https://docs.powertools.aws.dev/lambda/python/latest/utilities/batch/"
    "#processing-messages-from-sqs"
)


class SQSMessage:
    """An SQS record as the record handler reads it: the two fields of Powertools'
    ``SQSRecord`` it uses (``messageId``, ``body``; a missing one raises ``KeyError``)."""

    __slots__ = ("_raw",)

    def __init__(self, raw: dict[str, Any]) -> None:
        self._raw = raw

    @property
    def message_id(self) -> str:
        """``messageId``."""
        return str(self._raw["messageId"])

    @property
    def body(self) -> str:
        """``body``."""
        return str(self._raw["body"])


def partial_batch_response(
    event: dict[str, Any], record_handler: Callable[[SQSMessage], Any], pool: ThreadPoolExecutor
) -> dict[str, Any]:
    """The partial batch response of ``event``'s records, each run through ``record_handler`` on
    ``pool``: what Powertools' ``process_partial_response`` with
    ``BatchProcessor(EventType.SQS, raise_on_entire_batch_failure=False)`` returns (a record
    whose handler raises is a failure, in the order they failed; the same debug lines), without
    importing Powertools' batch package at the cold start (with its asyncio and every event
    source's data classes: ``bench/bundle_cold_start.py``).

    Raises
    ------
    ValueError
        ``event`` is not a mapping.
    UnexpectedBatchTypeError
        Its ``Records`` are missing, empty or not a list (Powertools' exception).
    """
    try:
        records = event.get("Records", [])
    except AttributeError:
        raise ValueError(_NOT_A_BATCH)  # noqa: B904 (Powertools chains it implicitly)
    if not records or not isinstance(records, list):
        from aws_lambda_powertools.utilities.batch.exceptions import UnexpectedBatchTypeError

        raise UnexpectedBatchTypeError(
            "Unexpected batch event type. Possible values are: SQS, KinesisDataStreams, "
            "DynamoDBStreams, Kafka"
        )
    failed: list[SQSMessage] = []

    def one(record: dict[str, Any]) -> None:
        message = SQSMessage(record)
        try:
            record_handler(message)
        except Exception:
            kind, value, _ = sys.exc_info()
            _BATCH_LOGGER.debug(
                "Record cannot be converted to customer's model; converting without model"
            )
            _BATCH_LOGGER.debug(f"Record processing exception: {kind}:{value}")
            failed.append(message)  # list.append is atomic under the GIL

    list(pool.map(carry_context(one), records))
    if not failed:
        _BATCH_LOGGER.debug(f"All {len(records)} records successfully processed")
        return {"batchItemFailures": []}
    return {"batchItemFailures": [{"itemIdentifier": m.message_id} for m in failed]}


def make_handler(
    processor: MessageProcessor,
    record_concurrency: int,
    emit: Callable[[Result, str], None] | None = None,
    clock_ms: Callable[[], float] = lambda: time.time() * 1000,
) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """Build an SQS batch handler around a :class:`MessageProcessor`.

    Parameters
    ----------
    processor : MessageProcessor
    record_concurrency : int
        Records processed at once (thread pool size).
    emit : callable, optional
        Receives every (Result, messageId) as soon as its record finishes (from the record's
        worker thread), so a timeout later in the batch loses no line. Default: a structured
        log line per record, and, once the batch is done, its metrics (stack-wide, and per
        bucket: one document per bucket).
    clock_ms : callable
        Epoch milliseconds, for the end-to-end lag (``lag_ms`` on live records).

    Returns
    -------
    callable
        ``handler(event, context) -> {"batchItemFailures": [...]}``.
    """
    pool = ThreadPoolExecutor(max_workers=record_concurrency, thread_name_prefix="record")
    log = emit or _log_record

    def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
        done: list[Result] = []
        bind = getattr(processor, "bind_context", None)
        if bind is not None:
            bind(context)  # effect leases end with this invocation

        def record_handler(record: SQSMessage) -> str:
            results = processor.process(record.body, record.message_id)
            finished = clock_ms()
            for result in results:
                _add_lag(result, finished)
                log(result, record.message_id)
            done.extend(results)  # list.extend of a list is atomic under the GIL
            retry = [r.reason for r in results if r.outcome is Outcome.RETRIED]
            if retry:
                raise RetryRecordError(retry[0])
            return ",".join(r.outcome.value for r in results)

        response = partial_batch_response(event, record_handler, pool)
        if emit is None:
            with invocation_metrics() as metrics:
                for result in done:
                    _count(metrics, result)
            for document in bucket_metrics(per_bucket(done)):
                document.flush_metrics()
            for document in dimension_metrics(per_processor(done), PROCESSOR_DIMENSION):
                document.flush_metrics()
        return dict(response)

    return handle


#: Outcomes of a live event that wrote the ledger (the lag is measured for these: a duplicate
#: or stale copy, e.g. a message redriven from the DLQ hours later, is no ingestion latency).
_DECIDED = frozenset({Outcome.APPLIED, Outcome.SUPERSEDED})


def _add_lag(result: Result, finished_ms: float) -> None:
    """``lag_ms``: S3's event time to the end of this record (its ledger write, and its
    processor's effect when one runs), for live events that wrote the ledger only (replayed,
    repaired and backfilled records are not S3's latency)."""
    event_time = result.extra.get("event_time")
    if (
        result.outcome not in _DECIDED
        or result.extra.get("source") != "live"
        or not isinstance(event_time, str)
    ):
        return
    try:
        at = datetime.fromisoformat(event_time.replace("Z", "+00:00"))
    except ValueError:
        return  # a malformed time is informational only (CONTRACT C3)
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    result.extra["lag_ms"] = max(0, int(finished_ms - at.timestamp() * 1000))


def _log_record(result: Result, message_id: str) -> None:
    logger.info(
        "record processed",
        extra={
            "outcome": result.outcome.value,
            "reason": result.reason,
            "bucket": result.bucket,
            "key": result.key,
            "sequencer": result.sequencer,
            "message_id": message_id,
            **result.extra,
        },
    )


def _count(metrics: EphemeralMetrics, result: Result) -> None:
    metrics.add_metric(name=result.outcome.value, unit=MetricUnit.Count, value=1)
    lag = result.extra.get("lag_ms")
    if isinstance(lag, int):
        metrics.add_metric(name=LAG_METRIC, unit=MetricUnit.Milliseconds, value=lag)
    if result.extra.get("source") == "replay":
        # counted apart (CONTRACT C14): all replayed records, and per outcome
        metrics.add_metric(name="replayed", unit=MetricUnit.Count, value=1)
        metrics.add_metric(name=f"replayed_{result.outcome.value}", unit=MetricUnit.Count, value=1)


def per_bucket(results: list[Result]) -> Counter[tuple[str, str]]:
    """The invocation's outcomes per bucket, ``{(bucket, outcome): n}``, for the per-bucket
    counts (:func:`~s3ingest_fn.handlers.telemetry.bucket_metrics`); records of a bucket that
    is not the stack's count under one name (:data:`~s3ingest_fn.contract.OTHER_BUCKET`), and
    records without a bucket (an invalid message) are left out (the stack-wide count has them).
    """
    counts: Counter[tuple[str, str]] = Counter()
    for result in results:
        if not result.bucket:
            continue
        bucket = OTHER_BUCKET if result.extra.get("scope") == "other-bucket" else result.bucket
        counts[(bucket, result.outcome.value)] += 1
    return counts


def per_processor(results: list[Result]) -> Counter[tuple[str, str]]:
    """The invocation's effect runs per processor, ``{(processor, "effect_<status>"): n}``
    (status ``done``, ``superseded``, ``failed``, ``killed``, ``lease-lost``; a re-run counts
    as its status), from each result's ``effect``: a map by processor name, or the single
    processor's status (named ``default``). ``s3ingest status`` reads them."""
    counts: Counter[tuple[str, str]] = Counter()
    for result in results:
        effect = result.extra.get("effect")
        named = effect if isinstance(effect, dict) else {DEFAULT_PROCESSOR: effect}
        for name, status in named.items():
            if isinstance(status, str) and status.removeprefix("resumed-") in EFFECT_STATUSES:
                counts[(str(name), f"effect_{status.removeprefix('resumed-')}")] += 1
    return counts


#: Effect statuses counted per processor (:func:`per_processor`).
EFFECT_STATUSES = frozenset({"done", "superseded", "failed", "killed", "lease-lost"})

#: The built handler of each configuration (``(IngestConfig, ClientConfig)``), from its cold
#: start on; None: none built yet.
_handler: dict[Any, Callable[[dict[str, Any], Any], dict[str, Any]]] | None = None


def _build_from_env() -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """Cold start: settings from the environment, clients, and (unless disabled) the X-Ray
    tracer, imported here so that importing this module stays cheap (see ``bench/``)."""
    from s3ingest_fn import wiring
    from s3ingest_fn.config import POWERTOOLS_TRACE_DISABLED, invocation_env

    settings = wiring.function_settings()
    env = invocation_env()
    if env.get(POWERTOOLS_TRACE_DISABLED, "false").lower() != "true":
        from aws_lambda_powertools import Tracer

        Tracer(service="s3ingest", patch_modules=["boto3", "botocore"])
    return make_handler(wiring.function_message_processor(), settings.record_concurrency)


def built() -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """The handler of this invocation's configuration, built on its first use (the cold start,
    the garbage collector paused: :func:`s3ingest_fn.handlers.cold_start`)."""
    global _handler
    from s3ingest_fn import wiring

    key = (wiring.function_settings(), wiring.function_clients())
    if _handler is None:
        _handler = {}
    made = _handler.get(key)
    if made is None:
        with cold_start():
            made = _handler[key] = _build_from_env()
    return made


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Lambda entry point (``s3ingest_fn.handlers.ingest.handler``).

    Clients and settings are built on the first invocation (cold start) from the environment:
    ``LEDGER_TABLE_NAME``, ``DEAD_LETTER_QUEUE_URL``, ``TOMBSTONE_TTL_SECONDS``,
    ``RECORD_CONCURRENCY``, ``SCOPE`` (else ``BUCKET_NAME``); ``PROCESSOR``
    (``package.module:function``) runs the team's effect for every applied change (CONTRACT
    C11), with leases that end with this invocation; ``POWERTOOLS_TRACE_DISABLED=true`` (the
    stack's default, setting ``tracing`` off) skips the X-Ray SDK and its cold-start cost
    (``bench/bundle_cold_start.py``).
    """
    return built()(event, context)


#: the cold start ends with this module (see :mod:`s3ingest_fn.handlers`)
resume()
