"""Every function's environment as one typed, validated, hashable model per function role.

Each model owns its variables' names (the constants below), ``to_env()`` (what the stack's
constructs, ``infra/s3ingest_cdk``, and the local runtime give the function: the variables of
the fields that are set) and ``from_env(env)`` (what the handlers' cold-start builders,
:mod:`s3ingest_fn.wiring`, read), which reports every missing or malformed variable in one
:class:`ConfigError`. Models are frozen and hashable, so wiring caches what it builds per
configuration value (two functions of one process never share a graph built for the other).

The environment of the invocation under way is :func:`invocation_env`: the one the local
Lambda service set for it (:func:`use_env`, a :class:`contextvars.ContextVar`), else the
process environment (deployed, Lambda gives each execution environment its own process).

The ingest function's model (:class:`IngestConfig`); the AWS clients of any role:
:class:`ClientConfig`; how any of them logs object keys: :class:`LogConfig`. Pure standard
library: importing this module stays cheap (``bench/bundle_cold_start.py``). The other roles'
models (and :class:`~s3ingest_fn.config_roles.Inventory`,
:data:`~s3ingest_fn.config_roles.ROLES`) live in :mod:`s3ingest_fn.config_roles`, which the
ingest function never imports: its cold start builds only its own dataclasses.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from s3ingest_fn.contract import DELIVERY_BUCKETS_ENV, STACK_ENV
from s3ingest_fn.core.context import in_caller_context
from s3ingest_fn.core.scope import Scope
from s3ingest_fn.effect_targets import (  # noqa: F401 (the stack reads them here)
    PROCESSOR_TARGETS,
    targets_json,
)
from s3ingest_fn.owners import parse_owners

# -- variable names ---------------------------------------------------------------------------

LEDGER_TABLE_NAME = "LEDGER_TABLE_NAME"
DEAD_LETTER_QUEUE_URL = "DEAD_LETTER_QUEUE_URL"
INGEST_QUEUE_URL = "INGEST_QUEUE_URL"
TOMBSTONE_TTL_SECONDS = "TOMBSTONE_TTL_SECONDS"
RECORD_CONCURRENCY = "RECORD_CONCURRENCY"
#: The first (default) bucket; alone, without ``SCOPE``, the only one.
BUCKET_NAME = "BUCKET_NAME"
#: The buckets and key filters (:meth:`~s3ingest_fn.core.scope.Scope.to_json`).
SCOPE = "SCOPE"
#: Each bucket's inventory reports, ``[{"name", "bucket", "prefix"}]`` (:class:`Inventory`).
INVENTORIES = "INVENTORIES"
#: The first bucket's inventory (back compat, when ``INVENTORIES`` names none for it).
INVENTORY_BUCKET_NAME = "INVENTORY_BUCKET_NAME"
INVENTORY_PREFIX = "INVENTORY_PREFIX"
#: The listing backfill's checkpoints (and the fan-out's shards).
CHECKPOINT_BUCKET_NAME = "CHECKPOINT_BUCKET_NAME"
#: The single in-process processor, ``package.module:function``.
PROCESSOR = "PROCESSOR"
#: Several processors, a JSON list of :class:`ProcessorEntry` objects.
PROCESSORS = "PROCESSORS"
#: The processors whose effects reconciliation reads (comma-separated).
PROCESSOR_NAMES = "PROCESSOR_NAMES"
#: The stack-wide hold policy (JSON object, ``docs/hold.md``).
HOLD = "HOLD"
#: Review decisions kept per row.
TRAIL_LENGTH = "TRAIL_LENGTH"
#: The in-process processors' output bucket (read by the processors themselves).
OUTPUT_BUCKET = "OUTPUT_BUCKET"
#: The Batch Operations completion reports (the backfill control's ``report`` step).
REPORT_BUCKET_NAME = "REPORT_BUCKET_NAME"
CHANGE_BUS_NAME = "CHANGE_BUS_NAME"
#: The change relay also publishes effects done (``Effect Done``): ``true`` with ``historyTable``.
EFFECT_EVENTS = "EFFECT_EVENTS"
#: The history writer's catalog (pyiceberg properties, JSON), table and its location.
HISTORY_CATALOG = "HISTORY_CATALOG"
HISTORY_TABLE = "HISTORY_TABLE"
HISTORY_LOCATION = "HISTORY_LOCATION"
DELIVERY_CHECK_BUCKETS = DELIVERY_BUCKETS_ENV
S3INGEST_STACK = STACK_ENV
POWERTOOLS_TRACE_DISABLED = "POWERTOOLS_TRACE_DISABLED"
#: How object keys appear in the function's logs: ``plain``, ``hashed`` or ``none``
#: (:class:`LogConfig`; the ``logKeys`` setting).
LOG_KEYS = "LOG_KEYS"
#: JSON objects by bucket name (``docs/organisation.md``): the role the functions assume to read
#: a bucket of another account (``{"<bucket>": "<role ARN>"}``), and each landing bucket's owner
#: (``{"<bucket>": "<account>"}``: ``ExpectedBucketOwner``, ``wrong-account``).
READ_ROLES = "READ_ROLES"
BUCKET_OWNERS = "BUCKET_OWNERS"
#: The Secrets Manager secret whose value keys the hash of ``LOG_KEYS=hashed``.
LOG_KEY_SECRET_ARN = "LOG_KEY_SECRET_ARN"
#: ``LOG_KEYS``' values (kept in step with ``s3ingest.settings.LOG_KEYS_MODES``).
LOG_KEYS_MODES = ("plain", "hashed", "none")
#: The local runtime only: names the recorder its functions' processor runs are reported to
#: (:func:`s3ingest_fn.wiring.record_processor_runs`), whatever invoked the function.
LOCAL_RECORDER = "S3INGEST_LOCAL_RECORDER"

#: Default processor timeout (``timeoutSeconds``) of a function processor, seconds.
DEFAULT_PROCESSOR_TIMEOUT_SECONDS = 30


class ConfigError(ValueError):
    """A function's environment is incomplete or malformed: ``problems`` lists each one (the
    message names the role and every problem)."""

    def __init__(self, role: str, problems: Sequence[str]) -> None:
        super().__init__(f"{role} function misconfigured: " + "; ".join(problems))
        self.role = role
        self.problems = tuple(problems)


# -- the invocation's environment -------------------------------------------------------------

_INVOCATION_ENV: ContextVar[Mapping[str, str] | None] = ContextVar(
    "s3ingest_invocation_env", default=None
)


def invocation_env() -> Mapping[str, str]:
    """The environment of the function invocation running in this context: the one
    :func:`use_env` set (the local Lambda service, per invocation), else ``os.environ``."""
    env = _INVOCATION_ENV.get()
    return os.environ if env is None else env


@contextmanager
def use_env(env: Mapping[str, str]) -> Iterator[None]:
    """Run the block (and what it starts with :func:`contextvars.copy_context`) as an
    invocation with ``env`` as its whole environment; nothing else's changes."""
    token = _INVOCATION_ENV.set(dict(env))
    try:
        yield
    finally:
        _INVOCATION_ENV.reset(token)


