"""Bounds of the event fields that reach a ledger row, a log line or the change stream
(CONTRACT C9): a value outside its bound makes the message ``invalid`` at parse time, with the
reason ``field-too-long: <field>`` (or the one named below), never a truncated or dropped value.

Each bound is AWS's documented limit of the field, or (for the shapes AWS documents by example
only) the longest value S3 sends with headroom; the constants say which page.
"""

from __future__ import annotations

import re
from typing import Any

from s3ingest_fn.core.model import InvalidMessageError

#: Bucket names: 3 to 63 characters today, up to 255 for buckets created in us-east-1 before
#: 2018-03-01 (https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html).
#: Only the length is checked: the scope decides which names are the stack's.
MAX_BUCKET_CHARS = 255
#: A form-encoded key: each byte of the 1,024-byte key at most as ``%XX``
#: (https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-keys.html).
MAX_RAW_KEY_CHARS = 3 * 1024
#: "Version IDs are Unicode, UTF-8 encoded, URL-ready, opaque strings that are no more than
#: 1,024 bytes long" (https://docs.aws.amazon.com/AmazonS3/latest/userguide/versioning-workflows.html).
#: Real ones are 32 characters.
MAX_VERSION_ID_BYTES = 1024
#: An ETag is an MD5 in hex (32) or a multipart ``<hex>-<parts>``, parts at most 10,000
#: (https://docs.aws.amazon.com/AmazonS3/latest/userguide/checking-object-integrity.html,
#: https://docs.aws.amazon.com/AmazonS3/latest/userguide/qfacts.html): 38 at most; 64 of hex
#: digits and ``-`` leaves headroom for a longer digest.
MAX_ETAG_CHARS = 64
_ETAG = re.compile(r"[0-9A-Fa-f-]+")
#: Event times are ISO-8601 (``1970-01-01T00:00:00.000Z``, 24 characters,
#: https://docs.aws.amazon.com/AmazonS3/latest/userguide/notification-content-structure.html);
#: 64 leaves room for offsets and more fractional digits. The value is not parsed (C3).
MAX_TIME_CHARS = 64
#: EventBridge replay names: 1 to 64 of ``[.\-_A-Za-z0-9]``
#: (https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_StartReplay.html).
MAX_REPLAY_NAME_CHARS = 64
_REPLAY_NAME = re.compile(r"[.\-_A-Za-z0-9]+")
#: EventBridge ``detail.reason`` (``PutObject``, ``CompleteMultipartUpload``, ``Lifecycle
#: Expiration``, ...) and ``detail.deletion-type`` (``Permanently Deleted``, ``Delete Marker
#: Created``), and notification ``eventName`` (``LifecycleExpiration:DeleteMarkerCreated``, 39,
#: the longest of https://docs.aws.amazon.com/AmazonS3/latest/userguide/notification-how-to-event-types-and-destinations.html
#: and https://docs.aws.amazon.com/AmazonS3/latest/userguide/ev-events.html): 64 characters.
MAX_EVENT_WORD_CHARS = 64
#: A repair event's ``reason`` (this product writes short codes such as ``missing-row``).
MAX_REPAIR_REASON_CHARS = 128
#: A metadata event's sequencer is ignored (C3) but kept for the logs: at most the stored width.
MAX_IGNORED_SEQUENCER_CHARS = 64
#: The largest object S3 stores: 10,000 parts of 5 GiB ("the actual maximum object size is
#: 53.7 TB (48.8 TiB)", https://docs.aws.amazon.com/AmazonS3/latest/userguide/UsingObjects.html,
#: raised from 5 TB in late 2025). 14 digits: far below DynamoDB's 38-digit numbers.
MAX_OBJECT_SIZE = 10_000 * 5 * 1024**3


def text(name: str, value: Any, max_chars: int) -> str | None:
    """``value`` when a non-empty str of at most ``max_chars`` characters; None when absent or
    empty (or not a str: such fields are informational).

    Raises
    ------
    InvalidMessageError
        ``field-too-long: <name>``.
    """
    if not isinstance(value, str) or value == "":
        return None
    if len(value) > max_chars:
        raise InvalidMessageError(f"field-too-long: {name}", f"{len(value)} characters")
    return value


def utf8(name: str, value: Any, max_bytes: int) -> str | None:
    """As :func:`text`, the bound in UTF-8 bytes.

    Raises
    ------
    InvalidMessageError
        ``field-too-long: <name>``, or ``field-not-utf8: <name>`` (a lone surrogate).
    """
    if not isinstance(value, str) or value == "":
        return None
    if len(value) > max_bytes:  # every character is at least one byte
        raise InvalidMessageError(f"field-too-long: {name}", f"{len(value)} characters")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeError as exc:
        raise InvalidMessageError(f"field-not-utf8: {name}", repr(value[:100])) from exc
    if size > max_bytes:
        raise InvalidMessageError(f"field-too-long: {name}", f"{size} bytes")
    return value


def etag(value: Any) -> str | None:
    """The ETag without quotes (events send it bare, the S3 API quoted; docs/payloads.md 1.4),
    None when absent or empty.

    Raises
    ------
    InvalidMessageError
        ``field-too-long: etag``, ``field-shape: etag`` (not hex digits and ``-``).
    """
    raw = text("etag", value, MAX_ETAG_CHARS + 2)
    bare = raw.strip('"') if raw else None
    if not bare:
        return None
    if len(bare) > MAX_ETAG_CHARS:
        raise InvalidMessageError("field-too-long: etag", f"{len(bare)} characters")
    if not _ETAG.fullmatch(bare):
        raise InvalidMessageError("field-shape: etag", repr(bare))
    return bare


def replay_name(value: Any) -> str | None:
    """The EventBridge ``replay-name``, None when absent.

    Raises
    ------
    InvalidMessageError
        ``field-too-long: replay-name``, ``field-shape: replay-name``.
    """
    name = text("replay-name", value, MAX_REPLAY_NAME_CHARS)
    if name is not None and not _REPLAY_NAME.fullmatch(name):
        raise InvalidMessageError("field-shape: replay-name", repr(name))
    return name


def size(value: Any) -> int | None:
    """An object size in bytes: an integer (or a string of decimal digits, as some library
    fixtures write it) from 0 to :data:`MAX_OBJECT_SIZE`; None when absent (delete events).

    Raises
    ------
    InvalidMessageError
        ``field-not-integer: size`` (a float, bool, or other string), ``field-range: size``
        (negative or above :data:`MAX_OBJECT_SIZE`).
    """
    if value is None or value == "":
        return None
    if isinstance(value, str) and value.isascii() and value.isdigit():
        if len(value) > len(str(MAX_OBJECT_SIZE)):
            raise InvalidMessageError("field-range: size", f"{len(value)} digits")
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidMessageError("field-not-integer: size", repr(value)[:100])
    if not 0 <= value <= MAX_OBJECT_SIZE:
        shown = str(value) if abs(value) < 10**40 else f"{len(str(abs(value)))} digits"
        raise InvalidMessageError("field-range: size", shown)
    return value
