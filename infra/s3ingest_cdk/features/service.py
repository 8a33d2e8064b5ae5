"""What a function that applies the ledger rules is granted, shared by the features that build
the ingest service (the ingest function, the backfill function, the distributed-map backfill
control function) and, for the landing objects, by reconciliation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from aws_cdk import Annotations
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3

from s3ingest.settings import Settings
from s3ingest_cdk.constructs.landing_bucket import Landings
from s3ingest_cdk.nag import acknowledge, grant, wildcard_resource_finding
from s3ingest_fn import config as fn_config


def grant_read_objects(function: lambda_.IFunction, bucket: s3.IBucket) -> str:
    """s3:GetObject and s3:GetObjectVersion (GET, and HEAD: HeadObject needs s3:GetObject) on
    ``bucket``'s objects; returns the objects' ARN pattern (for the acknowledgement of its
    wildcard, which the caller words)."""
    objects_arn = bucket.arn_for_objects("*")
    grant(function, ["s3:GetObject", "s3:GetObjectVersion"], objects_arn)
    return objects_arn


#: Why the team's own ``processorPolicyStatements`` may hold wildcards (cdk-nag AwsSolutions-IAM5).
TEAM_STATEMENT_EVIDENCE = (
    "Granted by the processorPolicyStatements setting: the team's own statement, explicit "
    "actions (never a wildcard action: those are left to the team to acknowledge) for what its "
    "in-process processor needs beyond the landing and output buckets, reviewed with the team's "
    "configuration (s3ingest adds it as given)."
)


@dataclass(frozen=True)
class IngestProcessors:
    """What a function that runs the processors gets for the ``processors`` setting (built by
    :func:`s3ingest_cdk.features.processors.ingest_processors`).

    Attributes
    ----------
    environment : str or None
        The ``PROCESSORS`` variable (JSON, tokens allowed); None with the single ``processor``
        setting at version 1 (it keeps ``PROCESSOR``) or no processor.
    function_arns : tuple of str
        The processor functions it invokes (``lambda:InvokeFunction`` on exactly these).
    in_process : bool
        A ``module`` processor runs in the function: ``OUTPUT_BUCKET`` and the output bucket's
        grants, as with ``processor``.
    statements : tuple of aws_cdk.aws_iam.PolicyStatement
        ``processorPolicyStatements``, added to the function's role.
    variables : tuple of (str, str)
        More variables of the functions that run the processors and write the ledger's review
        trail: ``HOLD`` and ``TRAIL_LENGTH`` (:meth:`s3ingest.settings.Settings.hold_env`).
    """

    environment: str | None = None
    function_arns: tuple[str, ...] = ()
    in_process: bool = False
    statements: tuple[iam.PolicyStatement, ...] = ()
    variables: tuple[tuple[str, str], ...] = ()


def grant_processors(function: lambda_.Function, processors: IngestProcessors) -> None:
    """``PROCESSORS`` (and ``HOLD``, ``TRAIL_LENGTH``: :attr:`IngestProcessors.variables`),
    ``lambda:InvokeFunction`` on the processor functions (their ARNs exactly, so no version or
    alias of them beyond the one named) and the team's extra statements, whose wildcards are
    acknowledged with :data:`TEAM_STATEMENT_EVIDENCE` for a resource wildcard with explicit
    actions only; an info annotation on the role names what was merged."""
    role = function.role
    if role is None:  # pragma: no cover - python_function gives every function a role
        raise TypeError("an s3ingest function has its own role")
    if processors.environment is not None:
        function.add_environment(fn_config.PROCESSORS, processors.environment)
    for name, value in processors.variables:
        function.add_environment(name, value)
    if processors.function_arns:
        grant(function, ["lambda:InvokeFunction"], *processors.function_arns)
    merged: list[str] = []
    for index, statement in enumerate(processors.statements):
        function.add_to_role_policy(statement.copy())
        merged.append(_described(index, statement))
        # A wildcard action is never acknowledged: cdk-nag reports it, and the team
        # acknowledges it on this role itself if it stands by it. A resource wildcard is, when
        # the actions are explicit (the processor's keys are known only at run time).
        if statement.effect != iam.Effect.ALLOW or any("*" in a for a in statement.actions):
            continue
        for resource in statement.resources:
            if "*" in resource:
                acknowledge(
                    role, wildcard_resource_finding(function, resource), TEAM_STATEMENT_EVIDENCE
                )
    if merged:
        Annotations.of(role).add_info(
            f"s3ingest: processorPolicyStatements merged into this role (the role of "
            f"{function.node.path}): {'; '.join(merged)}"
        )


def _described(index: int, statement: iam.PolicyStatement) -> str:
    """``[i] Allow s3:GetObject on arn:...``: one merged statement, for the synth-time note
    (tokens left as CDK renders them)."""
    sid = f" ({statement.sid})" if statement.sid else ""
    return (
        f"[{index}]{sid} {'Allow' if statement.effect == iam.Effect.ALLOW else 'Deny'} "
        f"{', '.join(statement.actions)} on "
        f"{', '.join(statement.resources)}"
    )


def grant_ingest_service(
    function: lambda_.Function,
    *,
    ledger_table: dynamodb.ITable,
    buckets: Sequence[s3.IBucket],
    processor: str | None,
    output_bucket: s3.IBucket | None,
    objects_reason: str,
    processors: IngestProcessors | None = None,
) -> None:
    """What a function that builds the ingest service (``wiring.ingest_service``) takes: the
    ledger rules and, with a processor, the processor; each wildcard acknowledged here.

    Ledger: one conditional UpdateItem per event (C5); GetItem/PutItem for observations (C7).
    Bucket: HEAD/GET pinned to a version or ETag (C7, C8). ListBucket makes a HEAD of a missing
    key answer 404 rather than 403
    (https://docs.aws.amazon.com/AmazonS3/latest/API/API_HeadObject.html#API_HeadObject_RequestSyntax).

    The processor reads the bytes of the change pinned by version or ETag (CONTRACT C8:
    GetObject with ``VersionId`` or ``If-Match``), which the ledger rules' grants already cover.
    Its output: ``PROCESSOR`` (unless ``PROCESSORS`` carries it: a ``processorVersion`` above
    1) and ``OUTPUT_BUCKET``, and read, write and delete of the output
    bucket's objects (ListBucket on the bucket, so a missing output reads as 404 rather than 403).

    Parameters
    ----------
    objects_reason : str
        Why this function reads the landing objects by wildcard (the AwsSolutions-IAM5 reason).
    processors : IngestProcessors, optional
        The ``processors`` setting's part (:func:`grant_processors`); an in-process ``module``
        among them gets the output bucket as ``processor`` does.
    """
    role = function.role
    if role is None:  # pragma: no cover - python_function gives every function a role
        raise TypeError("an s3ingest function has its own role")
    ledger_table.grant(function, "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem")
    for bucket in buckets:
        objects_arn = grant_read_objects(function, bucket)
        grant(function, ["s3:ListBucket"], bucket.bucket_arn)
        acknowledge(role, wildcard_resource_finding(function, objects_arn), objects_reason)
    if processors is not None:
        grant_processors(function, processors)
    in_process = processor is not None or (processors is not None and processors.in_process)
    if output_bucket is None or not in_process:
        return
    if processor is not None and (processors is None or processors.environment is None):
        function.add_environment(fn_config.PROCESSOR, processor)  # else PROCESSORS carries it
    function.add_environment(fn_config.OUTPUT_BUCKET, output_bucket.bucket_name)
    outputs_arn = output_bucket.arn_for_objects("*")
    grant(function, ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"], outputs_arn)
    grant(function, ["s3:ListBucket"], output_bucket.bucket_arn)
    acknowledge(
        role,
        wildcard_resource_finding(function, outputs_arn),
        "The processor writes (and deletes) one output per object whose change it ran for: "
        "s3:GetObject, s3:PutObject and s3:DeleteObject on the processor output bucket's objects "
        "only (keys made from the landing keys at run time).",
    )


class Given(NamedTuple):
    """What the pipeline gives a feature (``settings, code, landings, ledger_table,
    output_bucket, processors = given``): the validated settings, the functions' code, the
    landing buckets, the ledger, the processor output bucket (None without one) and what the
    processors give the functions that run them."""

    settings: Settings
    code: lambda_.Code
    landings: Landings
    ledger_table: dynamodb.ITable
    output_bucket: s3.IBucket | None = None
    processors: IngestProcessors | None = None