#: ``fn`` run, on whatever thread calls it, in a copy of the caller's context (a worker
#: thread of an invocation sees its :func:`invocation_env`; ``core.context.in_caller_context``).
carry_context = in_caller_context


# -- parsing helpers --------------------------------------------------------------------------


def _whole(
    env: Mapping[str, str],
    name: str,
    default: int | None,
    lo: int,
    hi: int,
    problems: list[str],
) -> int | None:
    raw = env.get(name)
    if raw is None or raw == "":
        if default is None:
            return None
        raw = str(default)
    text = str(raw)
    if not (text.isascii() and text.isdigit()) or not lo <= int(text) <= hi:
        problems.append(f"{name}={raw!r} is not a whole number in {lo}..{hi}")
        return default
    return int(text)


def _required(env: Mapping[str, str], name: str, problems: list[str]) -> str:
    value = env.get(name) or ""
    if not value:
        problems.append(f"{name} is not set")
    return value


def _json(env: Mapping[str, str], name: str, problems: list[str]) -> Any:
    raw = env.get(name)
    if not raw:
        return None
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        problems.append(f"{name} is not JSON: {exc.msg}")
        return None


def compact(value: Any) -> str:
    """``value`` as JSON without spaces (what the variables hold)."""
    return json.dumps(value, separators=(",", ":"))


