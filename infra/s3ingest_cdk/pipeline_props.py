"""The team's own resources given to :class:`~s3ingest_cdk.pipeline.S3IngestPipeline` (a bucket,
processors, policy statements) as settings entries, and their problems."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from aws_cdk import Stack, Token
from aws_cdk import aws_iam as iam
from constructs import Construct

from s3ingest.settings import BucketSpec, Settings
from s3ingest.settings.processors import wildcard_grant_problem
from s3ingest_cdk.encryption import key_region_problems
from s3ingest_cdk.features.processors import ProcessorConfig
from s3ingest_cdk.remote import remote_problems


def processor_entries(
    processors: Sequence[ProcessorConfig],
) -> tuple[list[dict[str, Any]], list[str]]:
    """The ``processors`` prop as setting entries (:meth:`ProcessorConfig.to_entry`), and the
    problems of a configuration that names two functions."""
    entries: list[dict[str, Any]] = []
    problems: list[str] = []
    for index, config in enumerate(processors):
        try:
            entries.append(config.to_entry())
        except ValueError as exc:
            problems.append(f"processors[{index}]: {exc}")
            entries.append(replace(config, function=None).to_entry())  # keep the indices
    return entries, problems


def props_problems(
    scope: Construct,
    settings: Settings,
    *,
    given_bucket: bool,
    statements: Sequence[iam.PolicyStatement],
) -> list[str]:
    """The problems of ``settings`` (the props' entries in it) but those of a token a rule cannot
    judge at synth time, the problems of the buckets of other accounts, of ``statements`` (as
    identity-policy statements, and their wildcard grants), of a ``given_bucket`` (the
    ``bucket`` prop) with the fan-out, and of the key's Region."""
    # A bucket created in the app has a token for a name, known at deploy time only: its form
    # is S3's to check then. Every other rule is the settings' own.
    specs: Sequence[BucketSpec] = settings.buckets
    token_fields = [
        f"buckets[{i}].name:"
        for i, spec in enumerate(specs)
        if spec.name is not None and Token.is_unresolved(spec.name)
    ]
    if settings.bucket_name is not None and Token.is_unresolved(settings.bucket_name):
        token_fields.append("bucketName:")
    # An IFunction's ARN is a token; the statements are CDK's own, checked by CDK below.
    token_fields.extend(
        f"processors[{i}].functionArn:"
        for i, entry in enumerate(settings.processors)
        if Token.is_unresolved(entry.get("functionArn"))
    )
    token_fields.extend(f"processorPolicyStatements[{i}]" for i in range(len(statements)))
    problems = [
        problem
        for problem in settings.problems()
        if not any(problem.startswith(field) for field in token_fields)
    ]
    problems.extend(remote_problems(scope, specs))
    for index, statement in enumerate(statements):
        problems.extend(
            f"processorPolicyStatements[{index}]: {error}"
            for error in statement.validate_for_identity_policy()
        )
        wildcard = wildcard_grant_problem(
            "Allow" if statement.effect == iam.Effect.ALLOW else "Deny",
            statement.actions,
            statement.resources,
            f"processorPolicyStatements[{index}]",
        )
        if wildcard is not None:
            problems.append(wildcard)
    # ``bucket`` is used as it is (no inventory): the fan-out cannot read one.
    if given_bucket and settings.reconcile_fan_out:
        problems.append(
            "reconcileFanOut needs the stack's own S3 Inventory of every bucket: a bucket "
            "given as `bucket` gets none (list it in `buckets` to have one)"
        )
    problems.extend(key_region_problems(Stack.of(scope).region, settings))
    return problems
