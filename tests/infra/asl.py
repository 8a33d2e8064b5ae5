"""A synthesized state machine's Amazon States Language, for exact assertions."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from s3ingest_cdk.synth import Synth


def placeholder(token: dict[str, Any]) -> str:
    """``<Id>`` for a ``Ref``, ``<Id.Attr>`` for a ``Fn::GetAtt``."""
    if "Ref" in token:
        return f"<{token['Ref']}>"
    if "Fn::GetAtt" in token:
        logical_id, attribute = token["Fn::GetAtt"]
        return f"<{logical_id}.{attribute}>"
    raise AssertionError(f"unexpected token in the state machine definition: {token}")


def definition(synth: Synth, state_machine: Any) -> dict[str, Any]:
    """The state machine's ASL, its ``Fn::Join`` rendered with ``<Id>`` / ``<Id.Attr>`` tokens."""
    logical_id = synth.logical_id(state_machine)
    machine = synth.template["Resources"][logical_id]
    delimiter, parts = machine["Properties"]["DefinitionString"]["Fn::Join"]
    text = delimiter.join(part if isinstance(part, str) else placeholder(part) for part in parts)
    rendered: dict[str, Any] = json.loads(text)
    return rendered


def reachable(block: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every state once, breadth first from ``StartAt`` (a state's successors: each Choice rule's
    target in order, then ``Default``, then ``Next``); a Map's or a Parallel's own states right
    after it."""
    queue = [block["StartAt"]]
    seen = set(queue)
    while queue:
        name = queue.pop(0)
        state = block["States"][name]
        yield name, state
        if "ItemProcessor" in state:
            yield from reachable(state["ItemProcessor"])
        for branch in state.get("Branches", []):
            yield from reachable(branch)
        targets = [choice["Next"] for choice in state.get("Choices", [])]
        targets += [state[key] for key in ("Default", "Next") if key in state]
        assert targets or state["Type"] in ("Succeed", "Fail") or state.get("End") is True, name
        for target in targets:
            if target not in seen:
                seen.add(target)
                queue.append(target)


#: The retriers every Lambda task carries
#: (``s3ingest_cdk.constructs.state_machine_parts.lambda_step``).
LAMBDA_RETRY = {
    "ErrorEquals": [
        "Lambda.ClientExecutionTimeoutException",
        "Lambda.ServiceException",
        "Lambda.AWSLambdaException",
        "Lambda.SdkClientException",
    ],
    "IntervalSeconds": 2,
    "MaxAttempts": 6,
    "BackoffRate": 2,
}
THROTTLE_RETRY = {
    "ErrorEquals": ["Lambda.TooManyRequestsException"],
    "IntervalSeconds": 2,
    "MaxAttempts": 8,
    "BackoffRate": 2,
    "JitterStrategy": "FULL",
}
