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
"""

from __future__ import annotations

import re

#: Width every normalised sequencer is right-padded to. Real AWS sequencers are 16-18 characters;
#: anything longer than this is treated as absent (not a sequencer we can order).
WIDTH = 64

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
