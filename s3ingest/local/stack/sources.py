"""The local runtime's event sources: what feeds the real handlers, as AWS would.

* :func:`publish_s3_events` puts S3's events on the emulator's default bus (the ingest rule
  routes them to the ingest queue, the archive keeps them);
* :class:`SqsEventSource` plays the Lambda SQS event source of the ingest function: it receives
  batches, invokes the handler with the Lambda SQS event shape
  (https://docs.aws.amazon.com/lambda/latest/dg/with-sqs.html) and deletes only the messages
  the handler did not report in ``batchItemFailures``;
* :class:`StreamEventSource` plays the relay function's DynamoDB stream event source
  (https://docs.aws.amazon.com/lambda/latest/dg/with-ddb.html) and collects what a rule on the
  change bus delivered to a subscriber queue;
* :func:`replay_archive` and :func:`run_backfill` drive an EventBridge archive replay and a
  Batch Operations job through the real code paths.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from s3ingest.local.emulator.faults import LambdaThrottled
from s3ingest.local.emulator.server import REGION

if TYPE_CHECKING:
    from s3ingest.commands.replay import ReplayTarget
    from s3ingest_fn.core.decide import IngestService
    from s3ingest_fn.services.reconcile import Reconciler

#: Visibility timeout used by the local poller for a received batch, seconds: a failed record
#: comes back this soon instead of after the deployed queue's timeout.
LOCAL_VISIBILITY_TIMEOUT = 1

#: A Lambda function's handler: ``(event, context) -> response``.
Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


def publish_s3_events(
    events: Any, deliver: list[dict[str, Any]], senders: Callable[[str], Any] | None = None
) -> int:
    """Put S3 event notifications (EventBridge shape) on the default bus, 10 per request;
    return how many were sent. With ``senders`` (account -> an EventBridge client of that
    account), each event goes on the default bus of its ``account`` (the bucket owner's, as S3
    sends it), whose rules forward it (a remote bucket's: the source stack's rule, to the
    central bus); ``events`` is the central account's client.

    Raises
    ------
    RuntimeError
        When the bus refuses an entry.
    """
    start = 0
    while start < len(deliver):
        account = deliver[start].get("account")
        batch = [deliver[start]]
        for e in deliver[start + 1 : start + 10]:
            if e.get("account") != account:
                break
            batch.append(e)
        start += len(batch)
        client = senders(str(account)) if senders is not None and account else events
        entries = [
            {
                "Source": e["source"],
                "DetailType": e["detail-type"],
                "Detail": json.dumps(e["detail"]),
                "Resources": e["resources"],
            }
            for e in batch
        ]
        resp = client.put_events(Entries=entries)
        if resp.get("FailedEntryCount"):
            raise RuntimeError(f"emulator refused events: {resp['Entries']}")
    return len(deliver)


def lambda_sqs_record(msg: dict[str, Any], queue_arn: str) -> dict[str, Any]:
    """An SQS message (``ReceiveMessage`` shape) in the shape Lambda hands it to a function
    (https://docs.aws.amazon.com/lambda/latest/dg/with-sqs.html)."""
    body = msg["Body"]
    return {
        "messageId": msg["MessageId"],
        "receiptHandle": msg["ReceiptHandle"],
        "body": body,
        "attributes": {k: str(v) for k, v in msg.get("Attributes", {}).items()},
        "messageAttributes": msg.get("MessageAttributes", {}),
        "md5OfBody": hashlib.md5(body.encode()).hexdigest(),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": REGION,
    }


class SqsEventSource:
    """The Lambda SQS event source of one queue and handler (partial batch responses on).

    Parameters
    ----------
    sqs : boto3 SQS client
    queue_url, queue_arn : str
    batch_size : int
        Records per invocation (clamped to 1..10, ``ReceiveMessage``'s limit).
    invoke : callable
        Runs the handler on one Lambda SQS event and returns its response
        (``{"batchItemFailures": [{"itemIdentifier": messageId}, ...]}``); raises
        :class:`~s3ingest.local.emulator.faults.LambdaThrottled` when Lambda refuses the invocation.
    """

    def __init__(
        self,
        sqs: Any,
        queue_url: str,
        queue_arn: str,
        batch_size: int,
        invoke: Callable[[dict[str, Any]], dict[str, Any]],
    ) -> None:
        self.sqs = sqs
        self.queue_url = queue_url
        self.queue_arn = queue_arn
        self.batch_size = max(1, min(10, batch_size))
        self.invoke = invoke
        #: Handler invocations so far.
        self.invocations = 0
        #: Invocations Lambda refused (throttled) so far.
        self.throttled = 0
        #: Invocations at once at most (the event source's maximum concurrency; 1: one batch
        #: at a time, the default locally; :func:`s3ingest.local.emulator.faults.limit_concurrency`
        #: sets the settings' ``maxConcurrency``).
        self.pollers = 1
        #: Visibility timeout of a received batch, seconds (:data:`LOCAL_VISIBILITY_TIMEOUT`;
        #: :func:`s3ingest.local.emulator.faults.leases_within_receives` lengthens it).
        self.visibility_timeout = LOCAL_VISIBILITY_TIMEOUT
        self._lock = threading.Lock()

    def send_raw(self, body: str) -> None:
        """Put one message on the queue exactly as given."""
        self.sqs.send_message(QueueUrl=self.queue_url, MessageBody=body)

    def queue_empty(self) -> bool:
        """Whether the queue holds no message, visible or in flight."""
        attrs = self.sqs.get_queue_attributes(
            QueueUrl=self.queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return all(int(attrs.get(k, "0")) == 0 for k in attrs)

    def drain(
        self,
        *,
        on_batch: Callable[[int], None] | None = None,
        after_batch: Callable[[], None] | None = None,
        timeout_seconds: float = 300.0,
    ) -> None:
        """Receive and invoke until the queue is empty, with :attr:`pollers` invocations at
        once at most. A failed record comes back after :attr:`visibility_timeout` seconds
        (and moves to the queue's dead-letter queue after ``maxReceiveCount`` receives); so does
        a whole batch whose invocation Lambda refused
        (:class:`~s3ingest.local.emulator.faults.LambdaThrottled`, counted in :attr:`throttled`):
        the function did not run, the receive counts
        (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-errorhandling.html).

        Parameters
        ----------
        on_batch : callable, optional
            Called with the number of records of each invoked batch (progress bars).
        after_batch : callable, optional
            Called after every invocation (tests check invariants from it).
        timeout_seconds : float
            Gives up (RuntimeError) when the queue has not emptied by then.
        """
        deadline = time.monotonic() + timeout_seconds
        if self.pollers <= 1:
            self._poll(deadline, on_batch, after_batch)
            return
        errors: list[BaseException] = []

        def poll() -> None:
            try:
                self._poll(deadline, on_batch, after_batch)
            except BaseException as exc:
                errors.append(exc)

        threads = [
            threading.Thread(target=contextvars.copy_context().run, args=(poll,), daemon=True)
            for _ in range(self.pollers)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]

    def _poll(
        self,
        deadline: float,
        on_batch: Callable[[int], None] | None,
        after_batch: Callable[[], None] | None,
    ) -> None:
        """One poller of :meth:`drain`, until the queue is empty."""
        while True:
            msgs = self.sqs.receive_message(
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=self.batch_size,
                AttributeNames=["All"],
                MessageAttributeNames=["All"],
                VisibilityTimeout=self.visibility_timeout,
            ).get("Messages", [])
            if not msgs:
                if self.queue_empty():
                    return
                if time.monotonic() > deadline:
                    raise RuntimeError("ingest queue did not drain in time")
                time.sleep(0.2)
                continue
            try:
                response = self.invoke(
                    {"Records": [lambda_sqs_record(m, self.queue_arn) for m in msgs]}
                )
            except LambdaThrottled:
                with self._lock:
                    self.throttled += 1
                continue  # nothing deleted: back after the visibility timeout
            with self._lock:
                self.invocations += 1
            failed = {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}
            done = [m for m in msgs if m["MessageId"] not in failed]
            if done:
                self.sqs.delete_message_batch(
                    QueueUrl=self.queue_url,
                    Entries=[
                        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                        for i, m in enumerate(done)
                    ],
                )
            if on_batch:
                on_batch(len(msgs))
            if after_batch:
                after_batch()


class StreamEventSource:
    """The relay function's DynamoDB stream event source, and a subscriber of the change bus.

    Parameters
    ----------
    streams, sqs : boto3 clients
        DynamoDB Streams and SQS on the emulator.
    stream_arn : str
        The ledger table's stream.
    relay : callable
        The relay handler over one Lambda DynamoDB stream event, returning
        ``{"batchItemFailures": [...]}``.
    subscriber_queue_url : str or None
        The queue a rule on the change bus delivers to; what arrives there is collected in
        :attr:`changes`.
    history : SqsEventSource, optional
        The history writer's event source (``historyTable``), drained after each pump.
    """

    def __init__(
        self,
        streams: Any,
        sqs: Any,
        stream_arn: str,
        relay: Callable[[dict[str, Any]], dict[str, Any]],
        subscriber_queue_url: str | None,
        history: SqsEventSource | None = None,
    ) -> None:
        self.streams = streams
        self.history = history
        self.sqs = sqs
        self.stream_arn = stream_arn
        self.relay = relay
        self.subscriber_queue_url = subscriber_queue_url
        #: Change events the subscriber received: ``{"detail-type", "source", "detail"}``.
        self.changes: list[dict[str, Any]] = []
        self._iterators: dict[str, str | None] = {}

    def pump(self) -> int:
        """Invoke the relay once over everything new in every shard of the stream, then collect
        what the subscriber received (and drain the history queue); return how many change
        events arrived.

        Raises
        ------
        RuntimeError
            When the relay reports a failed record.
        """
        shards = self.streams.describe_stream(StreamArn=self.stream_arn)["StreamDescription"][
            "Shards"
        ]
        for shard in shards:
            shard_id = shard["ShardId"]
            it = self._iterators.get(shard_id)
            if it is None:
                it = self.streams.get_shard_iterator(
                    StreamArn=self.stream_arn,
                    ShardId=shard_id,
                    ShardIteratorType="TRIM_HORIZON",
                )["ShardIterator"]
            while it:
                page = self.streams.get_records(ShardIterator=it, Limit=100)
                records = page.get("Records", [])
                it = page.get("NextShardIterator")
                if not records:
                    break
                response = self.relay(
                    {
                        "Records": [
                            {**r, "eventSource": "aws:dynamodb", "eventSourceARN": self.stream_arn}
                            for r in records
                        ]
                    }
                )
                if response["batchItemFailures"]:
                    raise RuntimeError(f"change relay failed: {response}")
            self._iterators[shard_id] = it
        got = self._collect()
        if self.history is not None:
            self.history.drain()
        return got

    def _collect(self) -> int:
        url = self.subscriber_queue_url
        got = 0
        while url:
            msgs = self.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get(
                "Messages", []
            )
            if not msgs:
                break
            for m in msgs:
                event = json.loads(m["Body"])
                self.changes.append(
                    {
                        "detail-type": event.get("detail-type"),
                        "source": event.get("source"),
                        "detail": event["detail"],
                    }
                )
            self.sqs.delete_message_batch(
                QueueUrl=url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(msgs)
                ],
            )
            got += len(msgs)
        return got


def replay_target(events: Any, *, archive: str, rule: str) -> ReplayTarget:
    """The archive, default bus and ingest rule ARNs (a replay is scoped to the ingest rule)."""
    from s3ingest.commands.replay import ReplayTarget

    return ReplayTarget(
        archive_arn=events.describe_archive(ArchiveName=archive)["ArchiveArn"],
        bus_arn=events.describe_event_bus()["Arn"],
        rule_arn=events.describe_rule(Name=rule)["Arn"],
    )


def replay_archive(
    events: Any, target: ReplayTarget, start: datetime, end: datetime, name: str | None = None
) -> dict[str, Any]:
    """Replay the archive of ``target`` between ``start`` and ``end`` and wait for it to
    complete (the emulator archives at once: no ingestion lag is kept). Returns
    ``{"replay", "from", "to"}``."""
    from s3ingest.commands.replay import start_replay, wait_replay

    replay = start_replay(events, target, start, end, name=name, now=end, min_lag=timedelta(0))
    wait_replay(events, replay, poll_seconds=0.2)
    return {"replay": replay, "from": start.isoformat(), "to": end.isoformat()}


def run_backfill(
    reconciler: Reconciler,
    service: IngestService,
    manifest_key: str,
    between: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Run a Batch Operations job over the S3 Inventory report ``manifest_key`` through the
    real backfill code path (CONTRACT C13), one task per inventory row; returns the job's
    completion report as a dict."""
    from s3ingest.local.emulator.batch_ops import run_job
    from s3ingest_fn.services.backfill import handle_invocation

    manifest = reconciler.manifest(manifest_key)
    data = [reconciler.get_inventory_object(k) for k in manifest.files]
    report = run_job(
        manifest_key,
        manifest,
        data,
        lambda event: handle_invocation(event, service),
        between,
    )
    return report.as_dict()
