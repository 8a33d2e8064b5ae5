"""Deployment settings shared by the CDK stack and the local runtime.

One model, read from ``cdk.json`` context (or the same keys given to the local runtime), validated
eagerly: every problem is reported in one :class:`SettingsError`. This module is pure (no CDK, no
boto3) so the local runtime and the tests can import it cheaply.

The tombstone lifetime (CONTRACT C6) and the ingest rule's event pattern are derived here, so the
stack and the local runtime cannot disagree about them.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

SECONDS_PER_DAY = 86_400

#: Context keys accepted in ``cdk.json`` (or ``-c key=value``), with their defaults.
DEFAULTS: dict[str, Any] = {
    "stage": "dev",
    "bucketName": None,
    "versioned": True,
    "archiveRetentionDays": 30,
    "queueRetentionDays": 4,
    "dlqRetentionDays": 14,
    "tombstoneMarginDays": 1,
    "functionTimeoutSeconds": 30,
    "functionMemoryMb": 512,
    "batchSize": 10,
    "maxBatchingWindowSeconds": 1,
    "maxConcurrency": 10,
    "maxReceiveCount": 5,
    "recordConcurrency": 16,
    "logRetentionDays": 30,
    "inventoryEnabled": True,
    "reconcileSchedule": "rate(1 day)",
    "reconcileFanOut": False,
    "reconcileMemoryMb": 3008,
    "reconcileTimeoutSeconds": 900,
    "backfillEngine": "batch-operations",
    "backfillFunctionTimeoutSeconds": 60,
    "alarmEmail": None,
    "processor": None,
    "processorPackageDir": None,
    "changeStream": False,
    "lagAlarmSeconds": 300,
    "runbookBaseUrl": "https://github.com/s3ingest/s3ingest/blob/main/docs/runbook.md",
    "tracing": False,
}

#: How the backfill (CONTRACT C13) runs over the inventory: an S3 Batch Operations job invoking the
#: backfill Lambda per object, or a Step Functions Distributed Map with one child per data file.
BACKFILL_ENGINES = ("batch-operations", "distributed-map")

# CloudWatch Logs accepts only these retention periods (days).
# https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_PutRetentionPolicy.html
LOG_RETENTION_DAYS = (
    1,
    3,
    5,
    7,
    14,
    30,
    60,
    90,
    120,
    150,
    180,
    365,
    400,
    545,
    731,
    1096,
    1827,
    2192,
    2557,
    2922,
    3288,
    3653,
)

_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_STAGE_RE = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,31}$")
# A plausible address (one "@", a dotted domain, no spaces); SNS confirms it by mail anyway.
_EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s.]+(\.[^@\s.]+)+$")
# "package.module:function": dotted Python identifiers, a colon, an identifier.
_PROCESSOR_RE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")
# rate(value unit), as EventBridge writes it (https://docs.aws.amazon.com/eventbridge/latest/
# userguide/eb-scheduled-rule-pattern.html#eb-rate-expressions).
_RATE_RE = re.compile(r"^rate\(\s*(?P<value>[1-9]\d*)\s+(?P<unit>minutes?|hours?|days?)\s*\)$")
_RATE_UNIT_SECONDS = {"minute": 60, "hour": 3_600, "day": SECONDS_PER_DAY}
#: Added to the reconcile schedule's interval for the heartbeat alarm's period: a run may start
#: late and take up to 15 minutes (the Lambda limit), or longer with the fan-out.
HEARTBEAT_MARGIN_SECONDS = 3_600
#: CloudWatch's longest evaluation range (Period x EvaluationPeriods), seconds
#: (https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_PutMetricAlarm.html).
MAX_ALARM_RANGE_SECONDS = 7 * SECONDS_PER_DAY
# An absolute https URL with a host, no whitespace and no fragment of its own.
_RUNBOOK_URL_RE = re.compile(r"^https://[^/\s#?]+(/[^\s#]*)?$")

#: The change stream's event ``source``, and its ``detail-type`` per kind of applied change.
CHANGE_SOURCE = "s3ingest"
CHANGE_DETAIL_TYPES = {"created": "Object Ingested", "removed": "Object Tombstoned"}


class SettingsError(ValueError):
    """Raised when context settings are invalid; ``problems`` lists every one of them."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("invalid s3ingest settings:\n  - " + "\n  - ".join(problems))


