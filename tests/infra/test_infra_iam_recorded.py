"""IAM checked before deploy: every AWS call each function makes on the emulator, in a run of
every feature, is allowed by that function's synthesized role.

The run (:func:`exercise`, 15 to 30 s) drives one local deployment with a processor, hold for
review and the change stream through ingest (an invalid message among them), an approval, the
scheduled reconciliation (the reconcile function), the fan-out reconciliation, both backfill
engines, the listing backfill, a reprocess run, the change relay and the delivery check, while
:func:`tests.iam_calls.recording` records each call with the function it ran in. The check
(:func:`tests.infra.identity_eval.denied`) reads each function's role in the fan-out synth (the
local runtime's configuration) and, for the Batch Operations backfill worker, in the same app
with ``backfillEngine: batch-operations``. What it does not evaluate is listed in
``docs/local-runtime.md`` ("IAM: checked before deploy, not enforced").
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from aws_cdk import aws_lambda as lambda_

from s3ingest.local.emulator.chaos import Chaos
from s3ingest.local.emulator.lambda_service import LambdaService
from s3ingest.local.emulator.server import Emulator
from s3ingest.local.stack.runtime import (
    BATCH_OPERATIONS,
    DISTRIBUTED_MAP,
    LocalRuntime,
    local_settings,
)
from s3ingest_cdk.local_machines import VARIANTS as CONTEXTS
from s3ingest_cdk.synth import Synth
from tests.iam_calls import Request, recording
from tests.infra.conftest import synthesize
from tests.infra.identity_eval import (
    Local,
    allows,
    denied,
    functions,
    local_names,
    resolve,
    symbolic,
)

#: The fan-out app with the Batch Operations backfill (its worker function exists only there).
BATCH_OPERATIONS_CONTEXT = {
    **CONTEXTS["fanout"],
    "stage": "iam",
    "backfillEngine": BATCH_OPERATIONS,
}

#: The run's hold for review (keys under ``held/`` wait for an approval).
HOLD = {"prefixes": ["held/"]}


@pytest.fixture(scope="module")
def batch_operations_synth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synth]:
    """:data:`BATCH_OPERATIONS_CONTEXT`, synthesized once with inline stand-in code."""
    yield synthesize(
        tmp_path_factory.mktemp("cdk-out-iam"),
        BATCH_OPERATIONS_CONTEXT,
        code=lambda_.Code.from_inline("def handler(event, context):\n    return None\n"),
    )


def invoke_as_deployed(
    emu: Emulator, rt: LocalRuntime, synth: Synth, handler: str, event: dict[str, Any]
) -> Any:
    """Invoke the function of ``synth`` running ``handler`` through the local Lambda service,
    with the environment the template gives it (its references resolved to ``rt``'s
    resources) plus the runtime's settings; return its parsed answer."""
    logical_id, _ = functions(synth.template)[handler]
    props = synth.template["Resources"][logical_id]["Properties"]
    names = local_names(synth, rt.resources, {})
    env = {k: resolve(v, names) for k, v in props["Environment"]["Variables"].items()}
    service = LambdaService(emu)
    try:
        arn = service.register(
            logical_id, handler, {**env, **rt.settings_env()}, timeout_seconds=60.0
        )
        answer = emu.client("lambda").invoke(FunctionName=arn, Payload=json.dumps(event))
        assert "FunctionError" not in answer, answer["Payload"].read()
        return json.loads(answer["Payload"].read())
    finally:
        service.close()


def merged(*parts: dict[str, set[Request]]) -> dict[str, set[Request]]:
    """Handler -> requests, the union of ``parts``."""
    out: dict[str, set[Request]] = {}
    for part in parts:
        for handler, requests in part.items():
            out.setdefault(handler, set()).update(requests)
    return out


def exercise(emu: Emulator, synth: Synth) -> tuple[dict[str, Any], LocalRuntime]:
    """Run every feature on one local deployment while recording; return the IAM requests of
    each function (by handler) per backfill engine (``{engine: {handler: requests}}``, each
    with what the other features made) and the deployment."""
    with recording() as common:
        rt = LocalRuntime(emu, local_settings(hold=HOLD))
        rt.faithful.put("a.txt", "1")
        rt.faithful.put("b.txt", "2")
        rt.faithful.put("held/c.txt", "3")
        rt.send_raw("not an event")  # invalid: the ingest function dead-letters it
        rt.flush(Chaos(seed=0))
        rt.drain()
        rt.faithful.delete("a.txt")
        rt.faithful.put("b.txt", "22")
        rt.flush(Chaos(seed=0))
        rt.drain()
        rt.review("held/c.txt", "approved")
        rt.faithful.put("lost.txt", "4")
        rt.faithful.take_pending()  # lost: the scheduled reconciliation repairs it
        rt.write_inventory()
        event = {"source": "inventory", "marginSeconds": 0}
        invoke_as_deployed(emu, rt, synth, "s3ingest_fn.handlers.reconcile.handler", event)
        rt.drain()
        rt.reconcile_fan_out()
        rt.backfill_listing()
        assert rt.reprocess("default", segments=2)["execution"]["status"] == "SUCCEEDED"
        delivery = "s3ingest_fn.handlers.delivery_check.handler"
        assert invoke_as_deployed(emu, rt, synth, delivery, {})["enabled"] is True
    engines: dict[str, Any] = {}
    for engine in (BATCH_OPERATIONS, DISTRIBUTED_MAP):
        with recording() as backfill:
            assert rt.backfill(engine=engine)["execution"]["status"] == "SUCCEEDED"
        deployment = rt.recorder_key
        engines[engine] = merged(common.by_handler(deployment), backfill.by_handler(deployment))
    assert rt.compare().converged
    return engines, rt


