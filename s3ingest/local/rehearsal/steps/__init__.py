"""Scenario steps (``{"op": NAME, ...}`` lines of a scenario file, ``docs/scenarios.md``): one
class per step, each with its fields, its check of a line, its run and its report list.

:data:`STEPS` is the registry, every :class:`~s3ingest.local.rehearsal.steps.base.Step` subclass
with an ``op`` by that op; :mod:`s3ingest.local.rehearsal.scenario` dispatches each line to it. A
new step is one class in one of these modules and its line in ``docs/scenarios.md``
(``tests/unit/test_scenario_steps.py`` checks every step has one).
"""

from __future__ import annotations

import sys
from typing import Any

from s3ingest.local.rehearsal.steps import (
    attest,
    clock,
    incidents,
    objects,
    operator,
    processors,
    repairs,
    review,
    storage,
)
from s3ingest.local.rehearsal.steps.base import REGISTRY, Run, ScenarioError, Step

#: The step modules in the order their steps are listed (an unknown op's message).
_MODULES = (objects, storage, repairs, attest, review, operator, incidents, processors, clock)
#: Every step class by its op.
STEPS: dict[str, type[Step]] = dict(
    sorted(REGISTRY.items(), key=lambda item: _MODULES.index(sys.modules[item[1].__module__]))
)


def step_class(lineno: int, op: Any) -> type[Step]:
    """The registered step of ``op``.

    Raises
    ------
    ScenarioError
        For an unknown op.
    """
    found = STEPS.get(op) if isinstance(op, str) else None
    if found is None:
        raise ScenarioError(f"line {lineno}: unknown op {op!r} ({', '.join(STEPS)})")
    return found


__all__ = ["STEPS", "Run", "ScenarioError", "Step", "step_class"]