@dataclass(frozen=True)
class Settings:
    """Validated deployment settings.

    Attributes
    ----------
    stage : str
        Environment name; the stack is named ``S3Ingest-<stage>`` (one stack per environment).
    bucket_name : str or None
        An existing bucket to adopt instead of creating one. ``None``: the stack owns the bucket.
    versioned : bool
        Versioning on the bucket the stack creates.
    archive_retention_days : int
        EventBridge archive retention, days (1 to 3650).
    queue_retention_days, dlq_retention_days : int
        SQS message retention of the ingest queue and its dead-letter queue, days (1 to 14).
    tombstone_margin_days : int
        Safety margin added to the tombstone lifetime, days.
    function_timeout_seconds, function_memory_mb : int
        Ingest Lambda timeout (seconds) and memory (MiB).
    batch_size, max_batching_window_seconds, max_concurrency : int
        SQS event source settings (records per batch, seconds, concurrent invocations).
    max_receive_count : int
        Receives before a message moves to the dead-letter queue.
    record_concurrency : int
        Records of one batch processed at once (bounded thread pool).
    log_retention_days : int
        CloudWatch Logs retention of the function's log group (an allowed value).
    inventory_enabled : bool
        Whether the stack configures a daily S3 Inventory on the bucket it creates.
    reconcile_schedule : str
        EventBridge schedule expression of the reconciliation (CONTRACT C12), ``rate(...)`` or
        ``cron(...)``.
    reconcile_fan_out : bool
        Reconcile through the Step Functions fan-out instead of one Lambda run; needs the stack's
        own inventory.
    reconcile_memory_mb, reconcile_timeout_seconds : int
        Reconcile Lambda memory (MiB) and timeout (seconds).
    backfill_engine : str
        ``"batch-operations"`` (an S3 Batch Operations job over the inventory manifest) or
        ``"distributed-map"`` (a Step Functions Distributed Map over its data files). The backfill
        (CONTRACT C13) is deployed only when the stack owns the inventory (:attr:`owns_inventory`).
    backfill_function_timeout_seconds : int
        Timeout of the backfill Lambda S3 Batch Operations invokes, seconds (3 to 900).
    alarm_email : str or None
        An e-mail address subscribed to the alarm topic (SNS sends it a confirmation first).
        ``None``: the topic has no subscription; subscribe to it yourself.
    processor : str or None
        The team's effect, ``"package.module:function"``, run by the ingest Lambda for every
        applied change (CONTRACT C11; :mod:`s3ingest_fn.core.effects`). ``None``: no effects, one
        write per event. The repository's example is ``s3ingest_examples.sidecar:process``.
    processor_package_dir : str or None
        A directory (relative to the project) whose top-level packages are copied into the
        ingest Lambda's package, for a processor that does not live under ``functions/``.
    change_stream : bool
        Publish every applied change to the stack's own EventBridge bus (source ``s3ingest``),
        from the ledger's DynamoDB stream.
    lag_alarm_seconds : int
        The end-to-end lag alarm's threshold: p99 of live events' ``ingest_lag_ms`` over
        5 minutes above this many seconds (1 to 86400).
    runbook_base_url : str
        The runbook's absolute URL (``https://``); each alarm description links to
        ``<runbookBaseUrl>#<anchor>``.
    tracing : bool
        X-Ray active tracing of every Lambda function (with the Powertools tracer in the ingest
        function). Off by default: the X-Ray SDK adds about 300 ms to a cold start; off, the
        functions get ``POWERTOOLS_TRACE_DISABLED=true`` and no X-Ray permission. The state
        machines keep their X-Ray tracing either way (no cold start there; cdk-nag
        AwsSolutions-SF2).
    """

    stage: str = DEFAULTS["stage"]
    bucket_name: str | None = DEFAULTS["bucketName"]
    versioned: bool = DEFAULTS["versioned"]
    archive_retention_days: int = DEFAULTS["archiveRetentionDays"]
    queue_retention_days: int = DEFAULTS["queueRetentionDays"]
    dlq_retention_days: int = DEFAULTS["dlqRetentionDays"]
    tombstone_margin_days: int = DEFAULTS["tombstoneMarginDays"]
    function_timeout_seconds: int = DEFAULTS["functionTimeoutSeconds"]
    function_memory_mb: int = DEFAULTS["functionMemoryMb"]
    batch_size: int = DEFAULTS["batchSize"]
    max_batching_window_seconds: int = DEFAULTS["maxBatchingWindowSeconds"]
    max_concurrency: int = DEFAULTS["maxConcurrency"]
    max_receive_count: int = DEFAULTS["maxReceiveCount"]
    record_concurrency: int = DEFAULTS["recordConcurrency"]
    log_retention_days: int = DEFAULTS["logRetentionDays"]
    inventory_enabled: bool = DEFAULTS["inventoryEnabled"]
    reconcile_schedule: str = DEFAULTS["reconcileSchedule"]
    reconcile_fan_out: bool = DEFAULTS["reconcileFanOut"]
    reconcile_memory_mb: int = DEFAULTS["reconcileMemoryMb"]
    reconcile_timeout_seconds: int = DEFAULTS["reconcileTimeoutSeconds"]
    backfill_engine: str = DEFAULTS["backfillEngine"]
    backfill_function_timeout_seconds: int = DEFAULTS["backfillFunctionTimeoutSeconds"]
    alarm_email: str | None = DEFAULTS["alarmEmail"]
    processor: str | None = DEFAULTS["processor"]
    processor_package_dir: str | None = DEFAULTS["processorPackageDir"]
    change_stream: bool = DEFAULTS["changeStream"]
    lag_alarm_seconds: int = DEFAULTS["lagAlarmSeconds"]
    runbook_base_url: str = DEFAULTS["runbookBaseUrl"]
    tracing: bool = DEFAULTS["tracing"]

    @property
    def stack_name(self) -> str:
        """CloudFormation stack name for this stage."""
        return f"S3Ingest-{self.stage}"

    @property
    def owns_inventory(self) -> bool:
        """Whether the stack configures (and so can read) the bucket's S3 Inventory."""
        return self.bucket_name is None and self.inventory_enabled

    @property
    def queue_visibility_timeout_seconds(self) -> int:
        """Ingest queue visibility timeout: six times the function timeout (AWS Lambda guidance,
        https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-configure.html)."""
        return 6 * self.function_timeout_seconds

    @property
    def tombstone_ttl_seconds(self) -> int:
        """Lifetime of a tombstone (CONTRACT C6), seconds.

        The longest time an older event can still arrive: it may sit in the archive for the archive
        retention before a replay, then in the ingest queue for its retention, then in the
        dead-letter queue for its retention before a redrive; plus a margin.
        """
        days = (
            self.archive_retention_days
            + self.queue_retention_days
            + self.dlq_retention_days
            + self.tombstone_margin_days
        )
        return days * SECONDS_PER_DAY

    @property
    def reconcile_heartbeat_seconds(self) -> int:
        """The reconciliation heartbeat alarm's period, seconds: the schedule's interval plus
        :data:`HEARTBEAT_MARGIN_SECONDS`, at most CloudWatch's 7-day evaluation range.

        A ``rate(N unit)`` gives its interval (``rate(1 day)``: 25 hours). A ``cron(...)`` is
        taken as daily (25 hours): a cron that runs less often than daily keeps the heartbeat
        alarm in ALARM between runs, so prefer ``rate(...)`` for those.
        """
        match = _RATE_RE.match(self.reconcile_schedule or "")
        interval = SECONDS_PER_DAY
        if match is not None:
            interval = int(match["value"]) * _RATE_UNIT_SECONDS[match["unit"].rstrip("s")]
        return min(interval + HEARTBEAT_MARGIN_SECONDS, MAX_ALARM_RANGE_SECONDS)

    def to_context(self) -> dict[str, Any]:
        """The settings as ``cdk.json`` context keys."""
        out: dict[str, Any] = {}
        for f in fields(self):
            out[_camel(f.name)] = getattr(self, f.name)
        return out

    @classmethod
    def from_context(cls, context: Mapping[str, Any]) -> Settings:
        """Build settings from context values, applying defaults and validating all of them.

        Parameters
        ----------
        context : Mapping[str, Any]
            The app's whole context: ``DEFAULTS``'s names, whose values may be strings as
            ``cdk -c k=v`` gives them, and the CDK's own keys (:func:`is_cdk_key`).

        Raises
        ------
        SettingsError
            With every problem found, not only the first; an unknown key is one (with the
            closest known name, when there is one).
        """
        problems: list[str] = unknown_keys(context)
        values: dict[str, Any] = {}
        untyped: list[str] = []  # keys whose value could not be converted
        for f in fields(cls):
            key = _camel(f.name)
            raw = context.get(key, DEFAULTS[key])
            default = DEFAULTS[key]
            val: Any
            if isinstance(default, bool):
                val = _to_bool(raw)
                if val is None:
                    problems.append(f"{key}: expected true or false, got {raw!r}")
                    untyped.append(key)
                    continue
            elif isinstance(default, int):
                val = _to_int(raw)
                if val is None:
                    problems.append(f"{key}: expected a whole number, got {raw!r}")
                    untyped.append(key)
                    continue
            else:
                val = None if raw in (None, "", "null") else str(raw)
            values[f.name] = val
        # Check the range and cross-key rules of every key that did convert, even when others did
        # not: the keys that failed fall back to their defaults for this check only, and any rule
        # that names one of them is dropped (it cannot be judged without a value).
        unjudgeable = [re.compile(rf"\b{re.escape(key)}\b") for key in untyped]
        for problem in cls(**values).problems():
            if not any(rx.search(problem) for rx in unjudgeable):
                problems.append(problem)
        if problems:
            raise SettingsError(problems)
        return cls(**values)

    def problems(self) -> list[str]:
        """Every constraint this settings object breaks (empty when valid)."""
        p: list[str] = []

        def rng(name: str, value: int, lo: int, hi: int, why: str = "") -> None:
            if not lo <= value <= hi:
                p.append(f"{name}: {value} is outside {lo}..{hi}{why}")

        if not _STAGE_RE.match(self.stage):
            p.append(
                f"stage: {self.stage!r} must start with a letter and hold only letters, "
                "digits and '-' (at most 32)"
            )
        if self.bucket_name is not None and not _BUCKET_RE.match(self.bucket_name):
            p.append(f"bucketName: {self.bucket_name!r} is not a valid S3 bucket name")
        rng("archiveRetentionDays", self.archive_retention_days, 1, 3650)
        rng("queueRetentionDays", self.queue_retention_days, 1, 14, " (SQS limit)")
        rng("dlqRetentionDays", self.dlq_retention_days, 1, 14, " (SQS limit)")
        if self.dlq_retention_days < self.queue_retention_days:
            p.append(
                "dlqRetentionDays must be at least queueRetentionDays: a standard queue keeps "
                "a message's original enqueue time when it moves to the dead-letter queue"
            )
        rng("tombstoneMarginDays", self.tombstone_margin_days, 0, 365)
        rng("functionTimeoutSeconds", self.function_timeout_seconds, 3, 900)
        rng("functionMemoryMb", self.function_memory_mb, 128, 10240)
        rng("batchSize", self.batch_size, 1, 10000)
        rng("maxBatchingWindowSeconds", self.max_batching_window_seconds, 0, 300)
        if self.batch_size > 10 and self.max_batching_window_seconds < 1:
            p.append(
                "batchSize above 10 needs maxBatchingWindowSeconds of at least 1 (Lambda rule)"
            )
        rng("maxConcurrency", self.max_concurrency, 2, 1000, " (Lambda SQS maximum concurrency)")
        rng("maxReceiveCount", self.max_receive_count, 1, 1000)
        rng("recordConcurrency", self.record_concurrency, 1, 64)
        if self.log_retention_days not in LOG_RETENTION_DAYS:
            p.append(
                f"logRetentionDays: {self.log_retention_days} is not a CloudWatch Logs "
                f"retention value ({', '.join(map(str, LOG_RETENTION_DAYS))})"
            )
        if self.queue_visibility_timeout_seconds > 43_200:
            p.append("functionTimeoutSeconds: six times it exceeds the SQS visibility limit (12 h)")
        schedule = self.reconcile_schedule or ""
        if not (schedule.startswith(("rate(", "cron(")) and schedule.endswith(")")):
            p.append(
                f"reconcileSchedule: {self.reconcile_schedule!r} is not an EventBridge "
                "schedule expression (rate(...) or cron(...))"
            )
        rng("reconcileMemoryMb", self.reconcile_memory_mb, 128, 10240)
        rng("reconcileTimeoutSeconds", self.reconcile_timeout_seconds, 60, 900)
        if self.reconcile_fan_out and not self.owns_inventory:
            p.append(
                "reconcileFanOut needs the stack's own S3 Inventory: leave bucketName unset "
                "and inventoryEnabled true"
            )
        if self.backfill_engine not in BACKFILL_ENGINES:
            p.append(
                f"backfillEngine: {self.backfill_engine!r} is not one of "
                f"{', '.join(BACKFILL_ENGINES)}"
            )
        rng("backfillFunctionTimeoutSeconds", self.backfill_function_timeout_seconds, 3, 900)
        if self.alarm_email is not None and not _EMAIL_RE.match(self.alarm_email):
            p.append(f"alarmEmail: {self.alarm_email!r} is not an e-mail address")
        if self.processor is not None and not _PROCESSOR_RE.match(self.processor):
            p.append(f"processor: {self.processor!r} is not 'package.module:function'")
        if self.processor is not None:
            for name, timeout in (
                ("functionTimeoutSeconds", self.function_timeout_seconds),
                ("backfillFunctionTimeoutSeconds", self.backfill_function_timeout_seconds),
            ):
                if timeout < 10:
                    p.append(
                        f"{name}: at least 10 with a processor (an effect is started only "
                        "with 3 s or more left in the invocation)"
                    )
        if self.processor_package_dir is not None and self.processor is None:
            p.append("processorPackageDir is set but processor is not")
        rng("lagAlarmSeconds", self.lag_alarm_seconds, 1, SECONDS_PER_DAY)
        url = self.runbook_base_url or ""
        if not _RUNBOOK_URL_RE.match(url):
            p.append(
                f"runbookBaseUrl: {self.runbook_base_url!r} must be an https:// URL with a "
                "host and no fragment (each alarm appends #<section>)"
            )
        return p

    def as_dict(self) -> dict[str, Any]:
        """Plain dict of the settings (snake_case names)."""
        return asdict(self)


