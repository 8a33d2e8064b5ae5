"""A pipeline's outputs published on the stack that holds it, so that ``s3ingest --stack NAME``
operates a pipeline inside a team's own stack (``docs/cdk-construct.md``).

Each output the CLI reads (:mod:`s3ingest.outputs`) becomes a ``CfnOutput`` named with the
stage's prefix (:func:`s3ingest.outputs.published_prefix`: ``S3IngestUploadsLedgerTableName``),
and one more, ``<prefix>PipelineStage``, names the stage. Outputs, not SSM parameters: the CLI
already reads them with one ``DescribeStacks``, they cost nothing, nothing in the account can
change them but a deployment of the stack, and a stack holds 200
(https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/cloudformation-limits.html),
room for four pipelines.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from s3ingest.outputs import PIPELINE_STAGE, published_prefix


def publish(pipeline: Construct, stage: str, values: Mapping[str, str]) -> list[CfnOutput]:
    """Add ``values`` (output name -> value) and the stage to ``pipeline``'s stack as outputs
    named with the stage's prefix; returns them.

    Raises
    ------
    ValueError
        When another pipeline of the stack published under the same prefix (the same stage).
    """
    stack = Stack.of(pipeline)
    prefix = published_prefix(stage)
    marker = prefix + PIPELINE_STAGE
    if stack.node.try_find_child(marker) is not None:
        raise ValueError(
            f"{pipeline.node.path}: another pipeline of stack {stack.node.id} publishes its "
            f"outputs as {prefix}*: give each pipeline of a stack its own stage (stage {stage!r})"
        )
    made = [
        CfnOutput(
            stack,
            marker,
            value=stage,
            description=f"s3ingest: a pipeline (s3ingest --stack {stack.node.id} --pipeline "
            f"{stage})",
        )
    ]
    made.extend(CfnOutput(stack, prefix + name, value=value) for name, value in values.items())
    return made
