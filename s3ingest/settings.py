"""Deployment settings shared by the CDK stack and the local runtime.

One model, read from ``cdk.json`` context (or the same keys given to the local runtime), validated
eagerly: every problem is reported in one :class:`SettingsError`. This module is pure (no CDK, no
boto3) so the local runtime and the tests can import it cheaply.

The tombstone lifetime (CONTRACT C6) and the ingest rule's event pattern are derived here, so the
stack and the local runtime cannot disagree about them.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any
from urllib.parse import quote_plus

from s3ingest_fn.core.hold import hold_errors
from s3ingest_fn.core.row import MAX_TRAIL, TRAIL_SLOTS

SECONDS_PER_DAY = 86_400

#: Context keys accepted in ``cdk.json`` (or ``-c key=value``), with their defaults.
DEFAULTS: dict[str, Any] = {
    "stage": "dev",
    "bucketName": None,
    "buckets": None,
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
    "listingConcurrency": 32,
    "ledgerWarmWriteUnits": None,
    "alarmEmail": None,
    "processor": None,
    "processorPackageDir": None,
    "processors": None,
    "processorPolicyStatements": None,
    "hold": None,
    "trailLength": TRAIL_SLOTS,
    "holdAlarmSeconds": 86_400,
    "changeStream": False,
    "lagAlarmSeconds": 300,
    "runbookBaseUrl": "https://github.com/s3ingest/s3ingest/blob/main/docs/runbook.md",
    "tracing": False,
}

#: Whole-number settings whose default is ``None`` (unset).
OPTIONAL_INT_KEYS = frozenset({"ledgerWarmWriteUnits"})

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
CHANGE_DETAIL_TYPES = {
    "created": "Object Ingested",
    "removed": "Object Tombstoned",
    "held": "Object Held",
    "approved": "Change Approved",
    "rejected": "Change Rejected",
}

_CONSTRUCT_ID_RE = re.compile(r"^[A-Za-z][A-Za-z0-9]{0,63}$")
_INVENTORY_ID_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
#: Fields of one ``buckets`` entry (context form).
BUCKET_FIELDS = (
    "name",
    "existing",
    "id",
    "versioned",
    "prefixes",
    "suffixes",
    "inventory",
    "eventBridge",
)


@dataclass(frozen=True)
class InventoryRef:
    """An S3 Inventory configuration the bucket's owner already has, used instead of the
    stack's own: reports under ``s3://<bucket>/<prefix>/<source bucket>/<id>/``
    (https://docs.aws.amazon.com/AmazonS3/latest/userguide/storage-inventory-location.html).
    It must be a CSV inventory with the ``Size``, ``LastModifiedDate`` and ``ETag`` fields (and,
    for a versioned bucket, all versions)."""

    id: str
    bucket: str
    prefix: str = ""

    def report_prefix(self, source_bucket: str) -> str:
        """The folder holding one dated folder per report of ``source_bucket``."""
        head = f"{self.prefix.strip('/')}/" if self.prefix.strip("/") else ""
        return f"{head}{source_bucket}/{self.id}/"


@dataclass(frozen=True)
class BucketSpec:
    """One landing bucket of the stack (a ``buckets`` entry).

    Attributes
    ----------
    name : str or None
        The bucket's name: required for an existing bucket; for a created one, ``None`` lets
        CloudFormation name it.
    existing : bool
        The bucket exists already (adopted): the stack switches on its EventBridge delivery
        (``event_bridge``) and adds its inventory configuration, and changes nothing else.
    id : str or None
        Construct id of the bucket's resources (letters and digits); logical ids derive from it,
        so keep it stable. Default :meth:`construct_id`.
    versioned : bool
        Versioning on a bucket the stack creates (an existing bucket keeps its own).
    prefixes, suffixes : tuple of str
        Key filters (decoded keys): only keys with one of the prefixes and one of the suffixes
        are tracked (:mod:`s3ingest_fn.core.scope`). Empty: every key.
    inventory : bool or InventoryRef
        ``True``: the stack's own daily S3 Inventory (configuration id ``s3ingest-daily``, to the
        stack's inventory bucket); an :class:`InventoryRef`: an existing configuration; ``False``:
        none (reconciliation lists the bucket, no inventory backfill).
    event_bridge : bool
        Existing buckets: the stack switches on "Send notifications to Amazon EventBridge" and
        leaves it as found on deletion. ``False``: the bucket's owner does (``s3ingest onboard``
        checks it).
    """

    name: str | None = None
    existing: bool = False
    id: str | None = None
    versioned: bool = True
    prefixes: tuple[str, ...] = ()
    suffixes: tuple[str, ...] = ()
    inventory: bool | InventoryRef = True
    event_bridge: bool = True

    def construct_id(self, index: int) -> str:
        """``id``, else ``"Landing"`` for the first bucket and ``"Landing<index + 1>"`` after
        (the single-bucket stack's ids stay those of earlier releases)."""
        if self.id:
            return self.id
        return "Landing" if index == 0 else f"Landing{index + 1}"

    def contains(self, key: str) -> bool:
        """Whether ``key`` (decoded) passes the key filters (:mod:`s3ingest_fn.core.scope`)."""
        if not self.prefixes and not self.suffixes:
            return True
        return any(
            key.startswith(p) and key.endswith(x) and len(key) >= len(p) + len(x)
            for p in self.prefixes or ("",)
            for x in self.suffixes or ("",)
        )

    @property
    def has_inventory(self) -> bool:
        """Whether an inventory (the stack's own or an existing one) covers the bucket."""
        return self.inventory is not False

    def report_prefix(self, bucket_name: str | None = None) -> str | None:
        """Where the bucket's inventory reports land in their destination bucket, or None."""
        name = bucket_name or self.name or ""
        if isinstance(self.inventory, InventoryRef):
            return self.inventory.report_prefix(name)
        return inventory_report_prefix(name) if self.inventory else None

    def scope_entry(self, bucket_name: str | None = None) -> dict[str, Any]:
        """``{"name", "prefixes", "suffixes"}`` (``SCOPE``'s entry; ``bucket_name`` for a
        created bucket's token)."""
        return {
            "name": bucket_name or self.name,
            "prefixes": list(self.prefixes),
            "suffixes": list(self.suffixes),
        }

    def to_context(self) -> dict[str, Any]:
        """The context form (``cdk.json``'s ``buckets`` entry), without defaulted fields."""
        out: dict[str, Any] = {}
        if self.name is not None:
            out["name"] = self.name
        if self.existing:
            out["existing"] = True
        if self.id is not None:
            out["id"] = self.id
        if not self.versioned:
            out["versioned"] = False
        if self.prefixes:
            out["prefixes"] = list(self.prefixes)
        if self.suffixes:
            out["suffixes"] = list(self.suffixes)
        if isinstance(self.inventory, InventoryRef):
            out["inventory"] = asdict(self.inventory)
        elif not self.inventory:
            out["inventory"] = False
        if not self.event_bridge:
            out["eventBridge"] = False
        return out

    @classmethod
    def from_context(cls, raw: Any, where: str) -> tuple[BucketSpec | None, list[str]]:
        """One entry from its context form; ``(None, problems)`` when it cannot be read.
        ``where`` names it in the problems (``"buckets[0]"``)."""
        if not isinstance(raw, Mapping):
            return None, [f"{where}: expected an object, got {raw!r}"]
        problems = [
            f"{where}.{k}: unknown field (known: {', '.join(BUCKET_FIELDS)})"
            for k in raw
            if k not in BUCKET_FIELDS
        ]
        flags: dict[str, bool] = {}
        for key, default in (("existing", False), ("versioned", True), ("eventBridge", True)):
            flag = _to_bool(raw.get(key, default))
            if flag is None:
                problems.append(f"{where}.{key}: expected true or false, got {raw.get(key)!r}")
            flags[key] = default if flag is None else flag
        filters: dict[str, tuple[str, ...]] = {}
        for key in ("prefixes", "suffixes"):
            values = raw.get(key) or []
            if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values):
                problems.append(f"{where}.{key}: expected a list of non-empty strings")
                values = []
            filters[key] = tuple(values)
        inventory: bool | InventoryRef = True
        raw_inventory = raw.get("inventory", True)
        if isinstance(raw_inventory, Mapping):
            unknown = sorted(set(raw_inventory) - {"id", "bucket", "prefix"})
            if unknown or not raw_inventory.get("id") or not raw_inventory.get("bucket"):
                problems.append(
                    f"{where}.inventory: an existing configuration is "
                    '{"id": ..., "bucket": ..., "prefix": ...} (id and bucket required)'
                )
            else:
                inventory = InventoryRef(
                    str(raw_inventory["id"]),
                    str(raw_inventory["bucket"]),
                    str(raw_inventory.get("prefix") or ""),
                )
        else:
            flag = _to_bool(raw_inventory)
            if flag is None:
                problems.append(
                    f"{where}.inventory: expected true, false or an existing configuration"
                )
            inventory = True if flag is None else flag
        name = raw.get("name")
        ident = raw.get("id")
        spec = cls(
            name=None if name in (None, "") else str(name),
            existing=flags["existing"],
            id=None if ident in (None, "") else str(ident),
            versioned=flags["versioned"],
            prefixes=filters["prefixes"],
            suffixes=filters["suffixes"],
            inventory=inventory,
            event_bridge=flags["eventBridge"],
        )
        return spec, problems

    def problems(self, where: str) -> list[str]:
        """Every rule this entry breaks (empty when valid)."""
        p: list[str] = []
        if self.name is not None and not _BUCKET_RE.match(self.name):
            p.append(f"{where}.name: {self.name!r} is not a valid S3 bucket name")
        if self.existing and self.name is None:
            p.append(f"{where}: an existing bucket needs its name")
        if self.id is not None and not _CONSTRUCT_ID_RE.match(self.id):
            p.append(f"{where}.id: {self.id!r} must be letters and digits, starting with a letter")
        if isinstance(self.inventory, InventoryRef):
            if not self.existing:
                p.append(f"{where}.inventory: only an existing bucket names an existing inventory")
            if not _INVENTORY_ID_RE.match(self.inventory.id):
                p.append(f"{where}.inventory.id: {self.inventory.id!r} is not an inventory id")
            if not _BUCKET_RE.match(self.inventory.bucket):
                p.append(
                    f"{where}.inventory.bucket: {self.inventory.bucket!r} is not a valid "
                    "S3 bucket name"
                )
        for key, values in (("prefixes", self.prefixes), ("suffixes", self.suffixes)):
            if len(set(values)) != len(values):
                p.append(f"{where}.{key}: listed twice")
            if any(len(v.encode()) > 1024 for v in values):
                p.append(f"{where}.{key}: longer than a key can be (1024 bytes)")
        return p


