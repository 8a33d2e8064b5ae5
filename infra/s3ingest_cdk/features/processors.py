"""Several processors per stack (the ``processors`` setting): the configuration of one
(:class:`ProcessorConfig`, the ``S3IngestPipeline`` prop), the functions the stack deploys for
the ``handler`` entries (:class:`Processors`), and what the ingest-side functions get for them
(:class:`s3ingest_cdk.features.service.IngestProcessors`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from constructs import Construct

from s3ingest import function_roles
from s3ingest.settings import (
    PROCESSOR_KINDS,
    PROCESSOR_MODES,
    Settings,
    is_function_processor,
)
from s3ingest_cdk.constructs.function import RoleFunction, lambda_handler
from s3ingest_cdk.features.evidence import synchronous_evidence
from s3ingest_cdk.features.role_function import acknowledged_function
from s3ingest_cdk.features.service import IngestProcessors
from s3ingest_cdk.nag import acknowledge, grant, wildcard_resource_finding
from s3ingest_fn import config as fn_config


@dataclass(frozen=True)
class ProcessorConfig:
    """One processor of an ``S3IngestPipeline`` (its ``processors`` prop; a ``processors``
    setting entry, :func:`s3ingest.settings.processor_entry`, in Python).

    Give exactly one of ``function``, ``function_arn``, ``handler`` or ``module``.

    Attributes
    ----------
    name : str
        Unique in the pipeline, ``^[a-z][a-z0-9-]{0,31}$``; names its effect state on the
        ledger row (``"default"`` is where the single ``processor`` setting's state is kept).
    mode : str
        ``"latest"`` (an older change's unfinished effect is dropped when a newer one is
        applied) or ``"every-change"`` (every applied change's effect runs, in sequencer order
        per key).
    prefixes, suffixes : sequence of str
        Key filters (decoded keys); empty: every key.
    kinds : sequence of str
        ``"created"`` and/or ``"removed"``.
    timeout_seconds : int, optional
        A processor function's timeout, seconds (1 to 900; default 30): the deployed
        function's (``handler``), or the team's function's own timeout (``function``,
        ``function_arn``). The ingest-side functions' timeouts are raised to at least the
        longest plus 15 s. Not for a ``module``.
    function : aws_cdk.aws_lambda.IFunction, optional
        The team's own Lambda function (any runtime), invoked synchronously under the claim.
    function_arn : str, optional
        The same by ARN (``arn:<partition>:lambda:<region>:<account>:function:<name>``, with
        an optional qualifier).
    handler : str, optional
        ``"package.module:function"``, a Lambda handler of this repository's bundle: the
        pipeline deploys it as its own function (the example:
        ``s3ingest_examples.sidecar:handler``).
    module : str, optional
        ``"package.module:function"`` run in-process by the ingest-side functions (as the
        ``processor`` setting).
    hold : mapping, optional
        This processor's hold for review policy, in the settings form of
        :mod:`s3ingest_fn.core.hold` (``{"deletes": True}``, ``{"prefixes": ["published/"]}``,
        ...; ``docs/hold.md``); None: the pipeline's ``hold`` applies.
    version : int
        The processor's version (1 and up, default 1): raise it when its code changes so that
        the outputs of earlier code are stale; rows done under a lower version are then behind
        (``docs/processors.md``).
    """

    name: str
    mode: str = PROCESSOR_MODES[0]
    prefixes: Sequence[str] = ()
    suffixes: Sequence[str] = ()
    kinds: Sequence[str] = PROCESSOR_KINDS
    timeout_seconds: int | None = None
    function: lambda_.IFunction | None = None
    function_arn: str | None = None
    handler: str | None = None
    module: str | None = None
    hold: Mapping[str, Any] | None = None
    version: int = 1

    def to_entry(self) -> dict[str, Any]:
        """The ``processors`` setting entry (context form); ``function`` becomes
        ``functionArn`` (a token for a function of the app).

        Raises
        ------
        ValueError
            When both ``function`` and ``function_arn`` are given.
        """
        if self.function is not None and self.function_arn is not None:
            raise ValueError(f"processor {self.name!r}: give function or function_arn, not both")
        entry: dict[str, Any] = {
            "name": self.name,
            "mode": self.mode,
            "prefixes": list(self.prefixes),
            "suffixes": list(self.suffixes),
            "kinds": list(self.kinds),
        }
        if self.timeout_seconds is not None:
            entry["timeoutSeconds"] = self.timeout_seconds
        arn = self.function.function_arn if self.function is not None else self.function_arn
        for key, value in (
            ("functionArn", arn),
            ("handler", self.handler),
            ("module", self.module),
        ):
            if value is not None:
                entry[key] = value
        if self.hold is not None:
            entry["hold"] = dict(self.hold)
        if self.version != 1 or isinstance(self.version, bool):  # True: the settings refuse it
            entry["version"] = self.version
        return entry

    @classmethod
    def from_entry(cls, entry: Mapping[str, Any]) -> ProcessorConfig:
        """The configuration of a validated ``processors`` entry (the settings path)."""
        return cls(
            name=entry["name"],
            mode=entry.get("mode", PROCESSOR_MODES[0]),
            prefixes=tuple(entry.get("prefixes") or ()),
            suffixes=tuple(entry.get("suffixes") or ()),
            kinds=tuple(entry.get("kinds") or PROCESSOR_KINDS),
            timeout_seconds=entry.get("timeoutSeconds"),
            function_arn=entry.get("functionArn"),
            handler=entry.get("handler"),
            module=entry.get("module"),
            hold=entry.get("hold"),
            version=entry.get("version", 1),
        )


class Processors(Construct):
    """The processor functions the stack deploys: one
    :class:`~s3ingest_cdk.constructs.function.RoleFunction` per ``handler`` entry of
    ``settings.processors``, named by the processor, each with the entry's ``timeoutSeconds``,
    ``functionMemoryMb`` and its own role.

    Attributes
    ----------
    functions : dict[str, s3ingest_cdk.constructs.function.RoleFunction]
        By processor name.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        code: lambda_.Code,
        output_bucket: s3.IBucket | None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.functions: dict[str, RoleFunction] = {}
        for entry in settings.processor_entries():
            if "handler" not in entry:
                continue
            name, handler = entry["name"], entry["handler"]
            owner = acknowledged_function(
                self,
                name,
                dead_letters=synchronous_evidence(
                    "the functions that apply a change, under its claim (RequestResponse): a "
                    "failed processor fails that change's record, which its queue or run retries"
                ),
                row=function_roles.PROCESSOR,
                settings=settings,
                code=code,
                environment=(
                    {}
                    if output_bucket is None
                    else {fn_config.OUTPUT_BUCKET: output_bucket.bucket_name}
                ),
                timeout_seconds=entry["timeoutSeconds"],
                handler=lambda_handler(handler),
                fields={"name": name, "handler": handler},
            )
            if output_bucket is not None:
                _grant_outputs(owner, name, output_bucket)
            self.functions[name] = owner


