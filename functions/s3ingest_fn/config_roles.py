"""The environment models of every function role but ingest's: the inventory and listing
backfills, the reprocess run, reconcile and its fan-out, the backfill state machine's steps,
the change relay, the delivery check, the bucket set-up; :data:`ROLES`, every role's model by
name.

Apart from :mod:`s3ingest_fn.config` so that the ingest function's cold start, which reads
:class:`~s3ingest_fn.config.IngestConfig` alone, builds none of these dataclasses (nor imports
:mod:`s3ingest_fn.core.effects` for :class:`EffectTarget`): ``bench/bundle_cold_start.py``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from s3ingest_fn.config import (
    BUCKET_NAME,
    CHANGE_BUS_NAME,
    CHECKPOINT_BUCKET_NAME,
    DEAD_LETTER_QUEUE_URL,
    DELIVERY_CHECK_BUCKETS,
    EFFECT_EVENTS,
    HISTORY_CATALOG,
    HISTORY_LOCATION,
    HISTORY_TABLE,
    INGEST_QUEUE_URL,
    INVENTORIES,
    INVENTORY_BUCKET_NAME,
    INVENTORY_PREFIX,
    LEDGER_TABLE_NAME,
    PROCESSOR_NAMES,
    REPORT_BUCKET_NAME,
    SCOPE,
    C,
    IngestConfig,
    _Config,
    _ingest_values,
    _names,
    _put,
    _required,
    compact,
    read_processors,
)
from s3ingest_fn.core.effects import EffectTarget
from s3ingest_fn.core.scope import Scope
from s3ingest_fn.effect_targets import PROCESSOR_TARGETS, read_targets, targets_json


@dataclass(frozen=True)
class Inventory:
    """One ``INVENTORIES`` entry: bucket ``name``'s reports are written to ``bucket`` under
    ``prefix``."""

    name: str
    bucket: str
    prefix: str = ""

    def as_dict(self) -> dict[str, str]:
        """``{"name", "bucket", "prefix"}``."""
        return {"name": self.name, "bucket": self.bucket, "prefix": self.prefix}

    @staticmethod
    def to_json(entries: Sequence[Inventory]) -> str:
        """The ``INVENTORIES`` value."""
        return compact([e.as_dict() for e in entries])

    @classmethod
    def parse(cls, raw: str | None) -> tuple[Inventory, ...]:
        """``INVENTORIES``' entries (empty: none).

        Raises
        ------
        ValueError
            When it is not a JSON list of ``{"name", "bucket", "prefix"?}`` objects.
        """
        if not raw:
            return ()
        try:
            entries = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ValueError(f"INVENTORIES is not JSON: {exc.msg}") from exc
        if not isinstance(entries, list):
            raise ValueError("INVENTORIES must be a JSON list")
        found = []
        for entry in entries:
            if not (
                isinstance(entry, dict)
                and isinstance(entry.get("name"), str)
                and isinstance(entry.get("bucket"), str)
            ):
                raise ValueError(f"INVENTORIES entry without name or bucket: {entry!r}")
            found.append(cls(entry["name"], entry["bucket"], str(entry.get("prefix") or "")))
        return tuple(found)


@dataclass(frozen=True)
class BackfillConfig(IngestConfig):
    """The inventory backfill function's (Batch Operations) environment: the ingest
    function's (``DEAD_LETTER_QUEUE_URL`` unused here, validated alike)."""

    ROLE: ClassVar[str] = "backfill"


@dataclass(frozen=True)
class ListingBackfillConfig(IngestConfig):
    """The listing backfill functions' environment: the ingest function's plus
    ``CHECKPOINT_BUCKET_NAME``."""

    ROLE: ClassVar[str] = "listing backfill"

    checkpoint_bucket_name: str = ""

    @classmethod
    def _read(cls: type[C], env: Mapping[str, str], problems: list[str]) -> C:
        values = _ingest_values(env, problems)
        values["checkpoint_bucket_name"] = _required(env, CHECKPOINT_BUCKET_NAME, problems)
        return cls(**values)

    def to_env(self) -> dict[str, str]:
        env = super().to_env()
        _put(env, CHECKPOINT_BUCKET_NAME, self.checkpoint_bucket_name)
        return env

    def ingest(self) -> IngestConfig:
        """The ingest part (what builds the ingest service)."""
        return IngestConfig(
            **{f.name: getattr(self, f.name) for f in fields(IngestConfig) if f.init}
        )