def _names(raw: str | None) -> tuple[str, ...]:
    return tuple(n for n in (raw or "").split(",") if n)


def _put(env: dict[str, str], name: str, value: Any) -> None:
    if value is None or value == "" or value == ():
        return
    env[name] = value if isinstance(value, str) else str(value)


# -- typed entries ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ProcessorEntry:
    """One processor of ``PROCESSORS`` (``docs/processor-api.md``): exactly one of ``module``
    (in-process, ``package.module:function``), ``function_arn`` (a Lambda function) or
    ``handler`` (the local runtime: a Lambda handler run in-process); ``hold_json`` is the
    entry's own hold policy as compact JSON (``"null"``: explicitly none; None: the entry names
    none, the stack's ``HOLD`` applies); ``version`` the processor's version (``version``, 1
    and up; None: the entry names none, version 1). ``extra`` keeps any other key, sorted, as
    JSON."""

    name: str
    module: str | None = None
    function_arn: str | None = None
    handler: str | None = None
    mode: str | None = None
    prefixes: tuple[str, ...] | None = None
    suffixes: tuple[str, ...] | None = None
    kinds: tuple[str, ...] | None = None
    timeout_seconds: int | None = None
    hold_json: str | None = None
    version: int | None = None
    extra: tuple[tuple[str, str], ...] = ()

    _KEYS: ClassVar[dict[str, str]] = {
        "name": "name",
        "module": "module",
        "functionArn": "function_arn",
        "handler": "handler",
        "mode": "mode",
        "prefixes": "prefixes",
        "suffixes": "suffixes",
        "kinds": "kinds",
        "timeoutSeconds": "timeout_seconds",
        "version": "version",
    }

    @classmethod
    def of(cls, entry: Mapping[str, Any]) -> ProcessorEntry:
        """From one JSON object of ``PROCESSORS``.

        Raises
        ------
        ValueError
            When the entry has no name, or a ``version`` that is not a whole number of at
            least 1.
        """
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"processor entry without a name: {dict(entry)!r}")
        values: dict[str, Any] = {}
        for key, attr in cls._KEYS.items():
            if key not in entry or entry[key] is None:
                continue
            value = entry[key]
            if attr in ("prefixes", "suffixes", "kinds"):
                value = tuple(str(v) for v in value)
            elif attr == "timeout_seconds":
                value = int(value)
            elif attr == "version":
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise ValueError(
                        f"processor {name!r}: version {value!r} is not a whole number of at least 1"
                    )
            else:
                value = str(value)
            values[attr] = value
        if "hold" in entry:
            values["hold_json"] = compact(entry["hold"])
        extra = tuple(
            sorted((k, compact(v)) for k, v in entry.items() if k not in cls._KEYS and k != "hold")
        )
        return cls(**values, extra=extra)

    def as_dict(self) -> dict[str, Any]:
        """The JSON object again (only the keys the entry had)."""
        out: dict[str, Any] = {}
        for key, attr in self._KEYS.items():
            value = getattr(self, attr)
            if value is not None:
                out[key] = list(value) if isinstance(value, tuple) else value
        if self.hold_json is not None:
            out["hold"] = json.loads(self.hold_json)
        for key, raw in self.extra:
            out[key] = json.loads(raw)
        return out

    @property
    def timeout(self) -> int:
        """``timeoutSeconds``, default :data:`DEFAULT_PROCESSOR_TIMEOUT_SECONDS`."""
        return self.timeout_seconds or DEFAULT_PROCESSOR_TIMEOUT_SECONDS

    def hold(self, stack: Any) -> Any:
        """The hold policy that applies: the entry's own, else ``stack`` (``HOLD``, parsed)."""
        return stack if self.hold_json is None else json.loads(self.hold_json)

    @staticmethod
    def to_json(entries: Sequence[ProcessorEntry]) -> str:
        """The ``PROCESSORS`` value."""
        return json.dumps([e.as_dict() for e in entries])


