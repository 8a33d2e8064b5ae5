"""The stack's state machines, as synthesized, for the local runtime.

Each ``<name>.json`` here is written by ``make machines`` (:mod:`s3ingest_cdk.local_machines`) from
the synthesized template: ``{"definition": <ASL>, "functions": {<construct path>: {"handler",
"environment", "timeoutSeconds", "memoryMb"}}}``, with every CloudFormation token a ``${...}``
placeholder (``${AWS::Region}``, ``${<construct path>}`` for a ``Ref``, ``${<construct path>.Arn}``
for a ``Fn::GetAtt``). :func:`fill` puts the emulator's values in.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from importlib import resources
from typing import Any

#: The machines this package holds (file names without ``.json``).
BACKFILL_BATCH_OPERATIONS = "backfill-batch-operations"
BACKFILL_DISTRIBUTED_MAP = "backfill-distributed-map"
RECONCILE_FANOUT = "reconcile-fanout"
BACKFILL_LISTING = "backfill-listing"
REPROCESS = "reprocess"
NAMES = (
    BACKFILL_BATCH_OPERATIONS,
    BACKFILL_DISTRIBUTED_MAP,
    RECONCILE_FANOUT,
    BACKFILL_LISTING,
    REPROCESS,
)

_PLACEHOLDER = re.compile(r"\$\{([^}]+)\}")


def load(name: str) -> dict[str, Any]:
    """The document of machine ``name`` (one of :data:`NAMES`), placeholders unfilled."""
    if name not in NAMES:
        raise ValueError(f"no state machine {name!r}; one of {NAMES}")
    text = resources.files(__package__).joinpath(f"{name}.json").read_text(encoding="utf-8")
    document: dict[str, Any] = json.loads(text)
    return document


def placeholders(value: Any) -> set[str]:
    """Every placeholder name in ``value`` (any JSON value)."""
    return set(_PLACEHOLDER.findall(json.dumps(value, ensure_ascii=False)))


def fill(value: Any, values: Mapping[str, str]) -> Any:
    """``value`` (any JSON value) with every ``${name}`` replaced by ``values[name]``.

    Raises
    ------
    KeyError
        Naming every placeholder ``values`` lacks (a token the local runtime does not know:
        the stack changed, map it in the runtime).
    """
    missing = placeholders(value) - set(values)
    if missing:
        raise KeyError(f"no local value for {sorted(missing)}")
    text = json.dumps(value, ensure_ascii=False)
    text = _PLACEHOLDER.sub(lambda m: json.dumps(values[m.group(1)])[1:-1], text)
    return json.loads(text)