@dataclass(frozen=True)
class ReprocessConfig(ListingBackfillConfig):
    """The reprocess functions' environment (plan, segment, summarize): the ingest function's
    (the ledger, ``SCOPE``, ``PROCESSORS`` or ``PROCESSOR``, ``HOLD``, ``TRAIL_LENGTH``,
    ``OUTPUT_BUCKET``: the segment step runs the processors) plus ``CHECKPOINT_BUCKET_NAME``
    (the run's plan and checkpoints, under ``reprocess/<run>/``)."""

    ROLE: ClassVar[str] = "reprocess"


@dataclass(frozen=True)
class ReconcileConfig(_Config):
    """The reconcile function's environment.

    Attributes
    ----------
    ledger_table_name, ingest_queue_url : str
        ``LEDGER_TABLE_NAME``, ``INGEST_QUEUE_URL`` (repairs go there)
    bucket_name, scope_json : str or None
        ``BUCKET_NAME``, ``SCOPE`` (:attr:`buckets`: the buckets covered)
    inventories : tuple of Inventory
        ``INVENTORIES``
    inventory_bucket_name, inventory_prefix : str or None
        ``INVENTORY_BUCKET_NAME``, ``INVENTORY_PREFIX``: the first bucket's inventory when
        ``INVENTORIES`` names none for it
    processor_names : tuple of str
        ``PROCESSOR_NAMES``, else the names of ``PROCESSORS`` / ``PROCESSOR``
    processor_targets : tuple of EffectTarget
        ``PROCESSOR_TARGETS``, else those of ``PROCESSORS`` / ``PROCESSOR``: rows behind each
        are counted (``effects_behind_by_processor``)
    """

    ROLE: ClassVar[str] = "reconcile"

    ledger_table_name: str
    ingest_queue_url: str
    bucket_name: str | None = None
    scope_json: str | None = None
    inventories: tuple[Inventory, ...] = ()
    inventory_bucket_name: str | None = None
    inventory_prefix: str | None = None
    processor_names: tuple[str, ...] = ()
    processor_targets: tuple[EffectTarget, ...] = ()

    @property
    def scope(self) -> Scope:
        """``SCOPE``, else ``BUCKET_NAME`` alone, else everything."""
        return Scope.from_env({SCOPE: self.scope_json or "", BUCKET_NAME: self.bucket_name or ""})

    @property
    def buckets(self) -> tuple[str, ...]:
        """The buckets a scheduled reconciliation covers, in order: ``SCOPE``'s, else
        ``BUCKET_NAME``."""
        names = self.scope.names
        return names or ((self.bucket_name,) if self.bucket_name else ())

    def inventory_of(self, bucket: str) -> tuple[str, str] | None:
        """``(destination bucket, report folder)`` of ``bucket``'s inventory, or None."""
        return self.inventory_map().get(bucket)

    def inventory_map(self) -> dict[str, tuple[str, str]]:
        """Each bucket's inventory reports, ``{source bucket: (destination, folder)}``:
        ``INVENTORIES``, and for the first bucket when it names none, ``INVENTORY_BUCKET_NAME``
        and ``INVENTORY_PREFIX``."""
        found = {e.name: (e.bucket, e.prefix) for e in self.inventories}
        first = self.buckets[0] if self.buckets else None
        if first and first not in found and self.inventory_bucket_name:
            found[first] = (self.inventory_bucket_name, self.inventory_prefix or "")
        return found

    @classmethod
    def _read(cls: type[C], env: Mapping[str, str], problems: list[str]) -> C:
        return cls(**_reconcile_values(env, problems))

    def to_env(self) -> dict[str, str]:
        env: dict[str, str] = {}
        _put(env, LEDGER_TABLE_NAME, self.ledger_table_name)
        _put(env, INGEST_QUEUE_URL, self.ingest_queue_url)
        _put(env, BUCKET_NAME, self.bucket_name)
        _put(env, SCOPE, self.scope_json)
        if self.inventories:
            env[INVENTORIES] = Inventory.to_json(self.inventories)
        _put(env, INVENTORY_BUCKET_NAME, self.inventory_bucket_name)
        _put(env, INVENTORY_PREFIX, self.inventory_prefix)
        _put(env, PROCESSOR_NAMES, ",".join(self.processor_names))
        if self.processor_targets:
            env[PROCESSOR_TARGETS] = targets_json(
                [dataclasses.asdict(t) for t in self.processor_targets]
            )
        return env


