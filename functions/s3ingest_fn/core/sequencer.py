"""S3 event sequencer normalisation and comparison (CONTRACT C2).

S3 gives every PUT and DELETE event of one key a ``sequencer``: a hex string whose value grows with
the key's write order. Two sequencers of the same key are compared by upper-casing both,
right-padding the shorter with ``0`` to equal width and comparing the strings.

Why right-padding (and not the left-padding of 2018-2021 AWS docs and many guides): AWS's current
S3 User Guide says "you must first right pad the shorter value with zeros, and then do a
lexicographical comparison" (notification-content-structure.html, wording since 2021-07-16), and
real sequencers are ``00`` + 8 hex digits of Unix seconds + a suffix of variable length, so only
right-padding keeps time order: ``00643717FA1234`` (one second later) left-padded sorts *below*
``00643717F9F8B85354``; right-padded it sorts above. Evidence: ``docs/sequencer.md`` and
``docs/payloads.md`` section 0. Case is normalised because real captures are upper-case and
the EventBridge doc examples lower-case (``'a' > 'F'`` in ASCII).

A normalised sequencer is stored right-padded to :data:`WIDTH` characters: padding both sides of a
comparison to one fixed width orders them exactly as padding the shorter to the longer's width, so
DynamoDB can compare stored values with a plain string ``<`` in a condition expression.

An event's value is accepted when S3 could have sent it (:func:`problem`: hex, at most
:data:`MAX_EVENT_WIDTH` characters, its time not beyond the skew); a stored one is judged again
(:func:`contradicted`) against :func:`ceiling`, the highest value S3 can have sent by now, so a
forged value that sorts above every real one is reset by reconciliation (``docs/sequencer.md``).
"""

from __future__ import annotations

import re

#: Width every normalised sequencer is right-padded to. Real AWS sequencers are 16-18 characters;
#: anything longer than this is treated as absent (not a sequencer we can order).
WIDTH = 64

#: Longest sequencer an event may carry, characters (CONTRACT C2, C9). AWS documents the field
#: only as "a string representation of a hexadecimal value"
#: (https://docs.aws.amazon.com/AmazonS3/latest/userguide/notification-content-structure.html);
#: the EventBridge examples are 16 characters
#: (https://docs.aws.amazon.com/AmazonS3/latest/userguide/ev-events.html), every captured one 18
#: (docs/payloads.md section 3), the local runtime's 20 to 26; 32 leaves headroom. There is no
#: shortest: compared right-padded, a shorter value can only sort lower, and AWS says lengths
#: differ (the ``docs/sequencer.md`` pair has a 14-character one).
MAX_EVENT_WIDTH = 32

#: How far a sequencer's embedded time may be ahead of the handler's clock, seconds: S3's own
#: tolerance for a request's clock (15 minutes, ``RequestTimeTooSkewed``,
#: https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html).
SKEW_SECONDS = 900

_HEX = re.compile(r"[0-9A-F]+")


def normalize(raw: object) -> str | None:
    """Normalise a raw ``sequencer`` value for ordering.

    Parameters
    ----------
    raw : object
        The event's ``sequencer`` field as received (usually a str; may be missing, empty, a
        number or garbage in fixtures).

    Returns
    -------
    str or None
        The upper-cased value right-padded with ``0`` to :data:`WIDTH` characters, or ``None`` when
        the value is absent, empty, not hex, or longer than :data:`WIDTH` (C2: treated as absent,
        never a crash).
    """
    if not isinstance(raw, str):
        return None
    value = raw.strip().upper()
    if not value or len(value) > WIDTH or not _HEX.fullmatch(value):
        return None
    return value.ljust(WIDTH, "0")


#: Digits a sequencer's time is read from: ``00`` + 8 hex digits of seconds (real ones) or the 8
#: digits first (the documentation examples).
_TIME_DIGITS = 10


