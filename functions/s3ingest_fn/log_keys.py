"""Object keys in the functions' logs, as the ``logKeys`` setting says (``LOG_KEYS``,
:class:`s3ingest_fn.config.LogConfig`): object keys are data.

* ``plain``: logged as they are (the default).
* ``hashed``: each key is replaced by :func:`key_hash`, an HMAC-SHA256 of the key's UTF-8
  bytes under the stack's secret, truncated to :data:`HASH_HEX` hex digits: the same key gives
  the same hash in every log line, so an operator who knows a key finds its lines by grepping
  its hash (``s3ingest log-key KEY``); without the secret the hash tells nothing about the key.
* ``none``: keys are left out.

One redaction point: :class:`KeyFilter`, a :class:`logging.Filter` every function's logger
carries (:func:`s3ingest_fn.handlers.telemetry.function_logger`), rewrites a record's fields
before any handler formats it (Powertools' JSON lines and any handler a test adds alike): the
key fields (:data:`KEY_FIELDS`: ``key`` becomes ``key_hash`` or goes), the lists of keys or of
samples (:data:`SAMPLE_FIELDS`, by name :data:`NAMED_SAMPLE_FIELDS`, and the per-bucket
``reports``), and, in the free-text fields
(:data:`TEXT_FIELDS`) and the message, every occurrence of a key the record names (a
processor's error that quotes its key). An invalid message's ``detail`` is left out when its
reason says it holds a (malformed) key (:data:`KEY_DETAIL_REASONS`). No pattern is guessed over
arbitrary text: log lines carry keys in fields, and only the keys a record names are replaced
in its text (keys shorter than :data:`MIN_TEXT_KEY` characters are not looked for in text).

Pure standard library (imported by every handler at cold start).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

#: Hex digits of the keyed hash (64 bits: two of a million keys share one with a chance of
#: about 3e-8; a hash finds lines, it is no identity).
HASH_HEX = 16
#: Fields that hold one object key (``encoded_key``: as an S3 notification or a Batch Operations
#: task encodes it; a listing boundary is a key too).
KEY_FIELDS = ("key", "encoded_key", "start_after", "end_before")
#: Fields that hold a list of keys, or of samples (objects with a ``key``).
SAMPLE_FIELDS = ("samples", "out_of_scope_samples", "failures")
#: Fields that hold such lists by name (a processor's).
NAMED_SAMPLE_FIELDS = ("behind_samples",)
#: Fields holding a summary, or a list of them, each redacted as a record's fields are
#: (``left_behind``: a reprocess run's keys left behind, its ``samples``).
NESTED_FIELDS = ("reports", "left_behind")
#: Free-text fields that may quote the keys a record names.
TEXT_FIELDS = ("reason", "detail", "effect_errors", "resultString", "error")
#: Reasons of ``invalid`` whose ``detail`` is (part of) the malformed key itself.
KEY_DETAIL_REASONS = frozenset({"missing-key", "bad-percent-encoding", "key-not-utf8"})
#: Keys shorter than this are not searched for in free text (they would match ordinary words).
MIN_TEXT_KEY = 4
#: What replaces a key in free text with ``none``.
LEFT_OUT = "<key>"


def key_hash(secret: bytes, key: str) -> str:
    """The keyed hash of ``key``: HMAC-SHA256 under ``secret`` of the key's UTF-8 bytes (lone
    surrogates kept), the first :data:`HASH_HEX` hex digits."""
    data = key.encode("utf-8", "surrogatepass")
    return hmac.new(secret, data, hashlib.sha256).hexdigest()[:HASH_HEX]


@dataclass(frozen=True)
class KeyPolicy:
    """How keys appear: ``mode`` (``plain``, ``hashed``, ``none``) and, for ``hashed``, the
    hash key ``secret``."""

    mode: str = "plain"
    secret: bytes = b""

    def shown(self, key: str) -> str | None:
        """``key`` as a log shows it: itself, its hash, or None (left out)."""
        if self.mode == "plain":
            return key
        if self.mode == "hashed":
            return key_hash(self.secret, key)
        return None

    def text(self, text: str, keys: Iterable[str]) -> str:
        """``text`` with every occurrence of ``keys`` replaced (``key#<hash>`` or ``<key>``),
        longest first."""
        if self.mode == "plain":
            return text
        for key in sorted(set(keys), key=len, reverse=True):
            if len(key) >= MIN_TEXT_KEY and key in text:
                shown = self.shown(key)
                text = text.replace(key, LEFT_OUT if shown is None else f"key#{shown}")
        return text

    def fields(self, fields: dict[str, Any]) -> dict[str, Any]:
        """A copy of a log line's ``fields`` with its keys shown as the mode says (plain: the
        same dict)."""
        if self.mode == "plain":
            return fields
        out = dict(fields)
        self.redact(out)
        return out

    def redact(self, fields: dict[str, Any]) -> list[str]:
        """Rewrite ``fields`` in place (:mod:`module docs <s3ingest_fn.log_keys>`); return
        the keys found, for the caller's text fields."""
        found: list[str] = []
        for name in KEY_FIELDS:
            value = fields.get(name)
            if isinstance(value, str):
                found.append(value)
                del fields[name]
                shown = self.shown(value)
                if shown is not None:
                    fields[f"{name}_hash"] = shown
        for name in SAMPLE_FIELDS:
            value = fields.get(name)
            if isinstance(value, list):
                samples = [self._sample(s, found) for s in value]
                fields[name] = [s for s in samples if s is not None]
        for name in NAMED_SAMPLE_FIELDS:
            value = fields.get(name)
            if isinstance(value, dict):
                fields[name] = {
                    n: [s for s in (self._sample(x, found) for x in v) if s is not None]
                    if isinstance(v, list)
                    else v
                    for n, v in value.items()
                }
        for name in NESTED_FIELDS:
            value = fields.get(name)
            if isinstance(value, list):
                fields[name] = [self._nested(v, found) for v in value]
            elif isinstance(value, dict):
                fields[name] = self._nested(value, found)
        if fields.get("reason") in KEY_DETAIL_REASONS:
            fields.pop("detail", None)
        for name in TEXT_FIELDS:
            if name in fields:
                fields[name] = self._text_value(fields[name], found)
        return found

    def _sample(self, sample: Any, found: list[str]) -> Any:
        if isinstance(sample, str):
            found.append(sample)
            return self.shown(sample)
        if isinstance(sample, dict):
            sample = dict(sample)
            self.redact(sample)
        return sample

    def _nested(self, value: Any, found: list[str]) -> Any:
        if not isinstance(value, dict):
            return value
        value = dict(value)
        found.extend(self.redact(value))
        return value

    def _text_value(self, value: Any, keys: list[str]) -> Any:
        if isinstance(value, str):
            return self.text(value, keys)
        if isinstance(value, dict):
            return {k: self._text_value(v, keys) for k, v in value.items()}
        return value