def _reconcile_values(env: Mapping[str, str], problems: list[str]) -> dict[str, Any]:
    ledger_table_name = _required(env, LEDGER_TABLE_NAME, problems)
    queue_url = _required(env, INGEST_QUEUE_URL, problems)
    scope_json = env.get(SCOPE) or None
    scope = Scope()
    try:
        scope = Scope.from_env({SCOPE: scope_json or ""})
    except ValueError as exc:
        problems.append(str(exc))
    if not scope.names and not env.get(BUCKET_NAME):
        problems.append(f"{BUCKET_NAME} is not set")
    inventories: tuple[Inventory, ...] = ()
    try:
        inventories = Inventory.parse(env.get(INVENTORIES))
    except ValueError as exc:
        problems.append(str(exc))
    listed = _names(env.get(PROCESSOR_NAMES))
    entries = read_processors(env, problems)
    names = listed or tuple(e.name for e in entries)
    targets = read_targets(env.get(PROCESSOR_TARGETS), [e.as_dict() for e in entries], problems)
    return {
        "ledger_table_name": ledger_table_name,
        "ingest_queue_url": queue_url,
        "bucket_name": env.get(BUCKET_NAME) or None,
        "scope_json": scope_json,
        "inventories": inventories,
        "inventory_bucket_name": env.get(INVENTORY_BUCKET_NAME) or None,
        "inventory_prefix": env.get(INVENTORY_PREFIX) if INVENTORY_PREFIX in env else None,
        "processor_names": names,
        "processor_targets": targets,
    }


@dataclass(frozen=True)
class FanOutConfig(ReconcileConfig):
    """The fan-out reconciliation's step function: the reconcile function's environment plus
    ``CHECKPOINT_BUCKET_NAME`` (optional)."""

    ROLE: ClassVar[str] = "reconcile fan-out"

    checkpoint_bucket_name: str | None = None

    @classmethod
    def _read(cls: type[C], env: Mapping[str, str], problems: list[str]) -> C:
        values = _reconcile_values(env, problems)
        values["checkpoint_bucket_name"] = env.get(CHECKPOINT_BUCKET_NAME) or None
        return cls(**values)

    def to_env(self) -> dict[str, str]:
        env = super().to_env()
        _put(env, CHECKPOINT_BUCKET_NAME, self.checkpoint_bucket_name)
        return env


@dataclass(frozen=True)
class BackfillControlConfig(_Config):
    """The backfill state machine's step function: the reconcile function's environment (the
    inventory it reads), the ingest function's (the service it records through), and
    ``REPORT_BUCKET_NAME`` (``report`` only)."""

    ROLE: ClassVar[str] = "backfill control"

    reconcile: ReconcileConfig
    ingest: IngestConfig
    report_bucket_name: str | None = None

    @classmethod
    def _read(cls: type[C], env: Mapping[str, str], problems: list[str]) -> C:
        reconcile = ReconcileConfig(**_reconcile_values(env, problems))
        own: list[str] = []
        ingest = IngestConfig(**_ingest_values(env, own))
        problems.extend(p for p in own if p not in problems)
        return cls(  # type: ignore[call-arg]
            reconcile=reconcile, ingest=ingest, report_bucket_name=env.get(REPORT_BUCKET_NAME)
        )

    def to_env(self) -> dict[str, str]:
        env = {**self.reconcile.to_env(), **self.ingest.to_env()}
        _put(env, REPORT_BUCKET_NAME, self.report_bucket_name)
        return env


