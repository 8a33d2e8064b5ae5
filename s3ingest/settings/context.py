"""The context keys (``cdk.json``'s, or ``-c key=value``) with their defaults, how their values
are read (strings, as ``cdk -c`` gives them, or JSON), the CDK's own keys, and the error that
lists every problem at once.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from typing import Any

from s3ingest_fn.core.row import TRAIL_SLOTS

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
    "processorVersion": 1,
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
    "logKeys": "plain",
    "ingestReservedConcurrency": None,
    "backfillReservedConcurrency": None,
    "operatorRoleArns": None,
    "kmsKeyArn": None,
    "allowModuleProcessorsWithRemoteBuckets": False,
}

#: Whole-number settings whose default is ``None`` (unset).
OPTIONAL_INT_KEYS = frozenset(
    {"ledgerWarmWriteUnits", "ingestReservedConcurrency", "backfillReservedConcurrency"}
)


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


class SettingsError(ValueError):
    """Raised when context settings are invalid; ``problems`` lists every one of them."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("invalid s3ingest settings:\n  - " + "\n  - ".join(problems))


def parse_json_list(key: str, raw: Any) -> tuple[list[Any], list[str]]:
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


def camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(w.capitalize() for w in rest)


def to_bool(raw: Any) -> bool | None:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    return None


def to_int(raw: Any) -> int | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str) and re.fullmatch(r"-?\d+", raw.strip()):
        return int(raw)
    return None
