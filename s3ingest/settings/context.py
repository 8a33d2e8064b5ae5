"""How context values (``cdk.json``'s, or ``-c key=value``) are read (strings, as ``cdk -c`` gives
them, or JSON), the CDK's own keys, unknown keys, and the error that lists every problem at once.
The keys and their defaults are the settings fields' (:data:`~s3ingest.settings.DEFAULTS`).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Collection, Mapping
from typing import Any

#: Context keys without ``@`` or ``:`` that the CDK CLI itself writes (``cdk acknowledge``,
#: telemetry); everything else the CDK uses is ``@aws-cdk/...`` or has a ``:``
#: (``aws:cdk:...``, context lookups cached in ``cdk.context.json``).
CDK_PLAIN_KEYS = frozenset({"acknowledged-issue-numbers", "cli-telemetry"})


def is_cdk_key(key: str) -> bool:
    """Whether a context key belongs to the CDK (feature flags, CLI and lookup keys), not to
    s3ingest (https://docs.aws.amazon.com/cdk/v2/guide/context.html)."""
    return key.startswith("@") or ":" in key or key in CDK_PLAIN_KEYS


def unknown_setting_problems(context: Mapping[str, Any], known: Mapping[str, Any]) -> list[str]:
    """One problem per context key that is neither in ``known`` (the settings' keys) nor the
    CDK's, naming the closest setting (``archiveRetentionDay`` -> ``did you mean
    archiveRetentionDays?``)."""
    return [
        f"{key}: unknown setting{closest_hint(key, known)}"
        for key in sorted(k for k in context if k not in known and not is_cdk_key(k))
    ]


def closest_hint(name: str, known: Collection[str]) -> str:
    """What an unknown setting ``name`` is likely meant to be, as the end of a problem:
    ``"; did you mean archiveRetentionDays?"``, else every ``known`` name in a ``(known: ...)``."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    if not close:  # a different case is the commonest typo after a missing letter
        close = [k for k in known if k.lower() == name.lower()]
    return f"; did you mean {close[0]}?" if close else f" (known: {', '.join(known)})"


class SettingsError(ValueError):
    """Raised when context settings are invalid; ``problems`` lists every one of them."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("invalid s3ingest settings:\n  - " + "\n  - ".join(problems))


class UnknownKeywordError(SettingsError, TypeError):
    """Raised for keyword arguments that are no setting (``S3IngestPipeline(...,
    queue_retention_day=7)``): a :class:`SettingsError` listing each of them with the hint that
    an unknown ``cdk.json`` key gets, and a :class:`TypeError` as for any unknown keyword."""


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
