"""Which (bucket, key) pairs the pipeline tracks: its buckets and their key filters.

The stack's EventBridge rule applies the same filters to live events
(:func:`s3ingest.settings.ingest_event_pattern`); every other way in (replays, redrives, repairs,
backfills, reconciliations) checks :meth:`Scope.contains`, so an out-of-scope key never reaches
the ledger (CONTRACT C9: outcome ``ignored``, reason ``out-of-scope``).

A key is in a bucket's scope when it starts with one of the bucket's prefixes (any key when there
are none) and ends with one of its suffixes (any key when there are none), the prefix and the
suffix not overlapping: the semantics of an EventBridge ``wildcard`` pattern ``<prefix>*<suffix>``
(https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-create-pattern-operators.html).

The functions read the scope from ``SCOPE`` (JSON, :meth:`Scope.to_json`), or from
``BUCKET_NAME`` alone (one bucket, no filters).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class BucketScope:
    """One bucket and its key filters (empty: every key)."""

    name: str
    prefixes: tuple[str, ...] = ()
    suffixes: tuple[str, ...] = ()

    def contains(self, key: str) -> bool:
        """Whether ``key`` (decoded) passes this bucket's filters."""
        if not self.prefixes and not self.suffixes:
            return True
        prefixes = self.prefixes or ("",)
        suffixes = self.suffixes or ("",)
        return any(
            key.startswith(p) and key.endswith(s) and len(key) >= len(p) + len(s)
            for p in prefixes
            for s in suffixes
        )

    def as_dict(self) -> dict[str, Any]:
        """``{"name", "prefixes", "suffixes"}``."""
        return {"name": self.name, "prefixes": list(self.prefixes), "suffixes": list(self.suffixes)}


@dataclass(frozen=True)
class Scope:
    """The pipeline's buckets, in the stack's order (the first is the default bucket).

    An empty scope (``buckets == ()``) tracks every bucket: the local runtime's and the tests'
    services built without one.
    """

    buckets: tuple[BucketScope, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        """The bucket names, in order."""
        return tuple(b.name for b in self.buckets)

    def bucket(self, name: str) -> BucketScope | None:
        """The bucket called ``name``, or None when it is not one of the pipeline's."""
        return next((b for b in self.buckets if b.name == name), None)

    def contains(self, bucket: str, key: str) -> bool:
        """Whether the pipeline tracks ``key`` (decoded) of ``bucket``."""
        if not self.buckets:
            return True
        found = self.bucket(bucket)
        return found is not None and found.contains(key)

    def reason(self, bucket: str, key: str) -> str | None:
        """Why (bucket, key) is out of scope (``"other-bucket"``, ``"key-filter"``), or None."""
        if not self.buckets:
            return None
        found = self.bucket(bucket)
        if found is None:
            return "other-bucket"
        return None if found.contains(key) else "key-filter"

    def to_json(self) -> str:
        """The ``SCOPE`` value: ``[{"name", "prefixes", "suffixes"}, ...]``."""
        return json.dumps([b.as_dict() for b in self.buckets], separators=(",", ":"))

    @classmethod
    def of(cls, entries: Iterable[Mapping[str, Any]]) -> Scope:
        """From ``[{"name", "prefixes"?, "suffixes"?}, ...]``.

        Raises
        ------
        ValueError
            When an entry has no name or a filter is not a list of strings.
        """
        buckets = []
        for entry in entries:
            name = entry.get("name")
            if not isinstance(name, str) or not name:
                raise ValueError(f"scope entry without a bucket name: {entry!r}")
            filters = []
            for field in ("prefixes", "suffixes"):
                values = entry.get(field) or []
                if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                    raise ValueError(f"scope of {name}: {field} must be a list of strings")
                filters.append(tuple(values))
            buckets.append(BucketScope(name, filters[0], filters[1]))
        return cls(tuple(buckets))

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Scope:
        """From ``SCOPE`` (JSON), else ``BUCKET_NAME`` (one bucket), else every bucket.

        Raises
        ------
        ValueError
            When ``SCOPE`` is not valid JSON of :meth:`of`'s shape.
        """
        raw = env.get("SCOPE")
        if raw:
            try:
                entries = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise ValueError(f"SCOPE is not JSON: {exc.msg}") from exc
            if not isinstance(entries, list):
                raise ValueError("SCOPE must be a JSON list")
            return cls.of(entries)
        name = env.get("BUCKET_NAME")
        return cls((BucketScope(name),)) if name else cls()
