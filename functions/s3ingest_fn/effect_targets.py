"""``PROCESSOR_TARGETS``: the configured processors as reconciliation judges their effects (name,
version, key filters, kinds: :class:`~s3ingest_fn.core.effects.EffectTarget`), without their
code, for the functions that do not run them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from s3ingest_fn.core.effects import KINDS, EffectTarget

#: The variable's name.
PROCESSOR_TARGETS = "PROCESSOR_TARGETS"


def targets_json(entries: Sequence[Mapping[str, Any]]) -> str:
    """``PROCESSOR_TARGETS`` of processor entries (settings or ``PROCESSORS`` form): each one's
    ``name`` and, when not their defaults, ``version``, ``prefixes``, ``suffixes`` and
    ``kinds``, as compact JSON."""
    out = []
    for entry in entries:
        target: dict[str, Any] = {"name": entry["name"]}
        if int(entry.get("version") or 1) != 1:
            target["version"] = int(entry["version"])
        for key in ("prefixes", "suffixes"):
            if entry.get(key):
                target[key] = list(entry[key])
        if entry.get("kinds") and set(entry["kinds"]) != set(KINDS):
            target["kinds"] = list(entry["kinds"])
        out.append(target)
    return json.dumps(out, separators=(",", ":"))


def hold_names(entries: Sequence[Mapping[str, Any]], stack_hold: Any) -> list[str]:
    """The names of the processor ``entries`` a hold policy applies to: the entry's own
    ``hold``, else the stack-wide ``stack_hold`` (as :func:`s3ingest_fn.wiring.hold_policies`
    chooses), when not None."""
    return [str(e["name"]) for e in entries if e.get("hold", stack_hold) is not None]


def parse_targets(raw: str) -> tuple[EffectTarget, ...]:
    """:class:`~s3ingest_fn.core.effects.EffectTarget` values of ``PROCESSOR_TARGETS``.

    Raises
    ------
    ValueError
        Not a JSON list of objects with a ``name``, or a malformed field.
    """
    try:
        entries = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{PROCESSOR_TARGETS} is not JSON: {exc.msg}") from exc
    if not isinstance(entries, list) or not all(
        isinstance(e, dict) and isinstance(e.get("name"), str) for e in entries
    ):
        raise ValueError(f"{PROCESSOR_TARGETS} must be a JSON list of objects with a name")
    try:
        return tuple(
            EffectTarget(
                name=e["name"],
                version=int(e.get("version", 1)),
                prefixes=tuple(str(p) for p in e.get("prefixes", ())),
                suffixes=tuple(str(x) for x in e.get("suffixes", ())),
                kinds=tuple(str(k) for k in e.get("kinds", KINDS)),
            )
            for e in entries
        )
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{PROCESSOR_TARGETS}: {exc}") from exc


def read_targets(
    raw: str | None, entries: Sequence[Mapping[str, Any]], problems: list[str]
) -> tuple[EffectTarget, ...]:
    """``PROCESSOR_TARGETS`` (``raw``), else the targets of the processor ``entries``; a
    malformed variable is added to ``problems`` (no targets then)."""
    try:
        return parse_targets(raw or targets_json(entries))
    except ValueError as exc:
        problems.append(str(exc))
        return ()