@dataclass(frozen=True)
class ChangeRelayConfig(_Config):
    """The change relay's environment: ``CHANGE_BUS_NAME``, ``DEAD_LETTER_QUEUE_URL`` (the
    relay's own dead-letter queue, for changes that can never be published; unset: such a
    change stops its batch instead) and ``EFFECT_EVENTS`` (``true``: also publish effects done,
    ``historyTable``; unset otherwise, so the environment is as before)."""

    ROLE: ClassVar[str] = "change relay"

    change_bus_name: str
    dead_letter_queue_url: str | None = None
    effect_events: bool = False

    @classmethod
    def _read(cls: type[C], env: Mapping[str, str], problems: list[str]) -> C:
        return cls(  # type: ignore[call-arg]
            change_bus_name=_required(env, CHANGE_BUS_NAME, problems),
            dead_letter_queue_url=env.get(DEAD_LETTER_QUEUE_URL) or None,
            effect_events=env.get(EFFECT_EVENTS, "").lower() == "true",
        )

    def to_env(self) -> dict[str, str]:
        env = {CHANGE_BUS_NAME: self.change_bus_name}
        _put(env, DEAD_LETTER_QUEUE_URL, self.dead_letter_queue_url)
        if self.effect_events:
            env[EFFECT_EVENTS] = "true"
        return env


@dataclass(frozen=True)
class HistoryConfig(_Config):
    """The history writer's environment: ``HISTORY_CATALOG`` (pyiceberg catalog properties as
    JSON, ``{"type": "glue"}`` deployed), ``HISTORY_TABLE`` (``database.table``),
    ``HISTORY_LOCATION`` (the table's S3 location when the writer creates it) and
    ``DEAD_LETTER_QUEUE_URL`` (its queue's dead-letter queue, for invalid records at once)."""

    ROLE: ClassVar[str] = "history writer"

    catalog: str
    table: str
    location: str | None = None
    dead_letter_queue_url: str | None = None

    @classmethod
    def _read(cls: type[C], env: Mapping[str, str], problems: list[str]) -> C:
        return cls(  # type: ignore[call-arg]
            catalog=_required(env, HISTORY_CATALOG, problems),
            table=_required(env, HISTORY_TABLE, problems),
            location=env.get(HISTORY_LOCATION) or None,
            dead_letter_queue_url=env.get(DEAD_LETTER_QUEUE_URL) or None,
        )

    def to_env(self) -> dict[str, str]:
        env = {HISTORY_CATALOG: self.catalog, HISTORY_TABLE: self.table}
        _put(env, HISTORY_LOCATION, self.location)
        _put(env, DEAD_LETTER_QUEUE_URL, self.dead_letter_queue_url)
        return env


@dataclass(frozen=True)
class DeliveryCheckConfig(_Config):
    """The delivery check's environment: ``DELIVERY_CHECK_BUCKETS`` (comma-separated)."""

    ROLE: ClassVar[str] = "delivery check"

    buckets: tuple[str, ...]

    @classmethod
    def _read(cls: type[C], env: Mapping[str, str], problems: list[str]) -> C:
        buckets = _names(env.get(DELIVERY_CHECK_BUCKETS))
        if not buckets:
            problems.append(f"{DELIVERY_CHECK_BUCKETS} names no bucket")
        return cls(buckets=buckets)  # type: ignore[call-arg]

    def to_env(self) -> dict[str, str]:
        return {DELIVERY_CHECK_BUCKETS: ",".join(self.buckets)}


@dataclass(frozen=True)
class BucketSetupConfig(_Config):
    """The bucket-setup custom resource's environment: none of its own (the request carries
    the bucket and what to set up)."""

    ROLE: ClassVar[str] = "bucket setup"

    @classmethod
    def _read(cls: type[C], env: Mapping[str, str], problems: list[str]) -> C:
        return cls()

    def to_env(self) -> dict[str, str]:
        return {}


#: Each role's model, by the name the stack's functions use (``S3IngestPipeline.functions``).
ROLES: dict[str, type[_Config]] = {
    "ingest": IngestConfig,
    "backfill": BackfillConfig,
    "listing": ListingBackfillConfig,
    "reprocess": ReprocessConfig,
    "reconcile": ReconcileConfig,
    "reconcile-fan-out": FanOutConfig,
    "backfill-control": BackfillControlConfig,
    "change-relay": ChangeRelayConfig,
    "history": HistoryConfig,
    "delivery-check": DeliveryCheckConfig,
    "bucket-setup": BucketSetupConfig,
}