def read_processors(env: Mapping[str, str], problems: list[str]) -> tuple[ProcessorEntry, ...]:
    """``PROCESSORS``, else the single ``PROCESSOR`` as the entry ``default``, else none."""
    from s3ingest_fn.core.row import DEFAULT_PROCESSOR

    raw = env.get(PROCESSORS)
    if raw:
        try:
            entries = json.loads(raw)
        except json.JSONDecodeError as exc:
            problems.append(f"PROCESSORS is not JSON: {exc.msg}")
            return ()
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            problems.append("PROCESSORS must be a JSON list of processor objects")
            return ()
        found = []
        for entry in entries:
            try:
                found.append(ProcessorEntry.of(entry))
            except (ValueError, TypeError) as exc:
                problems.append(f"PROCESSORS: {exc}")
        return tuple(found)
    single = env.get(PROCESSOR)
    return (ProcessorEntry(DEFAULT_PROCESSOR, module=single),) if single else ()


# -- the models -------------------------------------------------------------------------------

C = TypeVar("C", bound="_Config")


@dataclass(frozen=True)
class _Config:
    """Common behaviour: ``ROLE`` names the function in errors."""

    ROLE: ClassVar[str] = "s3ingest"

    @classmethod
    def from_env(cls: type[C], env: Mapping[str, str] | None = None) -> C:
        """Read and validate ``env`` (default :func:`invocation_env`).

        Raises
        ------
        ConfigError
            Naming every missing or malformed variable.
        """
        problems: list[str] = []
        config = cls._read(invocation_env() if env is None else env, problems)
        if problems:
            raise ConfigError(cls.ROLE, problems)
        return config

    @classmethod
    def _read(cls: type[C], env: Mapping[str, str], problems: list[str]) -> C:
        raise NotImplementedError

    def to_env(self) -> dict[str, str]:
        """The variables of the fields that are set."""
        raise NotImplementedError