def _grant_outputs(owner: RoleFunction, name: str, output_bucket: s3.IBucket) -> None:
    """``s3:PutObject`` and ``s3:DeleteObject`` on ``output_bucket``'s objects for processor
    function ``name`` (the example sidecar writes one output per key, deletes it on removal)."""
    outputs_arn = output_bucket.arn_for_objects("*")
    grant(owner.function, ["s3:PutObject", "s3:DeleteObject"], outputs_arn)
    acknowledge(
        owner.role,
        wildcard_resource_finding(owner, outputs_arn),
        f"The processor function {name} writes (and deletes) one output per object whose "
        "change it is invoked for: s3:PutObject and s3:DeleteObject on the processor output "
        "bucket's objects only (keys made from the landing keys at run time).",
    )


def ingest_processors(
    scope: Construct,
    settings: Settings,
    deployed: Mapping[str, lambda_.IFunction],
    statements: Sequence[iam.PolicyStatement],
) -> IngestProcessors:
    """What the ingest-side functions get for ``settings``' processors.

    ``PROCESSORS``: with the ``processors`` setting, or the single ``processor`` at a
    ``processorVersion`` above 1 (:attr:`Settings.processors_variable`; at version 1 it keeps
    its ``PROCESSOR`` variable), the JSON list of :meth:`Settings.processor_entries`, a ``handler``
    entry given as ``functionArn`` of its deployed function (``deployed``). Invoke grants: the
    ``functionArn`` of every processor function, exactly (no version or alias wildcard).
    """
    entries: list[dict[str, Any]] = []
    for entry in settings.processor_entries():
        entry = dict(entry)
        if "handler" in entry:
            del entry["handler"]
            entry["functionArn"] = deployed[entry["name"]].function_arn
        entries.append(entry)
    return IngestProcessors(
        environment=(
            Stack.of(scope).to_json_string(entries) if settings.processors_variable else None
        ),
        function_arns=tuple(e["functionArn"] for e in entries if is_function_processor(e)),
        in_process=any("module" in e for e in entries),
        statements=tuple(statements),
        variables=tuple(sorted(settings.hold_env().items())),
    )
