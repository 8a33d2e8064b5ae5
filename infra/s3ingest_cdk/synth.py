"""In-process synthesis of the app (no CDK CLI, no credentials), for tests and tooling."""

from __future__ import annotations

import importlib.util
import json
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aws_cdk import App, Environment
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template

from s3ingest.settings import Settings
from s3ingest_cdk.bundling import PROJECT_ROOT
from s3ingest_cdk.compose import FALLBACK_REGION, compose
from s3ingest_cdk.pipeline import S3IngestPipeline
from s3ingest_cdk.stack import S3IngestStack


def cdk_json_context(cdk_json: Path = PROJECT_ROOT / "cdk.json") -> dict[str, Any]:
    """The ``context`` block of ``cdk.json`` (settings defaults and feature flags)."""
    context: dict[str, Any] = json.loads(cdk_json.read_text())["context"]
    return context


def recommended_flags() -> dict[str, Any]:
    """The feature flags ``cdk init`` writes into a new app's ``cdk.json`` for the installed
    aws-cdk-lib: its ``recommended-feature-flags.json``, read from the JavaScript package the
    Python one embeds (``aws_cdk/_jsii/aws-cdk-lib@<version>.jsii.tgz``).

    Raises
    ------
    FileNotFoundError
        When the installed aws-cdk-lib embeds no such package or file.
    """
    spec = importlib.util.find_spec("aws_cdk._jsii")
    origin = Path(spec.origin) if spec is not None and spec.origin else None
    tarballs = sorted(origin.parent.glob("aws-cdk-lib@*.jsii.tgz")) if origin else []
    if not tarballs:
        raise FileNotFoundError("no aws-cdk-lib JavaScript package in aws_cdk._jsii")
    with tarfile.open(tarballs[-1]) as archive:
        member = archive.extractfile("package/recommended-feature-flags.json")
        if member is None:  # pragma: no cover - a directory of that name
            raise FileNotFoundError("recommended-feature-flags.json")
        flags: dict[str, Any] = json.load(member)
    return flags


@dataclass(frozen=True)
class Synth:
    """One synthesized app.

    Attributes
    ----------
    pipeline : s3ingest_cdk.pipeline.S3IngestPipeline
        The stack's pipeline (the constructs it composes are its attributes).
    """

    app: App
    stack: S3IngestStack
    pipeline: S3IngestPipeline
    settings: Settings
    template: dict[str, Any]
    assertions: Template
    template_path: Path
    outdir: Path

    def resources(self, resource_type: str) -> dict[str, dict[str, Any]]:
        """Logical id -> resource, for every resource of ``resource_type``."""
        return {
            logical_id: resource
            for logical_id, resource in self.template["Resources"].items()
            if resource["Type"] == resource_type
        }

    def one(self, resource_type: str) -> tuple[str, dict[str, Any]]:
        """The only resource of ``resource_type``.

        Raises
        ------
        AssertionError
            When there is none, or more than one.
        """
        found = self.resources(resource_type)
        if len(found) != 1:
            raise AssertionError(f"expected one {resource_type}, found {sorted(found)}")
        return next(iter(found.items()))

    def logical_id(self, construct: Any) -> str:
        """Logical id of an L2 construct's default resource (or of an L1 resource)."""
        element = getattr(construct.node, "default_child", None) or construct
        logical_id: str = self.stack.resolve(element.logical_id)
        return logical_id


def synthesize(
    outdir: Path,
    overrides: Mapping[str, Any] | None = None,
    *,
    region: str = FALLBACK_REGION,
    code: lambda_.Code | None = None,
    context: Mapping[str, Any] | None = None,
) -> Synth:
    """Synthesize the app as ``app.py`` composes it, with ``cdk.json``'s context plus ``overrides``.

    ``context`` replaces ``cdk.json``'s (``{}``: the app as ``python app.py`` runs it without the
    CDK CLI, with no feature flag and the settings' defaults).

    cdk-nag is not registered as a synth-time plugin (synth would stop at the first finding); run
    ``AwsSolutionsChecks().validate_scope(result.app)`` to get every finding as data. ``code``
    replaces the bundled function package (:func:`s3ingest_cdk.compose.compose`).

    Raises
    ------
    s3ingest.settings.SettingsError
        When the context settings are invalid.
    """
    base = cdk_json_context() if context is None else context
    app = App(context={**base, **(overrides or {})}, outdir=str(outdir))
    stack = compose(app, env=Environment(region=region), nag=False, code=code)
    artifact = app.synth().get_stack_by_name(stack.stack_name)
    template: dict[str, Any] = artifact.template
    return Synth(
        app=app,
        stack=stack,
        pipeline=stack.pipeline,
        settings=stack.settings,
        template=template,
        assertions=Template.from_json(template),
        template_path=Path(artifact.template_full_path),
        outdir=outdir,
    )