#: A processor's delivery modes and the change kinds it may filter on (the same values as
#: :mod:`s3ingest_fn.core.effects`' ``MODES`` and ``KINDS``; a test keeps them equal).
PROCESSOR_MODES = ("latest", "every-change")
PROCESSOR_KINDS = ("created", "removed")
#: The name the single ``processor`` setting runs under (``DEFAULT_PROCESSOR``).
DEFAULT_PROCESSOR_NAME = "default"
#: The most the ``PROCESSORS`` variable may take, bytes: Lambda allows 4 KB for all of a
#: function's environment variables
#: (https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html), and the others
#: (``SCOPE``, ``INVENTORIES``, names and URLs) need the rest.
MAX_PROCESSORS_ENV_BYTES = 2560
#: What a deployed ``handler`` entry's ``functionArn`` takes in ``PROCESSORS`` at most, bytes
#: (an ARN with a 64-character function name): the estimate of :func:`processors_env_size`.
_DEPLOYED_ARN_BYTES = 140


def processors_env_size(
    entries: Sequence[Mapping[str, Any]], hold: Mapping[str, Any] | None = None
) -> int:
    """Bytes of the ``PROCESSORS`` variable of ``entries`` (compact JSON; each ``handler``
    counted as a deployed function's ARN, each entry's ``hold`` included) and of the ``HOLD``
    variable of the stack-wide ``hold`` (:meth:`Settings.hold_env`), when given."""
    size = 0
    if hold is not None:
        size += len(compact_json(hold).encode())
    for entry in entries:
        sized = {k: v for k, v in entry.items() if k != "handler"}
        size += len(json.dumps(sized, separators=(",", ":")).encode()) + 1
        if "handler" in entry:
            size += _DEPLOYED_ARN_BYTES
    return size + 1