@pytest.fixture(scope="module")
def recorded(emulator: Emulator, fanout_synth: Synth) -> Iterator[tuple[Any, LocalRuntime]]:
    """The requests of :func:`exercise`, recorded once for the module."""
    engines, rt = exercise(emulator, fanout_synth)
    yield engines, rt
    rt.close()


def names_of(synth: Synth, rt: LocalRuntime) -> dict[str, Local]:
    """Logical id -> how ``rt`` names each of ``synth``'s resources."""
    return local_names(synth, rt.resources, {})


def test_every_function_was_exercised(
    recorded: Any, fanout_synth: Synth, batch_operations_synth: Synth
) -> None:
    # GIVEN the functions of both synths WHEN the run is recorded THEN each one made calls,
    # but the history writer: its deployed calls are Glue's and S3's, which the local run makes
    # to a SQLite catalog and a folder instead (tests/infra/test_infra_history.py checks its
    # grants)
    engines, _ = recorded
    for synth, engine in (
        (fanout_synth, DISTRIBUTED_MAP),
        (batch_operations_synth, BATCH_OPERATIONS),
    ):
        history = {"s3ingest_fn.handlers.history.handler"}
        assert history <= set(functions(synth.template))
        assert sorted(set(functions(synth.template)) - set(engines[engine]) - history) == []


def test_every_recorded_call_is_granted_by_its_functions_role(
    recorded: Any, fanout_synth: Synth, batch_operations_synth: Synth
) -> None:
    # GIVEN every call each function made WHEN each role is evaluated THEN none is denied
    engines, rt = recorded
    for synth, engine in (
        (fanout_synth, DISTRIBUTED_MAP),
        (batch_operations_synth, BATCH_OPERATIONS),
    ):
        assert denied(synth.template, engines[engine], names_of(synth, rt)) == []


def _without(template: dict[str, Any], role: str, action: str) -> dict[str, Any]:
    """``template`` with ``action`` removed from every statement of ``role``'s policies (a
    statement left without actions removed)."""
    out = copy.deepcopy(template)
    for resource in out["Resources"].values():
        if resource["Type"] != "AWS::IAM::Policy":
            continue
        if {"Ref": role} not in resource["Properties"]["Roles"]:
            continue
        kept = []
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"]
            actions = [a for a in (actions if isinstance(actions, list) else [actions])]
            statement["Action"] = [a for a in actions if a != action]
            if statement["Action"]:
                kept.append(statement)
        resource["Properties"]["PolicyDocument"]["Statement"] = kept
    return out


@pytest.mark.parametrize(
    ("handler", "action"),
    [
        ("s3ingest_fn.handlers.ingest.handler", "dynamodb:UpdateItem"),
        ("s3ingest_fn.handlers.ingest.handler", "sqs:SendMessage"),
        ("s3ingest_fn.handlers.reconcile.handler", "s3:GetObject"),
        ("s3ingest_fn.handlers.change_stream.handler", "events:PutEvents"),
        ("s3ingest_fn.handlers.reprocess.segment", "dynamodb:Scan"),
        ("s3ingest_fn.handlers.listing_backfill.list_shard", "s3:ListBucketVersions"),
        ("s3ingest_fn.handlers.delivery_check.handler", "s3:GetBucketNotification"),
    ],
)
def test_removing_one_grant_the_run_needs_is_reported(
    recorded: Any, fanout_synth: Synth, handler: str, action: str
) -> None:
    # GIVEN the fan-out template with one action removed from one function's role
    engines, rt = recorded
    by_handler = engines[DISTRIBUTED_MAP]
    _, role = functions(fanout_synth.template)[handler]
    broken = _without(fanout_synth.template, role, action)
    # WHEN the recorded calls are checked THEN that function's use of it is reported
    found = denied(broken, by_handler, names_of(fanout_synth, rt))
    assert found
    assert all(line.startswith(f"{handler} ({role}): {action} on ") for line in found), found


