"""The whole pipeline on one machine: faithful S3 events -> EventBridge -> SQS -> the real ingest
handler -> the DynamoDB ledger, all on the embedded emulator.

:class:`LocalRuntime` owns one provisioned set of resources and drives them:

* S3 operations go through :class:`~s3ingest.local.s3faithful.FaithfulS3`, which records the
  events S3 would emit;
* :meth:`LocalRuntime.flush` publishes those events to the emulator's default bus under a
  :class:`~s3ingest.local.chaos.Chaos` schedule; the ingest rule routes them to the ingest queue
  (and the archive keeps them);
* :meth:`LocalRuntime.drain` plays the Lambda SQS event source: it receives batches, invokes the
  real handler with the Lambda SQS event shape, and deletes only the messages the handler did not
  report in ``batchItemFailures``; failed ones come back after a visibility timeout and move to
  the dead-letter queue after ``maxReceiveCount`` receives;
* :meth:`LocalRuntime.compare` checks the ledger against the bucket (CONTRACT C15);
* with a processor configured, the real effect protocol runs it for every applied change
  (CONTRACT C11) and :attr:`LocalRuntime.effects` records what ran; ``Chaos.crash`` kills a
  worker between an effect and its commit (its lease is then ended, as the invocation's timeout
  would) so the retried message must re-run the effect;
* with the change stream on, :meth:`LocalRuntime.pump_changes` (run at the end of every drain
  and backfill) plays the relay Lambda's event source: it reads the ledger's DynamoDB stream,
  invokes the real relay with the Lambda event shape, and collects what a rule on the change
  bus delivered (:attr:`LocalRuntime.changes`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, cast
from unittest.mock import patch

from s3ingest.local.chaos import Chaos
from s3ingest.local.emulator import REGION, Emulator, Resources, provision
from s3ingest.local.inventory_writer import write_inventory
from s3ingest.local.s3faithful import MAX_KEY_BYTES, FaithfulS3, SequencerClock
from s3ingest.settings import Settings, inventory_report_prefix
from s3ingest_fn import wiring
from s3ingest_fn.adapters.dynamo_ledger import DynamoLedger, DynamoLedgerScanner
from s3ingest_fn.adapters.s3_objects import S3Objects
from s3ingest_fn.core.effects import (
    AppliedChange,
    PinnedContent,
    Processor,
    load_processor,
)
from s3ingest_fn.core.events import normalize_etag, normalize_version
from s3ingest_fn.core.model import Result, TransientError
from s3ingest_fn.core.row import LedgerRow
from s3ingest_fn.handlers.change_stream import relay
from s3ingest_fn.handlers.ingest import make_handler
from s3ingest_fn.services.reconcile import (
    INVENTORY,
    Progress,
    Reconciler,
    ReconcileReport,
    ReconcileRequest,
)

#: The repository's example processor (JSON sidecars), which local demos and scenarios run.
EXAMPLE_PROCESSOR = "s3ingest_examples.sidecar:process"


def local_settings(**overrides: Any) -> Settings:
    """Settings for local demos and scenarios: the stack's defaults plus the example processor
    and the change stream, so local runs show effects and change events."""
    return Settings(**{"processor": EXAMPLE_PROCESSOR, "change_stream": True, **overrides})


#: Visibility timeout used by the local poller for a received batch, seconds: a failed record
#: comes back this soon instead of after the deployed queue's timeout.
LOCAL_VISIBILITY_TIMEOUT = 1


@dataclass
class Delivered:
    """One processed record, for reports: the scenario step that delivered it and its Result."""

    step: int | None
    result: Result
    message_id: str


class InjectedCrash(TransientError):
    """The local runtime's worker 'died' between an effect and its commit (``Chaos.crash``).

    A :class:`TransientError`: the record ends ``retried`` (its message comes back, as after a
    Lambda timeout) and a backfill task ends ``TemporaryFailure`` (Batch Operations retries it).
    """


@dataclass
class EffectRun:
    """One completed run of the processor: the change it ran for, and whether the worker was
    then killed before committing (so the effect must run again)."""

    change_id: str
    key: str
    kind: str
    sequencer: str | None
    version_id: str | None
    etag: str | None
    token: int
    step: int | None
    crashed_before_commit: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.change_id,
            "key": self.key,
            "kind": self.kind,
            "sequencer": self.sequencer,
            "versionId": self.version_id,
            "etag": self.etag,
            "token": self.token,
            "step": self.step,
            "crashed_before_commit": self.crashed_before_commit,
        }


@dataclass
class Comparison:
    """Ledger against bucket (CONTRACT C15)."""

    converged: bool
    bucket: list[dict[str, Any]]
    ledger: list[LedgerRow]
    differences: list[str] = field(default_factory=list)


class LocalRuntime:
    """One deployment of the pipeline on the emulator.

    Parameters
    ----------
    emu : Emulator
        A started emulator.
    settings : Settings
        The stack's settings (same defaults as ``cdk.json``).
    bucket : str, optional
        Landing bucket name (unique by default).
    versioning : {"Enabled", "Suspended", None}
    seed : int
        Seeds the sequencer suffixes.
    """

    def __init__(
        self,
        emu: Emulator,
        settings: Settings | None = None,
        *,
        bucket: str | None = None,
        versioning: str | None = "Enabled",
        seed: int = 0,
    ) -> None:
        self.emu = emu
        self.settings = settings or Settings()
        self.resources: Resources = provision(
            emu, self.settings, bucket=bucket, versioning=versioning
        )
        self.s3 = emu.client("s3")
        self.sqs = emu.client("sqs")
        self.ddb = emu.client("dynamodb")
        self.events = emu.client("events")
        self.faithful = FaithfulS3(self.s3, self.resources.bucket, versioning, SequencerClock(seed))
        self.service = wiring.ingest_service(
            s3=self.s3,
            dynamodb=self.ddb,
            table=self.resources.table,
            tombstone_ttl_seconds=self.settings.tombstone_ttl_seconds,
            scope_bucket=self.resources.bucket,
        )
        self.ledger = cast(DynamoLedger, self.service.ledger)
        self.objects = cast(S3Objects, self.service.bucket)
        self.processor = wiring.message_processor(self.service, self.sqs, self.resources.dlq_url)
        self.delivered: list[Delivered] = []
        self.dropped: list[dict[str, Any]] = []
        self.step: int | None = None
        self.handler = make_handler(
            self.processor, self.settings.record_concurrency, emit=self._emit
        )
        self.invocations = 0
        #: Called after every handler invocation (tests check invariants from it).
        self.after_batch: Callable[[LocalRuntime], None] | None = None
        #: Completed processor runs, in completion order (CONTRACT C11).
        self.effects: list[EffectRun] = []
        #: Change-stream events a subscriber received: ``{"detail-type", "detail"}``.
        self.changes: list[dict[str, Any]] = []
        self._crash_rate = 0.0
        self._crash_rng = random.Random(seed)
        #: Crash chaos of the last flush, applied to the next drain only (then cleared).
        self._flush_chaos: Chaos | None = None
        self._lock = threading.Lock()
        self._stream_iterators: dict[str, str | None] = {}
        if self.settings.processor:
            self.service.effects = wiring.effect_runner(
                self._recording(load_processor(self.settings.processor)),
                self.s3,
                after_effect=self._maybe_crash,
            )

    # -- effects (CONTRACT C11) --------------------------------------------------------------

    def _recording(self, processor: Processor) -> Processor:
        """The team's processor, called exactly as the deployed functions call it (``processor(
        change, content)``, under :meth:`function_environment`), and recorded when it
        completes."""

        def run(change: AppliedChange, content: PinnedContent | None) -> None:
            processor(change, content)
            self.effects.append(
                EffectRun(
                    change_id=change.change_id,
                    key=change.key,
                    kind=change.kind,
                    sequencer=change.sequencer,
                    version_id=change.version_id,
                    etag=change.etag,
                    token=change.token,
                    step=self.step,
                )
            )

        return run

    def _maybe_crash(self, change: AppliedChange) -> None:
        with self._lock:
            crash = self._crash_rate > 0 and self._crash_rng.random() < self._crash_rate
            if not crash:
                return
            for run in reversed(self.effects):
                if run.change_id == change.change_id and run.token == change.token:
                    run.crashed_before_commit = True
                    break
        # The dead worker's invocation would have timed out by the time SQS shows the message
        # again, so its lease has run out: end that one lease now. (Moving a shared clock would
        # also expire the leases of workers still running on other threads, which in AWS are
        # separate invocations that never outlive their own leases.)
        self.ledger.release(change.bucket, change.key, change.token)
        # The dead worker logs nothing; the report still shows the delivery, as retried with its
        # own event's fields (the processing layer builds that record).
        raise InjectedCrash("worker-killed-before-commit")

    @contextmanager
    def function_environment(self) -> Iterator[None]:
        """The environment the stack gives the functions that run the processor (``PROCESSOR``,
        ``OUTPUT_BUCKET``), with boto3's default chain pointed at the emulator, in force while
        the block runs: the local runtime's invocations, as a Lambda function's."""
        env = self.emu.function_environment()
        if self.settings.processor:
            env["PROCESSOR"] = self.settings.processor
            if self.resources.output_bucket:
                env["OUTPUT_BUCKET"] = self.resources.output_bucket
        with patch.dict(os.environ, env):
            yield

    @contextmanager
    def crashing(self, chaos: Chaos | None) -> Iterator[None]:
        """Inject ``chaos.crash`` into the effects run inside the block, and only there."""
        with self._lock:
            saved = (self._crash_rate, self._crash_rng)
            if chaos is not None:  # None: the enclosing block's crash rate goes on
                self._crash_rate, self._crash_rng = chaos.crash, random.Random(chaos.seed)
        try:
            yield
        finally:
            with self._lock:
                self._crash_rate, self._crash_rng = saved

    # -- change stream -----------------------------------------------------------------------

    def pump_changes(self) -> int:
        """Play the relay's DynamoDB-stream event source once over everything new in the
        ledger's stream; return how many events the change bus delivered to the subscriber."""
        if not self.resources.stream_arn or not self.resources.change_bus:
            return 0
        streams = self.emu.client("dynamodbstreams")
        shards = streams.describe_stream(StreamArn=self.resources.stream_arn)["StreamDescription"][
            "Shards"
        ]
        for shard in shards:
            shard_id = shard["ShardId"]
            it = self._stream_iterators.get(shard_id)
            if it is None:
                it = streams.get_shard_iterator(
                    StreamArn=self.resources.stream_arn,
                    ShardId=shard_id,
                    ShardIteratorType="TRIM_HORIZON",
                )["ShardIterator"]
            while it:
                page = streams.get_records(ShardIterator=it, Limit=100)
                records = page.get("Records", [])
                it = page.get("NextShardIterator")
                if not records:
                    break
                response = relay(
                    wiring.change_publisher(self.events),
                    self.resources.change_bus,
                    {
                        "Records": [
                            {
                                **r,
                                "eventSource": "aws:dynamodb",
                                "eventSourceARN": self.resources.stream_arn,
                            }
                            for r in records
                        ]
                    },
                )
                if response["batchItemFailures"]:
                    raise RuntimeError(f"change relay failed: {response}")
            self._stream_iterators[shard_id] = it
        return self._collect_changes()

    def _collect_changes(self) -> int:
        url = self.resources.change_queue_url
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

    def effects_report(self) -> dict[str, Any]:
        """Effects and change events of this run, with every problem :meth:`check_effects` and
        :meth:`check_sidecars` found (empty lists when all is well)."""
        ids = [c["detail"]["id"] for c in self.changes]
        return {
            "processor": self.settings.processor,
            "effects_run": len(self.effects),
            "crashes_injected": sum(r.crashed_before_commit for r in self.effects),
            "change_events": len(self.changes),
            "change_events_unique": len(set(ids)),
            "change_events_by_type": dict(
                sorted(Counter(str(c["detail-type"]) for c in self.changes).items())
            ),
            "problems": self.check_effects(),
            "sidecar_differences": self.check_sidecars(),
        }

    def check_sidecars(self) -> list[str]:
        """For the example processor: every visible object has a sidecar describing its current
        version/ETag, and no other key has one. Empty when another processor is configured."""
        if self.settings.processor != EXAMPLE_PROCESSOR or not self.resources.output_bucket:
            return []
        from s3ingest_examples.sidecar import DEFAULT_PREFIX

        out = self.resources.output_bucket
        sidecars: dict[str, dict[str, Any]] = {}
        names: list[str] = []  # the emulator stores keys S3 would refuse: check their length
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=out):
            for obj in page.get("Contents", []):
                names.append(obj["Key"])
                doc = json.loads(self.s3.get_object(Bucket=out, Key=obj["Key"])["Body"].read())
                sidecars[doc["key"]] = doc
        problems = []
        for obj in self.bucket_objects():
            doc = sidecars.pop(obj["key"], None)
            if doc is None:
                problems.append(f"no sidecar for visible {obj['key']!r}")
            elif (doc["versionId"], doc["etag"]) != (obj["version_id"], obj["etag"]):
                problems.append(
                    f"sidecar of {obj['key']!r} describes {doc['versionId']}/"
                    f"{doc['etag']}, the bucket holds {obj['version_id']}/"
                    f"{obj['etag']}"
                )
        problems.extend(
            f"sidecar left for deleted {k!r} (under {DEFAULT_PREFIX})" for k in sidecars
        )
        problems.extend(
            f"sidecar key of {len(k.encode())} bytes: S3 refuses keys over {MAX_KEY_BYTES} bytes"
            for k in names
            if len(k.encode()) > MAX_KEY_BYTES
        )
        return problems

    def check_effects(self) -> list[str]:
        """Effects against the ledger (CONTRACT C11): per key, the processor runs in sequencer
        order with only crash-caused repeats, the last one ran for the row's current change, and
        no effect is pending or behind the row (:attr:`LedgerRow.effect_behind`). Returns the
        problems found."""
        problems: list[str] = []
        rows = {r.key: r for r in self.ledger_rows()}
        by_key: dict[str, list[EffectRun]] = {}
        for run in self.effects:
            by_key.setdefault(run.key, []).append(run)
        for key, runs in by_key.items():
            tokens = [r.token for r in runs]
            if tokens != sorted(tokens) or len(set(tokens)) != len(tokens):
                problems.append(f"{key!r}: effects not in claim order: tokens {tokens}")
            for before, after in itertools.pairwise(runs):
                if before.change_id == after.change_id and not before.crashed_before_commit:
                    problems.append(f"{key!r}: effect {before.change_id} ran twice without a crash")
            row = rows.get(key)
            if (
                row is not None
                and row.effect_status == "done"
                and runs[-1].change_id != row.change_id
            ):
                problems.append(
                    f"{key!r}: last effect {runs[-1].change_id} is not the row's "
                    f"change {row.change_id}"
                )
        visible = {o["key"]: o for o in self.bucket_objects()}
        for key, row in rows.items():
            if row.effect_status == "pending":
                problems.append(f"{key!r}: effect still pending after quiescence")
            elif row.effect_behind and _row_matches(row, visible.get(key)):
                # (a row that differs from the bucket is ledger drift, reported by compare();
                # its repair records a new change, which runs its own effect)
                problems.append(
                    f"{key!r}: effect {row.effect_status} for the row's change "
                    f"{row.change_id} and no newer change came (a reconciliation "
                    "re-runs it)"
                )
        return problems

    # -- delivery ------------------------------------------------------------------------

    def _emit(self, result: Result, message_id: str) -> None:
        self.delivered.append(Delivered(step=self.step, result=result, message_id=message_id))

    def flush(self, chaos: Chaos | None = None) -> int:
        """Publish every pending S3 event to the bus under ``chaos``; return how many were sent.

        Dropped events are kept in :attr:`dropped` (lost for good: only reconciliation can
        repair them). ``chaos.crash`` applies to the next :meth:`drain` only, which delivers this
        flush's messages; later drains, reconciliations and backfills run without it.
        """
        chaos = chaos or Chaos()
        self._flush_chaos = chaos
        deliver, dropped = chaos.schedule(self.faithful.take_pending())
        self.dropped.extend(dropped)
        for i in range(0, len(deliver), 10):
            entries = [
                {
                    "Source": e["source"],
                    "DetailType": e["detail-type"],
                    "Detail": json.dumps(e["detail"]),
                    "Resources": e["resources"],
                }
                for e in deliver[i : i + 10]
            ]
            resp = self.events.put_events(Entries=entries)
            if resp.get("FailedEntryCount"):
                raise RuntimeError(f"emulator refused events: {resp['Entries']}")
        return len(deliver)

    def send_raw(self, body: str) -> None:
        """Put one message on the ingest queue exactly as given (a body as AWS would send it)."""
        self.sqs.send_message(QueueUrl=self.resources.queue_url, MessageBody=body)

    def drain(
        self, on_batch: Callable[[int], None] | None = None, timeout_seconds: float = 300.0
    ) -> None:
        """Play the Lambda SQS event source until the ingest queue is empty.

        Parameters
        ----------
        on_batch : callable, optional
            Called with the number of records of each invoked batch (progress bars).
        timeout_seconds : float
            Gives up (RuntimeError) when the queue has not emptied by then.
        """
        chaos, self._flush_chaos = self._flush_chaos, None
        with self.crashing(chaos):
            self._drain(on_batch, timeout_seconds)

    def _drain(self, on_batch: Callable[[int], None] | None, timeout_seconds: float) -> None:
        url = self.resources.queue_url
        deadline = time.monotonic() + timeout_seconds
        batch = max(1, min(10, self.settings.batch_size))
        while True:
            msgs = self.sqs.receive_message(
                QueueUrl=url,
                MaxNumberOfMessages=batch,
                AttributeNames=["All"],
                MessageAttributeNames=["All"],
                VisibilityTimeout=LOCAL_VISIBILITY_TIMEOUT,
            ).get("Messages", [])
            if not msgs:
                if self._queue_empty():
                    self.pump_changes()
                    return
                if time.monotonic() > deadline:
                    raise RuntimeError("ingest queue did not drain in time")
                time.sleep(0.2)
                continue
            event = {"Records": [self._lambda_record(m) for m in msgs]}
            with self.function_environment():
                response = self.handler(event, None)
            self.invocations += 1
            failed = {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}
            done = [m for m in msgs if m["MessageId"] not in failed]
            if done:
                self.sqs.delete_message_batch(
                    QueueUrl=url,
                    Entries=[
                        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                        for i, m in enumerate(done)
                    ],
                )
            if on_batch:
                on_batch(len(msgs))
            if self.after_batch:
                self.after_batch(self)

    def _queue_empty(self) -> bool:
        attrs = self.sqs.get_queue_attributes(
            QueueUrl=self.resources.queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return all(int(attrs.get(k, "0")) == 0 for k in attrs)

    def _lambda_record(self, msg: dict[str, Any]) -> dict[str, Any]:
        """An SQS message in the shape Lambda hands it to a function
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
            "eventSourceARN": self.resources.queue_arn,
            "awsRegion": REGION,
        }

    # -- reconciliation --------------------------------------------------------------------

    def reconciler(self) -> Reconciler:
        """The reconcile code the Lambda runs, bound to this deployment's resources."""
        return wiring.reconciler(
            s3=self.s3,
            dynamodb=self.ddb,
            sqs=self.sqs,
            bucket=self.resources.bucket,
            table=self.resources.table,
            queue_url=self.resources.queue_url,
            inventory_bucket=self.resources.inventory_bucket,
            inventory_prefix=inventory_report_prefix(self.resources.bucket),
        )

    def write_inventory(self) -> str:
        """Write an S3 Inventory report of the bucket now; return its manifest key."""
        return write_inventory(
            self.s3,
            source_bucket=self.resources.bucket,
            destination_bucket=self.resources.inventory_bucket,
        )

    def reconcile(
        self,
        source: str = INVENTORY,
        *,
        prefix: str = "",
        dry_run: bool = False,
        margin_seconds: int = 0,
        progress: Progress | None = None,
        drain: bool = True,
    ) -> ReconcileReport:
        """Run one reconciliation (writing an inventory report first for ``inventory``), then
        drain the repairs through the ingest handler.

        ``margin_seconds`` defaults to 0 here: locally, nothing changes after the snapshot.
        """
        manifest = self.write_inventory() if source == INVENTORY else None
        request = ReconcileRequest(
            source=source,
            prefix=prefix,
            dry_run=dry_run,
            manifest_key=manifest,
            margin_ms=margin_seconds * 1000,
        )
        report = self.reconciler().run(request, progress)
        if drain and not dry_run:
            self.drain()
        return report

    # -- replay --------------------------------------------------------------------------------

    def replay_target(self) -> Any:
        """The archive, bus and ingest rule ARNs (the replay is scoped to the ingest rule)."""
        from s3ingest.operations import ReplayTarget

        archive = self.events.describe_archive(ArchiveName=self.resources.archive)["ArchiveArn"]
        return ReplayTarget(
            archive_arn=archive,
            bus_arn=self.events.describe_event_bus()["Arn"],
            rule_arn=self.events.describe_rule(Name=self.resources.rule)["Arn"],
        )

    def replay(self, start: Any = None, end: Any = None, name: str | None = None) -> dict[str, Any]:
        """Replay the archive (default: everything archived so far) to the ingest rule, then
        drain. The emulator archives at once, so no ingestion lag is enforced here."""
        from datetime import UTC, datetime, timedelta

        from s3ingest.operations import start_replay, wait_replay

        now = datetime.now(UTC)
        start = start or now - timedelta(days=1)  # before anything this runtime archived
        # nothing is archived after now, and the emulator archives at once: no lag to keep
        end = min(end or now, now) + timedelta(seconds=1)
        replay = start_replay(
            self.events, self.replay_target(), start, end, name=name, now=end, min_lag=timedelta(0)
        )
        wait_replay(self.events, replay, poll_seconds=0.2)
        self.drain()
        return {"replay": replay, "from": start.isoformat(), "to": end.isoformat()}

    # -- backfill ----------------------------------------------------------------------------

    def backfill(
        self,
        manifest_key: str | None = None,
        between: Callable[[int], None] | None = None,
        chaos: Chaos | None = None,
    ) -> dict[str, Any]:
        """Backfill from an S3 Inventory report (written now unless given): a Batch Operations
        job driven locally through the real backfill code path (CONTRACT C13). ``chaos.crash``
        kills workers of this job's tasks: each becomes a ``TemporaryFailure`` that the job
        retries."""
        from s3ingest.local.batch_ops import run_job
        from s3ingest_fn.services.backfill import handle_invocation

        reconciler = self.reconciler()
        manifest_key = manifest_key or self.write_inventory()
        manifest = reconciler.manifest(manifest_key)
        data = [reconciler.get_inventory_object(k) for k in manifest.files]
        with self.crashing(chaos), self.function_environment():
            report = run_job(
                manifest_key,
                manifest,
                data,
                lambda event: handle_invocation(event, self.service),
                between,
            )
        self.pump_changes()  # the job wrote to the ledger outside drain()
        return report.as_dict()

    # -- state ---------------------------------------------------------------------------

    def outcome_counts(self) -> Counter[str]:
        """Processed records per outcome."""
        return Counter(d.result.outcome.value for d in self.delivered)

    def dlq_messages(self) -> list[dict[str, Any]]:
        """Everything in the dead-letter queue (received without deleting)."""
        out: list[dict[str, Any]] = []
        seen: set[str] = set()
        for _ in range(100):
            msgs = self.sqs.receive_message(
                QueueUrl=self.resources.dlq_url,
                MaxNumberOfMessages=10,
                VisibilityTimeout=30,
                MessageAttributeNames=["All"],
            ).get("Messages", [])
            fresh = [m for m in msgs if m["MessageId"] not in seen]
            if not fresh:
                break
            seen.update(m["MessageId"] for m in fresh)
            out.extend(fresh)
        return out

    def dead_letters(self) -> list[dict[str, Any]]:
        """The dead-letter queue's messages as ``{"reason", "body"}`` (body cut to 200 chars);
        ``retries-exhausted`` for a message that used up its receives."""
        # A message SQS moved there after maxReceiveCount receives carries no reason of ours.
        return [
            {
                "reason": m.get("MessageAttributes", {})
                .get("s3ingest-reason", {})
                .get("StringValue")
                or "retries-exhausted",
                "body": m["Body"][:200],
            }
            for m in self.dlq_messages()
        ]

    def ledger_rows(self) -> list[LedgerRow]:
        """Every ledger row, sorted by key."""
        rows = DynamoLedgerScanner(self.ddb, self.resources.table).all_rows()
        return sorted(rows, key=lambda r: r.key)

    def bucket_objects(self) -> list[dict[str, Any]]:
        """Visible objects of the bucket: key, current version id (None when unversioned or
        the null version) and ETag without quotes."""
        bucket = self.resources.bucket
        visible: list[dict[str, Any]] = []
        if self.resources.versioning:
            pages = self.s3.get_paginator("list_object_versions").paginate(Bucket=bucket)
            latest: dict[str, dict[str, Any]] = {}
            for page in pages:
                for v in page.get("Versions", []):
                    if v.get("IsLatest"):
                        latest[v["Key"]] = {
                            "key": v["Key"],
                            "version_id": normalize_version(v.get("VersionId")),
                            "etag": normalize_etag(v.get("ETag")),
                        }
                for m in page.get("DeleteMarkers", []):
                    if m.get("IsLatest"):
                        latest.pop(m["Key"], None)
            visible = list(latest.values())
        else:
            for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
                visible.extend(
                    {"key": o["Key"], "version_id": None, "etag": normalize_etag(o.get("ETag"))}
                    for o in page.get("Contents", [])
                )
        return sorted(visible, key=lambda o: o["key"])

    def compare(self) -> Comparison:
        """Whether the ledger equals the bucket: every visible key present with its current
        version id and ETag; every other row a tombstone."""
        objects = self.bucket_objects()
        rows = self.ledger_rows()
        by_key = {r.key: r for r in rows}
        diffs: list[str] = []
        for obj in objects:
            row = by_key.get(obj["key"])
            if row is None:
                diffs.append(f"missing in ledger: {obj['key']!r}")
            elif not row.present:
                diffs.append(f"tombstoned but visible: {obj['key']!r}")
            elif not _row_matches(row, obj):
                diffs.append(
                    f"content mismatch: {obj['key']!r} ledger "
                    f"{row.version_id}/{row.etag} bucket "
                    f"{obj['version_id']}/{obj['etag']}"
                )
        visible = {o["key"] for o in objects}
        diffs.extend(
            f"present in ledger but not visible: {r.key!r}"
            for r in rows
            if r.present and r.key not in visible
        )
        return Comparison(converged=not diffs, bucket=objects, ledger=rows, differences=diffs)


def _row_matches(row: LedgerRow, obj: dict[str, Any] | None) -> bool:
    """Whether a ledger row records what the bucket shows: present with the visible object's
    version id and ETag, or a tombstone of a key that is not visible (``obj`` None)."""
    if obj is None:
        return not row.present
    return row.present and (row.version_id, row.etag) == (
        obj["version_id"],
        obj["etag"],
    )
