"""IAM assertions shared by the infrastructure tests: what a role is allowed, as comparable data."""

from __future__ import annotations

import json
from typing import Any

from s3ingest_cdk.synth import Synth


def statements_of(synth: Synth, role: Any) -> list[dict[str, Any]]:
    """Every statement of every policy attached to ``role`` (each attached to that role only)."""
    role_ref = {"Ref": synth.logical_id(role)}
    found: list[dict[str, Any]] = []
    for policy in synth.resources("AWS::IAM::Policy").values():
        if role_ref in policy["Properties"]["Roles"]:
            assert policy["Properties"]["Roles"] == [role_ref]
            found.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    return found


#: The actions a grant may hold to a condition (the reconcile role's PutEvents of attestations
#: only, by ``events:source`` and ``events:detail-type``); any other conditioned Allow fails
#: :func:`allowed`, whose readers take a grant as unconditional.
CONDITIONED = frozenset({"events:PutEvents"})


def allowed(statements: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Action -> the resources it is allowed on (sorted JSON); every statement an Allow, without
    a condition but on :data:`CONDITIONED` actions, whose entry is then
    ``{"Resource": ..., "Condition": ...}``."""
    granted: dict[str, list[str]] = {}
    for statement in statements:
        assert statement["Effect"] == "Allow"
        actions, resources = statement["Action"], statement["Resource"]
        actions = [actions] if isinstance(actions, str) else actions
        condition = statement.get("Condition")
        assert condition is None or set(actions) <= CONDITIONED, statement
        for action in actions:
            for resource in resources if isinstance(resources, list) else [resources]:
                entry = (
                    resource
                    if condition is None
                    else {"Resource": resource, "Condition": condition}
                )
                granted.setdefault(action, []).append(json.dumps(entry, sort_keys=True))
    return {action: sorted(resources) for action, resources in granted.items()}


def role_allowed(synth: Synth, role: Any) -> dict[str, list[str]]:
    """:func:`allowed` over every policy of ``role``."""
    return allowed(statements_of(synth, role))


def expected(grants: dict[str, list[Any]]) -> dict[str, list[str]]:
    """Action -> resources written as template values, in :func:`allowed`'s form."""
    return {
        action: sorted(json.dumps(resource, sort_keys=True) for resource in resources)
        for action, resources in grants.items()
    }


def as_set(value: Any) -> Any:
    """A statement's list of actions or resources as the stack renders it with
    ``@aws-cdk/aws-iam:minimizePolicies``: unique, sorted, one element written as itself."""
    if not isinstance(value, list):
        return value
    unique = {json.dumps(v, sort_keys=True): v for v in value}
    ordered = [unique[k] for k in sorted(unique)]
    return ordered[0] if len(ordered) == 1 else ordered


def iam_rendered(node: Any) -> Any:
    """``node`` with every IAM statement's elements in :func:`as_set`'s form: the one part of
    a team stack's template its own ``minimizePolicies`` flag decides (read where the stack
    renders each policy document); IAM reads both forms the same."""
    if isinstance(node, list):
        return [iam_rendered(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: iam_rendered(v) for k, v in node.items()}
    if "Effect" in out:
        for key in ("Action", "NotAction", "Resource", "NotResource"):
            if key in out:
                out[key] = as_set(out[key])
        for key in ("Principal", "NotPrincipal"):
            if isinstance(out.get(key), dict):
                out[key] = {kind: as_set(v) for kind, v in out[key].items()}
    return out
