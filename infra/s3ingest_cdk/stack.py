"""The s3ingest stack of ``app.py``: one :class:`~s3ingest_cdk.pipeline.S3IngestPipeline`, the
stack's outputs and tags, and the logical ids its resources had before the pipeline existed. Its
template is the same with ``cdk.json``'s feature flags or none (:mod:`s3ingest_cdk.flags`)."""

from __future__ import annotations

import hashlib
import re
from typing import Any

from aws_cdk import CfnElement, CfnOutput, Names, Stack, Tags
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from s3ingest import outputs as output
from s3ingest.settings import Settings
from s3ingest.version import version
from s3ingest_cdk.constructs.landing_bucket import adopted_bucket
from s3ingest_cdk.flags import PINNED_FLAGS, STACK_FLAGS, pin_flags
from s3ingest_cdk.pipeline import FEATURE_IDS, S3IngestPipeline

#: The stack tag that records the s3ingest version deployed (:func:`s3ingest.version.version`).
VERSION_TAG = "s3ingest:version"
#: The pipeline's construct id in the stack.
PIPELINE_ID = "Pipeline"


def unique_id(components: list[str]) -> str:
    """The logical id CDK gives the element at path ``components`` (below its stack).

    CDK's ``makeUniqueId`` (aws-cdk-lib ``core/lib/private/uniqueid.ts``, the scheme
    ``Stack.allocateLogicalId`` uses): ``Default`` components dropped; a single component is kept
    as is (alphanumerics only); otherwise the human part (consecutive duplicates removed,
    ``Resource`` dropped, alphanumerics only, at most 240 characters) and the first 8 hex digits,
    upper case, of the MD5 of the ``/``-joined path.
    """
    components = [c for c in components if c != "Default"]
    if not components:
        raise ValueError("no path components")
    if len(components) == 1:
        return re.sub("[^A-Za-z0-9]", "", components[0])
    digest = hashlib.md5("/".join(components).encode(), usedforsecurity=False).hexdigest()
    human: list[str] = []
    for component in components:
        if not human or not human[-1].endswith(component):
            human.append(component)
    readable = "".join(re.sub("[^A-Za-z0-9]", "", c) for c in human if c != "Resource")
    return readable[:240] + digest[:8].upper()


class S3IngestStack(Stack):
    """The stack ``app.py`` deploys, one per stage: :class:`S3IngestPipeline` with the settings
    of the ``cdk.json`` context, the outputs the operator CLI reads, and tags.

    Resources keep the logical ids they had when the stack composed the constructs itself
    (before the pipeline): :meth:`_allocate_logical_id` names a resource of the pipeline by its
    path without the ``Pipeline`` and feature levels, so deploying this version over an older
    stack replaces nothing (a new id on the retained ledger table would create a new, empty one).

    Parameters
    ----------
    construct_id : str
        Stack id; also the CloudFormation stack name (``settings.stack_name``).
    settings : s3ingest.settings.Settings
        Validated deployment settings; ``bucket_name`` adopts that bucket (by name).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        code: lambda_.Code | None = None,
        **kwargs: Any,
    ) -> None:
        # The version deployed, as a stack tag (not a resource tag: a release changes no resource).
        kwargs["tags"] = {**(kwargs.get("tags") or {}), VERSION_TAG: version()}
        super().__init__(
            scope,
            construct_id,
            description="s3ingest: per-key DynamoDB ledger of an S3 bucket, fed by EventBridge",
            **kwargs,
        )
        # before any child: no app's feature flags change the template (s3ingest_cdk.flags)
        pin_flags(self, {**PINNED_FLAGS, **STACK_FLAGS})
        self.settings = settings
        self._legacy_components: dict[str, str] = {}
        Tags.of(self).add("project", "s3ingest")
        Tags.of(self).add("stage", settings.stage)
        bucket = None
        if settings.bucket_name is not None:
            bucket = adopted_bucket(self, "AdoptedBucket", settings.bucket_name)
        self.pipeline = S3IngestPipeline.from_settings(
            self, PIPELINE_ID, settings=settings, bucket=bucket, code=code, publish_outputs=False
        )
        for output_id, value in {**self.pipeline.outputs(), output.VERSION: version()}.items():
            CfnOutput(self, output_id, value=value)

    def _allocate_logical_id(self, cfn_element: CfnElement) -> str:
        """The logical id of ``cfn_element``: CDK's, computed from its path in the stack with the
        pipeline's level and its feature's level left out (the path it had before the pipeline).

        The ids stay unique: the features' children have the ids the stack's children had. A
        construct id CDK made from another construct's unique id (an event source mapping's
        ``SqsEventSource:<queue>``, a permission's ``AllowEventRule<function>``) gets that
        construct's legacy unique id.
        """
        components = self._legacy_path(cfn_element.node.path)
        if components is None:
            return super()._allocate_logical_id(cfn_element)
        return unique_id([self._legacy_component(component) for component in components])

    def _legacy_path(self, path: str) -> list[str] | None:
        """The components below the stack of the construct at ``path`` as they were before the
        pipeline; ``None`` for a construct outside the pipeline."""
        components = path.split("/")[len(self.node.path.split("/")) :]
        if components[:1] != [PIPELINE_ID] or len(components) < 2:
            return None
        components = components[1:]
        if components[0] in FEATURE_IDS and len(components) > 1:
            components = components[1:]
        return components

    def _legacy_component(self, component: str) -> str:
        """``component`` with the unique id of a construct of the pipeline it embeds, if any,
        replaced by that construct's legacy unique id (:func:`aws_cdk.Names.node_unique_id`)."""
        if PIPELINE_ID not in component:
            return component
        if component not in self._legacy_components:
            legacy = component
            for construct in self.node.find_child(PIPELINE_ID).node.find_all():
                uid = Names.node_unique_id(construct.node)
                path = self._legacy_path(construct.node.path)
                if path is not None and uid in component:
                    legacy = component.replace(uid, unique_id([self.node.id, *path]))
                    break
            self._legacy_components[component] = legacy
        return self._legacy_components[component]
