"""The validated settings, :class:`Settings`: built from context (:meth:`Settings.from_context`)
with every rule checked at once, and what the stack and the local runtime derive from them (the
tombstone lifetime of CONTRACT C6, the ingest-side timeouts, the heartbeat alarm's period).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from s3ingest.reconcile_sizing import RECONCILE_MEMORY_MIB
from s3ingest.settings.buckets import BUCKET_NAME_RE, BucketSpec, kms_key_problems, parse_buckets
from s3ingest.settings.context import (
    SettingsError,
    camel,
    parse_json_list,
    unknown_setting_problems,
)
from s3ingest.settings.fields import context_default, declared, env_value, read_scalar, setting
from s3ingest.settings.processors import (
    DEFAULT_PROCESSOR_NAME,
    DEFAULT_PROCESSOR_VERSION,
    PROCESSOR_RE,
    PROCESSOR_TIMEOUT_MARGIN_SECONDS,
    hold_problems,
    is_function_processor,
    normalised_entry,
    parse_hold,
    processor_entry,
    processor_settings_problems,
    version_problem,
)
from s3ingest_fn import config as fn_config
from s3ingest_fn.core.row import MAX_TRAIL, TRAIL_SLOTS

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
_RETENTION = "1 3 5 7 14 30 60 90 120 150 180 365 400 545 731 1096 1827 2192 2557 2922 3288 3653"
LOG_RETENTION_DAYS = tuple(int(days) for days in _RETENTION.split())

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


_SQS_LIMIT = " (SQS limit)"
_LISTING_WHY = (
    " (a Distributed Map's concurrency limit is 10000; Lambda's default account "
    "concurrency is 1000)"
)
_WARM_WHY = (
    " (DynamoDB's on-demand table: at least the 4000 write units a new table has, "
    "at most the 40000 of the default table quota)"
)
_RUNBOOK = "https://github.com/s3ingest/s3ingest/blob/main/docs/runbook.md"


def _read_buckets(key: str, raw: Any) -> tuple[Any, list[str]]:
    return parse_buckets(raw)


def _read_hold(key: str, raw: Any) -> tuple[Any, list[str]]:
    return parse_hold(raw)


def _read_list(key: str, raw: Any) -> tuple[Any, list[str]]:
    items, found = parse_json_list(key, raw)
    return tuple(items), found


def _read_processors(key: str, raw: Any) -> tuple[Any, list[str]]:
    # valid entries normalised; problems() judges every entry as given
    items, found = parse_json_list(key, raw)
    return tuple(normalised_entry(item) for item in items), found


# The rules of one setting that its bounds and choices do not say (``Setting.check``); each
# takes the whole settings and may name others.


def _stage_rule(s: Settings) -> list[str]:
    if _STAGE_RE.match(s.stage):
        return []
    return [
        f"stage: {s.stage!r} must start with a letter and hold only letters, "
        "digits and '-' (at most 32)"
    ]


def _bucket_name_rule(s: Settings) -> list[str]:
    if s.bucket_name is not None and not BUCKET_NAME_RE.match(s.bucket_name):
        return [f"bucketName: {s.bucket_name!r} is not a valid S3 bucket name"]
    return []


def _buckets_rule(s: Settings) -> list[str]:
    p: list[str] = []
    if s.buckets and s.bucket_name is not None:
        p.append("bucketName and buckets are both set: list the bucket in buckets")
    for index, spec in enumerate(s.buckets):
        p.extend(spec.problems(f"buckets[{index}]"))
    names = [spec.name for spec in s.buckets if spec.name is not None]
    for name in sorted({n for n in names if names.count(n) > 1}):
        p.append(f"buckets: {name!r} is listed twice")
    ids = [spec.construct_id(i) for i, spec in enumerate(s.buckets)]
    for ident in sorted({i for i in ids if ids.count(i) > 1}):
        p.append(f"buckets: construct id {ident!r} is used twice")
    return p


def _dlq_rule(s: Settings) -> list[str]:
    if s.dlq_retention_days >= s.queue_retention_days:
        return []
    return [
        "dlqRetentionDays must be at least queueRetentionDays: a standard queue keeps "
        "a message's original enqueue time when it moves to the dead-letter queue"
    ]


def _visibility_rule(s: Settings) -> list[str]:
    if s.queue_visibility_timeout_seconds > 43_200:
        return ["functionTimeoutSeconds: six times it exceeds the SQS visibility limit (12 h)"]
    return []


def _batching_rule(s: Settings) -> list[str]:
    if s.batch_size > 10 and s.max_batching_window_seconds < 1:
        return ["batchSize above 10 needs maxBatchingWindowSeconds of at least 1 (Lambda rule)"]
    return []


def _log_retention_rule(s: Settings) -> list[str]:
    if s.log_retention_days in LOG_RETENTION_DAYS:
        return []
    return [
        f"logRetentionDays: {s.log_retention_days} is not a CloudWatch Logs "
        f"retention value ({', '.join(map(str, LOG_RETENTION_DAYS))})"
    ]


def _schedule_rule(s: Settings) -> list[str]:
    schedule = s.reconcile_schedule or ""
    if schedule.startswith(("rate(", "cron(")) and schedule.endswith(")"):
        return []
    return [
        f"reconcileSchedule: {s.reconcile_schedule!r} is not an EventBridge "
        "schedule expression (rate(...) or cron(...))"
    ]


def _fan_out_rule(s: Settings) -> list[str]:
    if s.reconcile_fan_out and not s.owns_inventory:
        return [
            "reconcileFanOut needs an S3 Inventory of every bucket: leave inventoryEnabled "
            "true (or each bucket's inventory on)"
        ]
    return []


def _alarm_email_rule(s: Settings) -> list[str]:
    if s.alarm_email is not None and not _EMAIL_RE.match(s.alarm_email):
        return [f"alarmEmail: {s.alarm_email!r} is not an e-mail address"]
    return []


def _processor_rule(s: Settings) -> list[str]:
    if s.processor is not None and not PROCESSOR_RE.match(s.processor):
        return [f"processor: {s.processor!r} is not 'package.module:function'"]
    return []


def _version_rule(s: Settings) -> list[str]:
    _, version = version_problem(s.processor_version, "processorVersion")
    if version is not None:
        return [version]
    if s.processor_version != DEFAULT_PROCESSOR_VERSION and s.processor is None:
        return [
            "processorVersion is set but processor is not"
            + (" (a processors entry takes its own version)" if s.processors else "")
        ]
    return []


def _hold_rule(s: Settings) -> list[str]:
    p = hold_problems(s.hold)
    if s.hold is not None and not s.processor_entries():
        p.append(
            "hold needs processors: it decides when a processor's effect runs (set "
            "processor or processors, or leave hold unset)"
        )
    return p


def _hold_alarm_rule(s: Settings) -> list[str]:
    if s.hold_alarm_seconds < 60:
        return [f"holdAlarmSeconds: {s.hold_alarm_seconds} is below 60"]
    return []


def _history_rule(s: Settings) -> list[str]:
    if s.history_table and not s.change_stream:
        return ["historyTable needs changeStream: the table is written from the change stream"]
    return []


def _reserved_rule(s: Settings) -> list[str]:
    reserved = s.ingest_reserved_concurrency
    if reserved is None or reserved >= s.max_concurrency:
        return []
    return [
        f"ingestReservedConcurrency: {reserved} is below "
        f"maxConcurrency ({s.max_concurrency}): the ingest queue's event source "
        "would be throttled, and throttled messages count receives toward the "
        "dead-letter queue"
    ]


def _operator_roles_rule(s: Settings) -> list[str]:
    return [
        f"operatorRoleArns[{index}]: {arn!r} is not an IAM role ARN"
        for index, arn in enumerate(s.operator_role_arns)
        if not isinstance(arn, str) or not _ROLE_ARN_RE.match(arn)
    ]


def _kms_rule(s: Settings) -> list[str]:
    return kms_key_problems("kmsKeyArn", s.kms_key_arn, allow_create=True)


def _runbook_rule(s: Settings) -> list[str]:
    if _RUNBOOK_URL_RE.match(s.runbook_base_url or ""):
        return []
    return [
        f"runbookBaseUrl: {s.runbook_base_url!r} must be an https:// URL with a "
        "host and no fragment (each alarm appends #<section>)"
    ]


@dataclass(frozen=True)
class Settings:
    """Validated deployment settings: one field per context key (``stage`` is ``stage``,
    ``archive_retention_days`` is ``archiveRetentionDays``), each declared once with its
    default, unit, bounds, rules and description (:func:`~s3ingest.settings.fields.setting`;
    ``docs/settings.md`` shows them). ``buckets``, ``processors``,
    ``processor_policy_statements`` and ``operator_role_arns`` are tuples (JSON lists in
    context); ``hold`` is a dict (a JSON object).
    """

    stage: str = setting(
        "dev",
        "environment name; the stack is `S3Ingest-<stage>`",
        check=_stage_rule,
    )
    bucket_name: str | None = setting(
        None,
        (
            "adopt one existing bucket instead of creating one (the same as `buckets` with one "
            '`{"name": ..., "existing": true}` entry): the stack switches on its EventBridge '
            "delivery, keeping every other notification configuration, and adds its own daily "
            "inventory configuration (`s3ingest-daily`), both undone on stack deletion "
            "([existing buckets](existing-buckets.md))"
        ),
        check=_bucket_name_rule,
    )
    buckets: tuple[BucketSpec, ...] = setting(
        (),
        (
            "the landing buckets, a JSON list (`-c 'buckets=[...]'`), instead of `bucketName`: "
            "each entry an object with the [fields below](#a-buckets-entry), created by the "
            'stack (no `existing`) or adopted (`"existing": true`, `name` required), with '
            "optional key filters the EventBridge rule applies ([existing "
            "buckets](existing-buckets.md), [buckets in other accounts](organisation.md))"
        ),
        read=_read_buckets,
        check=_buckets_rule,
    )
    versioned: bool = setting(
        True,
        "versioning on the bucket the stack creates",
    )
    archive_retention_days: int = setting(
        30,
        "EventBridge archive retention (replay window)",
        unit="days",
        bounds=(1, 3650),
    )
    queue_retention_days: int = setting(
        4,
        "ingest queue retention",
        unit="days",
        bounds=(1, 14),
        why=_SQS_LIMIT,
    )
    dlq_retention_days: int = setting(
        14,
        "dead-letter queue retention (at least `queueRetentionDays`)",
        unit="days",
        bounds=(1, 14),
        why=_SQS_LIMIT,
        check=_dlq_rule,
    )
    tombstone_margin_days: int = setting(
        1,
        "added to the tombstone lifetime (see [below](#tombstone-lifetime))",
        unit="days",
        bounds=(0, 365),
    )
    function_timeout_seconds: int = setting(
        30,
        "ingest Lambda timeout; the queue's visibility timeout is 6 times this",
        unit="seconds",
        bounds=(3, 900),
        check=_visibility_rule,
    )
    function_memory_mb: int = setting(
        512,
        "ingest Lambda memory",
        unit="MiB",
        bounds=(128, 10240),
    )
    batch_size: int = setting(
        10,
        "SQS records per invocation",
        bounds=(1, 10000),
    )
    max_batching_window_seconds: int = setting(
        1,
        "SQS batching window",
        unit="seconds",
        bounds=(0, 300),
        check=_batching_rule,
    )
    max_concurrency: int = setting(
        10,
        "concurrent invocations of the event source (2 to 1000)",
        bounds=(2, 1000),
        why=" (Lambda SQS maximum concurrency)",
    )
    max_receive_count: int = setting(
        5,
        "receives before a message goes to the DLQ",
        bounds=(1, 1000),
    )
    record_concurrency: int = setting(
        16,
        "records of one batch processed at once (thread pool)",
        bounds=(1, 64),
    )
    log_retention_days: int = setting(
        30,
        "CloudWatch Logs retention of the function",
        unit="days",
        check=_log_retention_rule,
    )
    inventory_enabled: bool = setting(
        True,
        "daily S3 Inventory (CSV, all versions) to an inventory bucket the stack owns",
    )
    reconcile_schedule: str = setting(
        "rate(1 day)",
        ("when the reconcile Lambda runs (an EventBridge `rate(...)` or `cron(...)` expression)"),
        check=_schedule_rule,
    )
    reconcile_fan_out: bool = setting(
        False,
        (
            "reconcile with the Step Functions fan-out instead of one Lambda (needs the stack's "
            "inventory; [reconciliation](reconciliation.md))"
        ),
        check=_fan_out_rule,
    )
    attestation_retention_days: int | None = setting(
        None,
        (
            "keep the attestations in a bucket of their own under S3 Object Lock, compliance "
            "mode, for this many days: no one, root included, deletes a version or shortens "
            "its retention before then, and Object Lock cannot be turned off on that bucket; "
            "`null`: kept in the stack's bucket, versioned ([attestation](attestation.md))"
        ),
        unit="days",
        bounds=(1, 36500),
    )
    reconcile_memory_mb: int = setting(
        RECONCILE_MEMORY_MIB,  # from the bytes per key: s3ingest/reconcile_sizing.py
        "the reconcile Lambda's memory",
        unit="MiB",
        bounds=(128, 10240),
    )
    reconcile_timeout_seconds: int = setting(
        900,
        "the reconcile Lambda's timeout",
        unit="seconds",
        bounds=(60, 900),
    )
    backfill_engine: str = setting(
        "batch-operations",
        "`batch-operations` or `distributed-map` ([backfill](backfill.md#engines))",
        choices=BACKFILL_ENGINES,
    )
    backfill_function_timeout_seconds: int = setting(
        60,
        "the backfill Lambda's timeout",
        unit="seconds",
        bounds=(3, 900),
    )
    listing_concurrency: int = setting(
        32,
        (
            "shards the listing backfill lists at once (its Distributed Map's `MaxConcurrency`, "
            "1 to 1000)"
        ),
        bounds=(1, 1000),
        why=_LISTING_WHY,
    )
    ledger_warm_write_units: int | None = setting(
        None,
        (
            "pre-warmed write units per second of the ledger table (DynamoDB warm throughput, "
            "4000 to 40000), so a large backfill writes at full speed from its start; `null`: "
            "none"
        ),
        bounds=(4000, 40000),
        why=_WARM_WHY,
    )
    alarm_email: str | None = setting(
        None,
        "an address subscribed to the alarm topic",
        check=_alarm_email_rule,
    )
    processor: str | None = setting(
        None,
        (
            "your effect, `package.module:function`, run for every applied change "
            "([effects](processors.md)); with it, `functionTimeoutSeconds` and "
            "`backfillFunctionTimeoutSeconds` must be at least 10"
        ),
        check=_processor_rule,
    )
    processor_version: int = setting(
        DEFAULT_PROCESSOR_VERSION,
        (
            "the version of `processor`, a whole number of at least 1: raise it when the "
            "processor's code changes so that the outputs of its earlier code are stale. Rows "
            "whose effect completed under a lower version are then behind, and `s3ingest "
            "reprocess --processor default` brings them up to date "
            "([versions](processors.md#versions)); a `processors` entry has its own `version`"
        ),
        check=_version_rule,
    )
    processor_package_dir: str | None = setting(
        None,
        (
            "a directory whose top-level packages are copied into the Lambda package, for a "
            "processor (or a `module`/`handler` of `processors`) outside `functions/`; with it "
            "set, every `module` and `handler` is looked for there only (copy an example from "
            "`functions/s3ingest_examples` into it to use both)"
        ),
    )
    processors: tuple[dict[str, Any], ...] = setting(
        (),
        (
            "several named processors, a JSON list (`-c 'processors=[...]'`), instead of "
            "`processor`: each an object with the [fields below](#a-processors-entry) and "
            'exactly one of `"functionArn"`, `"handler"` or `"module"`. The functions that run '
            "the processors (ingest, backfill, the listing backfill's shard step) get "
            "`PROCESSORS` (the normalised list, a `handler` as the `functionArn` of its deployed "
            "function) and timeouts of at least the longest `timeoutSeconds` + 15 s (raised from "
            "their setting when it is lower; the queue's visibility timeout follows)"
        ),
        read=_read_processors,
        check=processor_settings_problems,
    )
    processor_policy_statements: tuple[dict[str, Any], ...] = setting(
        (),
        (
            "extra IAM statements for the in-process processors (`processor`, or a `module` in "
            '`processors`), a JSON list of `{"Effect": "Allow" \\| "Deny", "Action": ..., '
            '"Resource": ...}` (optional `"Condition"`, `"Sid"`), added to the roles of the '
            "functions that run them (ingest, backfill, listing shard), so the stack needs no "
            "edit. An Allow of `*` or `service:*` actions on resource `*` is refused. Synth "
            "notes on each role what was merged into it (an info annotation, `cdk synth` prints "
            "it). A resource wildcard with explicit actions is acknowledged to cdk-nag as yours; "
            "a wildcard action never is: name the actions, or acknowledge "
            "`AwsSolutions-IAM5[Action::...]` on the role yourself (`S3IngestPipeline` users)"
        ),
        read=_read_list,
    )
    hold: dict[str, Any] | None = setting(  # noqa: RUF009 - a field(), default None
        None,
        (
            "hold for review ([hold](hold.md)): which changes' effects wait for an operator's "
            "approve or reject instead of running, for every processor without a `hold` of its "
            "own (with `processor`: for it). A JSON object (`-c 'hold={\"deletes\": true}'`) of "
            '`"deletes": true` (every removal), `"deletes": {"above": 100, "windowSeconds": '
            "300}` (the mass-delete breaker: removals beyond `above` within one window of "
            '`windowSeconds`, 1 to 86400, default 300), `"prefixes": ["published/"]` (any change '
            'under these) and `"policy": "package.module:function"` (your own answer, `run`, '
            '`skip`, `hold` or `{"action", "reason"}`); keys combine, the first rule that holds '
            "wins, in the order prefixes, deletes, policy. Needs `processor` or `processors`. "
            "The functions that run the processors get it as `HOLD` (counted with `PROCESSORS` "
            "in their 2560-byte budget)"
        ),
        read=_read_hold,
        check=_hold_rule,
        env=fn_config.HOLD,
    )
    trail_length: int = setting(
        TRAIL_SLOTS,
        (
            "review decisions (held, approved, rejected) kept on each ledger row, newest first "
            "(1 to 20); the functions that run the processors get it as `TRAIL_LENGTH` when not "
            "the default"
        ),
        bounds=(1, MAX_TRAIL),
        env=fn_config.TRAIL_LENGTH,
    )
    hold_alarm_seconds: int = setting(
        86400,
        (
            "with a `hold` (the stack's or a processor's), the held-changes alarm fires when the "
            "oldest held change is older than this (at least 60). The age is measured when "
            "reconciliation runs (`reconcileSchedule`, daily by default; metrics `held_effects` "
            "and `held_oldest_seconds`), so the alarm can lag by up to that schedule"
        ),
        unit="seconds",
        check=_hold_alarm_rule,
    )
    change_stream: bool = setting(
        False,
        "publish every applied change on the stack's own bus `s3ingest-changes-<stage>` "
        "([the change stream](processors.md#the-change-stream))",
    )
    history_table: bool = setting(
        False,
        "every change on the change stream (applied changes, holds, reviews) and every effect "
        "done (the relay publishes these for it) as a row of an Apache Iceberg table, once per "
        "change however often it is delivered, with named queries (`s3ingest history`; "
        "[history.md](history.md)). Needs `changeStream`",
        check=_history_rule,
    )
    history_snapshot_retention_hours: int = setting(
        6,
        "with `historyTable`, the hourly maintenance expires the table's snapshots older than "
        "this (the last 10 stay) and deletes the files only they reached; time travel reaches "
        "back this far ([maintenance](history.md#maintenance): why hours, not days)",
        unit="hours",
        bounds=(1, 720),
    )
    lag_alarm_seconds: int = setting(
        300,
        (
            "the end-to-end lag alarm fires when the p99 of live events' lag (S3 event time to "
            "the end of the record that wrote the ledger, `ingest_lag_ms`) over 5 minutes is "
            "above this (1 to 86400)"
        ),
        unit="seconds",
        bounds=(1, SECONDS_PER_DAY),
    )
    runbook_base_url: str = setting(
        _RUNBOOK,
        (
            "where the runbook is published (`https://` only); every alarm description ends with "
            "`Runbook: <runbookBaseUrl>#<section>`. Point it at your own copy (fork, wiki, "
            "internal Git)"
        ),
        check=_runbook_rule,
    )
    tracing: bool = setting(
        False,
        (
            "X-Ray active tracing of the Lambda functions (with the Powertools tracer in the "
            "ingest function). Off, the functions have no X-Ray permission and "
            "`POWERTOOLS_TRACE_DISABLED=true`: the X-Ray SDK adds 60-100 ms of CPU to the "
            "ingest function's cold start (`python -m bench --only bundle`) and is in "
            "maintenance mode. The state machines are traced either way"
        ),
    )
    log_keys: str = setting(
        "plain",
        (
            "how object keys appear in the function logs, the change audit log and the state "
            "machines' logs: `plain` (as they are), `hashed` (a keyed hash, HMAC-SHA256 "
            "truncated to 16 hex digits, the same for the same key: the functions log `key_hash` "
            "for `key`, the audit log `keyHash`; `s3ingest log-key KEY` prints it; the key is a "
            "Secrets Manager secret the stack generates and retains, about 0.40 USD a month) or "
            "`none` (left out). With `hashed` or `none` the audit log keeps each change's detail "
            "type, id, bucket, kind, rev and sequencer (the change event itself keeps the key "
            "for subscribers), and the state machines log no execution data (no state inputs or "
            "outputs, only events and timing). Runbook: [finding a key in the "
            "logs](runbook.md#finding-a-key-in-the-logs)"
        ),
        choices=LOG_KEYS_MODES,
    )
    ingest_reserved_concurrency: int | None = setting(
        None,
        (
            "reserved concurrency of the ingest function (at least `maxConcurrency`): live "
            "ingest keeps its share of the account's concurrency whatever else runs; `null`: "
            "unreserved"
        ),
        bounds=(1, 1000),
        check=_reserved_rule,
    )
    backfill_reserved_concurrency: int | None = setting(
        None,
        (
            "reserved concurrency of each backfill worker function (the Batch Operations task "
            "function, or with the Distributed Map engine the control function that runs each "
            "data file; the listing backfill's shard function; the reprocess run's segment "
            "function): a backfill never takes more than this; `null`: unreserved"
        ),
        bounds=(1, 1000),
    )
    operator_role_arns: tuple[str, ...] = setting(
        (),
        (
            "JSON list of IAM role ARNs allowed to send to the ingest queue (a redrive); the "
            "queue's policy denies every other principal but the stack's own; `null`: none"
        ),
        read=_read_list,
        check=_operator_roles_rule,
    )
    kms_key_arn: str | None = setting(
        None,
        (
            "a customer-managed KMS key for every resource of the stack that can be encrypted "
            "(ledger, queues and dead-letter queues, archives, change bus, log groups, the "
            "stack's buckets, alarm topic, state machines, secret, functions' environments; "
            "[encryption](encryption.md)): a key ARN (`arn:aws:kms:<region>:<account>:key/<id>`, "
            "whose policy must hold the statements `s3ingest.encryption.key_policy` generates) "
            "or `create` (a key the stack creates: rotated, retained, alias "
            "`alias/s3ingest-<stage>`). Each role gets exactly the key actions its own policy "
            "needs, on the key only. Unset: each service's own encryption, the template unchanged"
        ),
        check=_kms_rule,
    )
    allow_module_processors_with_remote_buckets: bool = setting(
        False,
        (
            "`true` accepts in-process processors (`processor`, or a `module` in `processors`) "
            "beside buckets of other accounts (`buckets[].account`). Such a processor runs "
            "inside the pipeline's functions with their privileges: ledger writes, the read role "
            "of every other account's bucket, the log-key secret "
            "([processors](processors.md#privileges)). Default `false`: refused at synth; deploy "
            "the processor as a `handler` or `functionArn` entry instead (a role of its own)"
        ),
    )

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
        trail): one per field declared with an ``env`` (``HOLD``, the stack-wide ``hold`` as
        compact JSON; ``TRAIL_LENGTH``) whose value is not its default; empty otherwise. The
        functions read them in :func:`s3ingest_fn.wiring.hold_policies` and
        :func:`s3ingest_fn.wiring.ledger`."""
        return {
            spec.env: env_value(getattr(self, f.name))
            for _, f, spec in declared(self)
            if spec.env and getattr(self, f.name) != f.default
        }

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
        for key, f, spec in declared(cls):
            raw = context.get(key, DEFAULTS[key])
            if spec.read is not None:
                val, found = spec.read(key, raw)
            else:
                val, found = read_scalar(key, str(f.type), raw)
                if found:
                    untyped.append(key)
            problems.extend(found)
            if key not in untyped:
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
        """Every constraint this settings object breaks (empty when valid): each field's
        declared bounds and choices, then its own rules (``check``), in field order."""
        found: list[str] = []
        for key, f, spec in declared(self):
            found.extend(spec.problems(key, getattr(self, f.name)))
            if spec.check is not None:
                found.extend(spec.check(self))
        return found

    def as_dict(self) -> dict[str, Any]:
        """Plain dict of the settings (snake_case names)."""
        return asdict(self)


#: Context keys accepted in ``cdk.json`` (or ``-c key=value``), with their defaults: one per
#: field of :class:`Settings`.
DEFAULTS: dict[str, Any] = {key: context_default(f) for key, f, _ in declared(Settings)}

#: Whole-number settings whose default is ``None`` (unset).
OPTIONAL_INT_KEYS = frozenset(key for key, f, _ in declared(Settings) if f.type == "int | None")


def unknown_keys(context: Mapping[str, Any]) -> list[str]:
    """One problem per context key that is neither a setting nor the CDK's, naming the closest
    setting (``archiveRetentionDay`` -> ``did you mean archiveRetentionDays?``)."""
    return unknown_setting_problems(context, DEFAULTS)
