"""Function assertions shared by the infrastructure tests: what every s3ingest function gets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from s3ingest_cdk.synth import Synth


def common_environment(synth: Synth, service: str) -> dict[str, str]:
    """The variables ``python_function`` adds to every function: Powertools' (the tracer
    disabled without ``tracing``) and the stack's."""
    return {
        "POWERTOOLS_SERVICE_NAME": service,
        "POWERTOOLS_METRICS_NAMESPACE": "S3Ingest",
        "POWERTOOLS_LOG_LEVEL": "INFO",
        "S3INGEST_STACK": synth.stack.stack_name,
        **({} if synth.settings.tracing else {"POWERTOOLS_TRACE_DISABLED": "true"}),
    }


def tracing_config(synth: Synth) -> dict[str, str] | None:
    """A function's ``TracingConfig``: active with ``tracing``, absent otherwise."""
    return {"Mode": "Active"} if synth.settings.tracing else None


def xray_grants(synth: Synth) -> dict[str, list[str]]:
    """What active tracing grants a function's role (nothing without ``tracing``), in the form
    of :func:`tests.infra.iam.expected`'s input."""
    if not synth.settings.tracing:
        return {}
    return {"xray:PutTraceSegments": ["*"], "xray:PutTelemetryRecords": ["*"]}


def scope_environment(bucket: Any) -> dict[str, Any]:
    """``SCOPE`` of a one-bucket stack without key filters (``bucket``: the name or its
    ``{"Ref": ...}``), as ``Stack.to_json_string`` renders it, and ``BUCKET_OWNERS``: the
    bucket owned by the stack's account (:func:`owners_environment`)."""
    if isinstance(bucket, str):
        scope: Any = f'[{{"name":"{bucket}","prefixes":[],"suffixes":[]}}]'
    else:
        scope = {"Fn::Join": ["", ['[{"name":"', bucket, '","prefixes":[],"suffixes":[]}]']]}
    return {"SCOPE": scope, **owners_environment(bucket)}


def owners_environment(bucket: Any) -> dict[str, Any]:
    """``BUCKET_OWNERS`` of a one-bucket stack: ``{"<bucket>": "<the stack's account>"}``."""
    account = {"Ref": "AWS::AccountId"}
    parts = [f'{{"{bucket}":"'] if isinstance(bucket, str) else ['{"', bucket, '":"']
    return {"BUCKET_OWNERS": {"Fn::Join": ["", [*parts, account, '"}']]}}


def inventories_environment(bucket: Any, inventory: Any) -> dict[str, Any]:
    """``INVENTORIES`` of a one-bucket stack with the stack's own inventory (references)."""
    return {
        "INVENTORIES": {
            "Fn::Join": [
                "",
                [
                    '[{"name":"',
                    bucket,
                    '","bucket":"',
                    inventory,
                    '","prefix":"inventory/',
                    bucket,
                    '/s3ingest-daily/"}]',
                ],
            ]
        }
    }


def targets_environment(synth: Synth) -> dict[str, str]:
    """``PROCESSOR_TARGETS``, which the functions that count rows behind each processor
    (reconciliation, the backfill control) get when processors are configured."""
    from s3ingest_fn.effect_targets import PROCESSOR_TARGETS, targets_json

    entries = synth.settings.processor_entries()
    return {PROCESSOR_TARGETS: targets_json(entries)} if entries else {}


def function_asset(synth: Synth, logical_id_prefix: str) -> Path:
    """The asset directory of the function whose logical id starts with ``logical_id_prefix``
    (``"IngestFunction"``, ``"ReconcileFunction"``): its ``Code.S3Key`` is ``<hash>.zip``."""
    (key,) = {
        resource["Properties"]["Code"]["S3Key"]
        for logical_id, resource in synth.resources("AWS::Lambda::Function").items()
        if logical_id.startswith(logical_id_prefix)
    }
    return synth.outdir / f"asset.{key.removesuffix('.zip')}"


def shared_asset(synth: Synth) -> Path:
    """The asset every function without packages of its own runs (the ingest function's)."""
    return function_asset(synth, "IngestFunction")