@dataclass(frozen=True)
class IngestConfig(_Config):
    """The ingest function's environment (and every function that builds the ingest service).

    Attributes
    ----------
    ledger_table_name : str
        ``LEDGER_TABLE_NAME``
    dead_letter_queue_url : str
        ``DEAD_LETTER_QUEUE_URL``
    tombstone_ttl_seconds : int
        ``TOMBSTONE_TTL_SECONDS`` (0: tombstones never expire)
    record_concurrency : int
        ``RECORD_CONCURRENCY``: records of one batch processed at once (1-64)
    bucket_name : str or None
        ``BUCKET_NAME``: the first (default) bucket; alone, without ``SCOPE``, the only one
    scope_json : str or None
        ``SCOPE``: the buckets and key filters ingested (:meth:`Scope.to_json`)
    processors : tuple of ProcessorEntry
        ``PROCESSORS``, or ``PROCESSOR`` as the one entry ``default`` (``single`` True; a
        versioned single processor comes as ``PROCESSORS``, ``PROCESSOR`` names no version)
    hold_json : str or None
        ``HOLD``: the stack-wide hold policy (JSON)
    trail_length : int or None
        ``TRAIL_LENGTH`` (None: the default)
    output_bucket : str or None
        ``OUTPUT_BUCKET`` (the in-process processors read it)
    single : bool
        The processor came as the single ``PROCESSOR``
    local_recorder : str or None
        ``S3INGEST_LOCAL_RECORDER`` (the local runtime only)
    """

    ROLE: ClassVar[str] = "ingest"

    ledger_table_name: str
    dead_letter_queue_url: str
    tombstone_ttl_seconds: int = 0
    record_concurrency: int = 8
    bucket_name: str | None = None
    scope_json: str | None = None
    processors: tuple[ProcessorEntry, ...] = ()
    hold_json: str | None = None
    trail_length: int | None = None
    output_bucket: str | None = None
    single: bool = False
    local_recorder: str | None = None

    @property
    def scope(self) -> Scope:
        """What the functions track: ``SCOPE``, else ``BUCKET_NAME`` alone, else everything."""
        return Scope.from_env({SCOPE: self.scope_json or "", BUCKET_NAME: self.bucket_name or ""})

    @property
    def hold(self) -> Any:
        """``HOLD``, parsed (None: none)."""
        return json.loads(self.hold_json or "null")

    def processor_entries(self) -> list[dict[str, Any]]:
        """The processors as JSON objects (:func:`s3ingest_fn.wiring.processor_specs`)."""
        return [entry.as_dict() for entry in self.processors]

    @classmethod
    def _read(cls: type[C], env: Mapping[str, str], problems: list[str]) -> C:
        values = _ingest_values(env, problems)
        return cls(**values)

    def to_env(self) -> dict[str, str]:
        env: dict[str, str] = {}
        _put(env, LEDGER_TABLE_NAME, self.ledger_table_name)
        _put(env, DEAD_LETTER_QUEUE_URL, self.dead_letter_queue_url)
        _put(env, TOMBSTONE_TTL_SECONDS, self.tombstone_ttl_seconds)
        _put(env, RECORD_CONCURRENCY, self.record_concurrency)
        _put(env, BUCKET_NAME, self.bucket_name)
        _put(env, SCOPE, self.scope_json)
        if self.single and len(self.processors) == 1 and self.processors[0].version is None:
            _put(env, PROCESSOR, self.processors[0].module)
        elif self.processors:
            env[PROCESSORS] = ProcessorEntry.to_json(self.processors)
        _put(env, HOLD, self.hold_json)
        _put(env, TRAIL_LENGTH, self.trail_length)
        _put(env, OUTPUT_BUCKET, self.output_bucket)
        _put(env, LOCAL_RECORDER, self.local_recorder)
        return env


def _ingest_values(env: Mapping[str, str], problems: list[str]) -> dict[str, Any]:
    ledger_table_name = _required(env, LEDGER_TABLE_NAME, problems)
    dead_letter_queue_url = _required(env, DEAD_LETTER_QUEUE_URL, problems)
    ttl = _whole(env, TOMBSTONE_TTL_SECONDS, 0, 0, 10 * 365 * 86400, problems)
    concurrency = _whole(env, RECORD_CONCURRENCY, 8, 1, 64, problems)
    scope_json = env.get(SCOPE) or None
    try:
        Scope.from_env({SCOPE: scope_json or ""})
    except ValueError as exc:
        problems.append(str(exc))
    processors = read_processors(env, problems)
    hold = _json(env, HOLD, problems)
    if hold is not None and not isinstance(hold, dict):
        problems.append("HOLD must be a JSON object")
    return {
        "ledger_table_name": ledger_table_name,
        "dead_letter_queue_url": dead_letter_queue_url,
        "tombstone_ttl_seconds": ttl,
        "record_concurrency": concurrency,
        "bucket_name": env.get(BUCKET_NAME) or None,
        "scope_json": scope_json,
        "processors": processors,
        "hold_json": env.get(HOLD) or None,
        "trail_length": _whole(env, TRAIL_LENGTH, None, 1, 10_000, problems),
        "output_bucket": env.get(OUTPUT_BUCKET) or None,
        "single": not env.get(PROCESSORS) and bool(env.get(PROCESSOR)),
        "local_recorder": env.get(LOCAL_RECORDER) or None,
    }