def seconds_of(value: str) -> int | None:
    """The Unix seconds a sequencer embeds, by the layout of real ones (docs/payloads.md
    section 3): ``00`` + 8 hex digits of seconds + a suffix; the 16-character documentation
    examples carry the 8 digits first. ``value`` is raw or normalised (hex, any case); a value
    shorter than 10 characters is read right-padded with ``0``, as it is compared (``6B`` is
    ``6B00000000``). None when it is empty or not hex."""
    text = value.strip().upper()
    if not _HEX.fullmatch(text or "-"):
        return None
    text = text.ljust(_TIME_DIGITS, "0")
    return int(text[2:10] if text.startswith("00") else text[:8], 16)


def problem(raw: object, now_s: float) -> str | None:
    """Why an event's ``sequencer`` field is not one S3 sends (CONTRACT C2, C9).

    Parameters
    ----------
    raw : object
        The field as received; absent (None) and ``""`` are no sequencer (an observation, C7),
        not a problem.
    now_s : float
        The handler's clock, Unix seconds.

    Returns
    -------
    str or None
        None when accepted; otherwise the reason code of the ``invalid`` outcome:
        ``sequencer-not-hex`` (not a string of hex digits), ``sequencer-length`` (longer than
        :data:`MAX_EVENT_WIDTH`; there is no shortest) or ``sequencer-from-future`` (its time,
        :func:`seconds_of`, is more than :data:`SKEW_SECONDS` ahead of ``now_s``).
    """
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str) or not _HEX.fullmatch(raw.strip().upper() or "-"):
        return "sequencer-not-hex"
    if len(raw.strip()) > MAX_EVENT_WIDTH:
        return "sequencer-length"
    seconds = seconds_of(raw)
    if seconds is not None and seconds > now_s + SKEW_SECONDS:
        return "sequencer-from-future"
    return None


def ceiling(now_s: float) -> str:
    """The highest normalised sequencer S3 can have sent by ``now_s`` (Unix seconds): ``00``,
    the 8 hex digits of ``now_s`` + :data:`SKEW_SECONDS`, then ``F`` to :data:`WIDTH`. Every real
    sequencer has that layout (docs/payloads.md section 3), so every real one sorts at or below
    it; it only rises with the clock."""
    return f"00{int(now_s) + SKEW_SECONDS:08X}".ljust(WIDTH, "F")


def contradicted(stored: str, now_s: float) -> str | None:
    """Why a row's stored (normalised) sequencer cannot have come from S3 by ``now_s``: one
    written before events were checked (:func:`problem`), one forged within the skew and now
    judged again, or one of another layout that sorts above every real sequencer (a forged
    ``0100000000000000`` or ``6B00000000000000``: every later real event of the key would be
    ``stale`` against it). Only ever fewer as the clock moves on.

    Returns
    -------
    str or None
        ``sequencer-length`` (significant digits beyond :data:`MAX_EVENT_WIDTH`, such as a forged
        64 ``F``), ``sequencer-from-future`` (its time ahead of ``now_s`` by more than
        :data:`SKEW_SECONDS`), ``sequencer-above-clock`` (it sorts above :func:`ceiling`), or
        None.
    """
    if len(stored.rstrip("0")) > MAX_EVENT_WIDTH:
        return "sequencer-length"
    seconds = seconds_of(stored)
    if seconds is not None and seconds > now_s + SKEW_SECONDS:
        return "sequencer-from-future"
    if stored.strip().upper().ljust(WIDTH, "0") > ceiling(now_s):
        return "sequencer-above-clock"
    return None


def compare(a: str, b: str) -> int:
    """Compare two raw sequencers of the same key.

    Parameters
    ----------
    a, b : str
        Raw sequencers (any case, any length up to :data:`WIDTH`).

    Returns
    -------
    int
        ``-1`` if ``a`` is older, ``0`` if equal (a duplicate), ``1`` if ``a`` is newer.

    Raises
    ------
    ValueError
        If either value is not a usable sequencer (see :func:`normalize`).
    """
    na, nb = normalize(a), normalize(b)
    if na is None or nb is None:
        raise ValueError(f"not a sequencer: {a!r} / {b!r}")
    return (na > nb) - (na < nb)
