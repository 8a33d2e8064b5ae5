"""Whether a synthesized function role's identity policies allow the IAM requests its function
made on the emulator (:mod:`tests.iam_calls`): an evaluator of identity-policy statements, not
a full IAM engine.

Evaluated: ``Effect``, ``Action``/``NotAction`` and ``Resource``/``NotResource`` with ``*`` and
``?`` wildcards (actions case-insensitively), an explicit Deny overriding an Allow, and no Allow
being an implicit deny
(https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html).
Template values are compared symbolically, as :mod:`tests.infra.policy_eval` does: a resource's
``Fn::GetAtt`` ``Arn`` is ``"arn:<logical id>"``, its ``Ref`` ``"ref:<logical id>"``, and a
recorded ARN is rewritten the same way from the local runtime's names (:func:`local_names`).

Not evaluated (``docs/local-runtime.md``): a statement's ``Condition`` (an Allow with one counts
as allowing, a Deny with one as not denying), resource policies (bucket, queue, key policies),
KMS key policies and grants, SCPs and permission boundaries, and S3's bucket-owner checks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from s3ingest_cdk.local_machines import _paths
from s3ingest_cdk.synth import Synth
from tests.iam_calls import ACCOUNT, REGION, Request

#: Pseudo parameters as the local stack's ARNs spell them.
PSEUDO = {
    "AWS::Partition": "aws",
    "AWS::URLSuffix": "amazonaws.com",
    "AWS::Region": REGION,
    "AWS::AccountId": ACCOUNT,
}


def symbol(value: Any) -> str:
    """A template value as a comparable string (module docstring).

    Raises
    ------
    ValueError
        For an intrinsic function it does not know.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and "Fn::Join" in value:
        delimiter, parts = value["Fn::Join"]
        return str(delimiter).join(symbol(part) for part in parts)
    if isinstance(value, Mapping) and "Ref" in value:
        ref = value["Ref"]
        return PSEUDO.get(ref, f"ref:{ref}")
    if isinstance(value, Mapping) and "Fn::GetAtt" in value:
        resource, attribute = value["Fn::GetAtt"]
        return f"arn:{resource}" if attribute == "Arn" else f"{attribute}:{resource}"
    raise ValueError(f"no symbol for {value!r}")


