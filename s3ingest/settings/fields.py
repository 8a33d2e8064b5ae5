"""One declaration per setting: :func:`setting` makes a :class:`~s3ingest.settings.Settings`
dataclass field whose metadata (:class:`Setting`) holds what the rest derives from it: the
context key and its default (:data:`~s3ingest.settings.DEFAULTS`), how a context value is read,
the declared bounds or choices (:meth:`Setting.problems`), the rules that name other settings
(``check``), the unit and the description ``docs/settings.md`` shows.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import Field, dataclass, field, fields
from typing import Any

from s3ingest.settings.context import UnknownKeywordError, camel, closest_hint, to_bool, to_int

#: The metadata key of a settings field's :class:`Setting`.
SETTING = "s3ingest.setting"

#: A context reader: ``(key, raw value) -> (value, problems)``.
Reader = Callable[[str, Any], tuple[Any, list[str]]]

_EMPTY: tuple[Any, ...] = (None, "", "null")


@dataclass(frozen=True)
class Setting:
    """What one settings field declares besides its name, type and default.

    Attributes
    ----------
    description : str
        Markdown, one table cell of ``docs/settings.md`` (no line break, ``|`` escaped).
    unit : str
        ``"days"``, ``"seconds"``, ``"MiB"`` or ``""`` (none).
    bounds : tuple of (int, int) or None
        The inclusive range of a whole-number setting (not checked when the value is ``None``).
    why : str
        Appended to the out-of-range problem (`` (SQS limit)``).
    choices : tuple of str
        The allowed values of a text setting (empty: any).
    read : callable or None
        Reads a structured context value (JSON lists and objects); ``None``: read by the
        field's type (``bool``, ``int``, ``int | None``, ``str``, ``str | None``).
    check : callable or None
        ``check(settings) -> list[str]``: the field's other rules, which may name other
        settings; run after the bounds, in field order.
    env : str
        The environment variable of the functions that run the processors that carries the
        setting when it is not its default (``TRAIL_LENGTH``; a dict as compact JSON), or ``""``.
    """

    description: str
    unit: str = ""
    bounds: tuple[int, int] | None = None
    why: str = ""
    choices: tuple[str, ...] = ()
    read: Reader | None = None
    check: Callable[[Any], list[str]] | None = None
    env: str = ""

    def problems(self, key: str, value: Any) -> list[str]:
        """The declared bounds and choices ``value`` breaks, as problems of ``key``."""
        if self.bounds is not None and isinstance(value, int):
            lo, hi = self.bounds
            if not lo <= value <= hi:
                return [f"{key}: {value} is outside {lo}..{hi}{self.why}"]
        if self.choices and value not in self.choices:
            return [f"{key}: {value!r} is not one of {', '.join(self.choices)}"]
        return []


def setting(default: Any, description: str, **declared: Any) -> Any:
    """A settings dataclass field with ``default`` and its :class:`Setting` (``declared``:
    the other attributes of :class:`Setting`). A tuple default is the empty list of a
    structured setting, whose context default is ``null``."""
    return field(default=default, metadata={SETTING: Setting(description, **declared)})


def declared(cls: Any) -> Iterator[tuple[str, Field[Any], Setting]]:
    """``(context key, field, setting)`` for every declared field of a settings dataclass."""
    for f in fields(cls):
        yield camel(f.name), f, f.metadata[SETTING]


def context_default(f: Field[Any]) -> Any:
    """A field's default as ``cdk.json`` writes it (``null`` for an empty list)."""
    return None if f.default == () else f.default


def read_scalar(key: str, kind: str, raw: Any) -> tuple[Any, list[str]]:
    """A ``bool``, ``int``, ``int | None``, ``str`` or ``str | None`` setting from its context
    value (a string as ``cdk -c k=v`` gives it, or JSON's own type).

    Returns the value and its problems (one, ``expected ...``, when it does not convert).
    """
    if kind == "bool":
        flag = to_bool(raw)
        if flag is None:
            return None, [f"{key}: expected true or false, got {raw!r}"]
        return flag, []
    if kind.startswith("int"):
        if kind.endswith("None") and raw in _EMPTY:
            return None, []
        number = to_int(raw)
        if number is None:
            return None, [f"{key}: expected a whole number, got {raw!r}"]
        return number, []
    return (None if raw in _EMPTY else str(raw)), []


def env_value(value: Any) -> str:
    """A setting's value as its variable carries it: JSON without spaces for a dict (as
    :func:`~s3ingest.settings.processors.compact_json`), else ``str``."""
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def overrides(
    cls: Any, given: Mapping[str, Any], owner: str, exclude: Collection[str] = ()
) -> dict[str, Any]:
    """``given`` keyword arguments of ``owner`` as fields of the settings dataclass ``cls``
    (``exclude`` left out): a sequence made a tuple and a mapping a dict, as the frozen model
    holds them.

    Raises
    ------
    UnknownKeywordError
        A :class:`~s3ingest.settings.SettingsError` and a :class:`TypeError`, naming every
        keyword that is no field and the closest field of each (as ``cdk.json``'s unknown keys).
    """
    known = {f.name: f for f in fields(cls) if f.name not in exclude}
    unknown = [name for name in given if name not in known]
    if unknown:
        raise UnknownKeywordError(
            [
                f"{owner} got an unexpected keyword argument {name!r}{closest_hint(name, known)}"
                for name in unknown
            ]
        )
    out: dict[str, Any] = {}
    for name, value in given.items():
        kind = str(known[name].type)
        if kind.startswith("tuple") and value is not None:
            value = tuple(value)
        elif kind.startswith("dict") and value is not None:
            value = dict(value)
        out[name] = value
    return out


def keyword_parameters(cls: Any, exclude: Collection[str] = ()) -> list[inspect.Parameter]:
    """One keyword-only parameter per field of ``cls`` (``exclude`` left out), with the field's
    default and type: a signature derived from the model (``S3IngestPipeline``'s)."""
    return [
        inspect.Parameter(
            f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=f.type
        )
        for f in fields(cls)
        if f.name not in exclude
    ]
