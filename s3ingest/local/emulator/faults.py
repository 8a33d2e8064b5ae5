"""Throttling injected into the local runtime, reproducible from a seed, and Lambda's
concurrency limits.

* DynamoDB throttling (``Chaos.ddb_throttle``): a request of the ingest path's DynamoDB client
  is answered, before it reaches the emulator, with the error DynamoDB sends for a throttled
  request (HTTP 400, ``{"__type": "com.amazonaws.dynamodb.v20120810#<code>", "message"}``,
  ``<code>`` ``ProvisionedThroughputExceededException`` or ``ThrottlingException``,
  https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Programming.Errors.html).
  botocore parses and retries it as it would AWS's answer (its standard retry mode and quota);
  what is still refused reaches the ledger adapter as a ``ClientError`` and becomes a
  ``TransientError`` (the record ends ``retried``, its message comes back).
* Lambda throttling (``Chaos.lambda_throttle``) and concurrency limits
  (:class:`Concurrency`): the SQS event source's invocation of the ingest function is refused
  with ``TooManyRequestsException`` (:class:`LambdaThrottled`): the batch is not run, its
  messages become visible again after the visibility timeout and the next receive counts, so
  a message throttled ``maxReceiveCount`` times moves to the dead-letter queue, as in AWS
  (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-errorhandling.html). The local
  Lambda service refuses an invocation beyond a function's reserved concurrency or beyond the
  account's unreserved pool the same way (``Invoke`` answers 429, which Step Functions names
  ``Lambda.TooManyRequestsException`` and Batch Operations counts a ``TemporaryFailure``;
  https://docs.aws.amazon.com/lambda/latest/dg/configuration-concurrency.html).

Each draw is a function of the seed, what is drawn for (the operation and the object key; or
the function and the batch's deliveries: each record's key, sequencer without its time digits
and receive count) and how many times it was drawn for before, never of which thread draws
first. With one record per batch a delivery's Lambda throttle is therefore a function of the
seed alone, whatever the timing; the order in which a key's deliveries reach DynamoDB still
follows when retried messages come back (a real visibility timer), so DynamoDB throttles replay
only as closely. What each receive of a message met is kept (:attr:`FaultInjector.receipts`), so
a test can tell a message dead-lettered by throttling from one lost to a defect.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import random
import threading
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from s3ingest import function_roles
from s3ingest.local.emulator.chaos import Chaos, CrashInjector
from s3ingest.local.emulator.in_process import answer_before
from s3ingest_fn.adapters.dynamo_ledger.layout import PARTITION_KEY

if TYPE_CHECKING:
    from s3ingest_fn.core.effects import AppliedChange

#: What DynamoDB answers a throttled data-plane request with (the first for a table's capacity,
#: the second when the request rate itself is refused).
DDB_THROTTLE_CODES = ("ProvisionedThroughputExceededException", "ThrottlingException")
#: The local name of the ingest function (the SQS event source invokes it).
INGEST = function_roles.INGEST.name
#: The backfill worker functions ``backfillReservedConcurrency`` applies to, as the local Lambda
#: service names them: the Batch Operations task function, the Distributed Map engine's control
#: function (it runs each data file) and the listing backfill's shard function
#: (``s3ingest.settings.Settings.backfill_reserved_concurrency``); the stack reserves the one
#: of the first two its ``backfillEngine`` deploys (:func:`backfill_workers`).
BACKFILL_WORKERS = tuple(
    row.construct_id
    for row in (
        function_roles.BACKFILL,
        function_roles.BACKFILL_CONTROL,
        function_roles.LISTING_SHARD,
    )
)
#: What one receive of an ingest message met (:attr:`FaultInjector.receipts`): Lambda refused
#: the invocation; the record failed in an invocation where DynamoDB was throttled; it failed
#: with no throttle injected; it succeeded.
REFUSED, THROTTLED, FAILED, DONE = "refused", "throttled", "failed", "done"


class _Invocation:
    """One guarded invocation, seen by the DynamoDB hook through a context variable (the local
    Lambda service runs a handler in a copy of the invoking context)."""

    throttled = False


_INVOCATION: contextvars.ContextVar[_Invocation | None] = contextvars.ContextVar(
    "s3ingest_local_invocation", default=None
)


class LambdaThrottled(Exception):
    """Lambda refused the invocation (``TooManyRequestsException``): the function did not run."""


class Concurrency:
    """Lambda's concurrency limits of one local account: each function with reserved
    concurrency runs at most that many invocations at once, and every other function shares
    the unreserved rest of ``account`` (https://docs.aws.amazon.com/lambda/latest/dg/configuration-concurrency.html).
    Thread-safe.

    Parameters
    ----------
    account : int
        The account's concurrency limit (AWS's default is 1,000; a local test sets a few).
    reserved : mapping of str to int
        Reserved concurrency per function name.

    Raises
    ------
    ValueError
        When the reservations exceed the account's limit (AWS also keeps 100 unreserved; not
        required locally).
    """

    def __init__(self, account: int, reserved: Mapping[str, int] | None = None) -> None:
        self.account = int(account)
        self.reserved = dict(reserved or {})
        if self.account < 1 or any(n < 0 for n in self.reserved.values()):
            raise ValueError("concurrency limits are whole numbers, the account's at least 1")
        if sum(self.reserved.values()) > self.account:
            raise ValueError(
                f"reserved concurrency {sum(self.reserved.values())} exceeds the account's "
                f"limit {self.account}"
            )
        #: Invocations running now, per function.
        self.in_use: Counter[str] = Counter()
        #: The most invocations of a function that ran at once.
        self.peak: Counter[str] = Counter()
        #: Invocations refused, per function.
        self.throttled: Counter[str] = Counter()
        self._changed = threading.Condition()

    @property
    def unreserved(self) -> int:
        """The pool the functions without reserved concurrency share."""
        return self.account - sum(self.reserved.values())

    def acquire(self, function: str) -> bool:
        """Take a slot for one invocation of ``function``; False (counted in
        :attr:`throttled`) when its limit or the unreserved pool is full."""
        with self._changed:
            limit = self.reserved.get(function)
            if limit is not None:
                used = self.in_use[function]
            else:
                limit = self.unreserved
                used = sum(n for f, n in self.in_use.items() if f not in self.reserved)
            if used >= limit:
                self.throttled[function] += 1
                self._changed.notify_all()
                return False
            self.in_use[function] += 1
            self.peak[function] = max(self.peak[function], self.in_use[function])
            self._changed.notify_all()
            return True

    def release(self, function: str) -> None:
        """Give back the slot of one ended invocation of ``function``."""
        with self._changed:
            self.in_use[function] -= 1
            self._changed.notify_all()

    def wait_for(
        self, condition: Callable[[Concurrency], bool], timeout_seconds: float = 60.0
    ) -> bool:
        """Block until ``condition(self)`` holds (checked whenever a slot is taken, refused or
        given back); False when it did not within ``timeout_seconds``."""
        with self._changed:
            return self._changed.wait_for(lambda: condition(self), timeout_seconds)


class FaultInjector(CrashInjector):
    """The runtime's worker faults: :class:`~s3ingest.local.emulator.chaos.CrashInjector`'s crashes
    plus throttling (``Chaos.ddb_throttle``, ``Chaos.lambda_throttle``), all at the rates of the
    enclosing :meth:`crashing` block, and the account's :attr:`concurrency` limits when set.

    Parameters
    ----------
    release, on_crash, seed
        As :class:`~s3ingest.local.emulator.chaos.CrashInjector`.
    dynamodb : boto3 DynamoDB client, optional
        The ingest path's client: its requests are throttled at ``Chaos.ddb_throttle``.
    """

    def __init__(
        self,
        release: Callable[[AppliedChange], object],
        on_crash: Callable[[AppliedChange], None] | None = None,
        seed: int = 0,
        dynamodb: Any = None,
    ) -> None:
        super().__init__(release, on_crash, seed)
        self._rates = (0.0, 0.0, seed)
        self._counts: Counter[tuple[str, ...]] = Counter()
        self._faults_lock = threading.Lock()
        #: Per thread: ``off`` (:meth:`unthrottled`), ``refused`` (a throttle was answered).
        self._local = threading.local()
        #: Throttles injected: ``ddb:<code>`` per DynamoDB answer, ``lambda:<function>`` per
        #: refused invocation (concurrency limits counted in :attr:`Concurrency.throttled`).
        self.injected: Counter[str] = Counter()
        #: The account's concurrency limits, when set (:func:`limit_concurrency`).
        self.concurrency: Concurrency | None = None
        #: Per message id of an SQS record, what each of its receives by a guarded function met
        #: (:data:`REFUSED`, :data:`THROTTLED`, :data:`FAILED` or :data:`DONE`), in order.
        self.receipts: defaultdict[str, list[str]] = defaultdict(list)
        if dynamodb is not None:
            # a throttled request must never reach the emulator (DynamoDB applies none)
            answer_before(dynamodb, self._before_send)

    @classmethod
    def of_ledger(
        cls,
        ledger: Any,
        *,
        on_crash: Callable[[AppliedChange], None] | None = None,
        seed: int = 0,
        dynamodb: Any = None,
    ) -> FaultInjector:
        """The injector whose killed workers' leases ``ledger`` (the runtime's
        :class:`~s3ingest_fn.adapters.dynamo_ledger.DynamoLedger`) ends."""

        injector: FaultInjector

        def release(change: AppliedChange) -> object:
            with injector.unthrottled():
                return ledger.release(change.bucket, change.key, change.token, change.processor)

        injector = cls(release, on_crash, seed, dynamodb)
        injector._end_refused_leases(ledger)
        return injector

    def _end_refused_leases(self, ledger: Any) -> None:
        """Wrap ``ledger.finish`` and ``ledger.release`` (the writes that end an effect's lease)
        so that one refused by an injected throttle still ends its lease, unthrottled: in AWS
        the message comes back after the queue's visibility timeout (six times the function's
        timeout), when the lease has run out; locally it comes back after 1 s, while the lease
        would still hold and turn every receive into ``effect-in-progress`` until the DLQ.
        The refused write still fails its record (``retried``)."""
        finish, release = ledger.finish, ledger.release

        def ending(write: Callable[..., bool]) -> Callable[..., bool]:
            def wrapped(bucket: str, key: str, token: int, *args: Any, **kwargs: Any) -> bool:
                self._local.refused = False
                try:
                    return write(bucket, key, token, *args, **kwargs)
                except Exception:
                    if getattr(self._local, "refused", False):
                        ran = getattr(self._local, "effect", None)
                        if ran is not None and ran.token == token and self._on_crash:
                            # the effect ran and its commit was refused: as a worker killed
                            # before its commit, it runs again on the retry (C11 allows it)
                            self._on_crash(ran)
                        processor = kwargs.get("processor")
                        if processor is None and write is release and args:
                            processor = args[0]
                        with self.unthrottled():
                            if processor is None:
                                release(bucket, key, token)
                            else:
                                release(bucket, key, token, processor)
                    raise

            return wrapped

        ledger.finish, ledger.release = ending(finish), ending(release)

    def after_effect(self, change: AppliedChange) -> None:
        """:meth:`CrashInjector.after_effect`, remembering on this thread the change whose
        effect just ran (a throttled commit of it is then told apart)."""
        super().after_effect(change)
        self._local.effect = change

    @contextmanager
    def unthrottled(self) -> Iterator[None]:
        """No DynamoDB throttle is injected on this thread inside the block."""
        saved = getattr(self._local, "off", False)
        self._local.off = True
        try:
            yield
        finally:
            self._local.off = saved

    @contextmanager
    def crashing(self, chaos: Chaos | None) -> Iterator[None]:
        """Inject ``chaos``'s crash and throttle rates into what runs inside the block, and only
        there (``None``: the enclosing block's rates go on)."""
        with self._faults_lock:
            saved = self._rates
            if chaos is not None:
                self._rates = (chaos.ddb_throttle, chaos.lambda_throttle, chaos.seed)
        try:
            with super().crashing(chaos):
                yield
        finally:
            with self._faults_lock:
                self._rates = saved

    def _drawn(self, rate: float, *what: str) -> float | None:
        """The next draw for ``what`` when ``rate`` is on: a value in [0, 1) below ``rate``
        means the fault happens; None when off."""
        if rate <= 0:
            return None
        with self._faults_lock:
            n = self._counts[what]
            self._counts[what] = n + 1
            seed = self._rates[2]
        return random.Random("|".join((str(seed), *what, str(n)))).random()

    def _receipt(self, message_ids: list[str], what: str) -> None:
        with self._faults_lock:
            for message_id in message_ids:
                self.receipts[message_id].append(what)

    def failed_every_receive(self, max_receive_count: int) -> set[str]:
        """The message ids none of whose first ``max_receive_count`` receives succeeded: SQS
        moves exactly these to the dead-letter queue
        (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-dead-letter-queues.html)."""
        with self._faults_lock:
            return {
                message_id
                for message_id, seen in self.receipts.items()
                if len(seen) >= max_receive_count and DONE not in seen[:max_receive_count]
            }

    def _before_send(self, request: Any, **_: Any) -> Any:
        """botocore ``before-send.dynamodb`` handler: maybe answer a throttle."""
        rate = self._rates[0]
        if rate <= 0 or getattr(self._local, "off", False):
            return None
        target = request.headers.get("X-Amz-Target") or ""
        if isinstance(target, bytes):
            target = target.decode("utf-8")
        operation = str(target).rsplit(".", 1)[-1]
        try:
            body = json.loads(request.body or b"{}")
        except (TypeError, ValueError):
            body = {}
        pk = str((body.get("Key") or {}).get(PARTITION_KEY, {}).get("S", ""))
        key = pk.split("/", 1)[-1]  # not the bucket: unique per run, a seed must replay
        drawn = self._drawn(rate, "ddb", operation, key)
        if drawn is None or drawn >= rate:
            return None
        code = DDB_THROTTLE_CODES[int(drawn / rate * len(DDB_THROTTLE_CODES))]
        with self._faults_lock:
            self.injected[f"ddb:{code}"] += 1
        self._local.refused = True
        invocation = _INVOCATION.get()
        if invocation is not None:
            invocation.throttled = True
        return _ddb_error(request.url, code)

    def guard(
        self, function: str, invoke: Callable[[dict[str, Any]], dict[str, Any]]
    ) -> Callable[[dict[str, Any]], dict[str, Any]]:
        """``invoke`` as Lambda's ``Invoke`` of ``function`` admits it: refused at
        ``Chaos.lambda_throttle`` and beyond :attr:`concurrency`'s limits.

        Raises
        ------
        LambdaThrottled
            From the returned callable, when refused (the function did not run).
        """

        def guarded(event: dict[str, Any]) -> dict[str, Any]:
            records = event.get("Records") or []
            ids = [str(r["messageId"]) for r in records if "messageId" in r]
            rate = self._rates[1]
            drawn = self._drawn(rate, "lambda", function, *map(_delivery, records))
            if drawn is not None and drawn < rate:
                self._receipt(ids, REFUSED)
                with self._faults_lock:
                    self.injected[f"lambda:{function}"] += 1
                raise LambdaThrottled(f"{function}: TooManyRequestsException (injected)")
            pool = self.concurrency
            if pool is not None and not pool.acquire(function):
                self._receipt(ids, REFUSED)
                raise LambdaThrottled(f"{function}: TooManyRequestsException (concurrency)")
            invocation = _Invocation()
            token = _INVOCATION.set(invocation)
            try:
                response = invoke(event)
            finally:
                _INVOCATION.reset(token)
                if pool is not None:
                    pool.release(function)
            failed = {f.get("itemIdentifier") for f in response.get("batchItemFailures") or []}
            missed = THROTTLED if invocation.throttled else FAILED
            for message_id in ids:
                self._receipt([message_id], missed if message_id in failed else DONE)
            return response

        return guarded


def _delivery(record: Mapping[str, Any]) -> str:
    """What identifies one SQS record's delivery across runs: its object key, its sequencer
    without the time digits (the local clock's ``00`` + 8 hex digits of Unix seconds, which
    follow the wall clock) and its receive count (never the run's unique bucket, message or
    event ids); the body's hash when it is not an S3 event (any body: a hostile one too)."""
    count = str(record.get("attributes", {}).get("ApproximateReceiveCount", ""))
    body = str(record.get("body", ""))
    try:
        obj = json.loads(body)["detail"]["object"]
        sequencer = str(obj.get("sequencer", ""))
        return f"{obj['key']}@{sequencer[:2]}{sequencer[10:]}#{count}"
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        # not an S3 event's shape: a list or a string for a mapping, nested past the parser
        return f"{hashlib.sha256(body.encode('utf-8')).hexdigest()}#{count}"


def _ddb_error(url: str, code: str) -> Any:
    """DynamoDB's answer to a throttled request (JSON 1.0 protocol, HTTP 400)."""
    from botocore.awsrequest import AWSResponse, HTTPHeaders
    from moto.core.botocore_stubber import MockRawResponse

    body = json.dumps(
        {
            "__type": f"com.amazonaws.dynamodb.v20120810#{code}",
            "message": "The level of configured provisioned throughput for the table was "
            "exceeded. Consider increasing your provisioning level with the UpdateTable API."
            if code == DDB_THROTTLE_CODES[0]
            else "Rate of requests exceeds the allowed throughput.",
        }
    ).encode("utf-8")
    headers = HTTPHeaders()
    headers["Content-Type"] = "application/x-amz-json-1.0"
    headers["x-amzn-RequestId"] = uuid.uuid4().hex.upper()
    return AWSResponse(url, 400, headers, MockRawResponse(body))


def backfill_workers(backfill_engine: str) -> tuple[str, ...]:
    """The :data:`BACKFILL_WORKERS` a stack with ``backfill_engine`` deploys and reserves:
    the Batch Operations task function (``batch-operations``) or the control function
    (``distributed-map``), and the listing shard function."""
    worker = BACKFILL_WORKERS[0] if backfill_engine == "batch-operations" else BACKFILL_WORKERS[1]
    return (worker, BACKFILL_WORKERS[2])


def limit_concurrency(rt: Any, account: int) -> Concurrency:
    """Give local runtime ``rt`` an account concurrency limit of ``account`` and its settings'
    reserved concurrency (``ingestReservedConcurrency`` on the ingest function,
    ``backfillReservedConcurrency`` on each of the settings' ``backfillEngine``
    :func:`backfill_workers`), honoured by the SQS
    event source and the Lambda service alike; the SQS event source then runs up to the
    settings' ``maxConcurrency`` invocations at once, as the event source's maximum
    concurrency lets it (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html).
    Returns the limits (their counters say what ran and what was refused).

    Raises
    ------
    ValueError
        When the reservations exceed ``account``.
    """
    settings = rt.settings
    reserved: dict[str, int] = {}
    if settings.ingest_reserved_concurrency is not None:
        reserved[INGEST] = settings.ingest_reserved_concurrency
    if settings.backfill_reserved_concurrency is not None:
        workers = backfill_workers(settings.backfill_engine)
        reserved.update(dict.fromkeys(workers, settings.backfill_reserved_concurrency))
    pool = Concurrency(account, reserved)
    rt.crashes.concurrency = pool
    rt.machines.lambdas.concurrency = pool
    rt.ingest_source.pollers = settings.max_concurrency
    return pool


def leases_within_receives(rt: Any, ingest_timeout_seconds: float) -> int:
    """Give local runtime ``rt`` an ingest timeout of ``ingest_timeout_seconds`` and an event
    source visibility timeout long enough that ``maxReceiveCount`` receives outlast an effect's
    lease (the invocation's time plus :data:`~s3ingest_fn.core.effects.LEASE_SKEW_MS`), as the
    deployed queue's six times the function's timeout does; returns the visibility timeout.

    The local poller's 1 s visibility timeout (:data:`~s3ingest.local.stack.sources.
    LOCAL_VISIBILITY_TIMEOUT`) is far shorter than a lease: a record retried because a
    throttled commit or release left its lease running (``effect-in-progress``) could use up
    its receives locally before the lease ends, which the deployed timings never allow.
    """
    from s3ingest_fn.core.effects import LEASE_SKEW_MS

    lease = ingest_timeout_seconds + LEASE_SKEW_MS / 1000
    gaps = max(1, rt.settings.max_receive_count - 2)  # receives 1..N-1 while the lease lives
    visibility = int(lease / gaps) + 1
    rt.ingest_timeout_seconds = float(ingest_timeout_seconds)
    rt.ingest_source.visibility_timeout = visibility
    return visibility


__all__ = [
    "BACKFILL_WORKERS",
    "DDB_THROTTLE_CODES",
    "DONE",
    "FAILED",
    "INGEST",
    "REFUSED",
    "THROTTLED",
    "Concurrency",
    "FaultInjector",
    "LambdaThrottled",
    "backfill_workers",
    "leases_within_receives",
    "limit_concurrency",
]