def _values(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _wildcard(pattern: str, text: str, *, fold: bool = False) -> bool:
    """IAM's ``*`` (any run) and ``?`` (one character) match, nothing else special."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, text, re.IGNORECASE | re.DOTALL if fold else re.DOTALL) is not None


def role_statements(template: Mapping[str, Any], role_id: str) -> list[dict[str, Any]]:
    """Every identity-policy statement of role ``role_id``: its inline ``Policies`` and every
    ``AWS::IAM::Policy`` attached to it (managed policies are not read: the functions' is
    ``AWSLambdaBasicExecutionRole``, logs only)."""
    resources = template["Resources"]
    found: list[dict[str, Any]] = []
    for policy in resources[role_id]["Properties"].get("Policies", []):
        found.extend(policy["PolicyDocument"]["Statement"])
    for resource in resources.values():
        attached = resource["Type"] == "AWS::IAM::Policy" and {"Ref": role_id} in resource[
            "Properties"
        ].get("Roles", [])
        if attached:
            found.extend(resource["Properties"]["PolicyDocument"]["Statement"])
    return found


def _matches(statement: Mapping[str, Any], request: Request, resource: str) -> bool:
    """Whether ``statement``'s ``Action`` (or ``NotAction``) and ``Resource`` (or
    ``NotResource``) match (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_notaction.html)."""
    if "Action" in statement:
        action = any(
            _wildcard(str(a), request.action, fold=True) for a in _values(statement["Action"])
        )
    else:
        action = not any(
            _wildcard(str(a), request.action, fold=True) for a in _values(statement["NotAction"])
        )
    if "Resource" in statement:
        return action and any(
            _wildcard(symbol(r), resource) for r in _values(statement["Resource"])
        )
    return action and not any(
        _wildcard(symbol(r), resource) for r in _values(statement["NotResource"])
    )


def allows(statements: Iterable[Mapping[str, Any]], request: Request, resource: str) -> bool:
    """Whether ``statements`` allow ``request`` (its resource given as ``resource``, symbolic):
    an Allow matches and no unconditioned Deny does."""
    statements = list(statements)
    if any(
        s["Effect"] == "Deny" and "Condition" not in s and _matches(s, request, resource)
        for s in statements
    ):
        return False
    return any(s["Effect"] == "Allow" and _matches(s, request, resource) for s in statements)


@dataclass(frozen=True)
class Local:
    """How the local runtime names one of the stack's resources: its ``Ref`` value and, where
    the template reads one, its ``Arn`` (``Fn::GetAtt``)."""

    ref: str
    arn: str | None = None


#: Construct path (under the stack) -> what of :class:`s3ingest.local.stack.provisioning.Resources`
#: names it and its ARN's form.
def local_names(synth: Synth, resources: Any, machines: Mapping[str, str]) -> dict[str, Local]:
    """Logical id -> :class:`Local`, for the resources of ``synth`` the local runtime
    provisioned (``resources``: its :class:`~s3ingest.local.stack.provisioning.Resources`;
    ``machines``: construct path -> the local state machine's ARN)."""

    def bucket(name: str) -> Local:
        return Local(name, f"arn:aws:s3:::{name}")

    def queue(url: str) -> Local:
        return Local(url, f"arn:aws:sqs:{REGION}:{ACCOUNT}:{url.rstrip('/').rsplit('/', 1)[-1]}")

    r = resources
    by_path: dict[str, Local] = {
        "Pipeline/Landing/Bucket": bucket(r.bucket),
        "Pipeline/Landing/Inventory": bucket(r.inventory_bucket),
        "Pipeline/Ingestion/Ingest/Queue": queue(r.queue_url),
        "Pipeline/Ingestion/Ingest/DeadLetterQueue": queue(r.dlq_url),
        "Pipeline/Ledger/Table": Local(
            r.table, f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{r.table}"
        ),
    }
    if r.output_bucket:
        by_path["Pipeline/ProcessorOutput/Bucket"] = bucket(r.output_bucket)
    if r.change_bus:
        by_path["Pipeline/ChangeStream/ChangeBus/Bus"] = Local(
            r.change_bus, f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/{r.change_bus}"
        )
    if r.change_dlq_url:
        by_path["Pipeline/ChangeStream/ChangeRelay/DeadLetterQueue"] = queue(r.change_dlq_url)
    for path, arn in machines.items():
        by_path[path] = Local(arn)
    ids = {path: logical_id for logical_id, path in _paths(synth).items()}
    return {ids[path]: local for path, local in by_path.items() if path in ids}


def symbolic(arn: str, names: Mapping[str, Local]) -> str:
    """``arn`` with each local resource's ARN written ``arn:<logical id>`` and each local name
    (a bucket's inside a key, a state machine's ARN) ``ref:<logical id>``."""
    out = arn
    by_arn = sorted(
        ((local.arn, f"arn:{lid}") for lid, local in names.items() if local.arn),
        key=lambda pair: -len(pair[0]),
    )
    for value, name in by_arn:
        if out == value or out.startswith(value + "/"):
            out = name + out[len(value) :]
            break
    for lid, local in sorted(names.items(), key=lambda item: -len(item[1].ref)):
        out = out.replace(local.ref, f"ref:{lid}")
    return out


def resolve(value: Any, names: Mapping[str, Local]) -> Any:
    """A template value (an environment variable's) with the local runtime's names in place of
    ``Ref`` and ``Fn::GetAtt`` ``Arn`` (pseudo parameters: the local stack's)."""
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        delimiter, parts = value["Fn::Join"]
        return str(delimiter).join(resolve(p, names) for p in parts)
    if "Ref" in value:
        ref = value["Ref"]
        return PSEUDO[ref] if ref in PSEUDO else names[ref].ref
    resource, attribute = value["Fn::GetAtt"]
    arn = names[resource].arn
    if attribute != "Arn" or arn is None:
        raise ValueError(f"no local value for {value!r}")
    return arn


def functions(template: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """Handler -> (the function's logical id, its role's logical id), for every
    ``AWS::Lambda::Function`` of ``template`` (each handler is one function's)."""
    out: dict[str, tuple[str, str]] = {}
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] == "AWS::Lambda::Function":
            props = resource["Properties"]
            handler = props["Handler"]
            assert handler not in out, f"two functions run {handler}"
            out[handler] = (logical_id, props["Role"]["Fn::GetAtt"][0])
    return out


def denied(
    template: Mapping[str, Any],
    recorded: Mapping[str, set[Request]],
    names: Mapping[str, Local],
) -> list[str]:
    """Each recorded request the role of its function in ``template`` does not allow, as
    ``"<handler> (<role>): <action> on <symbolic resource>"``, sorted; handlers without a
    function in ``template`` are skipped."""
    found: set[str] = set()
    for handler, (_, role) in functions(template).items():
        statements = role_statements(template, role)
        for request in recorded.get(handler, set()):
            resource = symbolic(request.resource, names)
            if not allows(statements, request, resource):
                found.add(f"{handler} ({role}): {request.action} on {resource}")
    return sorted(found)