def compact_json(value: Any) -> str:
    """``value`` as JSON without spaces (what the functions' variables hold)."""
    return json.dumps(value, separators=(",", ":"))


def parse_hold(raw: Any, key: str = "hold") -> tuple[Any, list[str]]:
    """A ``hold`` setting from its context value: an object, or a JSON object as
    ``-c 'hold={...}'`` gives it; ``None``/empty: none. Anything else is returned as it is, for
    :func:`~s3ingest_fn.core.hold.hold_errors` to judge."""
    if raw in (None, "", "null"):
        return None, []
    if isinstance(raw, str):
        try:
            return json.loads(raw), []
        except json.JSONDecodeError as exc:
            return None, [f"{key}: not JSON ({exc.msg})"]
    return raw, []


def hold_problems(doc: Any, where: str = "") -> list[str]:
    """The problems of a ``hold`` document (:func:`~s3ingest_fn.core.hold.hold_errors`), each
    named by ``where`` (``"processors[0]."``: ``processors[0].hold.deletes ...``)."""
    return [f"{where}{error}" for error in hold_errors(doc)]


#: A processor function's timeout when its entry gives none, seconds.
DEFAULT_PROCESSOR_TIMEOUT_SECONDS = 30
#: Lambda's longest function timeout, seconds
#: (https://docs.aws.amazon.com/lambda/latest/dg/configuration-timeout.html).
MAX_LAMBDA_TIMEOUT_SECONDS = 900
#: What a function that invokes processor functions needs beyond the longest of their timeouts,
#: seconds: the applying write (the claim), the commit, and the 3 s an effect needs left before it
#: starts (``MIN_EFFECT_MS``), with room for the other records of the batch.
PROCESSOR_TIMEOUT_MARGIN_SECONDS = 15
#: Fields of one ``processors`` entry (context form), with exactly one of
#: :data:`PROCESSOR_TARGET_FIELDS`.
PROCESSOR_FIELDS = (
    "name",
    "mode",
    "prefixes",
    "suffixes",
    "kinds",
    "timeoutSeconds",
    "functionArn",
    "handler",
    "module",
    "hold",
)
#: How a processor runs: a Lambda function of the team (``functionArn``), a handler of this
#: repository's bundle the stack deploys as its own function (``handler``), or a module run
#: in-process by the ingest-side functions (``module``).
PROCESSOR_TARGET_FIELDS = ("functionArn", "handler", "module")
_PROCESSOR_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,31}$")
# arn:<partition>:lambda:<region>:<account>:function:<name>[:<version or alias>]
# (https://docs.aws.amazon.com/lambda/latest/api/API_Invoke.html#API_Invoke_RequestSyntax).
_FUNCTION_ARN_RE = re.compile(
    r"^arn:aws[a-z-]*:lambda:[a-z]{2}(-[a-z]+)+-\d+:\d{12}:function:[A-Za-z0-9_-]{1,64}"
    r"(:(\$LATEST|[A-Za-z0-9_-]{1,128}))?$"
)
#: Fields of one ``processorPolicyStatements`` entry (an IAM identity-policy statement).
STATEMENT_FIELDS = ("Sid", "Effect", "Action", "Resource", "Condition")
# service:Action, with IAM's * and ? wildcards, or * alone.
_ACTION_RE = re.compile(r"^(\*|[A-Za-z0-9-]+:[A-Za-z0-9*?]+)$")