#: Where the stack's S3 Inventory reports land in the inventory bucket, and the id of the
#: inventory configuration: S3 writes ``<prefix>/<source bucket>/<configuration id>/<date>/``
#: (https://docs.aws.amazon.com/AmazonS3/latest/userguide/storage-inventory-location.html).
INVENTORY_PREFIX = "inventory"
INVENTORY_ID = "s3ingest-daily"


#: Context keys without ``@`` or ``:`` that the CDK CLI itself writes (``cdk acknowledge``,
#: telemetry); everything else the CDK uses is ``@aws-cdk/...`` or has a ``:``
#: (``aws:cdk:...``, context lookups cached in ``cdk.context.json``).
CDK_PLAIN_KEYS = frozenset({"acknowledged-issue-numbers", "cli-telemetry"})


def is_cdk_key(key: str) -> bool:
    """Whether a context key belongs to the CDK (feature flags, CLI and lookup keys), not to
    s3ingest (https://docs.aws.amazon.com/cdk/v2/guide/context.html)."""
    return key.startswith("@") or ":" in key or key in CDK_PLAIN_KEYS


def unknown_keys(context: Mapping[str, Any]) -> list[str]:
    """One problem per context key that is neither a setting nor the CDK's, naming the closest
    setting (``archiveRetentionDay`` -> ``did you mean archiveRetentionDays?``)."""
    problems = []
    for key in sorted(k for k in context if k not in DEFAULTS and not is_cdk_key(k)):
        close = difflib.get_close_matches(key, list(DEFAULTS), n=1, cutoff=0.6)
        if not close:  # a different case is the commonest typo after a missing letter
            close = [k for k in DEFAULTS if k.lower() == key.lower()]
        hint = f"; did you mean {close[0]}?" if close else f" (known: {', '.join(DEFAULTS)})"
        problems.append(f"{key}: unknown setting{hint}")
    return problems


