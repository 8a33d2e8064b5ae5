"""A tiny evaluator of resource-policy statements over a synthesized template, for the few
condition operators the stack writes (not a full IAM engine: no NotPrincipal, NotAction, policy
variables or set operators).

Template values are compared symbolically: ``{"Fn::GetAtt": [id, "Arn"]}`` is the string
``"arn:<id>"``, and a request names principals and source ARNs the same way. The logic follows
https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html:
operators and keys of a Condition AND together, the values of one key OR together (NOR for a
negated operator), and a key absent from the request makes a negated operator true and any
other false.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: Pseudo parameters as a request names them (``{"Ref": "AWS::Partition"}`` is ``"aws"``).
PSEUDO = {"AWS::Partition": "aws", "AWS::URLSuffix": "amazonaws.com"}


def symbol(value: Any) -> str:
    """A template value as a comparable string (``"arn:<id>"`` for an ARN attribute, an
    ``Fn::Join`` joined, the partition ``"aws"``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and "Fn::Join" in value:
        delimiter, parts = value["Fn::Join"]
        return str(delimiter).join(symbol(part) for part in parts)
    if isinstance(value, Mapping) and value.get("Ref") in PSEUDO:
        return PSEUDO[value["Ref"]]
    if isinstance(value, Mapping) and "Fn::GetAtt" in value:
        resource, attribute = value["Fn::GetAtt"]
        return f"arn:{resource}" if attribute == "Arn" else f"{attribute}:{resource}"
    if isinstance(value, Mapping) and "Ref" in value:
        return f"ref:{value['Ref']}"
    raise ValueError(f"no symbol for {value!r}")


def _values(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


@dataclass(frozen=True)
class Request:
    """One request: who (``principal``: ``{"AWS": arn}`` or ``{"Service": name}``), what
    (``action``, on ``resource``) and the request context's keys (absent keys left out)."""

    principal: Mapping[str, str]
    action: str
    resource: str
    context: Mapping[str, str] = field(default_factory=dict)


def _equals(left: str, right: str) -> bool:
    return left == right


def _like(left: str, right: str) -> bool:
    return fnmatch.fnmatchcase(left, right)


def _true(left: str, right: str) -> bool:
    return left.lower() == right.lower()


#: Operator -> (comparison of the request's value with one policy value, negated).
_OPERATORS = {
    "StringEquals": (_equals, False),
    "StringNotEquals": (_equals, True),
    "StringLike": (_like, False),
    "StringNotLike": (_like, True),
    "ArnEquals": (_like, False),  # ARN operators take wildcards too
    "ArnLike": (_like, False),
    "ArnNotEquals": (_like, True),
    "ArnNotLike": (_like, True),
    "Bool": (_true, False),
}


def condition_holds(condition: Mapping[str, Mapping[str, Any]], request: Request) -> bool:
    """Whether every operator's every key of ``condition`` is true for ``request``."""
    for operator, keys in condition.items():
        compare, negated = _OPERATORS[operator]
        for key, wanted in keys.items():
            present = request.context.get(key)
            if present is None:
                if not negated:
                    return False
                continue  # absent: a negated operator is true
            hit = any(compare(present, symbol(v)) for v in _values(wanted))
            if hit == negated:
                return False
    return True


def _principal_matches(element: Any, request: Request) -> bool:
    if element == "*":
        return True
    for kind, names in element.items():
        for name in _values(names):
            if name == "*" and kind == "AWS":
                return True
            if request.principal.get(kind) == symbol(name):
                return True
    return False


def _action_matches(actions: Any, action: str) -> bool:
    return any(fnmatch.fnmatchcase(action.lower(), a.lower()) for a in _values(actions))


def applies(statement: Mapping[str, Any], request: Request) -> bool:
    """Whether ``statement`` (of a resource policy) matches ``request``."""
    return (
        _principal_matches(statement["Principal"], request)
        and _action_matches(statement["Action"], request.action)
        and any(_like(request.resource, symbol(r)) for r in _values(statement["Resource"]))
        and condition_holds(statement.get("Condition", {}), request)
    )


def decide(policy: Mapping[str, Any], request: Request, *, identity_allows: bool) -> str:
    """``"denied"`` (an explicit Deny matches), ``"allowed"`` (an Allow of the policy matches,
    or ``identity_allows``: the principal's own policies allow it, same account) or
    ``"implicit-deny"``
    (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html)."""
    statements = policy["Statement"]
    if any(s["Effect"] == "Deny" and applies(s, request) for s in statements):
        return "denied"
    if identity_allows or any(s["Effect"] == "Allow" and applies(s, request) for s in statements):
        return "allowed"
    return "implicit-deny"