def is_function_processor(entry: Mapping[str, Any]) -> bool:
    """Whether a ``processors`` entry is a processor function (``functionArn`` or ``handler``),
    invoked with a timeout, rather than an in-process ``module``."""
    return "functionArn" in entry or "handler" in entry


def processor_entry(raw: Any, where: str) -> tuple[dict[str, Any] | None, list[str]]:
    """One ``processors`` entry, normalised, and every rule it breaks.

    Normalised: ``{"name", "mode", "prefixes", "suffixes", "kinds"}``, then ``"timeoutSeconds"``
    for a processor function, then the one of ``functionArn``, ``handler`` or ``module`` it has,
    then its ``"hold"`` policy when it has one (:mod:`s3ingest_fn.core.hold`; without one the
    stack-wide ``hold`` setting applies to it); defaults filled in (``mode`` ``latest``, no
    key filters, both kinds, a 30 s timeout). A normalised entry normalises to itself.

    Parameters
    ----------
    raw : Any
        The entry as given (context JSON, or a dict).
    where : str
        Names it in the problems (``"processors[0]"``).

    Returns
    -------
    tuple
        ``(entry, problems)``; ``entry`` is None when ``raw`` is not an object.
    """
    if not isinstance(raw, Mapping):
        return None, [f"{where}: expected an object, got {raw!r}"]
    problems = [
        f"{where}.{k}: unknown field (known: {', '.join(PROCESSOR_FIELDS)})"
        for k in raw
        if k not in PROCESSOR_FIELDS
    ]
    name = raw.get("name")
    if not isinstance(name, str) or not _PROCESSOR_NAME_RE.match(name):
        problems.append(
            f"{where}.name: {name!r} must be lower-case letters, digits and '-', starting with "
            "a letter, at most 32 (^[a-z][a-z0-9-]{0,31}$)"
        )
    mode = raw.get("mode", PROCESSOR_MODES[0])
    if mode not in PROCESSOR_MODES:
        problems.append(f"{where}.mode: {mode!r} is not one of {', '.join(PROCESSOR_MODES)}")
    filters: dict[str, list[str]] = {}
    for key in ("prefixes", "suffixes"):
        values = raw.get(key) or []
        if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values):
            problems.append(f"{where}.{key}: expected a list of non-empty strings")
            values = []
        elif len(set(values)) != len(values):
            problems.append(f"{where}.{key}: listed twice")
        elif any(len(v.encode()) > 1024 for v in values):
            problems.append(f"{where}.{key}: longer than a key can be (1024 bytes)")
        filters[key] = list(values)
    kinds = raw.get("kinds", list(PROCESSOR_KINDS))
    if (
        not isinstance(kinds, list)
        or not kinds
        or not all(k in PROCESSOR_KINDS for k in kinds)
        or len(set(kinds)) != len(kinds)
    ):
        problems.append(
            f"{where}.kinds: {kinds!r} is not a non-empty list of {', '.join(PROCESSOR_KINDS)} "
            "(each once)"
        )
        kinds = list(PROCESSOR_KINDS)
    given = [k for k in PROCESSOR_TARGET_FIELDS if raw.get(k) not in (None, "")]
    if len(given) != 1:
        problems.append(
            f"{where}: give exactly one of {', '.join(PROCESSOR_TARGET_FIELDS)}"
            + (f" (got {', '.join(given)})" if given else "")
        )
    entry: dict[str, Any] = {
        "name": name,
        "mode": mode,
        "prefixes": filters["prefixes"],
        "suffixes": filters["suffixes"],
        "kinds": list(kinds),
    }
    function = any(k in given for k in ("functionArn", "handler"))
    timeout = raw.get("timeoutSeconds")
    if timeout is not None and not function:
        problems.append(
            f"{where}.timeoutSeconds: only a processor function (functionArn or handler) has a "
            "timeout; a module runs within the ingest-side functions' own"
        )
    if function:
        seconds = DEFAULT_PROCESSOR_TIMEOUT_SECONDS if timeout is None else _to_int(timeout)
        if seconds is None or not 1 <= seconds <= MAX_LAMBDA_TIMEOUT_SECONDS:
            problems.append(
                f"{where}.timeoutSeconds: {timeout!r} is not a whole number in "
                f"1..{MAX_LAMBDA_TIMEOUT_SECONDS} (Lambda's timeout range)"
            )
        entry["timeoutSeconds"] = seconds if seconds is not None else timeout
    for key in given:
        value = raw[key]
        entry[key] = value
        if key == "functionArn":
            if not isinstance(value, str) or not _FUNCTION_ARN_RE.match(value):
                problems.append(
                    f"{where}.functionArn: {value!r} is not a Lambda function ARN "
                    "(arn:<partition>:lambda:<region>:<account>:function:<name>[:<qualifier>])"
                )
        elif not isinstance(value, str) or not _PROCESSOR_RE.match(value):
            problems.append(f"{where}.{key}: {value!r} is not 'package.module:function'")
    hold, found = parse_hold(raw.get("hold"), f"{where}.hold")
    problems.extend(found)
    if hold is not None:
        entry["hold"] = hold
        problems.extend(hold_problems(hold, f"{where}."))
    return entry, problems