def inventory_report_prefix(bucket_name: str) -> str:
    """The folder holding one dated folder per inventory report of ``bucket_name``:
    ``"inventory/<bucket>/s3ingest-daily/"`` (a CDK token in the stack works too)."""
    return f"{INVENTORY_PREFIX}/{bucket_name}/{INVENTORY_ID}/"


def ingest_event_pattern(bucket_name: str) -> dict[str, Any]:
    """EventBridge event pattern of the ingest rule and its archive.

    Matches only this bucket's ``Object Created`` and ``Object Deleted`` events from ``aws.s3``
    (https://docs.aws.amazon.com/AmazonS3/latest/userguide/ev-events.html).

    Parameters
    ----------
    bucket_name : str
        The landing bucket's name (a CDK token in the stack, a literal locally).

    Returns
    -------
    dict
        ``{"source": [...], "detail-type": [...], "detail": {"bucket": {"name": [...]}}}``
    """
    return {
        "source": ["aws.s3"],
        "detail-type": ["Object Created", "Object Deleted"],
        "detail": {"bucket": {"name": [bucket_name]}},
    }


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(w.capitalize() for w in rest)


def _to_bool(raw: Any) -> bool | None:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    return None


def _to_int(raw: Any) -> int | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str) and re.fullmatch(r"-?\d+", raw.strip()):
        return int(raw)
    return None
