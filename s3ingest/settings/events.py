"""EventBridge: the ingest rule's event pattern (the landing buckets' ``Object Created`` and
``Object Deleted`` events, with their key filters), and the change stream's ``source`` and
``detail-type`` names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote_plus

#: The change stream's event ``source``, and its ``detail-type`` per kind of applied change.
CHANGE_SOURCE = "s3ingest"
CHANGE_DETAIL_TYPES = {
    "created": "Object Ingested",
    "removed": "Object Tombstoned",
    "held": "Object Held",
    "approved": "Change Approved",
    "rejected": "Change Rejected",
}


def ingest_event_pattern(
    buckets: str | Mapping[str, Any] | Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """EventBridge event pattern of the ingest rule and its archive.

    Matches only the landing buckets' ``Object Created`` and ``Object Deleted`` events from
    ``aws.s3`` (https://docs.aws.amazon.com/AmazonS3/latest/userguide/ev-events.html), and of a
    bucket with key filters only its keys: ``prefix`` / ``suffix`` matching, or ``wildcard``
    ``<prefix>*<suffix>`` when it has both, joined by ``$or``
    (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-create-pattern-operators.html).
    S3 sends keys form-encoded (``a b`` as ``a+b``), so the filters are encoded the same way
    (``quote_plus(value, safe="/")``); encoding is per character, so an encoded prefix is a
    prefix of the encoded key.

    Parameters
    ----------
    buckets : str, mapping or sequence of mapping
        One bucket's name (or a resolved CloudFormation reference to it, ``{"Ref": ...}``),
        or ``[{"name", "prefixes", "suffixes"}, ...]``
        (:meth:`BucketSpec.scope_entry`); names may be CDK tokens in the stack.

    Returns
    -------
    dict
        ``{"source", "detail-type", "detail": {"bucket": {"name": [...]}}}`` when no bucket has
        filters, else ``{"source", "detail-type", "detail": {"$or": [...]}}``.
    """
    # one bucket: its name, or a resolved CDK reference to it ({"Ref": ...}) in a template test
    entries: list[Mapping[str, Any]]
    if isinstance(buckets, str) or (isinstance(buckets, Mapping) and "name" not in buckets):
        entries = [{"name": buckets}]
    else:
        entries = list(buckets)  # type: ignore[arg-type]
    pattern: dict[str, Any] = {
        "source": ["aws.s3"],
        "detail-type": ["Object Created", "Object Deleted"],
    }
    plain = [e["name"] for e in entries if not e.get("prefixes") and not e.get("suffixes")]
    filtered = [e for e in entries if e.get("prefixes") or e.get("suffixes")]
    if not filtered:
        pattern["detail"] = {"bucket": {"name": plain}}
        return pattern
    alternatives: list[dict[str, Any]] = []
    if plain:
        alternatives.append({"bucket": {"name": plain}})
    for entry in filtered:
        alternatives.append(
            {
                "bucket": {"name": [entry["name"]]},
                "object": {"key": key_filters(entry.get("prefixes"), entry.get("suffixes"))},
            }
        )
    pattern["detail"] = {"$or": alternatives} if len(alternatives) > 1 else alternatives[0]
    return pattern


def key_filters(
    prefixes: Sequence[str] | None, suffixes: Sequence[str] | None
) -> list[dict[str, str]]:
    """The EventBridge matchers of ``detail.object.key`` for key filters (decoded values):
    ``[{"prefix": ...}]``, ``[{"suffix": ...}]`` or ``[{"wildcard": "<prefix>*<suffix>"}]``
    over the form-encoded values (an encoded value never holds ``*``: it is ``%2A``)."""
    pre = [quote_plus(p, safe="/") for p in prefixes or ()]
    suf = [quote_plus(x, safe="/") for x in suffixes or ()]
    if pre and suf:
        return [{"wildcard": f"{p}*{x}"} for p in pre for x in suf]
    if pre:
        return [{"prefix": p} for p in pre]
    return [{"suffix": x} for x in suf]
