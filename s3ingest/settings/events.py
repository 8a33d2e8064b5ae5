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
    "attestation": "Attestation Made",
}
#: An effect committed done, published with ``historyTable`` under a ``source`` of its own (so a
#: rule matching :data:`CHANGE_SOURCE` never gets it as a change) for the history table.
EFFECT_SOURCE = "s3ingest.effects"
EFFECT_DETAIL_TYPE = "Effect Done"


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

    Owners, not names: when the entries name their ``account`` (the bucket's owner), the
    pattern matches the event's ``account`` (the account of the bucket's owner, which S3's
    event carries and a rule forwarding it to another account's bus keeps) with the names of
    that account's buckets only: ``"account": [A]`` beside ``detail`` for one account, a
    top-level ``$or`` of ``{"account", "detail"}`` alternatives for several. A bucket of a
    configured name created in another account matches nothing.

    Parameters
    ----------
    buckets : str, mapping or sequence of mapping
        One bucket's name (or a resolved CloudFormation reference to it, ``{"Ref": ...}``),
        or ``[{"name", "prefixes", "suffixes", "account"?}, ...]``
        (:meth:`BucketSpec.scope_entry`, ``account`` a 12-digit id or a token); names and
        accounts may be CDK tokens in the stack.

    Returns
    -------
    dict
        ``{"source", "detail-type", "detail": {"bucket": {"name": [...]}}}`` when no bucket has
        filters, else ``{"source", "detail-type", "detail": {"$or": [...]}}``; with accounts,
        ``"account": [...]`` added (one account) or ``{"source", "detail-type", "$or":
        [{"account", "detail"}, ...]}`` (several).

    Raises
    ------
    ValueError
        When some entries name an account and others do not.
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
    named = [e.get("account") is not None for e in entries]
    if not any(named):
        pattern["detail"] = _one_detail(_detail_alternatives(entries))
        return pattern
    if not all(named):
        raise ValueError("every bucket entry names its account, or none does")
    accounts: list[Any] = []
    for entry in entries:  # in order; tokens and CloudFormation references compare equal
        if entry["account"] not in accounts:
            accounts.append(entry["account"])
    groups = [
        (a, _detail_alternatives([e for e in entries if e["account"] == a])) for a in accounts
    ]
    if len(groups) == 1:
        account, details = groups[0]
        pattern["account"] = [account]
        pattern["detail"] = _one_detail(details)
        return pattern
    pattern["$or"] = [
        {"account": [account], "detail": detail}
        for account, details in groups
        for detail in details
    ]
    return pattern


def _one_detail(alternatives: list[dict[str, Any]]) -> dict[str, Any]:
    return {"$or": alternatives} if len(alternatives) > 1 else alternatives[0]


def _detail_alternatives(entries: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The ``detail`` patterns of ``entries``: the unfiltered buckets' names together, then one
    per bucket with key filters."""
    plain = [e["name"] for e in entries if not e.get("prefixes") and not e.get("suffixes")]
    alternatives: list[dict[str, Any]] = []
    if plain:
        alternatives.append({"bucket": {"name": plain}})
    for entry in entries:
        if entry.get("prefixes") or entry.get("suffixes"):
            alternatives.append(
                {
                    "bucket": {"name": [entry["name"]]},
                    "object": {"key": key_filters(entry.get("prefixes"), entry.get("suffixes"))},
                }
            )
    return alternatives


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
