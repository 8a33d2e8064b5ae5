"""The validated settings, :class:`Settings`: built from context (:meth:`Settings.from_context`)
with every rule checked at once, and what the stack and the local runtime derive from them (the
tombstone lifetime of CONTRACT C6, the ingest-side timeouts, the heartbeat alarm's period).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from s3ingest.settings.buckets import BUCKET_NAME_RE, BucketSpec, kms_key_problems, parse_buckets
from s3ingest.settings.context import (
    DEFAULTS,
    OPTIONAL_INT_KEYS,
    SettingsError,
    camel,
    parse_json_list,
    to_bool,
    to_int,
    unknown_keys,
)
from s3ingest.settings.processors import (
    DEFAULT_PROCESSOR_NAME,
    DEFAULT_PROCESSOR_VERSION,
    PROCESSOR_RE,
    PROCESSOR_TIMEOUT_MARGIN_SECONDS,
    compact_json,
    hold_problems,
    is_function_processor,
    normalised_entry,
    parse_hold,
    processor_entry,
    processor_settings_problems,
    version_problem,
)
from s3ingest_fn import config as fn_config
from s3ingest_fn.core.row import MAX_TRAIL

SECONDS_PER_DAY = 86_400

#: How the backfill (CONTRACT C13) runs over the inventory: an S3 Batch Operations job invoking the
#: backfill Lambda per object, or a Step Functions Distributed Map with one child per data file.
BACKFILL_ENGINES = ("batch-operations", "distributed-map")

#: ``logKeys``: how object keys appear in logs.
LOG_KEYS_MODES = ("plain", "hashed", "none")
# An IAM role ARN in any partition (https://docs.aws.amazon.com/IAM/latest/UserGuide/
# reference-arns.html); a path is allowed.
_ROLE_ARN_RE = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]{1,512}$")

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

_STAGE_RE = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,31}$")
# A plausible address (one "@", a dotted domain, no spaces); SNS confirms it by mail anyway.
_EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s.]+(\.[^@\s.]+)+$")
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


@dataclass(frozen=True)
class Settings:
    """Validated deployment settings.

    Attributes
    ----------
    stage : str
        Environment name; the stack is named ``S3Ingest-<stage>`` (one stack per environment).
    bucket_name : str or None
        An existing bucket to adopt instead of creating one. ``None``: the stack owns the bucket.
    buckets : tuple of BucketSpec
        The landing buckets, created or existing, with their key filters (context key
        ``buckets``: a JSON list of :meth:`BucketSpec.to_context` objects). Empty: the one bucket
        ``bucketName``, ``versioned`` and ``inventoryEnabled`` describe
        (:attr:`bucket_specs`); giving both is an error.
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
        Whether the stack configures its daily S3 Inventory on the bucket of the single-bucket
        settings (created, or adopted by ``bucketName``: added by the bucket-setup custom
        resource next to the owner's configurations).
    reconcile_schedule : str
        EventBridge schedule expression of the reconciliation (CONTRACT C12), ``rate(...)`` or
        ``cron(...)``.
    reconcile_fan_out : bool
        Reconcile through the Step Functions fan-out instead of one Lambda run (one execution
        per bucket); needs an inventory of every bucket (:attr:`owns_inventory`).
    reconcile_memory_mb, reconcile_timeout_seconds : int
        Reconcile Lambda memory (MiB) and timeout (seconds).
    backfill_engine : str
        ``"batch-operations"`` (an S3 Batch Operations job over the inventory manifest) or
        ``"distributed-map"`` (a Step Functions Distributed Map over its data files). The backfill
        (CONTRACT C13) is deployed when every bucket has an inventory (:attr:`owns_inventory`);
        the listing backfill (no inventory needed) always is.
    backfill_function_timeout_seconds : int
        Timeout of the backfill Lambda S3 Batch Operations invokes, seconds (3 to 900).
    listing_concurrency : int
        The listing backfill's parallel shards: its Distributed Map's ``MaxConcurrency``
        (1 to 1000), so as many ``list_shard`` Lambdas at once, each writing the ledger.
    ledger_warm_write_units : int or None
        Pre-warmed write capacity of the on-demand ledger table, write request units per second
        (DynamoDB warm throughput, ``WarmThroughput.WriteUnitsPerSecond``, 4000 to 40000 as
        this stack sets it;
        https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/warm-throughput.html):
        a backfill of tens of millions of keys writes at full speed from its first minute
        instead of waiting for on-demand scaling. Billed once per increase. ``None``: no warm
        throughput (on-demand scaling only).
    alarm_email : str or None
        An e-mail address subscribed to the alarm topic (SNS sends it a confirmation first).
        ``None``: the topic has no subscription; subscribe to it yourself.
    processor : str or None
        The team's effect, ``"package.module:function"``, run by the ingest Lambda for every
        applied change (CONTRACT C11; :mod:`s3ingest_fn.core.effects`). ``None``: no effects, one
        write per event. The repository's example is ``s3ingest_examples.sidecar:process``.
    processor_version : int
        The version of ``processor`` (1 and up; default 1). Raise it when the processor's code
        changes so that the outputs of earlier code are stale: rows whose effect completed
        under a lower version are behind (``s3ingest reprocess`` brings them up to date). A
        ``processors`` entry has its own ``"version"``.
    processor_package_dir : str or None
        A directory (relative to the project) whose top-level packages are copied into the
        ingest Lambda's package, for a processor that does not live under ``functions/``.
    processors : tuple of dict
        Several named processors (context key ``processors``: a JSON list), each
        ``{"name", "mode", "prefixes", "suffixes", "kinds", "timeoutSeconds"}`` and exactly one
        of ``"functionArn"`` (the team's own Lambda function, any runtime, invoked synchronously
        under the claim), ``"handler"`` (a Lambda handler of this repository's bundle,
        ``package.module:function``, which the stack deploys as its own function) or
        ``"module"`` (run in-process by the ingest-side functions, as ``processor``); see
        :func:`processor_entry`. Empty: ``processor`` alone (:meth:`processor_entries`); giving
        both is an error.
    processor_policy_statements : tuple of dict
        Extra IAM identity-policy statements (``{"Effect", "Action", "Resource"}`` and an
        optional ``"Condition"``, ``"Sid"``; context key ``processorPolicyStatements``: a JSON
        list) added to the roles of the functions that run the in-process (``module``)
        processors, for what those need beyond the landing and output buckets.
    hold : dict or None
        Hold for review (``docs/hold.md``): which changes' effects wait for an operator's
        approval, for every processor whose ``processors`` entry has no ``hold`` of its own
        (with the single ``processor``: for it). The form of
        :mod:`s3ingest_fn.core.hold` (context key ``hold``: a JSON object):
        ``{"deletes": true}``, ``{"deletes": {"above": 100, "windowSeconds": 300}}``,
        ``{"prefixes": ["published/"]}``, ``{"policy": "package.module:function"}``, keys
        combined. Needs a processor. ``None``: nothing is held (but by an entry's own ``hold``).
    trail_length : int
        Review decisions (held, approved, rejected) kept on each ledger row, newest first
        (1 to 20; default 5).
    hold_alarm_seconds : int
        The held-changes alarm's threshold (with ``hold`` or an entry's ``hold`` only): the
        oldest held change older than this many seconds (at least 60; default 86400). The age
        is measured when reconciliation runs (``reconcileSchedule``, daily by default), so the
        alarm can lag by up to that schedule.
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
    log_keys : str
        How object keys appear in the function logs, the change audit log and the state
        machines' logs (:data:`LOG_KEYS_MODES`): ``plain`` (as they are), ``hashed`` (a keyed
        hash, the same for the same key, to grep by) or ``none`` (left out).
    ingest_reserved_concurrency : int or None
        Reserved concurrency of the ingest function (at least ``maxConcurrency``, so its own
        SQS event source is never throttled): live ingest keeps its share of the account's
        concurrency whatever else runs. ``None``: unreserved.
    backfill_reserved_concurrency : int or None
        Reserved concurrency of each backfill worker function (the Batch Operations task
        function, or the Distributed Map engine's control function, which runs each data file;
        and the listing backfill's shard function): a backfill never takes more of the
        account's concurrency than this. ``None``: unreserved.
    operator_role_arns : tuple of str
        IAM role ARNs (``arn:aws:iam::<account>:role/...``) of the operators allowed to send to
        the ingest queue (a redrive from its dead-letter queue); the queue's policy denies every
        other principal but the stack's own (context key ``operatorRoleArns``: a JSON list).
    kms_key_arn : str or None
        The customer-managed KMS key that encrypts every resource of the stack that can be
        (``docs/encryption.md``): a key ARN (``arn:aws:kms:<region>:<account>:key/<id>``, its
        policy must allow what :func:`s3ingest.encryption.key_policy_statements` lists), or
        ``"create"`` for a key the stack creates (rotated, retained, alias
        ``alias/s3ingest-<stage>``). ``None``: each service's own encryption, as before.
    allow_module_processors_with_remote_buckets : bool
        Accept in-process processors (``processor``, a ``module`` in ``processors``) beside
        buckets of other accounts (``buckets[].account``): they run inside the pipeline's
        functions with those functions' privileges, the read roles of the other accounts'
        buckets included (``docs/processors.md``). ``False`` (the default): refused; deploy
        such a processor as a ``handler`` or ``functionArn`` (a role of its own).
    """

    stage: str = DEFAULTS["stage"]
    bucket_name: str | None = DEFAULTS["bucketName"]
    buckets: tuple[BucketSpec, ...] = ()
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
    listing_concurrency: int = DEFAULTS["listingConcurrency"]
    ledger_warm_write_units: int | None = DEFAULTS["ledgerWarmWriteUnits"]
    alarm_email: str | None = DEFAULTS["alarmEmail"]
    processor: str | None = DEFAULTS["processor"]
    processor_version: int = DEFAULTS["processorVersion"]
    processor_package_dir: str | None = DEFAULTS["processorPackageDir"]
    processors: tuple[dict[str, Any], ...] = ()
    processor_policy_statements: tuple[dict[str, Any], ...] = ()
    hold: dict[str, Any] | None = DEFAULTS["hold"]
    trail_length: int = DEFAULTS["trailLength"]
    hold_alarm_seconds: int = DEFAULTS["holdAlarmSeconds"]
    change_stream: bool = DEFAULTS["changeStream"]
    lag_alarm_seconds: int = DEFAULTS["lagAlarmSeconds"]
    runbook_base_url: str = DEFAULTS["runbookBaseUrl"]
    tracing: bool = DEFAULTS["tracing"]
    log_keys: str = DEFAULTS["logKeys"]
    ingest_reserved_concurrency: int | None = DEFAULTS["ingestReservedConcurrency"]
    backfill_reserved_concurrency: int | None = DEFAULTS["backfillReservedConcurrency"]
    operator_role_arns: tuple[str, ...] = ()
    kms_key_arn: str | None = DEFAULTS["kmsKeyArn"]
    allow_module_processors_with_remote_buckets: bool = DEFAULTS[
        "allowModuleProcessorsWithRemoteBuckets"
    ]

    @property
    def stack_name(self) -> str:
        """CloudFormation stack name for this stage."""
        return f"S3Ingest-{self.stage}"

    @property
    def bucket_specs(self) -> tuple[BucketSpec, ...]:
        """The landing buckets: ``buckets``, or the one bucket of ``bucketName``,
        ``versioned`` and ``inventoryEnabled`` (created when ``bucketName`` is unset, adopted
        otherwise)."""
        if self.buckets:
            return self.buckets
        return (
            BucketSpec(
                name=self.bucket_name,
                existing=self.bucket_name is not None,
                versioned=self.versioned,
                inventory=self.inventory_enabled,
            ),
        )

    @property
    def owns_inventory(self) -> bool:
        """Whether an S3 Inventory (the stack's own or a named existing one) covers every
        landing bucket: the inventory backfill and the fan-out reconciliation need it."""
        return all(spec.has_inventory for spec in self.bucket_specs)

    def scope_entries(self) -> list[dict[str, Any]]:
        """``SCOPE``'s entries (:class:`s3ingest_fn.core.scope.Scope`) for buckets with
        literal names (the stack passes its created buckets' tokens itself)."""
        return [spec.scope_entry() for spec in self.bucket_specs]

    def processor_entries(self) -> list[dict[str, Any]]:
        """Every processor of the stack, normalised (:func:`processor_entry`): ``processors``,
        or the single ``processor`` setting as the one entry ``{"name": "default", "mode":
        "latest", "prefixes": [], "suffixes": [], "kinds": ["created", "removed"], "module":
        processor}`` (with ``"version"`` when ``processorVersion`` is above 1); empty without
        either. Entries that cannot be read (invalid settings) are
        left out."""
        if not self.processors:
            if self.processor is None:
                return []
            single: dict[str, Any] = {"name": DEFAULT_PROCESSOR_NAME, "module": self.processor}
            if self.processor_version != DEFAULT_PROCESSOR_VERSION:
                single["version"] = self.processor_version
            raw: Sequence[Any] = [single]
        else:
            raw = self.processors
        entries = [processor_entry(entry, "")[0] for entry in raw]
        return [entry for entry in entries if entry is not None]

    @property
    def processors_variable(self) -> bool:
        """Whether the functions that run the processors get them as ``PROCESSORS`` (the JSON
        list of :meth:`processor_entries`): with ``processors``, or with a ``processor`` whose
        ``processorVersion`` is above 1 (``PROCESSOR`` carries the module alone, at version
        1)."""
        return bool(self.processors) or (
            self.processor is not None and self.processor_version != DEFAULT_PROCESSOR_VERSION
        )

    @property
    def holds(self) -> bool:
        """Whether any processor may hold changes: the stack-wide ``hold`` or an entry's own
        (the held-changes alarm is deployed then)."""
        if self.hold is not None:
            return bool(self.processor_entries())
        return any(entry.get("hold") is not None for entry in self.processor_entries())

    def hold_env(self) -> dict[str, str]:
        """The variables of the functions that run the processors (and write the review
        trail): ``HOLD`` (the stack-wide ``hold``, compact JSON) when it is set, and
        ``TRAIL_LENGTH`` when ``trailLength`` is not the default; empty otherwise. The
        functions read them in :func:`s3ingest_fn.wiring.hold_policies` and
        :func:`s3ingest_fn.wiring.ledger`."""
        env: dict[str, str] = {}
        if self.hold is not None:
            env[fn_config.HOLD] = compact_json(self.hold)
        if self.trail_length != DEFAULTS["trailLength"]:
            env[fn_config.TRAIL_LENGTH] = str(self.trail_length)
        return env

    @property
    def processor_timeout_floor_seconds(self) -> int:
        """The shortest timeout a function that invokes the processor functions may have,
        seconds: the longest ``timeoutSeconds`` of a ``functionArn`` or ``handler`` entry plus
        :data:`PROCESSOR_TIMEOUT_MARGIN_SECONDS`; 0 without processor functions."""
        timeouts = [
            entry["timeoutSeconds"]
            for entry in self.processor_entries()
            if is_function_processor(entry) and isinstance(entry.get("timeoutSeconds"), int)
        ]
        return max(timeouts) + PROCESSOR_TIMEOUT_MARGIN_SECONDS if timeouts else 0

    def ingest_side_timeout(self, seconds: int) -> int:
        """The timeout of an ingest-side function (one that runs the processors) configured as
        ``seconds``: at least :attr:`processor_timeout_floor_seconds` (derived when lower)."""
        return max(seconds, self.processor_timeout_floor_seconds)

    @property
    def ingest_timeout_seconds(self) -> int:
        """The ingest function's timeout: ``functionTimeoutSeconds``, raised to
        :attr:`processor_timeout_floor_seconds` when that is longer."""
        return self.ingest_side_timeout(self.function_timeout_seconds)

    @property
    def queue_visibility_timeout_seconds(self) -> int:
        """Ingest queue visibility timeout: six times the ingest function's timeout
        (:attr:`ingest_timeout_seconds`; AWS Lambda guidance,
        https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-configure.html)."""
        return 6 * self.ingest_timeout_seconds

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
            out[camel(f.name)] = getattr(self, f.name)
        out["buckets"] = [spec.to_context() for spec in self.buckets] or None
        out["processors"] = [dict(entry) for entry in self.processors] or None
        out["processorPolicyStatements"] = [
            dict(statement) for statement in self.processor_policy_statements
        ] or None
        out["operatorRoleArns"] = list(self.operator_role_arns) or None
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
            key = camel(f.name)
            raw = context.get(key, DEFAULTS[key])
            default = DEFAULTS[key]
            val: Any
            if key == "buckets":
                specs, found = parse_buckets(raw)
                problems.extend(found)
                values[f.name] = specs
                continue
            if key == "hold":
                doc, found = parse_hold(raw)
                problems.extend(found)
                values[f.name] = doc
                continue
            if key == "operatorRoleArns":
                items, found = parse_json_list(key, raw)
                problems.extend(found)
                values[f.name] = tuple(items)
                continue
            if key in ("processors", "processorPolicyStatements"):
                items, found = parse_json_list(key, raw)
                problems.extend(found)
                if key == "processors":
                    # valid entries normalised; problems() judges every entry as given
                    items = [normalised_entry(item) for item in items]
                values[f.name] = tuple(items)
                continue
            if isinstance(default, bool):
                val = to_bool(raw)
                if val is None:
                    problems.append(f"{key}: expected true or false, got {raw!r}")
                    untyped.append(key)
                    continue
            elif key in OPTIONAL_INT_KEYS and raw in (None, "", "null"):
                val = None
            elif isinstance(default, int) or key in OPTIONAL_INT_KEYS:
                val = to_int(raw)
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
        if self.bucket_name is not None and not BUCKET_NAME_RE.match(self.bucket_name):
            p.append(f"bucketName: {self.bucket_name!r} is not a valid S3 bucket name")
        if self.buckets and self.bucket_name is not None:
            p.append("bucketName and buckets are both set: list the bucket in buckets")
        for index, spec in enumerate(self.buckets):
            p.extend(spec.problems(f"buckets[{index}]"))
        names = [spec.name for spec in self.buckets if spec.name is not None]
        for name in sorted({n for n in names if names.count(n) > 1}):
            p.append(f"buckets: {name!r} is listed twice")
        ids = [spec.construct_id(i) for i, spec in enumerate(self.buckets)]
        for ident in sorted({i for i in ids if ids.count(i) > 1}):
            p.append(f"buckets: construct id {ident!r} is used twice")
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
                "reconcileFanOut needs an S3 Inventory of every bucket: leave inventoryEnabled "
                "true (or each bucket's inventory on)"
            )
        if self.backfill_engine not in BACKFILL_ENGINES:
            p.append(
                f"backfillEngine: {self.backfill_engine!r} is not one of "
                f"{', '.join(BACKFILL_ENGINES)}"
            )
        rng("backfillFunctionTimeoutSeconds", self.backfill_function_timeout_seconds, 3, 900)
        rng(
            "listingConcurrency",
            self.listing_concurrency,
            1,
            1000,
            " (a Distributed Map's concurrency limit is 10000; Lambda's default account "
            "concurrency is 1000)",
        )
        if self.ledger_warm_write_units is not None:
            rng(
                "ledgerWarmWriteUnits",
                self.ledger_warm_write_units,
                4000,
                40000,
                " (DynamoDB's on-demand table: at least the 4000 write units a new table has, "
                "at most the 40000 of the default table quota)",
            )
        if self.alarm_email is not None and not _EMAIL_RE.match(self.alarm_email):
            p.append(f"alarmEmail: {self.alarm_email!r} is not an e-mail address")
        if self.processor is not None and not PROCESSOR_RE.match(self.processor):
            p.append(f"processor: {self.processor!r} is not 'package.module:function'")
        _, version = version_problem(self.processor_version, "processorVersion")
        if version is not None:
            p.append(version)
        elif self.processor_version != DEFAULT_PROCESSOR_VERSION and self.processor is None:
            p.append(
                "processorVersion is set but processor is not"
                + (" (a processors entry takes its own version)" if self.processors else "")
            )
        p.extend(processor_settings_problems(self))
        rng("lagAlarmSeconds", self.lag_alarm_seconds, 1, SECONDS_PER_DAY)
        p.extend(hold_problems(self.hold))
        if self.hold is not None and not self.processor_entries():
            p.append(
                "hold needs processors: it decides when a processor's effect runs (set "
                "processor or processors, or leave hold unset)"
            )
        rng("trailLength", self.trail_length, 1, MAX_TRAIL)
        if self.hold_alarm_seconds < 60:
            p.append(f"holdAlarmSeconds: {self.hold_alarm_seconds} is below 60")
        if self.log_keys not in LOG_KEYS_MODES:
            p.append(f"logKeys: {self.log_keys!r} is not one of {', '.join(LOG_KEYS_MODES)}")
        if self.ingest_reserved_concurrency is not None:
            rng("ingestReservedConcurrency", self.ingest_reserved_concurrency, 1, 1000)
            if self.ingest_reserved_concurrency < self.max_concurrency:
                p.append(
                    f"ingestReservedConcurrency: {self.ingest_reserved_concurrency} is below "
                    f"maxConcurrency ({self.max_concurrency}): the ingest queue's event source "
                    "would be throttled, and throttled messages count receives toward the "
                    "dead-letter queue"
                )
        if self.backfill_reserved_concurrency is not None:
            rng("backfillReservedConcurrency", self.backfill_reserved_concurrency, 1, 1000)
        for index, arn in enumerate(self.operator_role_arns):
            if not isinstance(arn, str) or not _ROLE_ARN_RE.match(arn):
                p.append(f"operatorRoleArns[{index}]: {arn!r} is not an IAM role ARN")
        p.extend(kms_key_problems("kmsKeyArn", self.kms_key_arn, allow_create=True))
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