def test_a_narrowed_resource_is_reported(recorded: Any, fanout_synth: Synth) -> None:
    # GIVEN the ingest role's object reads narrowed to one prefix of the landing bucket
    engines, rt = recorded
    by_handler = engines[DISTRIBUTED_MAP]
    handler = "s3ingest_fn.handlers.ingest.handler"
    _, role = functions(fanout_synth.template)[handler]
    broken = copy.deepcopy(fanout_synth.template)
    for resource in broken["Resources"].values():
        if (
            resource["Type"] == "AWS::IAM::Policy"
            and {"Ref": role} in resource["Properties"]["Roles"]
        ):
            for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
                text = json.dumps(statement["Resource"])
                if "LandingBucket" in text and "/*" in text:
                    statement["Resource"] = json.loads(text.replace("/*", "/nothing-here/*"))
    # WHEN checked THEN the reads of the landing bucket's objects are reported
    found = denied(broken, by_handler, names_of(fanout_synth, rt))
    assert any("s3:GetObject on arn:LandingBucket" in line for line in found), found


LEDGER = {"Fn::GetAtt": ["Ledger", "Arn"]}
OBJECTS = {"Fn::Join": ["", [{"Fn::GetAtt": ["Bucket", "Arn"]}, "/in/*"]]}


@pytest.mark.parametrize(
    ("statements", "request_", "resource", "allowed"),
    [
        # an Allow's action wildcard (case-insensitive) and resource wildcard
        (
            [{"Effect": "Allow", "Action": "S3:Get*", "Resource": OBJECTS}],
            Request("s3:GetObject", ""),
            "arn:Bucket/in/a b.csv",
            True,
        ),
        (
            [{"Effect": "Allow", "Action": "s3:Get*", "Resource": OBJECTS}],
            Request("s3:GetObject", ""),
            "arn:Bucket/out/a.csv",
            False,
        ),
        # no Allow: implicit deny
        ([], Request("dynamodb:GetItem", ""), "arn:Ledger", False),
        # an explicit Deny wins; a Deny with a condition is not evaluated (not denying)
        (
            [
                {"Effect": "Allow", "Action": "dynamodb:*", "Resource": LEDGER},
                {"Effect": "Deny", "Action": "dynamodb:Scan", "Resource": "*"},
            ],
            Request("dynamodb:Scan", ""),
            "arn:Ledger",
            False,
        ),
        (
            [
                {"Effect": "Allow", "Action": "dynamodb:*", "Resource": LEDGER},
                {
                    "Effect": "Deny",
                    "Action": "dynamodb:Scan",
                    "Resource": "*",
                    "Condition": {"StringNotEquals": {"aws:SourceAccount": "1"}},
                },
            ],
            Request("dynamodb:Scan", ""),
            "arn:Ledger",
            True,
        ),
        # an Allow with a condition counts as allowing (s3:ResourceAccount is not evaluated)
        (
            [
                {
                    "Effect": "Allow",
                    "Action": "s3:GetObject",
                    "Resource": OBJECTS,
                    "Condition": {"StringEquals": {"s3:ResourceAccount": "1"}},
                }
            ],
            Request("s3:GetObject", ""),
            "arn:Bucket/in/k",
            True,
        ),
        # NotAction and NotResource
        (
            [{"Effect": "Allow", "NotAction": "s3:Delete*", "Resource": "*"}],
            Request("s3:PutObject", ""),
            "arn:Bucket/in/k",
            True,
        ),
        (
            [{"Effect": "Allow", "NotAction": "s3:Delete*", "Resource": "*"}],
            Request("s3:DeleteObject", ""),
            "arn:Bucket/in/k",
            False,
        ),
        (
            [{"Effect": "Allow", "Action": "dynamodb:GetItem", "NotResource": LEDGER}],
            Request("dynamodb:GetItem", ""),
            "arn:Ledger",
            False,
        ),
    ],
)
def test_the_evaluator_reads_identity_statements_as_iam_does(
    statements: list[dict[str, Any]], request_: Request, resource: str, allowed: bool
) -> None:
    assert allows(statements, request_, resource) is allowed


def test_recorded_arns_are_named_as_the_template_names_them() -> None:
    names = {
        "Bucket": Local("landing-1", "arn:aws:s3:::landing-1"),
        "Inventory": Local("inventory-1", "arn:aws:s3:::inventory-1"),
    }
    assert symbolic("arn:aws:s3:::landing-1/a/b", names) == "arn:Bucket/a/b"
    assert (
        symbolic("arn:aws:s3:::inventory-1/inventory/landing-1/s3ingest-daily/m.json", names)
        == "arn:Inventory/inventory/ref:Bucket/s3ingest-daily/m.json"
    )