#: The attributes of every :class:`logging.LogRecord` (never a line's own field).
_RECORD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None)))


class KeyFilter(logging.Filter):
    """Rewrites each record's key fields and the keys it quotes, as the policy of the
    invocation that logs it says (``policy``: called per record; when it fails, keys are left
    out: a secret that cannot be read never shows the keys). Never drops a record."""

    def __init__(self, policy: Callable[[], KeyPolicy]) -> None:
        super().__init__()
        self._policy = policy

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact ``record`` in place; always True."""
        try:
            policy = self._policy()
        except Exception:  # fail closed: never the plain keys
            policy = KeyPolicy("none")
        if policy.mode == "plain":
            return True
        attrs = record.__dict__
        fields = {k: v for k, v in attrs.items() if k not in _RECORD_ATTRIBUTES}
        keys = policy.redact(fields)
        for name in [k for k in attrs if k not in _RECORD_ATTRIBUTES and k not in fields]:
            del attrs[name]
        attrs.update(fields)
        if keys:
            record.msg = policy.text(record.getMessage(), keys)
            record.args = None
        return True


def install(logger: logging.Logger, policy: Callable[[], KeyPolicy]) -> None:
    """Give ``logger`` a :class:`KeyFilter` (once: a second call changes nothing)."""
    if not any(isinstance(f, KeyFilter) for f in logger.filters):
        logger.addFilter(KeyFilter(policy))
