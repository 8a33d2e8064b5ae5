#!/usr/bin/env python3
"""s3ingest across Regions: one pipeline per Region, one change stream for all of them.

Three stacks (``docs/organisation.md``, "Several Regions, one change stream"):

- ``S3Ingest-eu`` (``euAccount``, eu-west-1) and ``S3Ingest-us`` (``usAccount``, us-east-1):
  a pipeline each, with ``changeStream`` on, and a :class:`ChangeStreamForwarder` sending every
  change of its change bus to the hub bus.
- ``S3IngestHub`` (``hubAccount``, ``hubRegion``: eu-west-1): :class:`ChangeStreamHub`, the one
  bus the organisation's consumers subscribe to, admitting the two forwarders only.

Every name is fixed (bus, rule, role), so no stack references another: deploy them in any
order (a forwarder's deliveries go to its dead-letter queue until the hub exists). Synthesizes
in process (``python app.py``): no CDK CLI, no Docker with ``build(app, code=...)``.

Context (``-c key=value``): ``hubAccount``, ``hubRegion``, ``euAccount``, ``usAccount``,
``stage``.
"""

from __future__ import annotations

import os
from typing import Any

from aws_cdk import App, CfnOutput, Environment, Stack
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from s3ingest.settings import BucketSpec
from s3ingest_cdk import ChangeStreamForwarder, ChangeStreamHub, ForwardedRegion, S3IngestPipeline
from s3ingest_cdk.forwarding import hub_bus_arn

#: Placeholders for the context values (documentation accounts).
DEFAULTS = {
    "hubAccount": "111111111111",
    "hubRegion": "eu-west-1",
    "euAccount": "111111111111",
    "usAccount": "222222222222",
    "stage": "prod",
}
#: The regional pipelines: (stack id, account context key, Region).
REGIONS = (("S3Ingest-eu", "euAccount", "eu-west-1"), ("S3Ingest-us", "usAccount", "us-east-1"))


def _context(app: App) -> dict[str, str]:
    return {key: str(app.node.try_get_context(key) or value) for key, value in DEFAULTS.items()}


class RegionalPipeline(Stack):
    """One Region's pipeline and its forwarder to the hub bus."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        hub_arn: str,
        code: lambda_.Code | None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.pipeline = S3IngestPipeline(
            self, "Pipeline", stage=stage, buckets=[BucketSpec()], change_stream=True, code=code
        )
        self.forwarder = ChangeStreamForwarder(
            self, "Forwarder", pipeline=self.pipeline, hub_bus_arn=hub_arn
        )


class Hub(Stack):
    """The hub bus and its archive."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        forwarded: list[ForwardedRegion],
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.hub = ChangeStreamHub(self, "Hub", forwarded=forwarded)
        CfnOutput(self, "HubBusArn", value=self.hub.bus.event_bus_arn)
        CfnOutput(self, "HubArchiveName", value=self.hub.archive.archive_name)


def build(app: App, code: lambda_.Code | None = None) -> dict[str, Stack]:
    """The three stacks in ``app`` (``code``: the functions' code, the bundle by default)."""
    ctx = _context(app)
    forwarded = [ForwardedRegion(ctx[key], region, ctx["stage"]) for _, key, region in REGIONS]
    hub_arn = hub_bus_arn(ctx["hubAccount"], ctx["hubRegion"])
    stacks: dict[str, Stack] = {
        "hub": Hub(
            app,
            "S3IngestHub",
            forwarded=forwarded,
            env=Environment(account=ctx["hubAccount"], region=ctx["hubRegion"]),
        )
    }
    for stack_id, key, region in REGIONS:
        stacks[region] = RegionalPipeline(
            app,
            stack_id,
            stage=ctx["stage"],
            hub_arn=hub_arn,
            code=code,
            env=Environment(account=ctx[key], region=region),
        )
    return stacks


if __name__ == "__main__":
    # cdk.out, as the CDK CLI would (it names its own in CDK_OUTDIR)
    main_app = App() if os.environ.get("CDK_OUTDIR") else App(outdir="cdk.out")
    build(main_app)
    main_app.synth()