def statement_problems(raw: Any, where: str) -> list[str]:
    """Every rule one ``processorPolicyStatements`` entry breaks: an IAM identity-policy
    statement ``{"Effect": "Allow" | "Deny", "Action": ..., "Resource": ...}`` with an optional
    ``Sid`` and ``Condition`` (https://docs.aws.amazon.com/IAM/latest/UserGuide/
    reference_policies_elements.html); ``Action`` and ``Resource`` a string or a non-empty list."""
    if not isinstance(raw, Mapping):
        return [f"{where}: expected an object, got {raw!r}"]
    problems = [
        f"{where}.{k}: unknown field (known: {', '.join(STATEMENT_FIELDS)})"
        for k in raw
        if k not in STATEMENT_FIELDS
    ]
    if raw.get("Effect") not in ("Allow", "Deny"):
        problems.append(f"{where}.Effect: {raw.get('Effect')!r} is not Allow or Deny")
    for key, valid, what in (
        ("Action", _ACTION_RE.match, "'service:Action' (wildcards * and ? allowed) or '*'"),
        ("Resource", lambda v: v == "*" or v.startswith("arn:"), "an ARN ('arn:...') or '*'"),
    ):
        value = raw.get(key)
        values = [value] if isinstance(value, str) else value
        if not isinstance(values, list) or not values:
            problems.append(f"{where}.{key}: expected a string or a non-empty list of strings")
            continue
        bad = [v for v in values if not isinstance(v, str) or not valid(v)]
        if bad:
            problems.append(f"{where}.{key}: {', '.join(map(repr, bad))}: each must be {what}")
    condition = raw.get("Condition")
    if condition is not None and not (
        isinstance(condition, Mapping) and all(isinstance(v, Mapping) for v in condition.values())
    ):
        problems.append(
            f"{where}.Condition: expected {{operator: {{key: value}}}} (an IAM condition block)"
        )
    return problems


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
        processor}``; empty without either. Entries that cannot be read (invalid settings) are
        left out."""
        if not self.processors:
            if self.processor is None:
                return []
            raw: Sequence[Any] = [{"name": DEFAULT_PROCESSOR_NAME, "module": self.processor}]
        else:
            raw = self.processors
        entries = [processor_entry(entry, "")[0] for entry in raw]
        return [entry for entry in entries if entry is not None]

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
            env["HOLD"] = compact_json(self.hold)
        if self.trail_length != DEFAULTS["trailLength"]:
            env["TRAIL_LENGTH"] = str(self.trail_length)
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
            out[_camel(f.name)] = getattr(self, f.name)
        out["buckets"] = [spec.to_context() for spec in self.buckets] or None
        out["processors"] = [dict(entry) for entry in self.processors] or None
        out["processorPolicyStatements"] = [
            dict(statement) for statement in self.processor_policy_statements
        ] or None
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
            if key == "buckets":
                specs, found = _bucket_specs(raw)
                problems.extend(found)
                values[f.name] = specs
                continue
            if key == "hold":
                doc, found = parse_hold(raw)
                problems.extend(found)
                values[f.name] = doc
                continue
            if key in ("processors", "processorPolicyStatements"):
                items, found = _json_list(key, raw)
                problems.extend(found)
                if key == "processors":
                    # valid entries normalised; problems() judges every entry as given
                    items = [_normalised(item) for item in items]
                values[f.name] = tuple(items)
                continue
            if isinstance(default, bool):
                val = _to_bool(raw)
                if val is None:
                    problems.append(f"{key}: expected true or false, got {raw!r}")
                    untyped.append(key)
                    continue
            elif key in OPTIONAL_INT_KEYS and raw in (None, "", "null"):
                val = None
            elif isinstance(default, int) or key in OPTIONAL_INT_KEYS:
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
        if self.processor is not None and not _PROCESSOR_RE.match(self.processor):
            p.append(f"processor: {self.processor!r} is not 'package.module:function'")
        p.extend(self._processor_problems())
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
        url = self.runbook_base_url or ""
        if not _RUNBOOK_URL_RE.match(url):
            p.append(
                f"runbookBaseUrl: {self.runbook_base_url!r} must be an https:// URL with a "
                "host and no fragment (each alarm appends #<section>)"
            )
        return p

    def _processor_problems(self) -> list[str]:
        """The rules of ``processor``, ``processors``, ``processorPackageDir`` and
        ``processorPolicyStatements``, and the timeouts they need."""
        p: list[str] = []
        if self.processor is not None and self.processors:
            p.append(
                "processor and processors are both set: list the processor in processors as "
                f'{{"name": "{DEFAULT_PROCESSOR_NAME}", "module": "{self.processor}"}}'
            )
        names: list[str] = []
        for index, raw in enumerate(self.processors):
            where = f"processors[{index}]"
            entry, found = processor_entry(raw, where)
            p.extend(found)
            if entry is None:
                continue
            if isinstance(entry["name"], str):
                names.append(entry["name"])
            timeout = entry.get("timeoutSeconds")
            if (
                is_function_processor(entry)
                and isinstance(timeout, int)
                and 1 <= timeout <= MAX_LAMBDA_TIMEOUT_SECONDS
                and timeout + PROCESSOR_TIMEOUT_MARGIN_SECONDS > MAX_LAMBDA_TIMEOUT_SECONDS
            ):
                p.append(
                    f"{where}.timeoutSeconds: {timeout} + {PROCESSOR_TIMEOUT_MARGIN_SECONDS} s "
                    "for the functions that invoke it passes Lambda's "
                    f"{MAX_LAMBDA_TIMEOUT_SECONDS} s limit (at most "
                    f"{MAX_LAMBDA_TIMEOUT_SECONDS - PROCESSOR_TIMEOUT_MARGIN_SECONDS})"
                )
        for name in sorted({n for n in names if names.count(n) > 1}):
            p.append(f"processors: {name!r} is named twice")
        entries = self.processor_entries()
        hold = self.hold if isinstance(self.hold, Mapping) else None
        size = processors_env_size(entries if self.processors else [], hold)
        if (self.processors or hold is not None) and size > MAX_PROCESSORS_ENV_BYTES:
            what = " and ".join(
                name
                for name, used in (("PROCESSORS", self.processors), ("HOLD", hold is not None))
                if used
            )
            what += " environment variables" if " and " in what else " environment variable"
            p.append(
                f"{'processors' if self.processors else 'hold'}: the {what} would take about "
                f"{size} bytes, more than {MAX_PROCESSORS_ENV_BYTES} (Lambda allows 4 KB for "
                "all of a function's variables): fewer entries or shorter key filters"
            )
        in_process = [e for e in entries if "module" in e]
        if self.processor is not None or in_process:
            for name, timeout in (
                ("functionTimeoutSeconds", self.function_timeout_seconds),
                ("backfillFunctionTimeoutSeconds", self.backfill_function_timeout_seconds),
            ):
                if self.ingest_side_timeout(timeout) < 10:
                    p.append(
                        f"{name}: at least 10 with a processor (an effect is started only "
                        "with 3 s or more left in the invocation)"
                    )
        bundled = [e for e in entries if "module" in e or "handler" in e]
        if self.processor_package_dir is not None and not bundled:
            p.append(
                "processorPackageDir is set but processor is not"
                + (" (nor a module or handler in processors)" if self.processors else "")
            )
        for index, statement in enumerate(self.processor_policy_statements):
            p.extend(statement_problems(statement, f"processorPolicyStatements[{index}]"))
        if self.processor_policy_statements and not in_process:
            p.append(
                "processorPolicyStatements is set but no in-process processor runs (processor, "
                "or a module in processors): a processor function has its own role"
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


def ingest_event_pattern(
    buckets: str | Mapping[str, Any] | Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """EventBridge event pattern of the ingest rule and its archive.

    Matches only the landing buckets' ``Object Created`` and ``Object Deleted`` events from
    ``aws.s3`` (https://docs.aws.amazon.com/AmazonS3/latest/userguide/ev-events.html), and of a
    bucket with key filters only its keys: ``prefix`` / ``suffix`` matching, or ``wildcard``
    ``<prefix>*<suffix>`` when it has both, joined by ``$or``
    (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-create-pattern-operators.html).
    S3 sends keys form-encoded (``a b`` as ``a+b``), so the filters are encoded the same way
    (``quote_plus(value, safe="/")``); encoding is per character, so an encoded prefix is a
    prefix of the encoded key.

    Parameters
    ----------
    buckets : str, mapping or sequence of mapping
        One bucket's name (or a resolved CloudFormation reference to it, ``{"Ref": ...}``),
        or ``[{"name", "prefixes", "suffixes"}, ...]``
        (:meth:`BucketSpec.scope_entry`); names may be CDK tokens in the stack.

    Returns
    -------
    dict
        ``{"source", "detail-type", "detail": {"bucket": {"name": [...]}}}`` when no bucket has
        filters, else ``{"source", "detail-type", "detail": {"$or": [...]}}``.
    """
    # one bucket: its name, or a resolved CDK reference to it ({"Ref": ...}) in a template test
    entries: list[Mapping[str, Any]]
    if isinstance(buckets, str) or (isinstance(buckets, Mapping) and "name" not in buckets):
        entries = [{"name": buckets}]
    else:
        entries = list(buckets)  # type: ignore[arg-type]
    pattern: dict[str, Any] = {
        "source": ["aws.s3"],
        "detail-type": ["Object Created", "Object Deleted"],
    }
    plain = [e["name"] for e in entries if not e.get("prefixes") and not e.get("suffixes")]
    filtered = [e for e in entries if e.get("prefixes") or e.get("suffixes")]
    if not filtered:
        pattern["detail"] = {"bucket": {"name": plain}}
        return pattern
    alternatives: list[dict[str, Any]] = []
    if plain:
        alternatives.append({"bucket": {"name": plain}})
    for entry in filtered:
        alternatives.append(
            {
                "bucket": {"name": [entry["name"]]},
                "object": {"key": key_filters(entry.get("prefixes"), entry.get("suffixes"))},
            }
        )
    pattern["detail"] = {"$or": alternatives} if len(alternatives) > 1 else alternatives[0]
    return pattern


def key_filters(
    prefixes: Sequence[str] | None, suffixes: Sequence[str] | None
) -> list[dict[str, str]]:
    """The EventBridge matchers of ``detail.object.key`` for key filters (decoded values):
    ``[{"prefix": ...}]``, ``[{"suffix": ...}]`` or ``[{"wildcard": "<prefix>*<suffix>"}]``
    over the form-encoded values (an encoded value never holds ``*``: it is ``%2A``)."""
    pre = [quote_plus(p, safe="/") for p in prefixes or ()]
    suf = [quote_plus(x, safe="/") for x in suffixes or ()]
    if pre and suf:
        return [{"wildcard": f"{p}*{x}"} for p in pre for x in suf]
    if pre:
        return [{"prefix": p} for p in pre]
    return [{"suffix": x} for x in suf]


def _bucket_specs(raw: Any) -> tuple[tuple[BucketSpec, ...], list[str]]:
    """``buckets`` from its context value: a list, or a JSON list as ``-c buckets=[...]``
    gives it; ``None``/empty: no list (the single-bucket settings apply)."""
    if raw in (None, "", "null"):
        return (), []
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            return (), [f"buckets: not JSON ({exc.msg})"]
    if not isinstance(raw, list):
        return (), [f"buckets: expected a list of bucket objects, got {raw!r}"]
    specs: list[BucketSpec] = []
    problems: list[str] = []
    for index, entry in enumerate(raw):
        spec, found = BucketSpec.from_context(entry, f"buckets[{index}]")
        problems.extend(found)
        if spec is not None:
            specs.append(spec)
    return tuple(specs), problems


def _normalised(raw: Any) -> Any:
    """``raw`` normalised (:func:`processor_entry`) when it is a valid entry, else as given."""
    entry, problems = processor_entry(raw, "")
    return entry if entry is not None and not problems else raw


def _json_list(key: str, raw: Any) -> tuple[list[Any], list[str]]:
    """A list setting from its context value (``processors``, ``processorPolicyStatements``): a
    list, or a JSON list as ``-c 'key=[...]'`` gives it; ``None``/empty: no entries."""
    if raw in (None, "", "null"):
        return [], []
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            return [], [f"{key}: not JSON ({exc.msg})"]
    if not isinstance(raw, list | tuple):
        return [], [f"{key}: expected a list of objects, got {raw!r}"]
    return list(raw), []


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
