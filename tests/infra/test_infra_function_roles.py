"""The function-role table (``s3ingest/function_roles.py``) and the one construct built from a
row: the synthesized functions are the rows', and the deprecated per-role classes build the same
resources as :class:`RoleFunction` (and warn)."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from aws_cdk import App, Duration, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from aws_cdk.assertions import Template

from s3ingest import function_roles
from s3ingest.settings import Settings
from s3ingest_cdk.constructs import IngestFunction
from s3ingest_cdk.constructs.deprecated_functions import StepFunction
from s3ingest_cdk.constructs.function import RoleFunction
from s3ingest_cdk.synth import Synth
from s3ingest_fn import config as fn_config

_INLINE = "def handler(event, context):\n    return None\n"


@pytest.mark.parametrize("row", list(function_roles.ROLES.values()), ids=list(function_roles.ROLES))
def test_every_row_names_a_handler_of_the_bundle(row: function_roles.FunctionRole) -> None:
    if row is function_roles.PROCESSOR:  # the entry's own handler
        return
    module, _, attribute = row.handler.rpartition(".")
    assert callable(getattr(importlib.import_module(module), attribute))


def test_the_default_synth_deploys_the_rows_handlers_and_service_names(synth: Synth) -> None:
    functions = synth.resources("AWS::Lambda::Function")
    deployed = {
        (
            f["Properties"]["Handler"],
            f["Properties"]["Environment"]["Variables"].get("POWERTOOLS_SERVICE_NAME"),
        )
        for f in functions.values()
    }
    for row in function_roles.ROLES.values():
        if row.name in {"reconcile-fanout", "change-relay", "processor"}:
            continue  # not in the default variant
        assert (row.handler, row.service) in deployed, row.name


def _stack() -> tuple[Stack, dict[str, Any]]:
    stack = Stack(App(), "S")
    parts = {
        "code": lambda_.Code.from_inline(_INLINE),
        "ledger_table": dynamodb.Table(
            stack,
            "T",
            partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
        ),
        "bucket": s3.Bucket(stack, "B"),
        "dead_letter_queue": sqs.Queue(stack, "Q"),
    }
    return stack, parts


def _template(stack: Stack) -> dict[str, Any]:
    return dict(Template.from_stack(stack).to_json())


def test_a_deprecated_class_warns_and_builds_what_role_function_builds() -> None:
    settings = Settings()
    old, parts = _stack()
    with pytest.warns(DeprecationWarning, match="IngestFunction is deprecated"):
        IngestFunction(
            old,
            "IngestFunction",
            **parts,
            tombstone_ttl_seconds=settings.tombstone_ttl_seconds,
            record_concurrency=settings.record_concurrency,
            timeout=Duration.seconds(settings.ingest_timeout_seconds),
            memory_size_mib=settings.function_memory_mb,
            log_retention_days=settings.log_retention_days,
            tracing=settings.tracing,
        )
    new, parts = _stack()
    RoleFunction(
        new,
        row=function_roles.INGEST,
        settings=settings,
        code=parts["code"],
        environment=fn_config.IngestConfig(
            ledger_table_name=parts["ledger_table"].table_name,
            dead_letter_queue_url=parts["dead_letter_queue"].queue_url,
            tombstone_ttl_seconds=settings.tombstone_ttl_seconds,
            record_concurrency=settings.record_concurrency,
            bucket_name=parts["bucket"].bucket_name,
        ).to_env(),
    )
    assert _template(old) == _template(new)


def test_the_deprecated_step_function_builds_a_listing_step() -> None:
    settings = Settings()
    old, _ = _stack()
    row = function_roles.LISTING_PLAN
    code = lambda_.Code.from_inline(_INLINE)
    with pytest.warns(DeprecationWarning):
        StepFunction(
            old,
            row.construct_id,
            run="listing backfill",
            service_name=row.service,
            code=code,
            handler=row.handler,
            description="plans the listing backfill's key-range shards",
            environment={"A": "b"},
            timeout=Duration.minutes(5),
            memory_size_mib=512,
            log_retention_days=settings.log_retention_days,
            tracing=settings.tracing,
        )
    new, _ = _stack()
    RoleFunction(new, row=row, settings=settings, code=code, environment={"A": "b"})
    assert _template(old) == _template(new)
