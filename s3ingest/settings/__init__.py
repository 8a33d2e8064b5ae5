"""Deployment settings shared by the CDK stack and the local runtime.

One model, read from ``cdk.json`` context (or the same keys given to the local runtime), validated
eagerly: every problem is reported in one :class:`SettingsError`. This package is pure (no CDK, no
boto3) so the local runtime and the tests can import it cheaply.

The tombstone lifetime (CONTRACT C6) and the ingest rule's event pattern are derived here, so the
stack and the local runtime cannot disagree about them.

By concern: how context values are read (:mod:`~s3ingest.settings.context`), the declaration
of one setting (:mod:`~s3ingest.settings.fields`), the landing buckets
(:mod:`~s3ingest.settings.buckets`), the processors and hold documents
(:mod:`~s3ingest.settings.processors`), the :class:`Settings` model, its fields (the context
keys, :data:`DEFAULTS`) and its rules (:mod:`~s3ingest.settings.model`), the ingest rule's event
pattern and the change stream's names (:mod:`~s3ingest.settings.events`). Every name is
imported from here.
"""

from __future__ import annotations

from s3ingest.settings.buckets import (
    BUCKET_FIELDS,
    CREATE_KEY,
    INVENTORY_ID,
    INVENTORY_PREFIX,
    KMS_KEY_ARN_RE,
    BucketSpec,
    InventoryRef,
    inventory_report_prefix,
    kms_key_problems,
)
from s3ingest.settings.context import (
    CDK_PLAIN_KEYS,
    SettingsError,
    UnknownKeywordError,
    is_cdk_key,
)
from s3ingest.settings.events import (
    CHANGE_DETAIL_TYPES,
    CHANGE_SOURCE,
    EFFECT_DETAIL_TYPE,
    EFFECT_SOURCE,
    ingest_event_pattern,
    key_filters,
)
from s3ingest.settings.model import (
    BACKFILL_ENGINES,
    DEFAULTS,
    HEARTBEAT_MARGIN_SECONDS,
    LOG_RETENTION_DAYS,
    MAX_ALARM_RANGE_SECONDS,
    OPTIONAL_INT_KEYS,
    SECONDS_PER_DAY,
    Settings,
    unknown_keys,
)
from s3ingest.settings.processors import (
    DEFAULT_PROCESSOR_NAME,
    DEFAULT_PROCESSOR_TIMEOUT_SECONDS,
    DEFAULT_PROCESSOR_VERSION,
    MAX_LAMBDA_TIMEOUT_SECONDS,
    MAX_PROCESSORS_ENV_BYTES,
    PROCESSOR_FIELDS,
    PROCESSOR_KINDS,
    PROCESSOR_MODES,
    PROCESSOR_TARGET_FIELDS,
    PROCESSOR_TIMEOUT_MARGIN_SECONDS,
    STATEMENT_FIELDS,
    compact_json,
    hold_problems,
    is_function_processor,
    parse_hold,
    processor_entry,
    processors_env_size,
    statement_problems,
)

__all__ = [
    "BACKFILL_ENGINES",
    "BUCKET_FIELDS",
    "CDK_PLAIN_KEYS",
    "CHANGE_DETAIL_TYPES",
    "CHANGE_SOURCE",
    "CREATE_KEY",
    "DEFAULTS",
    "DEFAULT_PROCESSOR_NAME",
    "DEFAULT_PROCESSOR_TIMEOUT_SECONDS",
    "DEFAULT_PROCESSOR_VERSION",
    "EFFECT_DETAIL_TYPE",
    "EFFECT_SOURCE",
    "HEARTBEAT_MARGIN_SECONDS",
    "INVENTORY_ID",
    "INVENTORY_PREFIX",
    "KMS_KEY_ARN_RE",
    "LOG_RETENTION_DAYS",
    "MAX_ALARM_RANGE_SECONDS",
    "MAX_LAMBDA_TIMEOUT_SECONDS",
    "MAX_PROCESSORS_ENV_BYTES",
    "OPTIONAL_INT_KEYS",
    "PROCESSOR_FIELDS",
    "PROCESSOR_KINDS",
    "PROCESSOR_MODES",
    "PROCESSOR_TARGET_FIELDS",
    "PROCESSOR_TIMEOUT_MARGIN_SECONDS",
    "SECONDS_PER_DAY",
    "STATEMENT_FIELDS",
    "BucketSpec",
    "InventoryRef",
    "Settings",
    "SettingsError",
    "UnknownKeywordError",
    "compact_json",
    "hold_problems",
    "ingest_event_pattern",
    "inventory_report_prefix",
    "is_cdk_key",
    "is_function_processor",
    "key_filters",
    "kms_key_problems",
    "parse_hold",
    "processor_entry",
    "processors_env_size",
    "statement_problems",
    "unknown_keys",
]