@dataclass(frozen=True)
class ClientConfig(_Config):
    """What a function's boto3 clients are made from: ``AWS_REGION`` (else
    ``AWS_DEFAULT_REGION``), ``AWS_ENDPOINT_URL`` (the local runtime's emulator) and the
    credentials Lambda puts in the environment (``AWS_ACCESS_KEY_ID``,
    ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``); unset: boto3's default chain. The
    clients themselves are made by :func:`s3ingest_fn.wiring.client`. ``READ_ROLES``: the role
    to assume per bucket of another account; ``BUCKET_OWNERS``: each bucket's owner account."""

    ROLE: ClassVar[str] = "aws clients"

    region: str | None = None
    endpoint_url: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    session_token: str | None = None
    read_roles_json: str | None = None
    bucket_owners_json: str | None = None

    @property
    def read_roles(self) -> dict[str, str]:
        """``READ_ROLES``, parsed: bucket name -> role ARN (empty: every bucket is local)."""
        roles: dict[str, str] = json.loads(self.read_roles_json or "{}")
        return roles

    @classmethod
    def _read(cls: type[C], env: Mapping[str, str], problems: list[str]) -> C:
        roles = _json(env, READ_ROLES, problems)
        if roles is not None and not (
            isinstance(roles, dict) and all(isinstance(v, str) for v in roles.values())
        ):
            problems.append(f"{READ_ROLES} must be a JSON object of role ARNs by bucket")
        try:
            parse_owners(env.get(BUCKET_OWNERS))
        except ValueError as exc:
            problems.append(f"{BUCKET_OWNERS} {exc}")
        return cls(  # type: ignore[call-arg]
            region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None,
            endpoint_url=env.get("AWS_ENDPOINT_URL") or None,
            access_key_id=env.get("AWS_ACCESS_KEY_ID") or None,
            secret_access_key=env.get("AWS_SECRET_ACCESS_KEY") or None,
            session_token=env.get("AWS_SESSION_TOKEN") or None,
            read_roles_json=env.get(READ_ROLES) or None,
            bucket_owners_json=env.get(BUCKET_OWNERS) or None,
        )

    def to_env(self) -> dict[str, str]:
        env: dict[str, str] = {}
        _put(env, "AWS_REGION", self.region)
        _put(env, "AWS_DEFAULT_REGION", self.region)
        _put(env, "AWS_ENDPOINT_URL", self.endpoint_url)
        _put(env, "AWS_ACCESS_KEY_ID", self.access_key_id)
        _put(env, "AWS_SECRET_ACCESS_KEY", self.secret_access_key)
        _put(env, "AWS_SESSION_TOKEN", self.session_token)
        _put(env, READ_ROLES, self.read_roles_json)
        _put(env, BUCKET_OWNERS, self.bucket_owners_json)
        return env


@dataclass(frozen=True)
class LogConfig(_Config):
    """How every function logs object keys (:mod:`s3ingest_fn.log_keys`): ``LOG_KEYS``
    (``plain``, the default; ``hashed``; ``none``), and for ``hashed`` the Secrets Manager
    secret whose value keys the hash, ``LOG_KEY_SECRET_ARN`` (read once per cold start,
    :func:`s3ingest_fn.wiring.function_key_policy`)."""

    ROLE: ClassVar[str] = "logs"

    log_keys: str = "plain"
    secret_arn: str | None = None

    @classmethod
    def _read(cls: type[C], env: Mapping[str, str], problems: list[str]) -> C:
        mode = env.get(LOG_KEYS) or "plain"
        if mode not in LOG_KEYS_MODES:
            problems.append(f"{LOG_KEYS}={mode!r} is not one of {', '.join(LOG_KEYS_MODES)}")
        arn = env.get(LOG_KEY_SECRET_ARN) or None
        if mode == "hashed" and not arn:
            problems.append(f"{LOG_KEYS}=hashed needs {LOG_KEY_SECRET_ARN}")
        return cls(log_keys=mode, secret_arn=arn)  # type: ignore[call-arg]

    def to_env(self) -> dict[str, str]:
        env: dict[str, str] = {}
        if self.log_keys != "plain":
            env[LOG_KEYS] = self.log_keys
        _put(env, LOG_KEY_SECRET_ARN, self.secret_arn)
        return env
