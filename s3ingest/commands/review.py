"""``s3ingest held``, ``approve``, ``reject``: review the changes a hold policy holds
(``docs/hold.md``)."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from s3ingest_fn.adapters.dynamo_ledger import PARTITION_KEY, held_rows
from s3ingest_fn.services.review import HeldChange, held_changes


def list_held(
    dynamodb: Any,
    table: str,
    processors: Sequence[str],
    *,
    bucket: str | None = None,
    prefix: str = "",
    limit: int = 100,
    after: str | None = None,
    hold_processors: Sequence[str] | None = None,
) -> dict[str, Any]:
    """One page of held changes.

    ``hold_processors`` are the processors a hold policy applies to (``[]``: none is
    configured, None: not known).

    Returns
    -------
    dict
        ``{"held": [HeldChange.as_dict(), ...], "next": token or None, "hold_configured":
        bool or None, "hold_processors": [...] or None}``; pass ``next`` back as ``after`` for
        the next page.

    Raises
    ------
    ValueError
        As :func:`check_held_args`.
    """
    start = check_held_args(bucket, prefix, after)
    rows, last = held_rows(
        dynamodb,
        table,
        processors,
        prefix=f"{bucket}/{prefix}" if bucket else "",
        limit=limit,
        after=start,
    )
    held = [h.as_dict() for row in rows for h in held_changes(row)]
    return {
        "held": held,
        "next": _token(last) if last else None,
        "hold_configured": None if hold_processors is None else bool(hold_processors),
        "hold_processors": None if hold_processors is None else list(hold_processors),
    }


def check_held_args(bucket: str | None, prefix: str, after: str | None) -> dict[str, Any] | None:
    """Check ``held``'s arguments before any AWS call; return the decoded ``after`` token.

    Raises
    ------
    ValueError
        ``prefix`` without ``bucket``, or an ``after`` token that is not one a page printed.
    """
    if prefix and not bucket:
        raise ValueError("--prefix needs --bucket (keys are per bucket)")
    return _untoken(after) if after else None


def matching(
    dynamodb: Any,
    table: str,
    processors: Sequence[str],
    bucket: str | None,
    prefix: str = "",
) -> list[HeldChange]:
    """Every held change of ``bucket`` (every bucket when None) under ``prefix`` (all pages;
    the ``--all-matching`` of ``approve``/``reject``, and the local runtime's list).

    Raises
    ------
    ValueError
        As :func:`check_held_args`.
    TransientError
        DynamoDB failed.
    """
    check_held_args(bucket, prefix, None)
    found: list[HeldChange] = []
    after = None
    while True:
        rows, after = held_rows(
            dynamodb,
            table,
            processors,
            prefix=f"{bucket}/{prefix}" if bucket else "",
            limit=1000,
            after=after,
        )
        found.extend(h for row in rows for h in held_changes(row))
        if after is None:
            return found


def _token(key: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(key, separators=(",", ":")).encode()).decode()


def _untoken(token: str) -> dict[str, Any]:
    try:
        doc = json.loads(base64.urlsafe_b64decode(token.encode()))
    except ValueError as exc:
        raise ValueError(f"--after {token!r} is not a token printed by s3ingest held") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get(PARTITION_KEY), dict):
        raise ValueError(f"--after {token!r} is not a token printed by s3ingest held")
    return doc
