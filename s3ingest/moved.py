"""Names that moved, kept one release at their old module with a :class:`DeprecationWarning`
(https://docs.python.org/3/reference/datamodel.html#module.__getattr__, PEP 562)."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any


def moved(old: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for module ``old``: each name of ``homes`` (old name ->
    ``"module.new_name"``) read from its new home, warning that it moved; any other name raises
    :class:`AttributeError`."""

    def __getattr__(name: str) -> Any:
        if name not in homes:
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        module, _, new = homes[name].rpartition(".")
        warnings.warn(f"{old}.{name} moved to {homes[name]}", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(module), new)

    return __getattr__
